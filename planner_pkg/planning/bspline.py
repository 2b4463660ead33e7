"""Uniform B-splines: evaluation, derivatives, fitting to sampled points, feasibility, time scaling.

Convention (EGO-Planner's): a degree-``p`` spline with control points ``Q_0 .. Q_{N-1}`` and knot
interval ``dt`` (s) is defined on ``t in [0, (N - p) dt]``; segment ``k`` covers
``[k dt, (k + 1) dt)`` and is ``p(s) = [1 s s^2 .. s^p] M_p [Q_k .. Q_{k+p}]`` with
``s = t / dt - k``. The derivative of such a spline is the degree ``p - 1`` spline with control
points ``(Q_{i+1} - Q_i) / dt`` on the same time interval, so velocity, acceleration and jerk
control points are finite differences and limits on them bound the curve (convex hull property).

For the cubic case the curve at a knot is ``(Q_k + 4 Q_{k+1} + Q_{k+2}) / 6``, the velocity
``(Q_{k+2} - Q_k) / (2 dt)`` and the acceleration ``(Q_k - 2 Q_{k+1} + Q_{k+2}) / dt^2``:
:func:`fit_cubic` inverts exactly these relations.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Tuple

import numpy as np

__all__ = ["UniformBSpline", "basis_matrix", "fit_cubic"]


@lru_cache(maxsize=None)
def basis_matrix(degree: int) -> np.ndarray:
    """(p+1, p+1) matrix ``M`` with ``p(s) = [1, s, .., s^p] @ M @ Q[k:k+p+1]`` (uniform knots).

    From the closed form of the uniform B-spline basis (Qin 2000), which orders the rows by
    decreasing power: ``M'[i, j] = C(p, i) / p! * sum_{m=j}^{p} (p - m)^i (-1)^(m - j) C(p + 1, m - j)``
    is the coefficient of ``s^(p - i)``; the rows are flipped here to increasing powers.
    """
    p = int(degree)
    if p < 0:
        raise ValueError(f"B-spline degree must be >= 0, got {degree}")
    m = np.zeros((p + 1, p + 1))
    for i in range(p + 1):
        for j in range(p + 1):
            m[i, j] = sum((p - s) ** i * (-1) ** (s - j) * math.comb(p + 1, s - j) for s in range(j, p + 1))
            m[i, j] *= math.comb(p, i) / math.factorial(p)
    m = np.ascontiguousarray(m[::-1])
    m.setflags(write=False)
    return m


class UniformBSpline:
    """A uniform B-spline curve in R^D.

    control_points: (N, D) float64, m (or m/s^k for a k-th derivative), N >= degree + 1.
    dt: knot interval, s (> 0).
    degree: polynomial degree p (3 for EGO's position splines).
    """

    __slots__ = ("control_points", "dt", "degree")

    def __init__(self, control_points, dt: float, degree: int = 3):
        q = np.array(control_points, dtype=np.float64)
        if q.ndim == 1:
            q = q[:, None]
        if q.ndim != 2:
            raise ValueError(f"control points must be (N, D), got shape {q.shape}")
        if degree < 0 or q.shape[0] < degree + 1:
            raise ValueError(f"a degree-{degree} B-spline needs at least {degree + 1} control points, got {q.shape[0]}")
        if not (math.isfinite(dt) and dt > 0):
            raise ValueError(f"knot interval dt must be positive and finite, got {dt!r} s")
        if not np.isfinite(q).all():
            raise ValueError("control points must be finite")
        self.control_points = q
        self.dt = float(dt)
        self.degree = int(degree)

    # -- basic properties ------------------------------------------------------------------------
    @property
    def num_segments(self) -> int:
        return self.control_points.shape[0] - self.degree

    @property
    def duration(self) -> float:
        """Length of the time domain, s."""
        return self.num_segments * self.dt

    def derivative(self) -> "UniformBSpline":
        """The time derivative: degree p-1, control points ``diff(Q) / dt``, same time domain."""
        if self.degree == 0:
            raise ValueError("a degree-0 B-spline has no B-spline derivative (it is piecewise constant)")
        return UniformBSpline(np.diff(self.control_points, axis=0) / self.dt, self.dt, self.degree - 1)

    def derivative_control_points(self, order: int) -> np.ndarray:
        """Control points (N - order, D) of the ``order``-th time derivative."""
        q = self.control_points
        for _ in range(order):
            q = np.diff(q, axis=0) / self.dt
        return q

    # -- evaluation ---------------------------------------------------------------------------
    def evaluate(self, t) -> np.ndarray:
        """Curve value at times ``t`` (s, scalar or (T,)), clamped to ``[0, duration]``.

        Returns (D,) for a scalar ``t`` or (T, D).
        """
        scalar = np.ndim(t) == 0
        ts = np.atleast_1d(np.asarray(t, dtype=np.float64))
        p = self.degree
        u = np.clip(ts / self.dt, 0.0, float(self.num_segments))
        k = np.minimum(np.floor(u).astype(np.intp), self.num_segments - 1)
        s = u - k
        powers = s[:, None] ** np.arange(p + 1)  # (T, p+1)
        w = powers @ basis_matrix(p)  # (T, p+1) weights of Q_k .. Q_{k+p}
        idx = k[:, None] + np.arange(p + 1)
        out = np.einsum("tj,tjd->td", w, self.control_points[idx])
        return out[0] if scalar else out

    def evaluate_derivatives(self, t, order: int) -> Tuple[np.ndarray, ...]:
        """(value, 1st, .., order-th derivative) at ``t``; each like :meth:`evaluate`."""
        out = [self.evaluate(t)]
        spline = self
        for _ in range(order):
            spline = spline.derivative()
            out.append(spline.evaluate(t))
        return tuple(out)

    # -- feasibility and time scaling -----------------------------------------------------------
    def max_derivative_norm(self, order: int) -> float:
        """Largest Euclidean norm of the ``order``-th derivative control points (a bound on the
        curve's derivative by the convex hull property), m/s^order."""
        d = self.derivative_control_points(order)
        return float(np.sqrt((d * d).sum(axis=1)).max()) if d.shape[0] else 0.0

    def max_speed(self, samples_per_segment: int = 16) -> float:
        """Largest norm of the curve's first derivative, sampled ``samples_per_segment`` times per
        knot interval (ends included), m/s. Unlike :meth:`max_derivative_norm` (a bound from the
        control points, which can exceed the curve's own peak) this is the peak itself, to within
        the sampling: the derivative of a cubic is quadratic per segment, so 16 samples put the
        error below 0.1 % of the speed change within one segment."""
        if self.degree < 1:
            return 0.0
        ts = np.linspace(0.0, self.duration, self.num_segments * int(samples_per_segment) + 1)
        d = self.derivative().evaluate(ts)
        return float(np.sqrt((d * d).sum(axis=1)).max())

    def feasibility_ratio(self, max_vel: float, max_acc: float) -> float:
        """How much the time must be stretched for the limits to hold: ``max(1, |v|/max_vel,
        sqrt(|a|/max_acc))`` over the derivative control points (1.0 = feasible)."""
        if not (max_vel > 0 and max_acc > 0):
            raise ValueError(f"limits must be positive, got max_vel={max_vel}, max_acc={max_acc}")
        rv = self.max_derivative_norm(1) / max_vel
        ra = math.sqrt(self.max_derivative_norm(2) / max_acc) if self.degree >= 2 else 0.0
        return max(1.0, rv, ra)

    def is_feasible(self, max_vel: float, max_acc: float, tolerance: float = 1e-6) -> bool:
        """True when the velocity and acceleration control points respect the limits."""
        return self.feasibility_ratio(max_vel, max_acc) <= 1.0 + tolerance

    def lengthened(self, ratio: float) -> "UniformBSpline":
        """The same path traversed ``ratio`` times slower (dt * ratio): v / ratio, a / ratio^2."""
        if not (math.isfinite(ratio) and ratio > 0):
            raise ValueError(f"time ratio must be positive and finite, got {ratio!r}")
        return UniformBSpline(self.control_points, self.dt * ratio, self.degree)


@lru_cache(maxsize=64)
def _fit_pinv(k: int) -> np.ndarray:
    """Pseudo-inverse (K-4, K-2) of the interior fitting system: knot points P_1 .. P_{K-2} in
    terms of the free control points Q_3 .. Q_{K-2} (the pinned ones are moved to the right side)."""
    a = np.zeros((k - 2, k + 2))
    rows = np.arange(k - 2)
    a[rows, rows + 1] = 1.0 / 6.0
    a[rows, rows + 2] = 4.0 / 6.0
    a[rows, rows + 3] = 1.0 / 6.0
    pinv = np.linalg.pinv(a[:, 3:k - 1]) if k > 4 else np.zeros((0, k - 2))
    pinv.setflags(write=False)
    return pinv


def _boundary_triple(p, v, acc, dt: float, sign: float) -> np.ndarray:
    """The three control points (3, D) that put a cubic B-spline's knot point at ``p`` with
    velocity ``v`` and acceleration ``acc``: (Q_{k}, Q_{k+1}, Q_{k+2})."""
    mid = p - acc * dt * dt / 6.0
    return np.stack([mid - v * dt + 0.5 * acc * dt * dt, mid, mid + v * dt + 0.5 * acc * dt * dt])


def fit_cubic(points, dt: float, start_vel, end_vel, start_acc, end_acc) -> UniformBSpline:
    """Cubic B-spline through ``points`` at the knots, with exact boundary states.

    points: (K, D) samples at times ``0, dt, .., (K-1) dt`` (s), K >= 4.
    start_vel, end_vel: (D,) m/s; start_acc, end_acc: (D,) m/s^2.
    Returns a spline with K + 2 control points whose duration is ``(K - 1) dt``. The first and
    last knot points, velocities and accelerations are met exactly (they fix the first and last
    three control points: the start state must be continuous with the vehicle's reference); the
    interior knot points are met in the least-squares sense (exactly when the data come from a
    cubic B-spline with the same dt and boundary states).
    """
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[0] < 4:
        raise ValueError(f"need at least 4 sample points of shape (K, D), got {pts.shape}")
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"knot interval dt must be positive and finite, got {dt!r} s")
    bounds = [np.asarray(x, dtype=np.float64) for x in (start_vel, end_vel, start_acc, end_acc)]
    if not np.isfinite(pts).all() or not all(np.isfinite(b).all() for b in bounds):
        raise ValueError("fit_cubic: points and boundary derivatives must be finite")
    k, d = pts.shape
    q = np.empty((k + 2, d))
    q[:3] = _boundary_triple(pts[0], bounds[0], bounds[2], dt, 1.0)
    q[k - 1:] = _boundary_triple(pts[-1], bounds[1], bounds[3], dt, 1.0)
    if k > 4:
        # rows P_1 .. P_{K-2}: subtract the pinned control points' contributions
        rhs = pts[1:k - 1].copy()
        rhs[0] -= (q[1] + 4.0 * q[2]) / 6.0
        rhs[1] -= q[2] / 6.0
        rhs[-1] -= (4.0 * q[k - 1] + q[k]) / 6.0
        rhs[-2] -= q[k - 1] / 6.0
        q[3:k - 1] = _fit_pinv(k) @ rhs
    return UniformBSpline(q, dt, 3)
