#!/usr/bin/env bash
# One command: set up, then check generated code, lint, type-check and run every test
# (end-to-end ones included; they start real hub/agent processes and a PostgreSQL server).
# Pass pytest arguments through, e.g. `./scripts/test.sh -m "not slow"` while developing.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
# The store tests start a real PostgreSQL server (initdb/pg_ctl), unless FUYAO_TEST_PG_URL
# names one. Install Debian's server if the machine has none and we may.
if [ -z "${FUYAO_TEST_PG_URL:-}" ] && ! command -v initdb >/dev/null \
   && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing PostgreSQL server (Debian package postgresql)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "PostgreSQL server binaries (initdb, pg_ctl) are needed: install postgresql" >&2
    exit 1
  fi
fi
echo "== generated code"
python -m fuyao.wire.generate --check
echo "== ruff"
ruff check fuyao hub member_agent fuyaoctl tests bench examples
echo "== mypy"
mypy
echo "== pytest"
exec pytest -q -p no:cacheprovider "$@"
