#!/usr/bin/env bash
# Create .venv (if missing) and install the project with its dev tools into it.
# Needs only python3 >= 3.11 with venv; everything else comes from the package registry.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.fuyao-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
  echo "installing fuyao into .venv (log: .venv/install.log)"
  if ! .venv/bin/python -m pip install -e '.[dev]' > .venv/install.log 2>&1; then
    tail -n 40 .venv/install.log >&2
    echo "setup failed: see .venv/install.log" >&2
    exit 1
  fi
  touch "$stamp"
fi
# The placement engine compiled with mypyc (about a minute, again only when its sources
# change; docs/native.md). FUYAO_PURE=1 skips it; a failed compile leaves the source running.
if [ "${FUYAO_PURE:-0}" = 0 ]; then
  ./scripts/compile.sh ensure || echo "(the placement engine runs from its Python source)" >&2
fi
