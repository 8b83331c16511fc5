"""The benches' shared check of numeric flags (each within its range, else a usage error),
and their shared ``main``.

    from flags import check_bounds          # beside this file
    check_bounds(parser, args, {"conns": (1, 1024), "rate": (0, 1e6)})

NaN is out of every range; a flag's name is shown as typed (``--half-batch``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from typing import Any

from hub import native


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


def bench_main(parse: Callable[[list[str] | None], argparse.Namespace],
               run: Callable[[argparse.Namespace], dict[str, Any]],
               markdown: Callable[[dict[str, Any]], str], argv: list[str] | None = None,
               emit: Callable[[str], None] = print) -> int:
    """A bench's ``main``: parse, run, print (markdown, or JSON with ``--json``)."""
    args = parse(argv)
    result = run(args)
    result.setdefault("engine", str(native.STATE))   # compiled or source (hub.native)
    emit(json.dumps(result, indent=2) if args.json else markdown(result))
    return 0
