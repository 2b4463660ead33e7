"""argparse ``type=`` validators shared by the command line modules (``planner_pkg.cli``,
``planner_pkg.policy.cli``): each parses one argument and raises ``argparse.ArgumentTypeError``
with a one-line message saying what was expected (argparse prints it as the usage error).
"""
from __future__ import annotations

import argparse
import math
from typing import Callable, Optional, TypeVar

__all__ = ["positive_float", "positive_int", "nonneg_int", "seed", "speed"]

T = TypeVar("T")


def _checked(text: str, convert: Callable[[str], T], ok: Callable[[T], bool], expected: str,
             expected_value: Optional[str] = None) -> T:
    """``convert(text)`` if it parses and passes ``ok``; else "expected <expected>, got 'text'"
    (``expected_value`` replaces ``expected`` when the text parsed but the value is refused)."""
    try:
        value = convert(text)
    except ValueError:
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
    """A finite speed > 0, m/s."""
    return _checked(text, float, _finite_positive, "a speed in m/s", "a positive speed in m/s")


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _checked(text, int, lambda v: v >= 1, "a positive integer")


def nonneg_int(text: str) -> int:
    """An integer >= 0."""
    return _checked(text, int, lambda v: v >= 0, "a non-negative integer")


def seed(text: str) -> int:
    """A random seed: an integer >= 0."""
    return _checked(text, int, lambda v: v >= 0, "a non-negative integer seed")
