"""``--plot FILE.png``: GPU allocation vs arrived workload, one line per policy.

Called by ``fuyaoctl simulate --plot`` and ``bench/trace_quality.py --plot``; reads the
reports of ``hub.planning.simulate.run.simulate`` (their ``curve``). Matplotlib with the
``Agg`` backend (no display), imported only when a plot is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fuyao.errors import InvalidInput


def plot_curves(runs: Sequence[Mapping[str, Any]], path: Path, title: str = "") -> None:
    """Two panels side by side: the whole curve, and the last 30 points of arrival zoomed."""
    if path.suffix.lower() != ".png":
        raise InvalidInput(f"--plot {path}: the file name must end in .png")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (whole, zoom) = plt.subplots(1, 2, figsize=(12, 4.8), dpi=90)
    top = 0
    for run in runs:
        curve = {int(k): float(v) for k, v in run["curve"].items()}
        if not curve:
            continue
        xs = sorted(curve)
        top = max(top, xs[-1])
        label = f"{run.get('label') or run['policy']}: {run['gpu_allocation_pct']:.2f}%"
        for ax in (whole, zoom):
            ax.plot(xs, [curve[x] for x in xs], label=label, linewidth=1.3)
    for ax in (whole, zoom):
        ax.plot([0, top], [0, top], color="grey", linewidth=0.8, linestyle=":",
                label="arrived = allocated")
        ax.set_xlabel("arrived GPU demand, % of capacity")
        ax.set_ylabel("GPUs allocated, % of capacity")
        ax.grid(alpha=0.3)
    low = max(0, top - 30)
    zoom.set_xlim(low, top + 1)
    values = [float(v) for r in runs for k, v in r["curve"].items() if int(k) >= low]
    if values:
        zoom.set_ylim(min(values) - 1, min(100.0, max(values) + 1))
    zoom.set_title("zoom")
    whole.set_title(title or "GPU allocation vs arrival")
    whole.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise InvalidInput(f"--plot {path}: cannot write: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)
