"""Time reallocation: re-time a B-spline's path with a speed profile that respects the limits.

EGO-Planner stretches the time of an infeasible trajectory by the violation ratio and re-fits it.
A uniform stretch slows the whole trajectory, including the start, where the vehicle is already
moving (the reference would jump), and a large detour around an obstacle can need a stretch of
3x or more. Here the *path* is kept and a new timing is computed along its arc length instead:
the speed is the cruise speed, capped by the curvature (lateral acceleration) and by what the
acceleration limit allows from the start speed and toward the end speed (a forward/backward pass,
as in time-optimal path parameterisation). The path is then sampled at (about) the knot interval
and fitted to a new cubic B-spline with the original boundary derivatives, so the number of
control points follows the path length instead of the old timing.
"""
from __future__ import annotations

import math
from typing import Tuple

import numpy as np

from planner_pkg.planning.bspline import UniformBSpline, fit_cubic

__all__ = ["speed_profile", "retime"]


def speed_profile(s: np.ndarray, curvature: np.ndarray, v_start: float, v_end: float, v_max: float,
                  a_max: float, a_lat: float) -> np.ndarray:
    """Speeds (K,) m/s at arc lengths ``s`` (K,) m: at most ``v_max``, at most
    ``sqrt(a_lat / curvature)`` (curvature (K,) 1/m), reachable from ``v_start`` and able to reach
    ``v_end`` with |dv/dt| <= ``a_max`` (m/s^2). ``v_start`` is kept even above ``v_max`` (the
    vehicle is already that fast: it brakes at ``a_max``)."""
    v = np.minimum(v_max, np.sqrt(a_lat / np.maximum(curvature, 1e-9)))
    v[0] = v_start
    v[-1] = min(v[-1], v_end)
    ds = np.diff(s).tolist()
    vl = v.tolist()
    two_a = 2.0 * a_max
    # sequential passes: each speed depends on its neighbour's (K ~ 200, once per refine)
    for i in range(1, len(vl)):
        vl[i] = min(vl[i], math.sqrt(vl[i - 1] * vl[i - 1] + two_a * ds[i - 1]))
    for i in range(len(vl) - 2, 0, -1):
        vl[i] = min(vl[i], math.sqrt(vl[i + 1] * vl[i + 1] + two_a * ds[i]))
    return np.asarray(vl)


def retime(spline: UniformBSpline, max_vel: float, max_acc: float, knot_dt: float, speed_fraction: float = 0.95,
           acc_fraction: float = 0.7, step_m: float = 0.05) -> Tuple[UniformBSpline, np.ndarray, np.ndarray]:
    """The path of ``spline`` (cubic, 3-D) with a new, feasible timing.

    Returns (new spline, knot points (K, 3) m, unit tangents (K, 3)): the spline interpolates the
    knot points at the knot times in the least-squares sense (see :func:`fit_cubic`), with the
    original start velocity and acceleration and end velocity (its norm capped at max_vel).
    """
    duration = spline.duration
    # dense samples in the old time, about step_m apart
    vbound = max(spline.max_derivative_norm(1), 1e-3)
    n = int(min(max(math.ceil(duration * vbound / step_m) + 1, 20), 2000))
    pts = spline.evaluate(np.linspace(0.0, duration, n))
    seg = np.sqrt((np.diff(pts, axis=0) ** 2).sum(axis=1))
    s = np.concatenate([[0.0], np.cumsum(seg)])
    length = float(s[-1])
    _, v0_vec, a0_vec = spline.evaluate_derivatives(0.0, 2)
    v1_vec = spline.evaluate_derivatives(duration, 1)[1]
    v1 = float(np.linalg.norm(v1_vec))
    if v1 > max_vel:
        v1_vec = v1_vec * (max_vel / v1)
        v1 = max_vel
    if length < 1e-6:
        return spline, pts[[0]], np.zeros((1, 3))
    # curvature from the turning angle between consecutive chords
    d = np.diff(pts, axis=0)
    dn = d / np.maximum(seg, 1e-12)[:, None]
    cosang = np.clip((dn[1:] * dn[:-1]).sum(axis=1), -1.0, 1.0)
    kappa = np.zeros(n)
    kappa[1:-1] = np.arccos(cosang) / np.maximum(0.5 * (seg[1:] + seg[:-1]), 1e-9)
    a = acc_fraction * max_acc
    v = speed_profile(s, kappa, float(np.linalg.norm(v0_vec)), v1, speed_fraction * max_vel, a, a)
    v = np.maximum(v, 1e-3)
    dt_seg = 2.0 * seg / (v[1:] + v[:-1])
    t = np.concatenate([[0.0], np.cumsum(dt_seg)])
    total = float(t[-1])
    k = max(4, int(round(total / knot_dt)) + 1)
    dt = total / (k - 1)
    s_k = np.interp(np.arange(k) * dt, t, s)
    knots = np.stack([np.interp(s_k, s, pts[:, i]) for i in range(3)], axis=1)
    knots[0], knots[-1] = pts[0], pts[-1]
    tang = np.gradient(knots, axis=0)
    tang /= np.maximum(np.linalg.norm(tang, axis=1), 1e-12)[:, None]
    fitted = fit_cubic(knots, dt, v0_vec, v1_vec, a0_vec, np.zeros(3))
    return fitted, knots, tang
