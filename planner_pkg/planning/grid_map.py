"""Local occupancy grid map fed by depth images or world-frame point clouds (EGO's ``plan_env``).

The map is a fixed-size window of voxels that follows the vehicle: when the vehicle moves more
than ``recentre_distance_m`` from the window centre along an axis, the arrays are shifted by whole
voxels (what leaves the window is forgotten, what enters is unknown). Each voxel holds a
log-odds occupancy value; a frame is fused by casting one ray per point from the sensor origin:
the voxels the ray passes through get a *miss*, the voxel of the end point a *hit* (each voxel
at most one update per frame, hits win, as in EGO-Planner), values are clamped, and a voxel is
occupied when its probability reaches ``prob_occupied``. Occupied voxels are inflated by a cube
of half-width ``ceil(inflation_m / resolution_m)`` voxels (EGO inflates by a cube as well), or by
a vertical cylinder of that radius (``inflation_shape``); the inflation is refreshed lazily, only
inside the bounding box of voxels whose state changed.

Planning queries (``is_blocked``, ``blocked_array``) see: inflated occupied voxels, the virtual
floor and ceiling (``floor_m``, ``ceiling_m``), and unknown voxels (inside the window or outside
it) as the ``unknown`` policy says. Everything is vectorised NumPy: no per-voxel Python loops.

Global voxel ``g`` (3 ints) covers ``[g * res, (g + 1) * res)``; local index = ``g - origin``.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

from planner_pkg.planning.grid_map_config import GridMapConfig, InflationShape, UnknownPolicy, logit
from planner_pkg.types import CameraIntrinsics, quaternion_to_matrix

__all__ = ["UnknownPolicy", "InflationShape", "GridMapConfig", "OccupancyGridMap", "logit", "dilate",
           "dilate_cylinder"]


def dilate(a: np.ndarray, r: int) -> np.ndarray:
    """Binary dilation of a 3-D bool array by a (2r+1)^3 cube: separable ORs of shifted slices."""
    out = a.copy()
    for axis in range(3):
        src = out.copy() if r > 0 else out
        for k in range(1, r + 1):
            _shift_or(out, src, axis, k)
    return out


def _shift_or(out: np.ndarray, src: np.ndarray, axis: int, k: int) -> None:
    """out |= src shifted by +k and by -k voxels along ``axis`` (what leaves the array is dropped)."""
    n = src.shape[axis]
    if k >= n:
        return
    lo = [slice(None)] * 3
    hi = [slice(None)] * 3
    lo[axis], hi[axis] = slice(k, None), slice(None, n - k)
    out[tuple(lo)] |= src[tuple(hi)]
    out[tuple(hi)] |= src[tuple(lo)]


def dilate_cylinder(a: np.ndarray, r: int) -> np.ndarray:
    """Binary dilation of a 3-D bool array (x, y, z) by a vertical cylinder: the voxels (dx, dy)
    with dx^2 + dy^2 <= r^2 in each layer, +-r layers in z. Each disk row |dy| = j spans
    |dx| <= floor(sqrt(r^2 - j^2)): an x-dilation by that half-width, shifted by +-j in y."""
    if r <= 0:
        return a.copy()
    out = np.zeros_like(a)
    widened = {}
    for j in range(r + 1):
        w = int(math.isqrt(r * r - j * j))
        if w not in widened:
            grown = a.copy()
            for k in range(1, w + 1):
                _shift_or(grown, a, 0, k)
            widened[w] = grown
        if j == 0:
            out |= widened[w]
        else:
            _shift_or(out, widened[w], 1, j)
    src = out.copy()
    for k in range(1, r + 1):
        _shift_or(out, src, 2, k)
    return out


def nearest_depth_around(depth: np.ndarray, r: int) -> np.ndarray:
    """The nearest valid return within ``r`` pixels (a (2r+1)^2 window) of each pixel of a z-depth
    image (H, W), m: +inf where the window holds none (no-return and invalid pixels count as +inf)."""
    d = np.where(np.isfinite(depth) & (depth > 0), depth, np.inf)
    return ndimage.minimum_filter(d, size=2 * int(r) + 1, mode="constant", cval=np.inf)


class OccupancyGridMap:
    """The local log-odds voxel map (see the module docstring)."""

    def __init__(self, config: GridMapConfig = GridMapConfig(), center=(0.0, 0.0, 1.0)):
        self.config = c = config
        self.res = c.resolution_m
        self.dims = np.array([int(round(s / self.res)) for s in c.size_m], dtype=np.int64)
        self.inflate_voxels = int(math.ceil(c.inflation_m / self.res - 1e-9))
        self.l_hit, self.l_miss = logit(c.prob_hit), logit(c.prob_miss)
        self.l_min, self.l_max, self.l_occ = logit(c.prob_min), logit(c.prob_max), logit(c.prob_occupied)
        self._unknown_value = np.float32(self.l_min - 1.0)  # below the clamp: "never observed"
        self._known_min = self.l_min - 0.5  # float32 rounding safe test for "observed"
        shape = tuple(int(d) for d in self.dims)
        self.log_odds = np.full(shape, self._unknown_value, dtype=np.float32)
        self.occupied = np.zeros(shape, dtype=bool)
        self._blocked = np.zeros(shape, dtype=bool)
        self._scratch = np.zeros(int(np.prod(self.dims)), dtype=bool)
        self._dirty: Optional[Tuple[np.ndarray, np.ndarray]] = None
        self.frames_fused = 0
        center = np.asarray(center, dtype=np.float64)
        if center.shape != (3,) or not np.isfinite(center).all():
            raise ValueError(f"OccupancyGridMap: center must be a finite (3,) position, got {center.tolist()}")
        self.origin = self._origin_for(center)
        # a fresh map is all unknown: blocked everywhere under the OCCUPIED policy
        self._unknown_blocked = c.unknown is UnknownPolicy.OCCUPIED
        self._blocked[:] = self._static_blocked(0, shape[2])[None, None, :] | self._unknown_blocked

    # -- geometry ------------------------------------------------------------------------------
    def _origin_for(self, center: np.ndarray) -> np.ndarray:
        return np.floor(center / self.res).astype(np.int64) - self.dims // 2

    @property
    def window_min(self) -> np.ndarray:
        """(3,) m, lower corner of the window."""
        return self.origin * self.res

    @property
    def window_max(self) -> np.ndarray:
        """(3,) m, upper corner of the window."""
        return (self.origin + self.dims) * self.res

    @property
    def center(self) -> np.ndarray:
        return (self.origin + 0.5 * self.dims) * self.res

    def local_index(self, points) -> np.ndarray:
        """(N, 3) int64 local voxel indices of (N, 3) world points, m (may be outside the window)."""
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        return np.floor(p / self.res).astype(np.int64) - self.origin

    def index_to_position(self, idx) -> np.ndarray:
        """(N, 3) world positions, m, of voxel centres given (N, 3) local indices."""
        return (np.asarray(idx, dtype=np.float64) + self.origin + 0.5) * self.res

    def in_window(self, idx: np.ndarray) -> np.ndarray:
        return ((idx >= 0) & (idx < self.dims)).all(axis=-1)

    # -- following the vehicle -----------------------------------------------------------------
    def follow(self, position) -> bool:
        """Re-centre the window on ``position`` (3,) m if it has drifted too far; True if moved."""
        p = np.asarray(position, dtype=np.float64)
        if not np.isfinite(p).all():
            raise ValueError(f"OccupancyGridMap.follow: position must be finite, got {p.tolist()}")
        if (np.abs(p - self.center) <= self.config.recentre_distance_m).all():
            return False
        new_origin = self._origin_for(p)
        shift = new_origin - self.origin
        self.log_odds = self._shifted(self.log_odds, shift, self._unknown_value)
        self.occupied = self._shifted(self.occupied, shift, False)
        self._blocked = self._shifted(self._blocked, shift, self._unknown_blocked)
        self.origin = new_origin
        # voxels within 2 inflation radii of a moved border: their inflation may refer to
        # voxels that left the window, and the new slabs have none yet
        r = 2 * self.inflate_voxels + 1
        for axis in range(3):
            s = int(shift[axis])
            if s == 0:
                continue
            lo = np.zeros(3, np.int64)
            hi = self.dims - 1
            if s > 0:
                lo = lo.copy()
                lo[axis] = max(0, self.dims[axis] - s - r)
            else:
                hi = hi.copy()
                hi[axis] = min(self.dims[axis] - 1, -s + r)
            self._mark_dirty(lo, hi)
        return True

    def _shifted(self, a: np.ndarray, shift: np.ndarray, fill) -> np.ndarray:
        out = np.full_like(a, fill)
        src, dst = [], []
        for axis in range(3):
            s, n = int(shift[axis]), int(self.dims[axis])
            if abs(s) >= n:
                return out
            src.append(slice(max(s, 0), n + min(s, 0)))
            dst.append(slice(max(-s, 0), n - max(s, 0)))
        out[tuple(dst)] = a[tuple(src)]
        return out

    # -- fusing sensor data --------------------------------------------------------------------
    def insert_point_cloud(self, origin, points) -> int:
        """Fuse a world-frame cloud (N, 3) m seen from ``origin`` (3,) m; returns rays used.

        Non-finite points are dropped; an empty (or all-invalid) cloud is a no-op returning 0.
        """
        o = np.asarray(origin, dtype=np.float64)
        if o.shape != (3,) or not np.isfinite(o).all():
            raise ValueError(f"sensor origin must be a finite (3,) position, got {np.asarray(origin).tolist()}")
        if points is None:
            return 0
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        p = p[np.isfinite(p).all(axis=1)]
        if p.shape[0] == 0:
            return 0
        vec = p - o
        length = np.sqrt(np.einsum("ij,ij->i", vec, vec))
        keep = length >= max(self.config.min_ray_m, 1e-9)
        vec, length = vec[keep], length[keep]
        if length.shape[0] == 0:
            return 0
        return self._integrate(o, vec / length[:, None], length, np.ones(length.shape[0], dtype=bool))

    def insert_depth(self, depth, intrinsics: CameraIntrinsics, camera_position, camera_orientation,
                     pixel_stride: int = 1) -> int:
        """Fuse a z-depth image (H, W) m (REP 118: +inf = no return, -inf / NaN = invalid).

        ``camera_orientation`` is the quaternion (x, y, z, w) rotating the optical frame into the
        world (see :class:`planner_pkg.types.SensorFrame`). No-return pixels clear free space up
        to ``max_ray_m`` or the camera's range (``intrinsics.max_range_m`` of z-depth), whichever
        is shorter: past its range the camera saw nothing, which is not evidence of free space.
        A point cloud cannot clear along no-return rays at all. Returns the number of rays used.
        """
        d = np.asarray(depth, dtype=np.float64)
        if d.shape != (intrinsics.height, intrinsics.width):
            raise ValueError(f"depth image must be ({intrinsics.height}, {intrinsics.width}), got {d.shape}")
        o = np.asarray(camera_position, dtype=np.float64)
        if o.shape != (3,) or not np.isfinite(o).all():
            raise ValueError("camera position must be a finite (3,) position")
        rot = quaternion_to_matrix(camera_orientation)
        s = max(1, int(pixel_stride))
        d_image = d
        d = d[::s, ::s]
        rays = intrinsics.rays()[::s, ::s].reshape(-1, 3)
        d = d.reshape(-1)
        hit = np.isfinite(d) & (d > 0)
        no_return = np.isposinf(d)
        use = hit | no_return
        if not use.any():
            return 0
        rays, d, hit = rays[use], d[use], hit[use]
        norm = np.linalg.norm(rays, axis=1)
        dirs = (rays / norm[:, None]) @ rot.T
        # a no-return ray is known free only as far as the camera could have seen: max_range_m
        # of z-depth is max_range_m * |ray| along the ray
        length = np.where(hit, d * norm, intrinsics.max_range_m * norm)
        keep = length >= max(self.config.min_ray_m, 1e-9)
        clear = None
        if self.config.free_space_erosion_px > 0:
            clear = (nearest_depth_around(d_image, self.config.free_space_erosion_px)[::s, ::s].reshape(-1)[use]
                     * norm)[keep]
        return self._integrate(o, dirs[keep], length[keep], hit[keep], clear)

    def _integrate(self, origin: np.ndarray, dirs: np.ndarray, length: np.ndarray, has_hit: np.ndarray,
                   clear_length: Optional[np.ndarray] = None) -> int:
        """Core ray casting. dirs (N, 3) unit; length (N,) m (inf allowed); has_hit (N,) bool;
        clear_length (N,) m or None: a ray clears free space only up to half a voxel short of this
        where it is shorter than its own length (see ``GridMapConfig.free_space_erosion_px``)."""
        c = self.config
        res = self.res
        n_rays = dirs.shape[0]
        is_hit = has_hit & (length <= c.max_ray_m)
        ny, nz = int(self.dims[1]), int(self.dims[2])
        o_v = origin / res - self.origin  # sensor origin in local voxel units

        # hits: the end point's voxel
        hp = o_v + dirs[is_hit] * (length[is_hit, None] / res)
        hi = np.floor(hp).astype(np.int64)
        hi = hi[self.in_window(hi)]
        hit_flat = (hi[:, 0] * ny + hi[:, 1]) * nz + hi[:, 2]

        # misses: samples every voxel length along a subset of rays, stopping half a voxel short
        # of the end point (its voxel is the hit)
        stride = c.clear_ray_stride
        cd, cl, ch = dirs[::stride], length[::stride], is_hit[::stride]
        free_len = np.where(ch, cl - 0.5 * res, np.minimum(cl, c.max_ray_m))
        if clear_length is not None:
            ce = clear_length[::stride]
            free_len = np.where(ce < cl, np.minimum(free_len, ce - 0.5 * res), free_len)
        max_len = float(free_len.max()) if free_len.shape[0] else 0.0
        miss_flat = np.zeros(0, dtype=np.int64)
        if max_len > 0:
            steps = np.arange(1, int(max_len / res) + 1, dtype=np.float32)  # in voxels
            valid = steps[None, :] * res <= free_len[:, None].astype(np.float32)
            cdv = cd.astype(np.float32)
            ix = np.floor(np.float32(o_v[0]) + cdv[:, 0:1] * steps).astype(np.int64)[valid]
            iy = np.floor(np.float32(o_v[1]) + cdv[:, 1:2] * steps).astype(np.int64)[valid]
            iz = np.floor(np.float32(o_v[2]) + cdv[:, 2:3] * steps).astype(np.int64)[valid]
            inside = ((ix >= 0) & (ix < self.dims[0]) & (iy >= 0) & (iy < ny) & (iz >= 0) & (iz < nz))
            miss_flat = ((ix * ny + iy) * nz + iz)[inside]
            # hits win: drop misses on voxels hit in this frame (one update per voxel per frame)
            mark = self._scratch
            mark[hit_flat] = True
            miss_flat = miss_flat[~mark[miss_flat]]
            mark[hit_flat] = False

        flat_lo = self.log_odds.reshape(-1)
        changed = []
        for idx, delta in ((miss_flat, self.l_miss), (hit_flat, self.l_hit)):
            if idx.shape[0] == 0:
                continue
            v = flat_lo[idx]
            unknown = v < self._known_min
            if self._unknown_blocked and unknown.any():
                changed.append(idx[unknown])  # unknown -> known changes what is blocked
            v = np.where(unknown, np.float32(0.0), v)  # unknown starts from the 0.5 prior
            v = np.clip(v + np.float32(delta), self.l_min, self.l_max).astype(np.float32)
            flat_lo[idx] = v  # duplicates write the same value: each voxel updated once
            occ = v >= self.l_occ
            flat_occ = self.occupied.reshape(-1)
            flip = idx[occ != flat_occ[idx]]
            if flip.shape[0]:
                flat_occ[flip] = ~flat_occ[flip]
                changed.append(flip)
        if changed:
            flips = np.concatenate(changed)
            local = np.stack(np.unravel_index(flips, self.log_odds.shape), axis=1)
            self._mark_dirty(local.min(axis=0), local.max(axis=0))
        self.frames_fused += 1
        return n_rays

    # -- inflation -----------------------------------------------------------------------------
    def _mark_dirty(self, lo, hi) -> None:
        lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        if self._dirty is None:
            self._dirty = (lo.copy(), hi.copy())
        else:
            self._dirty = (np.minimum(self._dirty[0], lo), np.maximum(self._dirty[1], hi))

    def _refresh(self) -> None:
        """Recompute the blocked voxels inside the dirty box (grown by the inflation radius)."""
        if self._dirty is None:
            return
        r = self.inflate_voxels
        lo = np.maximum(self._dirty[0] - r, 0)
        hi = np.minimum(self._dirty[1] + r, self.dims - 1)
        # the source block needs r more voxels around the target block
        slo = np.maximum(lo - r, 0)
        shi = np.minimum(hi + r, self.dims - 1)
        src = self.occupied[slo[0]:shi[0] + 1, slo[1]:shi[1] + 1, slo[2]:shi[2] + 1]
        grown = dilate_cylinder(src, r) if self.config.inflation_shape is InflationShape.CYLINDER else dilate(src, r)
        off = lo - slo
        size = hi - lo + 1
        block = grown[off[0]:off[0] + size[0], off[1]:off[1] + size[1], off[2]:off[2] + size[2]]
        block = block | self._static_blocked(lo[2], hi[2] + 1)[None, None, :]
        if self.config.unknown is UnknownPolicy.OCCUPIED:
            lo_block = self.log_odds[lo[0]:hi[0] + 1, lo[1]:hi[1] + 1, lo[2]:hi[2] + 1]
            block = block | (lo_block < self._known_min)
        self._blocked[lo[0]:hi[0] + 1, lo[1]:hi[1] + 1, lo[2]:hi[2] + 1] = block
        self._dirty = None

    def _static_blocked(self, z0: int, z1: int) -> np.ndarray:
        """(z1 - z0,) bool: local z layers below the virtual floor or above the ceiling."""
        z = (np.arange(z0, z1) + self.origin[2] + 0.5) * self.res
        return (z < self.config.floor_m) | (z > self.config.ceiling_m)

    def blocked_array(self) -> np.ndarray:
        """(nx, ny, nz) bool view of the window's blocked voxels (read only; do not keep it
        across updates)."""
        self._refresh()
        return self._blocked

    # -- queries -------------------------------------------------------------------------------
    def is_blocked(self, points) -> np.ndarray:
        """(N,) bool: is each world point (N, 3) m unusable for planning (inflated obstacle,
        below the floor / above the ceiling, or unknown under the OCCUPIED policy)?"""
        self._refresh()
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        idx = self.local_index(p)
        inside = self.in_window(idx)
        out = np.empty(p.shape[0], dtype=bool)
        out[~inside] = self.config.unknown is UnknownPolicy.OCCUPIED
        ii = idx[inside]
        out[inside] = self._blocked[ii[:, 0], ii[:, 1], ii[:, 2]]
        z = p[:, 2]
        out |= (z < self.config.floor_m) | (z > self.config.ceiling_m) | ~np.isfinite(z)
        return out

    def is_occupied(self, points) -> np.ndarray:
        """(N,) bool: raw occupancy (no inflation, no policy) of world points; outside = False."""
        idx = self.local_index(points)
        inside = self.in_window(idx)
        out = np.zeros(idx.shape[0], dtype=bool)
        ii = idx[inside]
        out[inside] = self.occupied[ii[:, 0], ii[:, 1], ii[:, 2]]
        return out

    def occupied_points(self, lo, hi) -> np.ndarray:
        """(K, 3) m: centres of the occupied voxels (raw occupancy, no inflation) whose centre is in
        the world box ``[lo, hi]`` (3,) m, clipped to the window (empty when they do not meet)."""
        lo = np.asarray(lo, dtype=np.float64).reshape(3)
        hi = np.asarray(hi, dtype=np.float64).reshape(3)
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            raise ValueError(f"occupied_points: the box must be finite, got {lo.tolist()}, {hi.tolist()}")
        i0, i1 = self.centre_index_range(lo, hi)
        if (i1 <= i0).any():
            return np.zeros((0, 3))
        sub = self.occupied[i0[0]:i1[0], i0[1]:i1[1], i0[2]:i1[2]]
        return self.index_to_position(np.argwhere(sub) + i0)

    def occupied_distances(self, points, reach_m: float, max_distance_m: Optional[float] = None) -> np.ndarray:
        """(N,) m: the distance from each world point (N, 3) to the nearest occupied voxel centre
        (raw occupancy) among those within ``reach_m`` of the points' bounding box; inf where
        that nearest centre is ``max_distance_m`` (default ``reach_m``) or farther, or there is
        none."""
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        occupied = self.occupied_points(p.min(axis=0) - reach_m, p.max(axis=0) + reach_m)
        if occupied.shape[0] == 0:
            return np.full(p.shape[0], math.inf)
        bound = reach_m if max_distance_m is None else max_distance_m
        return cKDTree(occupied).query(p, distance_upper_bound=bound)[0]

    def centre_index_range(self, lo: np.ndarray, hi: np.ndarray):
        """(i0, i1) (3,) int64 each: the local indices ``i0 <= i < i1`` of the voxels whose centre
        lies in the world box ``[lo, hi]`` (3,) m, clipped to the window."""
        i0 = np.maximum(np.ceil(lo / self.res - 0.5).astype(np.int64) - self.origin, 0)
        i1 = np.minimum(np.floor(hi / self.res - 0.5).astype(np.int64) - self.origin + 1, self.dims)
        return i0, i1

    def set_known(self, occupied) -> None:
        """Replace the window's contents by a known occupancy: every voxel observed, occupied
        where ``occupied`` (bool, the window's shape ``dims``) is True, free elsewhere (the
        clamped log-odds), the inflation recomputed at once. For a map given rather than sensed
        (a survey, or the world itself in a simulation study of the planner alone); depth frames
        fused afterwards update it as usual."""
        occ = np.asarray(occupied)
        if occ.shape != self.log_odds.shape or occ.dtype != np.bool_:
            raise ValueError(f"OccupancyGridMap.set_known: occupied must be a bool array of the window's shape "
                             f"{self.log_odds.shape}, got {occ.dtype} {occ.shape}")
        self.occupied[:] = occ
        self.log_odds[:] = np.where(occ, np.float32(self.l_max), np.float32(self.l_min))
        self._mark_dirty(np.zeros(3, np.int64), self.dims - 1)
        self._refresh()

    def is_known(self, points) -> np.ndarray:
        """(N,) bool: has each world point's voxel been observed (inside the window)?"""
        idx = self.local_index(points)
        inside = self.in_window(idx)
        out = np.zeros(idx.shape[0], dtype=bool)
        ii = idx[inside]
        out[inside] = self.log_odds[ii[:, 0], ii[:, 1], ii[:, 2]] >= self._known_min
        return out

    def probability(self, points) -> np.ndarray:
        """(N,) occupancy probability of world points; NaN where unknown or outside."""
        idx = self.local_index(points)
        inside = self.in_window(idx)
        out = np.full(idx.shape[0], np.nan)
        ii = idx[inside]
        lo = self.log_odds[ii[:, 0], ii[:, 1], ii[:, 2]].astype(np.float64)
        out[inside] = np.where(lo >= self._known_min, 1.0 / (1.0 + np.exp(-lo)), np.nan)
        return out

    def nearest_free(self, point, max_distance_m: float) -> Optional[np.ndarray]:
        """The centre (3,) m of the nearest non-blocked voxel within ``max_distance_m`` of
        ``point``, the point itself if it is free, or None when there is none."""
        p = np.asarray(point, dtype=np.float64).reshape(3)
        if not self.is_blocked(p[None])[0]:
            return p.copy()
        blocked = self.blocked_array()
        r = int(math.ceil(max_distance_m / self.res))
        c = self.local_index(p[None])[0]
        lo = np.maximum(c - r, 0)
        hi = np.minimum(c + r + 1, self.dims)
        if (hi <= lo).any():
            return None
        sub = blocked[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
        free = np.argwhere(~sub)
        if free.shape[0] == 0:
            return None
        centres = self.index_to_position(free + lo)
        d2 = ((centres - p) ** 2).sum(axis=1)
        z = centres[:, 2]
        d2[(z < self.config.floor_m) | (z > self.config.ceiling_m)] = np.inf
        k = int(np.argmin(d2))
        if not d2[k] <= max_distance_m ** 2:
            return None
        return centres[k]
