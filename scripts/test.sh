#!/usr/bin/env bash
# One command: set up, then check generated code, lint, type-check and run every test
# (end-to-end ones included; they start real hub/agent processes and a PostgreSQL server).
# Pass pytest arguments through, e.g. `./scripts/test.sh -m "not slow"` while developing.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
echo "== generated code"
python -m fuyao.wire.generate --check
echo "== ruff"
ruff check fuyao hub member_agent fuyaoctl tests bench examples
echo "== mypy"
mypy
echo "== pytest"
exec pytest -q -p no:cacheprovider "$@"
