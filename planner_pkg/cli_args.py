"""What the command lines share (``planner_pkg.cli``, ``planner_pkg.nodes.bringup``,
``planner_pkg.policy.cli``), kept out of the CLI entry point so that library code never imports it
(docs/architecture.md):

* argparse ``type=`` validators: each parses one argument and raises
  ``argparse.ArgumentTypeError`` with a one-line message saying what was expected (argparse prints
  it as the usage error and exits with code 2);
* :class:`CliError` and the exit codes, and the checks that raise it: the world file
  (:func:`load_world_file`), an output path (:func:`writable_path`), start and goal
  (:func:`check_start_goal`); :func:`write_outputs` writes each output on its own.

``fly`` and ``bringup`` take the same mission arguments (``--start``/``--goal``, ``--timeout``,
``--goal-tolerance``, ``--max-vel``, output files) with the same types from here, so the two
commands refuse the same bad values with the same words.

Imports only the envelope and (inside functions) the world.
"""
from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path
from typing import Callable, List, Optional, Sequence, TypeVar

from planner_pkg.envelope import DEFAULT_ENVELOPE

__all__ = ["positive_float", "positive_int", "nonneg_int", "seed", "speed", "point", "duration_s",
           "goal_tolerance_m", "real_time_factor", "ros_namespace", "output_file",
           "MAX_DURATION_S", "MAX_GOAL_TOLERANCE_M", "MAX_REAL_TIME_FACTOR",
           "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "CliError", "join_negative_coordinates", "load_world_file",
           "writable_path", "check_start_goal", "write_outputs"]

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


# ---------------------------------------------------------------------------------------------
# errors, exit codes and the checks the commands share
# ---------------------------------------------------------------------------------------------
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_COORD = re.compile(r"^-\d")


class CliError(Exception):
    """A user-facing error: printed as ``error: <message>``, exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


def join_negative_coordinates(argv: Sequence[str], options=("--start", "--goal")) -> List[str]:
    """Let ``--start -20,0,1`` work: argparse would read ``-20,0,1`` as an option name."""
    out: List[str] = []
    it = iter(argv)
    for arg in it:
        if arg in options:
            nxt = next(it, None)
            if nxt is not None and _COORD.match(nxt):
                out.append(f"{arg}={nxt}")
                continue
            out.append(arg)
            if nxt is not None:
                out.append(nxt)
        else:
            out.append(arg)
    return out


def load_world_file(path: str):
    """The world in ``path``, or CliError saying what is wrong with the file."""
    from planner_pkg.world import WorldFormatError, load_world

    if not Path(path).is_file():
        raise CliError(f"world file {path!r} does not exist; create one with 'python -m planner_pkg world generate'")
    try:
        return load_world(path)
    except WorldFormatError as exc:
        raise CliError(f"invalid world file: {exc}") from None
    except OSError as exc:
        raise CliError(f"cannot read world file {path!r}: {exc}") from None


def check_start_goal(world, start, goal, radius: float, tolerance_m: float) -> None:
    """CliError unless start and goal ((3,) arrays, m, ENU) are free points of ``world`` (at least
    ``radius`` from every surface) and the start is not already within ``tolerance_m`` of the goal
    (that "flight" would be reached at t = 0). ``fly`` and ``bringup --goal`` refuse the same points."""
    import numpy as np

    _check_free(world, "start", np.asarray(start), radius)
    _check_free(world, "goal", np.asarray(goal), radius)
    gap = float(np.linalg.norm(np.asarray(goal) - np.asarray(start)))
    if gap <= tolerance_m:
        raise CliError(f"the start is {gap:.3f} m from the goal, within the goal tolerance {tolerance_m:g} m: "
                       f"there is nothing to fly; choose a goal farther away or a smaller --goal-tolerance")


def _check_free(world, name: str, point, radius: float) -> None:
    import numpy as np

    lo, hi = np.asarray(world.bounds_min), np.asarray(world.bounds_max)
    where = ",".join(f"{v:g}" for v in point)
    if (point < lo).any() or (point > hi).any():
        raise CliError(
            f"{name} {where} is outside the world bounds {lo.tolist()} .. {hi.tolist()}; choose a point inside"
        )
    distance = float(world.signed_distance(point))
    if distance < radius:
        inside = "inside an obstacle" if distance < 0 else f"within {radius:g} m (the vehicle radius) of an obstacle"
        raise CliError(
            f"{name} {where} is {inside} (distance to the nearest surface {distance:.3f} m, ground included); "
            f"choose a free point"
        )


def writable_path(path, what: str) -> Path:
    """``path`` as a Path, its folder created; CliError (naming the option ``what``) if it is a
    directory or its folder cannot be created."""
    p = Path(path)
    if p.exists() and p.is_dir():
        raise CliError(f"{what} path {str(path)!r} is a directory; give a file name")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{what}: cannot create the folder of {str(path)!r}: {exc}") from None
    return p


def write_outputs(writers) -> List[str]:
    """Run each ``(what, path, write)`` in turn; one that fails does not stop the others (a flight
    is not lost to one bad path). Returns one error line per failure."""
    errors = []
    for what, path, write in writers:
        try:
            write()
        except (OSError, ValueError) as exc:
            errors.append(f"could not write {what} {str(path)!r}: {exc}")
    return errors
