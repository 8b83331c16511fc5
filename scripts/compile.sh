#!/usr/bin/env bash
# One command: compile the placement engine (hub.native.MODULES) with mypyc, in place.
#   ./scripts/compile.sh          build (again)
#   ./scripts/compile.sh ensure   build unless the extensions match the sources
#   ./scripts/compile.sh clean    remove them: the engine runs from source
#   ./scripts/compile.sh status   which runs, and why
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -c 'import sys; from hub.native import main; sys.exit(main(sys.argv[1:]))' \
  "${1:-build}" "${@:2}"
