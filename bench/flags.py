"""The benches' shared check of numeric flags: each within its range, else a usage error.

    from flags import check_bounds          # beside this file
    check_bounds(parser, args, {"conns": (1, 1024), "rate": (0, 1e6)})

NaN is out of every range; a flag's name is shown as typed (``--half-batch``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping


def out_of_bounds(args: argparse.Namespace,
                  bounds: Mapping[str, tuple[float, float]]) -> str | None:
    """The first flag of ``bounds`` outside its range (NaN included), as an error, or None."""
    for name, (low, high) in bounds.items():
        value = getattr(args, name)
        if not low <= value <= high:     # also false for NaN
            return f"--{name.replace('_', '-')} must be from {low:g} to {high:g}, not {value}"
    return None


def check_bounds(parser: argparse.ArgumentParser, args: argparse.Namespace,
                 bounds: Mapping[str, tuple[float, float]]) -> None:
    """``parser.error`` (exit 2, nothing started) for the first flag out of its range."""
    if problem := out_of_bounds(args, bounds):
        parser.error(problem)
