"""Regenerate the protobuf and gRPC Python code from ``proto/``.

Run ``python -m fuyao.wire.generate`` from the repository root after editing a ``.proto``
file; ``--check`` exits 1 when the committed code is stale (the tests call it). The output
lands beside this module in ``v1/`` and is never edited by hand.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "proto"
PROTO_FILES = ["fuyao/wire/v1/agent.proto"]
GENERATED = ["agent_pb2.py", "agent_pb2.pyi", "agent_pb2_grpc.py"]


def generate(out_dir: Path) -> None:
    """Run protoc (grpcio-tools) for every proto file into ``out_dir``."""
    from grpc_tools import protoc

    for proto in PROTO_FILES:
        args = [
            "protoc",
            f"-I{PROTO_DIR}",
            f"--python_out={out_dir}",
            f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            str(PROTO_DIR / proto),
        ]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed for {proto}")


def stale_files() -> list[str]:
    """Names of generated files that differ from what protoc would write now."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        fresh = Path(tmp) / "fuyao" / "wire" / "v1"
        here = ROOT / "fuyao" / "wire" / "v1"
        return [
            name
            for name in GENERATED
            if not (here / name).exists()
            or not filecmp.cmp(fresh / name, here / name, shallow=False)
        ]


def main(argv: list[str] | None = None) -> int:
    """Entry point: regenerate, or with ``--check`` report stale files."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if generated code is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        if stale:
            print("stale generated code: " + ", ".join(stale), file=sys.stderr)
            return 1
        print("generated code is up to date")
        return 0
    generate(ROOT)
    print("regenerated " + ", ".join(GENERATED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
