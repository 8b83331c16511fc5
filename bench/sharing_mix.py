"""Generate GPU-sharing-heavy pod lists from an openb pod list, seeded, for the quality bench.

The shipped ``openb_pod_list_gpushare40.csv`` is the default list with more pods sharing a
GPU. This makes heavier mixes the same way: a share ``--share`` (e.g. 0.6) of the pods
that ask for exactly one whole GPU become shared-GPU pods, each taking the ``gpu_milli``
and cpu/memory of a shared pod drawn at random from the list itself, so the shapes stay
the trace's own. The other pods are unchanged; names are kept. Seeded: the same seed and
share give the same file.

    .venv/bin/python bench/sharing_mix.py --share 0.6,0.8 --out /tmp/mixes
    .venv/bin/python bench/trace_quality.py --pods /tmp/mixes/openb_pod_list_gpushare60.csv

With ``--of-gpu-tasks`` the share is of all GPU pods that end up sharing a card (the
default list has 44% sharing; ``--share 0.6,0.7,0.8 --of-gpu-tasks`` gives 60/70/80%),
written as ``openb_pod_list_sharetasks<NN>.csv``.

Writes ``openb_pod_list_gpushare<NN>.csv`` per share into ``--out``; prints the paths.
"""

from __future__ import annotations

import argparse
import csv
import io
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from trace_quality import PODS, TRACES


def sharing_heavy(text: str, share: float, seed: int, of_gpu_tasks: bool = False) -> str:
    """The pod list ``text`` with ``share`` of its one-whole-GPU pods turned into shares, or
    (``of_gpu_tasks``) with as many turned as make ``share`` of all its GPU pods shared."""
    reader = csv.DictReader(io.StringIO(text))
    fields = list(reader.fieldnames or ())
    rows = list(reader)
    shared = [r for r in rows if r["num_gpu"] == "1" and int(r["gpu_milli"]) < 1000]
    whole = [i for i, r in enumerate(rows) if r["num_gpu"] == "1" and r["gpu_milli"] == "1000"]
    if not shared or not whole:
        raise SystemExit("the pod list needs both shared-GPU and one-GPU pods")
    turned = round(share * len(whole))
    if of_gpu_tasks:
        gpu_pods = sum(1 for r in rows if int(r["num_gpu"] or 0) > 0)
        turned = round(share * gpu_pods) - len(shared)
        if not 0 <= turned <= len(whole):
            raise SystemExit(f"--of-gpu-tasks {share:g}: {len(shared)} of {gpu_pods} GPU pods "
                             f"share already; reachable: up to "
                             f"{(len(shared) + len(whole)) / gpu_pods:.2f}")
    rng = random.Random(seed)
    for i in rng.sample(whole, turned):
        donor = rng.choice(shared)
        rows[i] = {**rows[i], **{k: donor[k] for k in ("cpu_milli", "memory_mib",
                                                        "gpu_milli")}}
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pods", type=Path, default=TRACES / PODS, help="source pod list")
    parser.add_argument("--share", default="0.6,0.8",
                        help="shares of whole-GPU pods to turn into shares (e.g. 0.6,0.8)")
    parser.add_argument("--of-gpu-tasks", action="store_true",
                        help="--share is the share of all GPU pods that end up sharing a card "
                             "(written as openb_pod_list_sharetasks<NN>.csv)")
    parser.add_argument("--seed", type=int, default=2023)
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    args = parser.parse_args(argv)
    try:
        text = args.pods.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"error: {args.pods}: cannot read pod list: {exc.strerror or exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for part in args.share.split(","):
        share = float(part)
        if not 0 < share <= 1:
            print(f"error: --share {part}: must be in (0, 1]", file=sys.stderr)
            return 2
        kind = "sharetasks" if args.of_gpu_tasks else "gpushare"
        path = args.out / f"openb_pod_list_{kind}{round(share * 100)}.csv"
        path.write_text(sharing_heavy(text, share, args.seed, args.of_gpu_tasks),
                        encoding="utf-8")
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
