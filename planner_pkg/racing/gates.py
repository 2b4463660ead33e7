"""Gate geometry for N vehicles and G gates each: plane crossings and frame collisions.

A gate's local frame: ``s`` along its normal (pass direction), ``u`` along its horizontal
in-plane axis, ``w`` vertical. The opening is ``max(|u|, |w|) < half``; the frame is the square
ring ``half <= max(|u|, |w|) <= half + width`` of thickness ``depth`` along the normal. A vehicle
is a sphere of radius ``r``.

Over one physics step from ``p0`` to ``p1`` (straight segment):
* it *passes* a gate when the segment crosses the gate's plane from ``s < 0`` to ``s >= 0`` with
  the crossing point inside the opening shrunk by ``r`` (the body clears the frame);
* it *hits* a gate's frame when it crosses the plane (either way) within the ring grown by ``r``
  on both sides, or when it ends the step inside the frame slab grown by ``r``. The crossing test
  catches a vehicle too fast for the slab test (tunnelling through a thin frame).
"""
from __future__ import annotations

import numpy as np

__all__ = ["GateArrays", "gate_events", "gate_frame"]


class GateArrays:
    """Padded per-vehicle gate arrays: centers (N, G, 3), normals (N, G, 3), laterals (N, G, 3),
    half sizes (N, G), valid (N, G) bool, count (N,) int."""

    __slots__ = ("centers", "normals", "laterals", "half", "valid", "count")

    def __init__(self, n: int, g: int):
        self.centers = np.zeros((n, g, 3))
        self.centers[:, :, 2] = -1e6  # padding gates far below ground: never crossed
        self.normals = np.zeros((n, g, 3))
        self.normals[:, :, 0] = 1.0
        self.laterals = np.zeros((n, g, 3))
        self.laterals[:, :, 1] = 1.0
        self.half = np.ones((n, g))
        self.valid = np.zeros((n, g), dtype=bool)
        self.count = np.ones(n, dtype=np.int64)

    def set_track(self, i: int, track) -> None:
        c, nrm, lat, h = track.arrays()
        g = len(h)
        if g > self.centers.shape[1]:
            raise ValueError(f"track of {g} gates does not fit the {self.centers.shape[1]} gate slots")
        self.centers[i] = 0.0
        self.centers[i, :, 2] = -1e6
        self.centers[i, :g] = c
        self.normals[i, :g] = nrm
        self.laterals[i, :g] = lat
        self.half[i] = 1.0
        self.half[i, :g] = h
        self.valid[i] = False
        self.valid[i, :g] = True
        self.count[i] = g


def gate_frame(p: np.ndarray, gates: GateArrays):
    """Local coordinates (s, u, w), each (N, G), of points ``p`` (N, 3) in every gate's frame."""
    d = p[:, None, :] - gates.centers
    s = np.einsum("ngk,ngk->ng", d, gates.normals)
    u = np.einsum("ngk,ngk->ng", d, gates.laterals)
    return s, u, d[:, :, 2]


def gate_events(p0: np.ndarray, p1: np.ndarray, gates: GateArrays, radius: float, width: float, depth: float):
    """(passed (N, G) bool, hit (N, G) bool) for the step from ``p0`` to ``p1`` (module docstring)."""
    s0, u0, w0 = gate_frame(p0, gates)
    s1, u1, w1 = gate_frame(p1, gates)
    crossed = (s0 < 0.0) != (s1 < 0.0)
    denom = np.where(crossed, s0 - s1, 1.0)
    t = np.where(crossed, s0 / denom, 0.0)
    uc = u0 + t * (u1 - u0)
    wc = w0 + t * (w1 - w0)
    m_cross = np.maximum(np.abs(uc), np.abs(wc))
    half = gates.half
    in_ring_cross = (m_cross > half - radius) & (m_cross < half + width + radius)
    m1 = np.maximum(np.abs(u1), np.abs(w1))
    in_slab = (np.abs(s1) < 0.5 * depth + radius) & (m1 > half - radius) & (m1 < half + width + radius)
    hit = gates.valid & ((crossed & in_ring_cross) | in_slab)
    passed = gates.valid & crossed & (s0 < 0.0) & (m_cross <= half - radius) & ~hit
    return passed, hit
