#!/usr/bin/env bash
# The README's "main job": on a fresh machine (Python 3.11, nothing else) set up .venv, generate a
# forest world, bring up the simulated ROS 2 graph over DDS (embedded simulator, planner,
# trajectory server, MCAP recorder: `python -m planner_pkg bringup sim`), send the goal and fly it.
# Outputs in out/: forest.yaml, flight.csv (t,x,y,z,vx,vy,vz from odom), summary.json, flight.png,
# flight.mcap (every topic: open it in Foxglove or `ros2 bag info`), bringup.log; the summary is
# printed at the end. `python -m planner_pkg plot out/flight.mcap --world out/forest.yaml -o x.png`
# draws the plot again from the recording.
#
# Usage: [PLANNER=ego|direct] [SEED=N] [ROS=0] bash scripts/fly.sh [extra bringup options]
#   extra options go to `bringup` (e.g. --real-time-factor 2, --timeout 90), or to `fly` with ROS=0.
#   --viz [--viz-port P] [--viz-host A]: watch it live in Foxglove (the URL is printed; docs/viz.md;
#   installs the viz extra) and, with ROS, in RViz2 (rviz2 -d rviz/planner.rviz).
#   ROS=0: the fallback without ROS 2 (no x86_64 ROS wheels, e.g. on ARM): the same episode in the
#   embedded simulator in one process, `python -m planner_pkg fly ...` (no MCAP).
# DDS discovery stays on this host (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST unless set); set
# ROS_DOMAIN_ID to keep two runs on one machine apart or to watch this one from Foxglove / RViz2.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
USE_ROS="${ROS:-1}"
EXTRAS='.[ros,plots,record]'
CHECK='import rclpy, mcap_ros2, matplotlib'
if [ "$USE_ROS" = "0" ]; then
    EXTRAS='.[plots]'
    CHECK='import matplotlib'
fi
# --viz: the live view needs foxglove-sdk (extra viz); the URL is printed below
VIZ=0 VIZ_PORT=8765 VIZ_HOST=127.0.0.1
prev=""
for arg in "$@"; do
    case "$prev" in
        --viz-port) VIZ_PORT="$arg" ;;
        --viz-host) VIZ_HOST="$arg" ;;
    esac
    case "$arg" in
        --viz) VIZ=1 ;;
        --viz-port=*) VIZ_PORT="${arg#*=}" ;;
        --viz-host=*) VIZ_HOST="${arg#*=}" ;;
    esac
    prev="$arg"
done
if [ "$VIZ" = "1" ]; then
    EXTRAS="${EXTRAS%]},viz]"
    CHECK="$CHECK, foxglove"
fi
if [ ! -x "$VENV/bin/python" ]; then
    PY="$(command -v python3.11 || command -v python3 || true)"
    if [ -z "$PY" ]; then
        echo "error: need python3.11 (or python3) on PATH to create $VENV" >&2
        exit 1
    fi
    echo "creating $VENV with $PY"
    "$PY" -m venv "$VENV"
fi
PYTHON="$VENV/bin/python"
if ! "$PYTHON" -c "import planner_pkg; $CHECK" >/dev/null 2>&1; then
    echo "installing $EXTRAS into $VENV (ROS 2 Kilted wheels: about a minute)"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check -e "$EXTRAS"
fi
mkdir -p out

SEED="${SEED:-3}"
"$PYTHON" -m planner_pkg world generate --kind forest --seed "$SEED" -o out/forest.yaml
# start and goal are the forest generator's default clear discs: 40 m at up to 2 m/s, ~30 s of
# sim time (the mission's --timeout is 60 sim s), flown at real time (EGO budgets its optimiser in
# wall time, so real time is what an onboard computer sees)
if [ "$USE_ROS" = "0" ]; then
    # fly prints "live view: ws://HOST:PORT" itself (stderr) when --viz is given
    "$PYTHON" -m planner_pkg fly --world out/forest.yaml --start=-20,0,1 --goal=20,0,1 \
        --planner "${PLANNER:-ego}" --seed "$SEED" \
        --log out/flight.csv --summary out/summary.json --plot out/flight.png "$@" > /dev/null
    echo "flight log: out/flight.csv   plot: out/flight.png   summary: out/summary.json"
else
    export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
    rm -f out/flight.mcap out/summary.json
    echo "bringing up the simulated ROS 2 graph and flying ${PLANNER:-ego} from -20,0,1 to 20,0,1 (log: out/bringup.log)"
    if [ "$VIZ" = "1" ]; then
        # the bringup checks the port before any node starts (a taken one fails the run, exit 2)
        case "$VIZ_HOST" in 0.0.0.0|::) URL_HOST="$(hostname)" ;; *) URL_HOST="$VIZ_HOST" ;; esac
        if [ "$VIZ_PORT" = "0" ]; then
            echo "live view: on a free port: the viz node's '[viz] live view: ws://...' line in out/bringup.log"
        else
            echo "live view: ws://$URL_HOST:$VIZ_PORT  (Foxglove: Open connection > Foxglove WebSocket;" \
                 "layout: config/foxglove/planner_live.json; RViz2: rviz2 -d rviz/planner.rviz)"
        fi
    fi
    if ! "$PYTHON" -m planner_pkg bringup sim --world out/forest.yaml --start=-20,0,1 --goal=20,0,1 \
        --planner "${PLANNER:-ego}" --timeout 60 --real-time-factor 1.0 --log-level warn \
        --record out/flight.mcap --log out/flight.csv --summary out/summary.json --plot out/flight.png \
        "$@" > out/bringup.log 2>&1; then
        tail -n 20 out/bringup.log >&2
        echo "error: the bringup failed (full log: out/bringup.log)" >&2
        exit 1
    fi
    echo "flight log: out/flight.csv   plot: out/flight.png   summary: out/summary.json"
    echo "recording: out/flight.mcap ($(du -h out/flight.mcap | cut -f1)): Foxglove, 'ros2 bag info', or" \
         "'$PYTHON -m planner_pkg plot out/flight.mcap --world out/forest.yaml -o out/replot.png'"
fi
cat out/summary.json
