"""Measuring a policy model's speed calibration and storing it in the model file (the table
itself and what it means: :mod:`planner_pkg.policy.speed_calibration`).

    python -m planner_pkg policy calibrate [--model M] --out M2 [--episodes 2]
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from planner_pkg.policy.evaluate import evaluate_speeds
from planner_pkg.policy.export import POLICY_METADATA_KEY, PolicyModelError, file_metadata, load_policy_bytes
from planner_pkg.policy.speed_calibration import CALIBRATION_KEY, SpeedCalibration, SpeedCalibrationError

__all__ = ["measure_speed_calibration", "write_speed_calibration", "DEFAULT_COURSE_M", "DEFAULT_POINTS"]

#: Length of the straight open-space course, m: at 10 m/s the middle 60 % is past the take-off.
DEFAULT_COURSE_M = 110.0
#: Network commands measured: this many points over the training range of ``env.speed_mps``.
DEFAULT_POINTS = 9


def measure_speed_calibration(policy, network_speeds: Optional[Sequence[float]] = None, episodes: int = 2,
                              course_m: float = DEFAULT_COURSE_M, vehicle: str = "quadrotor", **pool
                              ) -> Tuple[SpeedCalibration, List[dict]]:
    """Fly ``policy`` (a LoadedPolicy) uncalibrated in open space at each network command (default:
    ``DEFAULT_POINTS`` over its training range ``env.speed_mps``); returns the calibration and one
    row per command (``network_mps``, ``cruise_mps`` (mean), ``cruise_each_mps``, ``reached``).
    Raises SpeedCalibrationError when a flight does not reach its goal or the cruise does not rise
    with the command (such a model cannot be calibrated). ``pool``: ``evaluate_speeds``'s workers."""
    if network_speeds is None:
        lo, hi = policy.config.env.speed_mps
        network_speeds = np.linspace(lo, hi, DEFAULT_POINTS)
    speeds = [float(v) for v in network_speeds]
    if len(speeds) < 2 or any(not (math.isfinite(v) and v > 0) for v in speeds) or sorted(set(speeds)) != speeds:
        raise SpeedCalibrationError(f"network speeds must be at least 2 distinct increasing positive speeds, got {speeds}")
    if not (math.isfinite(course_m) and course_m >= 20.0):
        raise SpeedCalibrationError(f"the course must be at least 20 m long, got {course_m}")
    half = 0.5 * course_m
    params = {"count": 0, "size_x": course_m + 10.0, "size_y": 20.0,
              "start": (-half, 0.0, 1.0), "goal": (half, 0.0, 1.0)}
    results = evaluate_speeds(policy, speeds, episodes=episodes, vehicle=vehicle, world_kind="forest",
                              world_params=params, calibrated=False, **pool)
    rows = []
    for r in results:
        each = [e.get("cruise_speed_mps") for e in r.episodes]
        reached = [bool(e["reached"]) for e in r.episodes]
        if not all(reached) or any(v is None for v in each):
            raise SpeedCalibrationError(f"at a network command of {r.speed_mps:g} m/s the model did not fly the "
                                        f"open {course_m:g} m course ({sum(reached)}/{len(reached)} reached): "
                                        "it cannot be calibrated")
        rows.append({"network_mps": r.speed_mps, "cruise_mps": float(np.mean(each)),
                     "cruise_each_mps": [float(v) for v in each], "reached": len(reached)})
    try:
        calibration = SpeedCalibration(tuple(r["cruise_mps"] for r in rows), tuple(speeds))
    except SpeedCalibrationError as exc:
        raise SpeedCalibrationError(f"the measured open-space cruise does not rise with the command ({exc}); "
                                    "this model cannot be calibrated") from None
    return calibration, rows


def write_speed_calibration(model: Union[str, Path], calibration: Optional[SpeedCalibration],
                            out: Union[str, Path]) -> Path:
    """Copy the model file ``model`` to ``out`` (atomically; the same path is fine) with
    ``calibration`` in its policy metadata (None removes it). The graph and weights are unchanged."""
    from autograd_core.runtime import _format

    where = str(model)
    try:
        data = Path(model).read_bytes()
    except OSError as exc:
        raise PolicyModelError(f"cannot read policy model {where!r}: {exc}") from None
    load_policy_bytes(data, where)  # a policy model, consistent with its config
    _, tensors = _format.loads(data)  # (checked above)
    metadata = dict(file_metadata(data, where))
    meta = json.loads(metadata[POLICY_METADATA_KEY])
    meta.pop(CALIBRATION_KEY, None)
    if calibration is not None:
        meta[CALIBRATION_KEY] = calibration.to_dict()
    metadata[POLICY_METADATA_KEY] = json.dumps(meta, separators=(",", ":"))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _format.write_file(out, tensors, metadata)
    return out
