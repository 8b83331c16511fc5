#!/usr/bin/env bash
# One command: set up, then run the demo (a hub on SQLite + three simulated member clusters).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/python examples/demo.py "$@"
