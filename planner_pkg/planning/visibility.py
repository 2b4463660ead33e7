"""Recent depth frames as a memory of observed free space (NanoMap-style visibility queries).

The voxel map knows a voxel only when a cast ray passed through it. A 64 x 48 depth image's rays
diverge: at 8 m two neighbouring pixel columns are 0.2 m apart (0.4 m with the map's
``clear_ray_stride``), so most voxels between them stay "never observed" although the camera saw
straight past them. Asking the frames themselves is exact: a point was observed free by a frame
if it projects into the image in front of what the pixels around it measured (or, for pixels
with no return, within the camera's range). Florence et al., "NanoMap: Fast, Uncertainty-Aware
Proximity Queries with Lazy Search over Local 3D Data" (ICRA 2018), keep a short history of
depth frames for the same reason.

:class:`DepthHistory` keeps the newest frame and older ones at least ``period_s`` apart, up to
``max_frames`` (a few seconds of flight; the voxel map remembers the rest). Queries are
vectorised over points and frames.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from planner_pkg.types import CameraIntrinsics, quaternion_to_matrix

__all__ = ["DepthHistory"]


@dataclass(frozen=True)
class _Frame:
    t: float
    origin: np.ndarray  # (3,) m, optical centre, world
    rot_t: np.ndarray  # (3, 3) world -> optical frame (the transpose of the camera orientation)
    depth: np.ndarray  # (H, W) float32 z-depth, m (REP 118 codes)
    intrinsics: CameraIntrinsics


class DepthHistory:
    """The last depth frames (see the module docstring).

    max_frames: frames kept; period_s: an older frame is kept only if it is this much older
        than the next one, s; surface_margin_m: a point counts as observed free only this far in
        front of a measured surface (z-depth), m.
    """

    def __init__(self, max_frames: int, period_s: float, surface_margin_m: float):
        if not (isinstance(max_frames, int) and max_frames >= 1):
            raise ValueError(f"DepthHistory needs max_frames >= 1, got {max_frames!r}")
        if not (math.isfinite(period_s) and period_s >= 0 and math.isfinite(surface_margin_m) and surface_margin_m >= 0):
            raise ValueError(f"DepthHistory needs finite period_s, surface_margin_m >= 0, got {period_s!r}, "
                             f"{surface_margin_m!r}")
        self.max_frames = max_frames
        self.period_s = float(period_s)
        self.margin = float(surface_margin_m)
        self._frames: List[_Frame] = []
        self._stacks: Optional[List[_Stack]] = None

    def __len__(self) -> int:
        return len(self._frames)

    def clear(self) -> None:
        self._frames = []
        self._stacks = None

    def add(self, t: float, depth, intrinsics: CameraIntrinsics, camera_position, camera_orientation) -> None:
        """Remember a frame: z-depth (H, W) m seen from ``camera_position`` (3,) m with the
        optical frame rotated into the world by the quaternion ``camera_orientation``. The newest
        frame always stays; it replaces the previous one when that is less than ``period_s`` newer
        than the one before it."""
        d = np.asarray(depth, dtype=np.float32)
        if d.shape != (intrinsics.height, intrinsics.width):
            raise ValueError(f"depth image must be ({intrinsics.height}, {intrinsics.width}), got {d.shape}")
        o = np.asarray(camera_position, dtype=np.float64)
        if o.shape != (3,) or not np.isfinite(o).all() or not math.isfinite(t):
            raise ValueError("DepthHistory.add: the camera position and time must be finite")
        frame = _Frame(float(t), o.copy(), quaternion_to_matrix(camera_orientation).T.copy(), d.copy(), intrinsics)
        frames = self._frames
        if len(frames) >= 2 and frames[-1].t - frames[-2].t < self.period_s:
            frames[-1] = frame  # the previous newest was only there for being the newest
        else:
            frames.append(frame)
        if len(frames) > self.max_frames:
            del frames[0]
        self._stacks = None

    def observed_free(self, points) -> np.ndarray:
        """(N,) bool: did some kept frame see each world point (N, 3) m as free space?"""
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        out = np.zeros(p.shape[0], dtype=bool)
        if p.shape[0] == 0 or not self._frames:
            return out
        for group in self._groups():
            todo = np.nonzero(~out)[0]
            if todo.shape[0] == 0:
                break
            out[todo] = _free_in(group, p[todo], self.margin)
        return out

    def _groups(self) -> List["_Stack"]:
        """The frames stacked per camera model (normally one stack), rebuilt after changes."""
        if self._stacks is None:
            by_camera = {}
            for f in self._frames:
                by_camera.setdefault(f.intrinsics, []).append(f)
            self._stacks = [_Stack(k, np.stack([f.origin for f in fs]), np.stack([f.rot_t for f in fs]),
                                   np.stack([f.depth for f in fs])) for k, fs in by_camera.items()]
        return self._stacks


@dataclass(frozen=True)
class _Stack:
    intrinsics: CameraIntrinsics
    origin: np.ndarray  # (K, 3)
    rot_t: np.ndarray  # (K, 3, 3)
    depth: np.ndarray  # (K, H, W)


def _free_in(f: _Stack, p: np.ndarray, margin: float) -> np.ndarray:
    """(N,) bool: is each point (N, 3) in front of what some frame of the stack measured?"""
    k = f.intrinsics
    c = np.einsum("kij,knj->kni", f.rot_t, p[None, :, :] - f.origin[:, None, :])  # (K, N, 3) optical
    z = c[..., 2]
    ok = z > 1e-6
    zs = np.where(ok, z, 1.0)
    u = k.fx * c[..., 0] / zs + k.cx
    v = k.fy * c[..., 1] / zs + k.cy
    n_frames, h, w = f.depth.shape
    ok &= (u >= -0.5) & (u <= w - 0.5) & (v >= -0.5) & (v <= h - 0.5)
    # the four pixel centres around the projection: the point is free only in front of all of
    # them (an obstacle's edge between two pixels)
    u0 = np.clip(np.floor(u).astype(np.int64), 0, w - 1)
    v0 = np.clip(np.floor(v).astype(np.int64), 0, h - 1)
    u1, v1 = np.minimum(u0 + 1, w - 1), np.minimum(v0 + 1, h - 1)
    flat = f.depth.reshape(n_frames, -1)
    rows = np.arange(n_frames)[:, None]
    reach = np.full(z.shape, np.inf)
    valid = np.ones(z.shape, dtype=bool)
    for vv, uu in ((v0, u0), (v0, u1), (v1, u0), (v1, u1)):
        d = flat[rows, vv * w + uu]
        valid &= ~(np.isnan(d) | np.isneginf(d) | (d <= 0))
        reach = np.minimum(reach, np.where(np.isposinf(d), k.max_range_m, d - margin))
    ok &= valid & (z <= reach)
    return ok.any(axis=0)
