"""Speed calibration of a policy model: which network command makes it cruise at a given speed.

A trained network does not hold exactly the speed it is told. Its loss trades the velocity term
against the others (acceleration, jerk, the auxiliary velocity estimate), so even in open space
it settles below its command: the stage-5 model cruises at 0.90-0.92 x (docs/policy.md).
Training that gap away moved the model along its speed/safety frontier instead (issue 16's
notes). This module measures the gap per model, in flight, and inverts it:

* :func:`~planner_pkg.policy.calibrate.measure_speed_calibration` flies the model, uncalibrated, through the same closed loop
  as ``policy eval`` (rigid-body quadrotor, SE(3) controller, 30 Hz depth camera, 15 Hz policy)
  in an empty world, along a straight ``course_m`` course, at a grid of network commands inside
  the model's training range (``env.speed_mps``). Its cruise at each command is the median
  speed over the middle 60 % of the path (``evaluate.cruise_speed``), averaged over
  ``episodes`` flights (different world seeds: different sensor noise).
* :class:`SpeedCalibration` holds the measured pairs (open-space cruise, network command) and
  maps a requested cruise speed to the network command that flew it (linear interpolation).
  Below the slowest measured cruise it scales by that point's ratio. Above the fastest it gives
  the highest command measured, which is the top of the training range: a network is never told
  more than it was trained on, so a request beyond what the model can cruise flies at the model's
  top speed, and ``policy eval`` reports the speed it reached.
* :func:`~planner_pkg.policy.calibrate.write_speed_calibration` stores the table in the model file's policy metadata (key
  ``speed_calibration``; data only). :func:`~planner_pkg.policy.export.load_policy` reads it and
  :class:`~planner_pkg.policy.planner.PolicyPlanner` applies it unless its config's
  ``speed_calibration`` is off. A model without the key flies uncalibrated, as before.

The calibration is measured in open space. Among obstacles the network slows down further by its
own choice, and the calibration does not try to undo that.

    python -m planner_pkg policy calibrate [--model M] --out M2 [--episodes 2]
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Tuple

import numpy as np

__all__ = ["SpeedCalibration", "SpeedCalibrationError", "parse_speed_calibration", "CALIBRATION_KEY"]

#: Key of the table in the model file's policy metadata (beside ``version`` and ``config``).
CALIBRATION_KEY = "speed_calibration"


class SpeedCalibrationError(ValueError):
    """A malformed calibration table, or a measurement that cannot be inverted."""


@dataclass(frozen=True)
class SpeedCalibration:
    """Measured open-space cruise speeds (m/s, strictly increasing) and the network commands
    (m/s, strictly increasing) that flew them; see the module docstring."""

    cruise_mps: Tuple[float, ...]
    network_mps: Tuple[float, ...]

    def __post_init__(self):
        c = np.asarray(self.cruise_mps, dtype=np.float64)
        g = np.asarray(self.network_mps, dtype=np.float64)
        if c.ndim != 1 or c.shape != g.shape or c.shape[0] < 2:
            raise SpeedCalibrationError(f"a speed calibration needs two equally long lists of at least 2 speeds, got "
                                        f"{len(self.cruise_mps)} cruise and {len(self.network_mps)} network speeds")
        if not (np.isfinite(c).all() and np.isfinite(g).all() and (c > 0).all() and (g > 0).all()):
            raise SpeedCalibrationError("speed calibration speeds must be finite and positive, got "
                                        f"cruise {list(self.cruise_mps)}, network {list(self.network_mps)}")
        if not ((np.diff(c) > 0).all() and (np.diff(g) > 0).all()):
            raise SpeedCalibrationError("speed calibration speeds must increase strictly (a faster command must "
                                        f"cruise faster), got cruise {list(self.cruise_mps)} for network "
                                        f"{list(self.network_mps)}")
        object.__setattr__(self, "cruise_mps", tuple(float(v) for v in c))
        object.__setattr__(self, "network_mps", tuple(float(v) for v in g))

    def network_speed(self, speed_mps: float) -> float:
        """The network command for a requested open-space cruise of ``speed_mps`` (>= 0)."""
        v = float(speed_mps)
        if not (math.isfinite(v) and v >= 0.0):
            raise ValueError(f"speed must be a finite non-negative number of m/s, got {speed_mps!r}")
        c, g = self.cruise_mps, self.network_mps
        if v <= c[0]:
            return v * g[0] / c[0]
        if v >= c[-1]:
            return g[-1]
        return float(np.interp(v, c, g))

    def cruise_speed(self, network_mps: float) -> float:
        """The measured open-space cruise at network command ``network_mps`` (the inverse map)."""
        v = float(network_mps)
        c, g = self.cruise_mps, self.network_mps
        if v <= g[0]:
            return v * c[0] / g[0]
        return float(np.interp(v, g, c)) if v < g[-1] else c[-1]

    def to_dict(self) -> dict:
        return {"cruise_mps": list(self.cruise_mps), "network_mps": list(self.network_mps)}


def parse_speed_calibration(values, where: str = "speed calibration") -> SpeedCalibration:
    """The table from its JSON form (``SpeedCalibration.to_dict``), as stored in a model file:
    exactly the two lists, checked as the constructor checks them; SpeedCalibrationError naming
    ``where`` otherwise."""
    if not isinstance(values, Mapping) or set(values) != {"cruise_mps", "network_mps"}:
        raise SpeedCalibrationError(f"{where}: expected {{'cruise_mps': [...], 'network_mps': [...]}}, got "
                                    f"{values!r:.200}")
    try:
        return SpeedCalibration(tuple(float(v) for v in values["cruise_mps"]),
                                tuple(float(v) for v in values["network_mps"]))
    except (TypeError, ValueError) as exc:
        raise SpeedCalibrationError(f"{where}: {exc}") from None
