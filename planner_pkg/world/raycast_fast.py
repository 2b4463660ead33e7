# 726 lines: one algorithm (image-plane culled casting); its lattice, bounds and kernels share one frame and MARGIN.
"""Single-origin ray casting culled in an image plane: the depth camera's fast path.

Rays that share one origin and fit in a cone narrower than ~150 degrees (a pinhole camera's
pixels) are projected onto the plane z' = 1 of a frame whose z' axis is their mean direction:
each ray becomes a point (u, v). The rays are binned on a regular (u, v) lattice matched to
their spacing, so the rays of a row-major pinhole image land one per bin in image order (checked
ray by ray; any other ray set is binned and sorted instead).

Each obstacle gets a (u, v) rectangle that holds every ray that can hit it: a ray's points all
project to the ray's own (u, v), so a rectangle bounding the obstacle's projection will do.
Cylinders and spheres use their exact extents (support) along the frame's axes and interval
division; boxes the rectangle of their 8 projected corners (central projection maps the convex
box to the convex hull of its corners). A hit point lies at distance >= ``near``, the obstacle's
distance lower bound, hence at z' >= near * cos(widest ray): parts behind that plane are cut
off, which bounds obstacles reaching behind the camera.

Candidate (ray, obstacle) pairs are enumerated as flat index arrays, one contiguous run of rays
per rectangle row, and exact kernels run on the flat pairs; hits are folded into the per-ray
minimum with ``np.minimum.at``. When the rectangles hold many pairs, obstacles go in
nearest-first batches and a run is dropped when all its rays already hit something nearer than
the obstacle's ``near`` (a range-maximum table of the current depths: occlusion culling).

The kernels compute, pair by pair, the same IEEE operations as ``raycast.RAY_KERNELS`` (values
that depend on the obstacle alone are computed once per obstacle, those of the ray alone once
per ray), so results are bitwise identical to ``raycast.cast_brute``. Every culling test is
conservative by ``MARGIN`` in (u, v) (far above rounding, far below a pixel) and by 1e-9
relative in distance; obstacles skipped outright lie beyond ``max_range``.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from .packed import Block

__all__ = ["cast_image", "RayImage", "MIN_VIEW_COS"]

#: Culling slack in image-plane units, scaled by 1 + the largest |u|, |v| of the rays.
MARGIN = 1e-7
#: The image path needs every ray within acos(MIN_VIEW_COS) (~75.5 deg) of the mean direction.
MIN_VIEW_COS = 0.25
#: Obstacles are cast in nearest-first batches once their rectangles hold more than
#: ``LAYER_MIN_AREA`` rays' worth of pairs: each batch but the last adds ``LAYER_AREA`` rays'
#: worth of rectangle area, at most ``MAX_LAYERS`` batches (see ``_layers``).
LAYER_MIN_AREA = 2.0
LAYER_AREA = 1.0
MAX_LAYERS = 4
#: Above this many obstacles in range, bounding balls outside the rays' frustum are dropped
#: before their boxes' corners are projected.
PRECULL_MIN = 96
#: Most (ray, obstacle) pairs per kernel call: 8192 float64 = 64 KiB per array, under glibc's
#: 128 KiB mmap threshold, and a bounded working set (temporaries the allocator hands back to
#: the OS page-fault afresh on every call).
PAIR_CHUNK = 8192

# Corner k of a frame is [1, s1, s2, s3] @ (centre, a1, a2, a3), s_i = -1 or 1 by bit i of k.
_CORNER_SIGNS = np.array([[1.0] + [1.0 if (k >> b) & 1 else -1.0 for b in range(3)]
                          for k in range(8)])
_LOG2 = np.zeros(1 << 12, dtype=np.int64)     # floor(log2(i)), i >= 1; grown on demand
_LOG2[1:] = [i.bit_length() - 1 for i in range(1, 1 << 12)]
_LATTICE: dict = {}


def _lattice(nbu: int, nbv: int) -> np.ndarray:
    """(2, nbv * nbu) float bins (column; row) of each position of a row-major nbv x nbu image."""
    key = (nbu, nbv)
    value = _LATTICE.get(key)
    if value is None:
        value = np.empty((2, nbu * nbv))
        value[0] = np.tile(np.arange(nbu, dtype=np.float64), nbv)
        value[1] = np.repeat(np.arange(nbv, dtype=np.float64), nbu)
        if len(_LATTICE) > 16:
            _LATTICE.clear()
        _LATTICE[key] = value
    return value


class RayImage:
    """Rays of one origin projected to (u, v) = (x'/z', y'/z') and binned on a regular lattice.

    axes: (3, 3) columns x', y', z' of the projection frame (z' along the mean ray direction);
    any invertible frame is exact, since rays and boxes are projected by the same map.
    cmin: smallest z' component of a ray. The bin of u is clip(floor((u - umin) / hu + 0.5)),
    likewise v. order: None when position i of the image is ray i (one ray per bin, row-major,
    the layout of a pinhole image), else the ray indices sorted by bin, with ``starts``
    (nbu * nbv + 1) the offsets of each bin's run in that order.
    """

    __slots__ = ("axes", "cmin", "extent", "slack", "box_tables", "bin_offset", "inv", "top",
                 "last", "support", "nbu", "nbv", "order", "starts", "max_run")

    @classmethod
    def build(cls, directions: np.ndarray) -> Optional["RayImage"]:
        """The image of unit ``directions`` (M, 3), or None when the rays do not fit in the cone
        the projection needs."""
        n = directions.shape[0]
        if n < 2:
            return None
        zx, zy, zz = (np.ones(n) @ directions).tolist()
        norm = math.sqrt(zx * zx + zy * zy + zz * zz)
        if not norm > 0.0:
            return None
        zx, zy, zz = zx / norm, zy / norm, zz / norm
        # x': the step between the first two rays on the plane z' = 1 (a camera row).
        d0, d1 = directions[0].tolist(), directions[1].tolist()
        c0 = d0[0] * zx + d0[1] * zy + d0[2] * zz
        c1 = d1[0] * zx + d1[1] * zy + d1[2] * zz
        if not (c0 > 0.0 and c1 > 0.0):
            return None
        ax, ay, az = (d1[i] / c1 - d0[i] / c0 for i in range(3))
        dot = ax * zx + ay * zy + az * zz
        ax, ay, az = ax - dot * zx, ay - dot * zy, az - dot * zz
        length = math.sqrt(ax * ax + ay * ay + az * az)
        if not length > 1e-9:
            # Any perpendicular: the lattice just will not match the rays' layout.
            if abs(zx) < 0.9:
                ax, ay, az = 1.0 - zx * zx, -zx * zy, -zx * zz
            else:
                ax, ay, az = -zy * zx, 1.0 - zy * zy, -zy * zz
            length = math.sqrt(ax * ax + ay * ay + az * az)
        ax, ay, az = ax / length, ay / length, az / length
        bx, by, bz = zy * az - zz * ay, zz * ax - zx * az, zx * ay - zy * ax   # y' = z' x x'
        axes = np.array([[ax, bx, zx], [ay, by, zy], [az, bz, zz]])
        proj = axes.T @ directions.T      # (3, M), rows x', y', z'
        cmin = float(proj[2].min())
        if not cmin >= MIN_VIEW_COS:
            return None
        uv = proj[:2]
        uv /= proj[2]
        if uv[1, -1] < uv[1, 0]:
            # Rows run against y' (an image stored bottom row first): flip y' so that they
            # still come out in bin order (the frame's handedness does not matter).
            bx, by, bz = -bx, -by, -bz
            axes[:, 1] *= -1.0
            np.negative(uv[1], out=uv[1])
        (umin, vmin), (umax, vmax) = uv.min(axis=1).tolist(), uv.max(axis=1).tolist()
        su, sv = umax - umin, vmax - vmin
        spacing = math.sqrt(max(su * sv, 0.0) / n)
        # Columns: the spacing of the first two rays when it looks like a camera row.
        nbu = 1
        if su > 0.0:
            hu = abs(float(uv[0, 1] - uv[0, 0]))
            if not 0.5 * spacing <= hu <= 2.0 * spacing or not hu > 0.0:
                hu = spacing if spacing > 0.0 else su / max(1.0, math.sqrt(n))
            nbu = int(min(su / hu + 0.5, 2.0 * n)) + 1
        nbv = max(1, int(min(n / nbu + 0.5, 2.0 * n / nbu))) if sv > 0.0 else 1
        # Bin pitch: the extent over nbins - 1 (the first and last rays on bin centres); one
        # bin wider than the extent.
        hu = su / (nbu - 1) if nbu > 1 else 2.0 * su + 1.0
        hv = sv / (nbv - 1) if nbv > 1 else 2.0 * sv + 1.0
        self = cls()
        self.axes = axes
        self.cmin = cmin
        self.extent = (umin, umax, vmin, vmax)
        self.slack = slack = MARGIN * (1.0 + max(abs(umin), abs(umax), abs(vmin), abs(vmax)))
        self.box_tables = None
        iu, iv = 1.0 / hu, 1.0 / hv
        # Rectangles are widened by slack as they are binned: lo - slack - umin, hi + slack - umin.
        self.bin_offset = np.array([[[umin + slack], [vmin + slack]],
                                    [[umin - slack], [vmin - slack]]])
        self.inv = np.array([[iu], [iv]])
        self.top = np.array([[nbu - 1.0], [nbv - 1.0]])
        # The bins of the last rays, by the same formula as every other bin.
        self.last = np.array([[math.floor((umax - umin) * iu + 0.5)],
                              [math.floor((vmax - vmin) * iv + 0.5)]])
        # Per projection axis: the norm of its horizontal part, |its vertical part|, its norm
        # (the supports of a unit disc, segment and ball along it).
        self.support = np.array([
            [math.hypot(ax, ay), math.hypot(bx, by), math.hypot(zx, zy)],
            [abs(az), abs(bz), abs(zz)],
            [math.sqrt(ax * ax + ay * ay + az * az), math.sqrt(bx * bx + by * by + bz * bz),
             math.sqrt(zx * zx + zy * zy + zz * zz)]])
        self.nbu, self.nbv = nbu, nbv
        b = uv
        b -= np.array([[umin], [vmin]])
        b *= self.inv
        b += 0.5
        np.floor(b, out=b)
        if nbu * nbv == n and np.array_equal(b, _lattice(nbu, nbv)):
            self.order = None
            self.starts = None
            self.max_run = nbu
            return self
        np.clip(b, 0.0, self.top, out=b)
        ids = (b[1] * nbu + b[0]).astype(np.int64)
        self.order = np.argsort(ids, kind="stable")
        counts = np.bincount(ids, minlength=nbu * nbv)
        starts = np.zeros(nbu * nbv + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        self.starts = starts
        self.max_run = int(counts.reshape(nbv, nbu).sum(axis=1).max())
        return self

    def boxes(self):
        """Tables for boxes, built on first use: (24, 12) map from frames (4, 3, K) to corners
        (8, 3, K) in the projection frame; the side planes of the rays' frustum (x' - u z' >= 0
        for u >= umin, ...) widened by slack, (4, 3), and the same with unit normals."""
        if self.box_tables is None:
            umin, umax, vmin, vmax = self.extent
            slack = self.slack
            corners = (_CORNER_SIGNS[:, None, :, None]
                       * self.axes.T[None, :, None, :]).reshape(24, 12)
            sides = ((1.0, 0.0, slack - umin), (-1.0, 0.0, umax + slack),
                     (0.0, 1.0, slack - vmin), (0.0, -1.0, vmax + slack))
            unit = [[c / math.sqrt(sum(x * x for x in side)) for c in side] for side in sides]
            self.box_tables = (corners, np.array(sides), np.array(unit))
        return self.box_tables

    def bins(self, bounds: np.ndarray):
        """(2, 2, K) (u, v) rectangles [lo, hi] x [u, v] -> (2, 2, K) int64 bins, clipped, and
        the mask (K,) of rectangles that reach the rays' bins at all."""
        b = bounds - self.bin_offset
        b *= self.inv
        b += 0.5
        np.floor(b, out=b)
        visible = (b[1] >= 0.0).all(axis=0)
        visible &= (b[0] <= self.last).all(axis=0)
        np.clip(b, 0.0, self.top, out=b)
        return b.astype(np.int64), visible


def _ray_table(directions: np.ndarray, oz: float, cylinders: bool) -> list:
    """Per-ray kernel inputs, (M,) each: dz, dx, dy, inv_dz, and for cylinders a, neg_inv_a,
    t_bottom (as ``raycast.make_rays`` and ``cylinder_ray`` form them). Each kernel reads a
    contiguous run of them (``_PAIR_KERNELS``).

    Every row is a new array of the canonical float64 dtype: a caller's equal but distinct dtype
    instance (an unpickled array's, say) would otherwise flow into the hit distances and send
    ``np.minimum.at`` down its slow generic path (~20x slower)."""
    n = directions.shape[0]
    rows = [np.empty(n) for _ in range(7 if cylinders else 4)]
    dz = rows[0]
    np.copyto(dz, directions[:, 2])
    dx = rows[1]
    np.copyto(dx, directions[:, 0])
    dy = rows[2]
    np.copyto(dy, directions[:, 1])
    inv_dz = np.divide(1.0, dz, out=rows[3])
    if cylinders:
        a = np.multiply(dx, dx, out=rows[4])
        a += dy * dy
        np.maximum(a, 1e-300, out=a)
        np.divide(-1.0, a, out=rows[5])
        np.multiply(-oz, inv_dz, out=rows[6])
    return rows


def _relative(kind: str, params: np.ndarray, ox: float, oy: float, oz: float) -> np.ndarray:
    """(R, K) per-obstacle kernel inputs relative to the origin, formed as
    ``raycast.RAY_KERNELS`` form them."""
    if kind == "cylinder":
        cx, cy, radius, height = params
        out = np.empty((4, cx.shape[0]))
        rx = np.subtract(ox, cx, out=out[0])
        ry = np.subtract(oy, cy, out=out[1])
        c = rx * rx + ry * ry - radius * radius
        np.negative(c, out=out[2])
        np.subtract(height, oz, out=out[3])
        return out
    if kind == "sphere":
        cx, cy, cz, radius = params
        out = np.empty((4, cx.shape[0]))
        rx = np.subtract(ox, cx, out=out[0])
        ry = np.subtract(oy, cy, out=out[1])
        rz = np.subtract(oz, cz, out=out[2])
        np.subtract(rx * rx + ry * ry + rz * rz, radius * radius, out=out[3])
        return out
    cx, cy, cz, hx, hy, hz, c, s = params
    out = np.empty((8, cx.shape[0]))
    out[0] = c
    out[1] = s
    rx = ox - cx
    ry = oy - cy
    local_ox = c * rx + s * ry
    local_oy = c * ry - s * rx
    local_oz = oz - cz
    np.subtract(-hx, local_ox, out=out[2])
    np.subtract(hx, local_ox, out=out[3])
    np.subtract(-hy, local_oy, out=out[4])
    np.subtract(hy, local_oy, out=out[5])
    np.subtract(-hz, local_oz, out=out[6])
    np.subtract(hz, local_oz, out=out[7])
    return out


# Flat-pair kernels: ``obs`` (R, P) per-obstacle inputs and ``ray`` (rows, P) per-ray inputs of
# each pair, both fresh copies the kernel may overwrite. Returns (entry, hit): the pair's hit
# distance and where it counts. Same operations, pair by pair, as ``raycast.RAY_KERNELS``.

def _cylinder_pairs(obs, ray):
    rx, ry, neg_c, top = obs
    dx, dy, inv_dz, a, neg_inv_a, t_bottom = ray
    half_b = np.multiply(rx, dx, out=rx)
    ry *= dy
    half_b += ry
    disc = np.multiply(half_b, half_b, out=dx)
    a *= neg_c
    disc += a
    ok = disc >= 0.0
    neg_q = np.sqrt(disc, out=disc)       # NaN for misses, which ``ok`` drops
    np.copysign(neg_q, half_b, out=neg_q)
    neg_q += half_b
    t1 = np.multiply(neg_inv_a, neg_q, out=neg_inv_a)
    t2 = np.divide(neg_c, neg_q, out=neg_q)
    t_near = np.fmin(t1, t2, out=a)
    t_far = np.fmax(t1, t2, out=t1)
    top *= inv_dz
    np.fmax(t_near, np.minimum(t_bottom, top, out=dy), out=t_near)
    np.fmin(t_far, np.maximum(t_bottom, top, out=top), out=t_far)
    np.maximum(t_near, 0.0, out=t_near)
    ok &= t_near <= t_far
    return t_near, ok


def _sphere_pairs(obs, ray):
    rx, ry, rz, c = obs
    dz, dx, dy = ray
    half_b = np.multiply(rx, dx, out=rx)
    ry *= dy
    half_b += ry
    rz *= dz
    half_b += rz
    disc = np.multiply(half_b, half_b, out=dx)
    disc -= c
    ok = disc >= 0.0
    neg_q = np.sqrt(disc, out=disc)
    np.copysign(neg_q, half_b, out=neg_q)
    neg_q += half_b
    np.negative(c, out=c)
    t2 = np.divide(c, neg_q, out=c)
    np.negative(neg_q, out=neg_q)
    t_near = np.fmin(neg_q, t2, out=dy)
    t_far = np.fmax(neg_q, t2, out=t2)
    np.maximum(t_near, 0.0, out=t_near)
    ok &= t_near <= t_far
    return t_near, ok


def _box_pairs(obs, ray):
    c, s, lo_x, hi_x, lo_y, hi_y, lo_z, hi_z = obs
    dx, dy, inv_z = ray
    inv_x = c * dx
    inv_x += s * dy
    np.divide(1.0, inv_x, out=inv_x)
    c *= dy
    s *= dx
    inv_y = np.subtract(c, s, out=c)
    np.divide(1.0, inv_y, out=inv_y)
    lo_x *= inv_x
    hi_x *= inv_x
    t_near = np.minimum(lo_x, hi_x, out=dx)
    t_far = np.maximum(lo_x, hi_x, out=lo_x)
    for lo, hi, inv in ((lo_y, hi_y, inv_y), (lo_z, hi_z, inv_z)):
        lo *= inv
        hi *= inv
        np.fmax(t_near, np.minimum(lo, hi, out=dy), out=t_near)
        np.fmin(t_far, np.maximum(lo, hi, out=lo), out=t_far)
    np.maximum(t_near, 0.0, out=t_near)
    return t_near, t_near <= t_far


# Kernel and the rows of ``_ray_table`` it reads.
_PAIR_KERNELS = {"cylinder": (_cylinder_pairs, slice(1, 7)), "box": (_box_pairs, slice(1, 4)),
                 "sphere": (_sphere_pairs, slice(0, 3))}


def _hull_nearest(hull: np.ndarray, ox: float, oy: float, oz: float) -> np.ndarray:
    """Lower bound on the distance from the origin to each obstacle (its prism hull), metres."""
    bx, by, radius, z_min, z_max = hull
    near = np.hypot(bx - ox, by - oy)
    near -= radius
    near -= 1e-12 * radius + 1e-12
    np.maximum(near, 0.0, out=near)
    gap = np.maximum(z_min - oz, oz - z_max)
    np.maximum(gap, 0.0, out=gap)
    return np.hypot(near, gap, out=near)


def _straddling_bounds(xyz: np.ndarray, lo: np.ndarray, hi: np.ndarray, depth: np.ndarray,
                       image: RayImage, bounds: np.ndarray, behind: np.ndarray) -> np.ndarray:
    """Bounds of boxes that reach behind the plane z' = depth, written into ``bounds`` where
    ``behind``; returns the mask of boxes that may still be hit.

    The part of a box in front of the plane has x' in [lo x', hi x'] and z' in [depth, hi z']
    (likewise y'), so u = x'/z' lies between the extremes of x'/z' over that rectangle's corners.
    Boxes wholly behind the plane, or wholly outside one side plane of the rays' frustum, cannot
    be hit. An origin in an obstacle's hull (depth 0) makes every ray a candidate: rays from a
    point of a closed obstacle hit it at distance 0. xyz (8, 3, K) corners in the projection
    frame; lo, hi (3, K) their extremes."""
    keep = hi[2] >= depth
    keep &= ((image.boxes()[1] @ xyz) >= 0.0).any(axis=0).all(axis=0)
    d = depth[None, :]
    lo_uv = np.minimum(lo[:2] / d, lo[:2] / hi[2])
    hi_uv = np.maximum(hi[:2] / d, hi[:2] / hi[2])
    # Rounding grows with the box's coordinates over the plane's depth.
    extra = np.maximum(np.abs(lo).max(axis=0), np.abs(hi).max(axis=0))
    extra *= 1e-12
    extra /= depth
    lo_uv -= extra
    hi_uv += extra
    np.copyto(bounds[0], lo_uv, where=behind)
    np.copyto(bounds[1], hi_uv, where=behind)
    inside = depth <= 0.0
    if inside.any():
        bounds[0][:, inside] = -np.inf
        bounds[1][:, inside] = np.inf
        keep |= inside
    return keep


class _Kind:
    """One block's obstacles that may be hit: kernel inputs, distance lower bounds and image
    rectangles (bins: start = first row * nbu + first column, width, first row, height)."""

    __slots__ = ("kernel", "rows", "rel", "near", "start", "width", "height", "area")

    def sort(self) -> None:
        """Nearest first."""
        order = np.argsort(self.near, kind="stable")
        self.rel = self.rel[:, order]
        self.near = self.near[order]
        self.start = self.start[order]
        self.width = self.width[order]
        self.height = self.height[order]
        self.area = self.area[order]


def _prepare(block: Block, origin: np.ndarray, image: RayImage,
             range_limit: float) -> Optional[_Kind]:
    """The obstacles of ``block`` within range whose image rectangles hold rays, or None."""
    ox, oy, oz = origin.tolist()
    near = _hull_nearest(block.hull, ox, oy, oz)
    in_range = near <= range_limit
    frame = block.frame.reshape(12, -1)
    if in_range.all():
        sel = None
        frame = frame - _origin_offset(origin)
    else:
        sel = np.flatnonzero(in_range)
        if not sel.size:
            return None
        near = near[sel]
        frame = frame[:, sel]
        frame[:3] -= origin[:, None]
    # Every hit point of a ray lies at distance >= near, so its z' is >= near * cmin.
    depth = near * (image.cmin * (1.0 - 1e-9))
    if block.kind == "box":
        bounds, keep, picked = _corner_bounds(frame, near, depth, block, sel, image)
        if picked is not None:
            if not picked.size:
                return None
            sel = picked if sel is None else sel[picked]
            near = near[picked]
    else:
        bounds, keep = _support_bounds(frame, depth, block.kind, image)
    bins, visible = image.bins(bounds)
    if keep is not None:
        visible &= keep
    if not visible.all():
        picked = np.flatnonzero(visible)
        if not picked.size:
            return None
        sel = picked if sel is None else sel[picked]
        near = near[picked]
        bins = bins[:, :, picked]
    kind = _Kind()
    kind.kernel, kind.rows = _PAIR_KERNELS[block.kind]
    kind.rel = _relative(block.kind, block.params if sel is None else block.params[:, sel],
                         ox, oy, oz)
    kind.near = near
    (c0, r0), (c1, r1) = bins
    kind.width = c1 - c0 + 1
    kind.height = r1 - r0 + 1
    kind.start = r0 * image.nbu + c0
    kind.area = kind.width * kind.height
    return kind


def _support_bounds(frame: np.ndarray, depth: np.ndarray, kind: str, image: RayImage):
    """(u, v) bounds (2, 2, K) of capped vertical cylinders or spheres, and a keep mask.

    In the projection frame each shape spans centre +- its support (half-width) along each axis
    e: radius * |horizontal part of e| + half height * |e_z| for a cylinder, radius * |e| for a
    sphere. Its points a ray can hit have z' >= depth, so u = x'/z' lies between the extremes of
    x'/z' over [x' min, x' max] x [max(z' min, depth), z' max], likewise v. Shapes wholly behind
    z' = depth are dropped; an origin in a shape's hull (depth 0) makes every ray a candidate.
    frame (12, K) relative to the origin."""
    centre = image.axes.T @ frame[:3]
    if kind == "cylinder":
        extent = np.multiply.outer(image.support[0], frame[3])
        extent += np.multiply.outer(image.support[1], frame[11])
    else:
        extent = np.multiply.outer(image.support[2], frame[3])
    lo = centre - extent
    hi = np.add(centre, extent, out=centre)
    z_hi = hi[2]
    z_lo = np.maximum(lo[2], depth)
    keep = z_hi >= depth
    bounds = np.empty((2, 2, depth.shape[0]))
    np.minimum(lo[:2] / z_lo, lo[:2] / z_hi, out=bounds[0])
    np.maximum(hi[:2] / z_lo, hi[:2] / z_hi, out=bounds[1])
    # Rounding of x'/z' grows with the shape's coordinates over its least depth.
    extent += np.abs(hi)
    extra = extent.max(axis=0)
    extra *= 1e-12
    extra /= z_lo
    bounds[0] -= extra
    bounds[1] += extra
    inside = depth <= 0.0
    if inside.any():
        bounds[0][:, inside] = -np.inf
        bounds[1][:, inside] = np.inf
        keep |= inside
    return bounds, keep


def _corner_bounds(frame: np.ndarray, near: np.ndarray, depth: np.ndarray, block: Block,
                   sel: Optional[np.ndarray], image: RayImage):
    """(u, v) bounds (2, 2, K) of yawed boxes from their 8 projected corners, a keep mask (or
    None), and the indices into ``frame`` of the boxes kept by a bounding-ball pre-cull (or
    None when it did not run); frame (12, K) relative to the origin."""
    picked = None
    corners, sides, unit_sides = image.boxes()
    if near.shape[0] > PRECULL_MIN:
        # Bounding balls wholly outside the rays' frustum: skip their boxes' corners.
        centre = image.axes.T @ frame[:3]
        radius = block.frame_radius if sel is None else block.frame_radius[sel]
        inside = (unit_sides @ centre >= -radius).all(axis=0)
        inside &= centre[2] + radius >= depth
        if not inside.all():
            picked = np.flatnonzero(inside)
            if not picked.size:
                return None, None, picked
            frame, depth = frame[:, picked], depth[picked]
    xyz = (corners @ frame).reshape(8, 3, -1)
    lo = xyz.min(axis=0)
    hi = xyz.max(axis=0)
    front = lo[2] >= depth
    front &= depth > 0.0
    # Boxes wholly in front: the rectangle of the projected corners.
    uv = xyz[:, :2] / xyz[:, 2:]
    bounds = np.empty((2, 2, depth.shape[0]))
    np.minimum.reduce(uv, axis=0, out=bounds[0])
    np.maximum.reduce(uv, axis=0, out=bounds[1])
    keep = None
    if not front.all():
        keep = _straddling_bounds(xyz, lo, hi, depth, image, bounds, ~front)
    return bounds, keep, picked


def _origin_offset(origin: np.ndarray) -> np.ndarray:
    """(12, 1) column subtracting ``origin`` from a frame's centre rows."""
    offset = np.zeros((12, 1))
    offset[:3, 0] = origin
    return offset


def _range_max_table(acc: np.ndarray, longest: int) -> np.ndarray:
    """Sparse table: row j, column i holds max(acc[i : i + 2**j]) (clamped at the end), for
    runs of up to ``longest`` rays."""
    global _LOG2
    if longest >= _LOG2.shape[0]:
        _LOG2 = np.floor(np.log2(np.maximum(np.arange(2 * longest), 1))).astype(np.int64)
    n = acc.shape[0]
    levels = max(1, int(longest).bit_length())
    table = np.empty((levels, n))
    table[0] = acc
    step = 1
    for j in range(1, levels):
        np.maximum(table[j - 1, :n - step], table[j - 1, step:], out=table[j, :n - step])
        table[j, n - step:] = table[j - 1, n - step:]
        step *= 2
    return table


def _cast_layer(kind: _Kind, lo: int, hi: int, image: RayImage, rays: np.ndarray,
                acc: np.ndarray, table: Optional[np.ndarray]) -> None:
    """Obstacles lo:hi of ``kind`` against their rectangles' rays, folded into ``acc``."""
    nbu = image.nbu
    heights = kind.height[lo:hi]
    n_seg = int(heights.sum())
    seg_obs = np.repeat(np.arange(lo, hi), heights)
    first = np.cumsum(heights)
    first -= heights
    # Row r of obstacle j's rectangle (a run of rays) starts at start_j + r * nbu.
    first *= nbu
    base = kind.start[lo:hi] - first
    seg_start = np.repeat(base, heights)
    seg_start += np.arange(0, n_seg * nbu, nbu)
    if image.starts is None:
        seg_len = kind.width[seg_obs]
    else:
        seg_end = image.starts[seg_start + kind.width[seg_obs]]
        seg_start = image.starts[seg_start]
        seg_len = seg_end - seg_start
        filled = np.flatnonzero(seg_len)
        if filled.size < seg_len.size:
            seg_obs, seg_start, seg_len = seg_obs[filled], seg_start[filled], seg_len[filled]
    if table is not None:
        # Drop runs whose rays all hit something nearer than the obstacle can be.
        level = _LOG2[seg_len]
        row = level * acc.shape[0]
        row += seg_start
        flat = table.reshape(-1)
        deepest = np.maximum(flat[row], flat[row + seg_len - (1 << level)])
        cut = kind.near[seg_obs]
        cut *= 1.0 - 1e-9
        visible = np.flatnonzero(deepest >= cut)
        if visible.size < seg_obs.size:
            seg_obs, seg_start, seg_len = seg_obs[visible], seg_start[visible], seg_len[visible]
    ends = np.cumsum(seg_len)
    n_pairs = int(ends[-1]) if ends.size else 0
    if not n_pairs:
        return
    if n_pairs <= PAIR_CHUNK:
        _cast_pairs(kind, seg_obs, seg_start, seg_len, ends, rays, acc)
        return
    # Chunks of whole runs, so that no per-pair array passes the size glibc maps afresh.
    cuts = np.searchsorted(ends, np.arange(PAIR_CHUNK, n_pairs, PAIR_CHUNK), side="right")
    lo = 0
    for hi in cuts.tolist() + [ends.shape[0]]:
        if hi > lo:
            base = int(ends[lo - 1]) if lo else 0
            _cast_pairs(kind, seg_obs[lo:hi], seg_start[lo:hi], seg_len[lo:hi],
                        ends[lo:hi] - base, rays, acc)
        lo = hi


def _cast_pairs(kind: _Kind, seg_obs: np.ndarray, seg_start: np.ndarray, seg_len: np.ndarray,
                ends: np.ndarray, rays, acc: np.ndarray) -> None:
    """Every ray of each run (start, length) against the run's obstacle, folded into ``acc``.
    ends: cumulative run lengths."""
    n_pairs = int(ends[-1])
    ends -= seg_len
    pos = np.repeat(seg_start - ends, seg_len)
    pos += np.arange(n_pairs)
    # One array per input row (not one (rows, P) block): smaller than glibc's mmap threshold.
    obs = [np.repeat(row, seg_len) for row in kind.rel.take(seg_obs, axis=1)]
    t, hit = kind.kernel(obs, [row.take(pos) for row in rays[kind.rows]])
    hit = np.flatnonzero(hit)
    np.minimum.at(acc, pos[hit], t[hit])


def _layers(kinds: list, n: int, longest: int, acc: np.ndarray):
    """Nearest-first batches of obstacles: yields (first, end) index lists (one per kind) and
    the occlusion table of ``acc`` as the earlier batches left it (None for the first batch).

    Rectangles holding at most ``LAYER_MIN_AREA`` rays' worth of pairs go in one batch. Beyond
    that, each batch but the last holds about ``LAYER_AREA`` rays' worth, up to ``MAX_LAYERS``
    batches: the near obstacles' hits then hide the far ones' runs from the kernels."""
    counts = [kind.near.shape[0] for kind in kinds]
    total = sum(int(kind.area.sum()) for kind in kinds)
    if total <= LAYER_MIN_AREA * n:
        yield [0] * len(kinds), counts, None
        return
    for kind in kinds:
        kind.sort()
    if len(kinds) == 1:
        near_all, area_all = kinds[0].near, kinds[0].area
    else:
        near_all = np.concatenate([kind.near for kind in kinds])
        area_all = np.concatenate([kind.area for kind in kinds])
        by_near = np.argsort(near_all, kind="stable")
        near_all, area_all = near_all[by_near], area_all[by_near]
    cumulative = np.cumsum(area_all)
    lo = [0] * len(kinds)
    start, done, table = 0, 0, None
    while start < near_all.shape[0]:
        before = int(cumulative[start - 1]) if start else 0
        if done + 1 >= MAX_LAYERS or total - before <= LAYER_MIN_AREA * n:
            hi = counts
        else:
            end = max(start + 1, int(np.searchsorted(cumulative, before + LAYER_AREA * n)) + 1)
            if end >= near_all.shape[0]:
                hi = counts
            else:
                # All obstacles up to this distance (ties included), in every kind.
                cut = near_all[end - 1]
                hi = [int(np.searchsorted(kind.near, cut, side="right")) for kind in kinds]
        yield lo, hi, table
        done += 1
        start = sum(hi)
        lo = hi
        if start < near_all.shape[0]:
            table = _range_max_table(acc, longest)


def cast_image(blocks: Sequence[Block], origin: np.ndarray, directions: np.ndarray,
               max_range: float) -> Optional[np.ndarray]:
    """Nearest obstacle hit per ray for rays sharing ``origin``, culled in the image plane.

    origin: (3,); directions: (M, 3) unit vectors; metres.
    Obstacles farther than ``max_range`` may be skipped. Returns (M,) float64 metres, inf where
    nothing is hit, or None when the rays span too wide a cone for one image plane.
    """
    image = RayImage.build(directions)
    if image is None:
        return None
    n = directions.shape[0]
    range_limit = max_range + 1e-9 * (1.0 + max_range)
    kinds = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for block in blocks:
            if block.size:
                kind = _prepare(block, origin, image, range_limit)
                if kind is not None:
                    kinds.append(kind)
        acc = np.full(n, np.inf)
        if not kinds:
            return acc
        order = image.order
        cylinders = any(kind.kernel is _cylinder_pairs for kind in kinds)
        oz = float(origin[2])
        rays = _ray_table(directions if order is None else directions[order], oz, cylinders)
        for lo, hi, table in _layers(kinds, n, image.max_run, acc):
            for kind, a, b in zip(kinds, lo, hi):
                if b > a:
                    _cast_layer(kind, a, b, image, rays, acc, table)
    if order is None:
        return acc
    out = np.empty(n)
    out[order] = acc
    return out
