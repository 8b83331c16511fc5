#!/usr/bin/env bash
# One command: set up, then check generated code, lint, type-check and run every test
# (end-to-end ones included; they start real hub/agent processes and a PostgreSQL server).
# Pass pytest arguments through, e.g. `./scripts/test.sh -m "not slow"` while developing.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
# Tests start real servers: PostgreSQL (initdb/pg_ctl, unless FUYAO_TEST_PG_URL names one),
# Redis (redis-server), headless Chromium for the web view, and valgrind (the instruction
# count bench). Install Debian's packages for whichever is missing, when we may (root with
# apt-get); otherwise say what to install.
missing=()
if [ -z "${FUYAO_TEST_PG_URL:-}" ] && ! command -v initdb >/dev/null \
   && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
command -v redis-server >/dev/null || missing+=(redis-server)
command -v chromium >/dev/null || missing+=(chromium chromium-driver)
command -v valgrind >/dev/null || missing+=(valgrind)   # bench/decision_count.py's counts
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "these Debian packages are needed for the tests: ${missing[*]}" >&2
    exit 1
  fi
fi
echo "== generated code"
python -m fuyao.wire.generate --check
echo "== ruff"
ruff check fuyao hub member_agent fuyaoctl tests bench examples
echo "== mypy"
mypy
if [ $# -eq 0 ] && python -c 'import sys, hub.native as n; sys.exit(not n.STATE.compiled)'; then
  # the suite below runs the compiled engine (scripts/setup.sh built it): its Python source,
  # what a plain `pip install` runs, passes the engine's own tests too
  echo "== pytest: the placement engine from its Python source (FUYAO_PURE=1)"
  FUYAO_PURE=1 pytest -q -p no:cacheprovider tests/placement tests/unit/test_native.py
fi
echo "== pytest"
exec pytest -q -p no:cacheprovider "$@"
