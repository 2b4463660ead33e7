#!/usr/bin/env bash
# The README's "main job": on a fresh machine (Python 3.11, nothing else) set up .venv, generate a
# forest world and fly it in the embedded simulator. Outputs in out/: forest.yaml, flight.csv,
# summary.json, flight.png; the summary is printed at the end.
# Usage: [PLANNER=ego|direct] [SEED=N] bash scripts/fly.sh [extra fly options, e.g. --max-vel 3]
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
if [ ! -x "$VENV/bin/python" ]; then
    PY="$(command -v python3.11 || command -v python3 || true)"
    if [ -z "$PY" ]; then
        echo "error: need python3.11 (or python3) on PATH to create $VENV" >&2
        exit 1
    fi
    echo "creating $VENV with $PY"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[plots]'
fi
PYTHON="$VENV/bin/python"
mkdir -p out

SEED="${SEED:-3}"
"$PYTHON" -m planner_pkg world generate --kind forest --seed "$SEED" -o out/forest.yaml
# start and goal are the forest generator's default clear discs
"$PYTHON" -m planner_pkg fly --world out/forest.yaml --start=-20,0,1 --goal=20,0,1 \
    --planner "${PLANNER:-ego}" --seed "$SEED" \
    --log out/flight.csv --summary out/summary.json --plot out/flight.png "$@" > /dev/null
echo "flight log: out/flight.csv   plot: out/flight.png   summary: out/summary.json"
cat out/summary.json
