#!/usr/bin/env bash
# Installs what the tests need into .venv and runs them. Used by .ci/run and the README.
# pytest's exit code passes through: 5 (no tests collected) fails like any other non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
exec .venv/bin/python -m pytest "$@"
