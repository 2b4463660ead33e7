"""argparse ``type=`` validators shared by the command line modules (``planner_pkg.cli``,
``planner_pkg.nodes.bringup``, ``planner_pkg.policy.cli``): each parses one argument and raises
``argparse.ArgumentTypeError`` with a one-line message saying what was expected (argparse prints
it as the usage error and exits with code 2).

``fly`` and ``bringup`` take the same mission arguments (``--start``/``--goal``, ``--timeout``,
``--goal-tolerance``, ``--max-vel``, output files) with the same types from here, so the two
commands refuse the same bad values with the same words.
"""
from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path
from typing import Callable, Optional, TypeVar

from planner_pkg.envelope import DEFAULT_ENVELOPE

__all__ = ["positive_float", "positive_int", "nonneg_int", "seed", "speed", "point", "duration_s",
           "goal_tolerance_m", "real_time_factor", "ros_namespace", "output_file",
           "MAX_DURATION_S", "MAX_GOAL_TOLERANCE_M", "MAX_REAL_TIME_FACTOR"]

T = TypeVar("T")

#: Longest time limit / duration accepted on a command line, s (one week: longer is a typo).
MAX_DURATION_S = 7 * 24 * 3600.0
#: Largest goal radius, m: a bigger one makes "reached" meaningless in any world we fly.
MAX_GOAL_TOLERANCE_M = 10.0
#: Fastest simulated pace, sim seconds per wall second (the sim_bridge's ``real_time_factor`` range).
MAX_REAL_TIME_FACTOR = 100.0


def _checked(text: str, convert: Callable[[str], T], ok: Callable[[T], bool], expected: str,
             expected_value: Optional[str] = None) -> T:
    """``convert(text)`` if it parses and passes ``ok``; else "expected <expected>, got 'text'"
    (``expected_value`` replaces ``expected`` when the text parsed but the value is refused)."""
    try:
        value = convert(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {expected_value or expected}, got {text!r}")
    return value


def _finite_positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def positive_float(text: str) -> float:
    """A finite number > 0."""
    return _checked(text, float, _finite_positive, "a number", "a positive number")


def speed(text: str) -> float:
    """A speed > 0 and within the flight envelope (``FlightEnvelope.max_speed_mps``), m/s."""
    top = DEFAULT_ENVELOPE.max_speed_mps
    return _checked(text, float, lambda v: _finite_positive(v) and v <= top, "a speed in m/s",
                    f"a positive speed in m/s, at most {top:g} (the flight envelope)")


def duration_s(text: str) -> float:
    """A time limit / duration: finite, > 0 and at most :data:`MAX_DURATION_S`, s."""
    return _checked(text, float, lambda v: _finite_positive(v) and v <= MAX_DURATION_S, "a number of seconds",
                    f"a positive number of seconds, at most {MAX_DURATION_S:g}")


def goal_tolerance_m(text: str) -> float:
    """A goal radius: finite, > 0 and at most :data:`MAX_GOAL_TOLERANCE_M`, m."""
    return _checked(text, float, lambda v: _finite_positive(v) and v <= MAX_GOAL_TOLERANCE_M, "a distance in m",
                    f"a positive distance in m, at most {MAX_GOAL_TOLERANCE_M:g}")


def real_time_factor(text: str) -> float:
    """Sim seconds per wall second: 0 (as fast as possible) up to :data:`MAX_REAL_TIME_FACTOR`."""
    return _checked(text, float, lambda v: math.isfinite(v) and 0.0 <= v <= MAX_REAL_TIME_FACTOR, "a number",
                    f"a number from 0 (as fast as possible) to {MAX_REAL_TIME_FACTOR:g}")


def point(text: str):
    """``"x,y,z"`` (metres, finite, inside the flight envelope) -> (3,) float64 array."""
    import numpy as np

    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected three finite numbers x,y,z in metres, got {text!r}")
    try:
        DEFAULT_ENVELOPE.check_position("point", values)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, got {text!r}") from None
    return np.array(values)


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _checked(text, int, lambda v: v >= 1, "a positive integer")


def nonneg_int(text: str) -> int:
    """An integer >= 0."""
    return _checked(text, int, lambda v: v >= 0, "a non-negative integer")


def seed(text: str) -> int:
    """A random seed: an integer >= 0."""
    return _checked(text, int, lambda v: v >= 0, "a non-negative integer seed")


# ROS 2 name rules (rcl/rmw validate_namespace): tokens of letters, digits and '_', not starting with
# a digit, separated by single '/'; no '__', no trailing '/'.
_NS_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def ros_namespace(text: str) -> str:
    """A ROS 2 namespace (``drone1``, ``/swarm/drone1``) or empty for none; returned absolute or ''."""
    if text in ("", "/"):
        return ""
    body = text[1:] if text.startswith("/") else text
    tokens = body.split("/")
    bad = next((t for t in tokens if not _NS_TOKEN.match(t) or "__" in t), None)
    if bad is not None:
        what = "an empty part (double or trailing '/')" if bad == "" else f"the part {bad!r}"
        raise argparse.ArgumentTypeError(
            f"expected a ROS namespace (letters, digits and '_' separated by '/', not starting with a digit, "
            f"no '__'), got {text!r}: {what} is not allowed")
    return "/" + body


def output_file(text: str) -> Path:
    """A file the command may write later: not a directory, and its folder (or the nearest one
    that exists, the rest is created) writable. Checked before any work starts, so a long
    flight is not lost to a bad output path."""
    if not text or text.endswith(os.sep):
        raise argparse.ArgumentTypeError(f"expected a file name, got {text!r}")
    p = Path(text)
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; give a file name")
    if p.exists() and not os.access(p, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text!r} exists and is not writable")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"cannot create {text!r}: {str(parent)!r} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot create {text!r}: the folder {str(parent)!r} is not writable")
    return p
