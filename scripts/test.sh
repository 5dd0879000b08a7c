#!/usr/bin/env bash
# Installs what the tests need into .venv, runs ruff and mypy --strict (either failing fails the run), then pytest.
# Used by .ci/run and the README. pytest's exit code passes through: 5 (no tests collected) fails like any
# other non-zero. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
# The contrib plugins (their tests run with the rest, and the metrics tests use them).
.venv/bin/python -m pip install --quiet -e contrib_plugins/networktraffic -e contrib_plugins/networkaware \
    -e contrib_plugins/loadaware
# Tests marked `prometheus` run a real Prometheus server (tests/promkit.py): without one they skip,
# or fail under CI=true. Install Debian's package when we can; SCORER_PROMETHEUS_BIN overrides PATH.
if [ -z "${SCORER_PROMETHEUS_BIN:-}" ] && ! command -v prometheus >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: installing prometheus (apt-get)..."
        if ! { apt-get update -qq >/dev/null \
               && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }; then
            echo "test.sh: could not install prometheus with apt-get: prometheus tests will skip (fail under CI=true)" >&2
        fi
    else
        echo "test.sh: no prometheus binary: prometheus tests will skip (fail under CI=true); install it with" \
             "'apt-get install prometheus' as root, or set SCORER_PROMETHEUS_BIN" >&2
    fi
fi
# Tests marked `kube` run a real etcd + kube-apiserver v1.20.2 (tests/kubekit.py), built from Debian's `kubernetes`
# source package into a cache outside the repository when missing (scripts/build-kube.sh, as root; a few minutes
# the first time). Without it they skip, or fail under CI=true. SCORER_KUBE_BIN names a directory that has one.
if [ -z "${SCORER_KUBE_BIN:-}" ] && ! bash scripts/build-kube.sh >/dev/null; then
    echo "test.sh: no kube-apiserver: kube tests will skip (fail under CI=true)" >&2
fi
echo "test.sh: ruff check scorer tests contrib_plugins bench"
.venv/bin/ruff check scorer tests contrib_plugins bench
echo "test.sh: mypy (strict: scorer and contrib_plugins, the files pyproject.toml names)"
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
