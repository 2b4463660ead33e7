#!/usr/bin/env bash
# Build a fresh virtual environment from this checkout's own files and run the whole test suite.
# Usage: bash scripts/test.sh [pytest args...]      (CI runs exactly this via .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
VENV=.venv-test
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test,ros,oracle,ray]'
set +e
"$VENV/bin/python" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: failing the run" >&2
    exit 1
fi
exit "$rc"
