"""Batched depth rendering for training: every agent's camera in one set of NumPy calls.

The simulator's camera (``planner_pkg.sim.camera``) renders one 64 x 48 frame in ~0.8 ms; a
training step needs a frame for each of 32-64 agents, 150 times per iteration, so training
renders all agents' pinhole cameras at once, sparsely:

1. every obstacle is bounded by a capsule (a sphere by itself, a cylinder by its axis segment
   and radius, a box by its circumscribed ball); per agent, the capsules in range and in front
   of the camera are projected to an exact, conservative rectangle of pixel indices
   (``_pixel_span``), so only (ray, obstacle) pairs that can hit are enumerated (~1-2 % of
   all pairs in a cluttered world);
2. the exact ray-primitive intersections (the same slab / quadratic tests as ``World.raycast``)
   run on those flat pairs, one kernel per primitive type, and ``np.minimum.at`` keeps the
   nearest hit per pixel; the ground and ceiling planes are intersected densely.

"Fat" rays (``cone_rad`` > 0): each obstacle is inflated by ``cone_rad`` x its distance (and a
ray tilts by ``cone_rad`` towards the ground/ceiling), so one ray per network pixel reports
approximately the *nearest* surface inside the pixel's cone: what max-pooling the inverse depth
of a finer image reports (the simulator camera's 4 x 4 pooling), at 1/16 of the rays. With
``cone_rad = 0`` the hit distances equal ``World.raycast``'s (tested). Depths are z-depths along
the optical axis, m; +inf where nothing is hit within ``max_range_m``. No gradient flows here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from planner_pkg.policy.observation import optical_rays
from planner_pkg.world.primitives import Box, Cylinder, Sphere

__all__ = ["PackedScene", "pack_scenes", "render_depth"]

@dataclass(frozen=True)
class PackedScene:
    """Obstacles of one or more worlds, packed for :func:`render_depth`.

    spheres: (Ns, 4) cx, cy, cz, r. cylinders: (Nc, 4) cx, cy, r, h. boxes: (Nb, 8) cx, cy, cz,
    hx, hy, hz, cos(yaw), sin(yaw). Per world, padded to M entries: ``capsule`` (W, M, 7) is each
    obstacle's bounding capsule (segment ends p0, p1 and radius: a sphere is its own, a cylinder
    its axis and radius, a box its circumscribed ball), ``kind`` (W, M) 0 sphere, 1 cylinder,
    2 box, -1 padding, ``row`` (W, M) its row in the array of its kind.
    ground: (W,) bool; ceiling: (W,) float, +inf where none. Metres.
    """

    spheres: np.ndarray
    cylinders: np.ndarray
    boxes: np.ndarray
    capsule: np.ndarray
    kind: np.ndarray
    row: np.ndarray
    ground: np.ndarray
    ceiling: np.ndarray


def pack_scenes(worlds: Sequence) -> PackedScene:
    """Pack the obstacles of ``worlds`` (``planner_pkg.world.World``) for :func:`render_depth`."""
    rows = ([], [], [])
    per_world = []
    for world in worlds:
        entries = []
        for ob in world.obstacles:
            if isinstance(ob, Sphere):
                k, params = 0, (*ob.center, ob.radius)
                cap = (*ob.center, *ob.center, ob.radius)
            elif isinstance(ob, Cylinder):
                k, params = 1, (*ob.center, ob.radius, ob.height)
                cap = (*ob.center, 0.0, *ob.center, ob.height, ob.radius)
            elif isinstance(ob, Box):
                hx, hy, hz = (0.5 * v for v in ob.size)
                k, params = 2, (*ob.center, hx, hy, hz, math.cos(ob.yaw), math.sin(ob.yaw))
                cap = (*ob.center, *ob.center, math.sqrt(hx * hx + hy * hy + hz * hz))
            else:  # pragma: no cover - World validates its obstacles
                raise TypeError(f"cannot render obstacle {ob!r}")
            entries.append((cap, k, len(rows[k])))
            rows[k].append(params)
        per_world.append(entries)
    m = max([len(e) for e in per_world] + [1])
    capsule = np.zeros((len(worlds), m, 7))
    capsule[..., 2] = capsule[..., 5] = -1.0e6  # padding: far below the ground, radius 0
    kind = np.full((len(worlds), m), -1, dtype=np.int64)
    row = np.zeros((len(worlds), m), dtype=np.int64)
    for w, entries in enumerate(per_world):
        for j, (cap, k, r) in enumerate(entries):
            capsule[w, j], kind[w, j], row[w, j] = cap, k, r
    return PackedScene(
        np.array(rows[0], dtype=np.float64).reshape(-1, 4),
        np.array(rows[1], dtype=np.float64).reshape(-1, 4),
        np.array(rows[2], dtype=np.float64).reshape(-1, 8),
        capsule, kind, row,
        np.array([bool(w.ground) for w in worlds]),
        np.array([math.inf if w.ceiling is None else float(w.ceiling) for w in worlds]),
    )


def _sphere_hits(p, inflate, ox, oy, oz, dx, dy, dz):
    ocx, ocy, ocz = ox - p[:, 0], oy - p[:, 1], oz - p[:, 2]
    r = p[:, 3] + inflate
    bq = dx * ocx + dy * ocy + dz * ocz
    cq = ocx * ocx + ocy * ocy + ocz * ocz - r * r
    disc = bq * bq - cq
    sq = np.sqrt(np.maximum(disc, 0.0))
    miss = (disc < 0.0) | (sq < bq)  # no real root, or both roots behind the origin
    return np.where(miss, np.inf, np.maximum(-bq - sq, 0.0))


def _cylinder_hits(p, inflate, ox, oy, oz, dx, dy, dz):
    ocx, ocy = ox - p[:, 0], oy - p[:, 1]
    r = p[:, 2] + inflate
    a = dx * dx + dy * dy
    flat = a < 1e-12  # a vertical ray: inside the infinite cylinder iff cq <= 0
    inv_a = 1.0 / np.where(flat, 1.0, a)
    bq = dx * ocx + dy * ocy
    cq = ocx * ocx + ocy * ocy - r * r
    disc = bq * bq - a * cq
    sq = np.sqrt(np.maximum(disc, 0.0))
    inside = np.where(cq <= 0.0, np.inf, -np.inf)
    t0 = np.where(flat, -inside, (-bq - sq) * inv_a)
    t1 = np.where(flat, inside, (sq - bq) * inv_a)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_dz = 1.0 / dz
        za = (-inflate - oz) * inv_dz  # the slab -inflate <= z <= height + inflate
        zb = (p[:, 3] + inflate - oz) * inv_dz
    tn = np.fmax(t0, np.fmin(za, zb))
    tf = np.fmin(t1, np.fmax(za, zb))
    miss = (disc < 0.0) | (tn > tf) | (tf < 0.0)
    return np.where(miss, np.inf, np.maximum(tn, 0.0))


def _box_hits(p, inflate, ox, oy, oz, dx, dy, dz):
    c, s = p[:, 6], p[:, 7]
    rx, ry = ox - p[:, 0], oy - p[:, 1]
    orig = (c * rx + s * ry, c * ry - s * rx, oz - p[:, 2])
    dirs = (c * dx + s * dy, c * dy - s * dx, dz)
    tn = np.full(c.shape, -np.inf)
    tf = np.full(c.shape, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for axis in range(3):
            half = p[:, 3 + axis] + inflate
            inv = 1.0 / dirs[axis]
            t1 = (-half - orig[axis]) * inv
            t2 = (half - orig[axis]) * inv
            # NaN (a ray in a face's plane) constrains nothing: fmax/fmin skip it
            np.fmax(tn, np.minimum(t1, t2), out=tn)
            np.fmin(tf, np.maximum(t1, t2), out=tf)
    miss = (tn > tf) | (tf < 0.0)
    return np.where(miss, np.inf, np.maximum(tn, 0.0))


def _pixel_span(a0, z0, a1, z1, rad, focal, centre, size):
    """Inclusive pixel index range [lo, hi] along one image axis whose rays can meet a capsule.

    The capsule (segment from point 0 to point 1 in the camera frame, radius ``rad``) projects
    onto the plane of this image axis ``a`` and the optical axis ``z`` as a 2-D capsule; the
    angles atan2(a, z) of its points lie within the segment's angular sweep widened by
    asin(rad / its distance from the origin). Only points with z > 0 are seen (rays have
    z > 0), where a / z = tan(angle) is monotonic. All arrays (P,); focal, centre: pinhole
    constants; size: pixels along the axis. Conservative (never misses a pixel).
    """
    sa, sz = a1 - a0, z1 - z0
    seg2 = sa * sa + sz * sz
    s = np.clip(-(a0 * sa + z0 * sz) / np.maximum(seg2, 1e-300), 0.0, 1.0)
    d_min = np.hypot(a0 + s * sa, z0 + s * sz)
    full = rad >= d_min  # the capsule covers the origin of the plane: every direction
    half = np.arcsin(np.minimum(rad / np.maximum(d_min, 1e-300), 1.0))
    phi0 = np.arctan2(a0, z0)
    dphi = np.remainder(np.arctan2(a1, z1) - phi0 + math.pi, 2.0 * math.pi) - math.pi
    lo = phi0 + np.minimum(dphi, 0.0) - half
    hi = phi0 + np.maximum(dphi, 0.0) + half
    k = np.floor((lo + math.pi) / (2.0 * math.pi))  # shift so that lo is in [-pi, pi)
    lo -= 2.0 * math.pi * k
    hi -= 2.0 * math.pi * k
    quarter = 0.5 * math.pi
    in0 = (lo < quarter) & (hi > -quarter)  # overlaps the visible window (-pi/2, pi/2)
    in1 = hi > 3.0 * quarter  # wraps into the next turn's window
    lo_ang = np.where(in1, -quarter, np.maximum(lo, -quarter))
    hi_ang = np.where(in0, np.minimum(hi, quarter), -quarter)
    hi_ang = np.where(in1, np.maximum(hi_ang, np.minimum(hi - 4.0 * quarter, quarter)), hi_ang)
    visible = in0 | in1 | full
    lo_ang = np.where(full, -quarter, lo_ang)
    hi_ang = np.where(full, quarter, hi_ang)
    margin = 1e-6
    with np.errstate(invalid="ignore", over="ignore"):
        lo_px = np.where(lo_ang <= -quarter, -np.inf, focal * np.tan(lo_ang) + centre - margin)
        hi_px = np.where(hi_ang >= quarter, np.inf, focal * np.tan(hi_ang) + centre + margin)
    lo_i = np.clip(np.ceil(lo_px), 0, size).astype(np.int64)
    hi_i = np.clip(np.floor(hi_px), -1, size - 1).astype(np.int64)
    hi_i[~visible] = -1
    return lo_i, hi_i


_KERNELS = ((0, "spheres", _sphere_hits), (1, "cylinders", _cylinder_hits), (2, "boxes", _box_hits))


def _to_camera(points, origins, rot):
    """(B, M, 3) world points -> three (B, M) camera-frame coordinate arrays."""
    rx = points[..., 0] - origins[:, 0:1]
    ry = points[..., 1] - origins[:, 1:2]
    rz = points[..., 2] - origins[:, 2:3]
    return tuple(rx * rot[:, 0:1, i] + ry * rot[:, 1:2, i] + rz * rot[:, 2:3, i] for i in range(3))


def _candidate_pixels(scene, agent_scene, origins, rot, focal, image_hw, cull_range, cone_rad):
    """Flat (agent * R + pixel) indices, obstacle slots and inflations of every candidate
    (ray, obstacle) pair: the pixels inside each visible obstacle's projected rectangle."""
    h, w = image_hw
    cap = scene.capsule[agent_scene]  # (B, M, 7)
    x0, y0, z0 = _to_camera(cap[..., 0:3], origins, rot)
    x1, y1, z1 = _to_camera(cap[..., 3:6], origins, rot)
    dist = np.sqrt(np.minimum(x0 * x0 + y0 * y0 + z0 * z0, x1 * x1 + y1 * y1 + z1 * z1))
    radius = cap[..., 6]
    rad = radius + cone_rad * (dist + radius)
    ok = (dist - rad < cull_range) & (np.maximum(z0, z1) > -rad) & (scene.kind[agent_scene] >= 0)
    ag_i, ob_i = np.nonzero(ok)
    if ag_i.size == 0:
        return None
    rr, f = rad[ag_i, ob_i], focal[ag_i]
    sz0, sz1 = z0[ag_i, ob_i], z1[ag_i, ob_i]
    u0, u1 = _pixel_span(x0[ag_i, ob_i], sz0, x1[ag_i, ob_i], sz1, rr, f, 0.5 * (w - 1), w)
    v0, v1 = _pixel_span(y0[ag_i, ob_i], sz0, y1[ag_i, ob_i], sz1, rr, f, 0.5 * (h - 1), h)
    nu = np.maximum(u1 - u0 + 1, 0)
    counts = nu * np.maximum(v1 - v0 + 1, 0)
    total = int(counts.sum())
    if total == 0:
        return None
    owner = np.repeat(np.arange(counts.size), counts)
    k = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    nu_o = nu[owner]
    row, col = np.divmod(k, nu_o)
    pix = (v0[owner] + row) * w + u0[owner] + col
    agent = ag_i[owner]
    # inflate by the cone's width at the obstacle's nearest possible point (a lower bound on
    # the hit distance): a near surface of a large obstacle is not over-inflated
    inflate = cone_rad * np.maximum(dist - radius, 0.0)[ag_i, ob_i][owner]
    return agent, agent * (h * w) + pix, ob_i[owner], inflate


def _cast_pairs(scene, agent_scene, origins, dirs, pairs, t):
    """Lower ``t`` (B * R,) to each candidate pair's hit distance, kernel by obstacle kind."""
    agent, flat, slot, inflate = pairs
    scene_i = agent_scene[agent]
    kinds = scene.kind[scene_i, slot]
    rows = scene.row[scene_i, slot]
    flat_dirs = dirs.reshape(-1, 3)
    for kind_id, name, kernel in _KERNELS:
        sel = np.nonzero(kinds == kind_id)[0]
        if sel.size == 0:
            continue
        fl = flat[sel]
        d = flat_dirs[fl]
        o = origins[agent[sel]]
        params = getattr(scene, name)[rows[sel]]
        hit = kernel(params, inflate[sel], o[:, 0], o[:, 1], o[:, 2], d[:, 0], d[:, 1], d[:, 2])
        np.minimum.at(t, fl, hit)


def _cast_planes(scene, agent_scene, origins, dirs, cone_rad, t):
    """Lower ``t`` (B, R) to the ground (z = 0) and ceiling hits; a fat ray tilts by
    ``cone_rad`` towards the plane."""
    dz = dirs[..., 2]
    horiz = np.sqrt(np.maximum(1.0 - dz * dz, 0.0))
    sin_c, cos_c = math.sin(cone_rad), math.cos(cone_rad)
    oz = origins[:, 2:3]
    down = dz * cos_c - horiz * sin_c
    with np.errstate(divide="ignore", invalid="ignore"):
        tg = np.where(oz <= 0.0, 0.0, np.where(down < 0.0, -oz / down, np.inf))
    np.minimum(t, np.where(scene.ground[agent_scene][:, None], tg, np.inf), out=t)
    ceiling = scene.ceiling[agent_scene][:, None]
    if np.isfinite(ceiling).any():
        up = dz * cos_c + horiz * sin_c
        gap = ceiling - oz
        with np.errstate(divide="ignore", invalid="ignore"):
            tc = np.where(gap <= 0.0, 0.0, np.where(up > 0.0, gap / up, np.inf))
        np.minimum(t, np.where(np.isfinite(ceiling), tc, np.inf), out=t)


def render_depth(
    scene: PackedScene,
    agent_scene: np.ndarray,
    origins: np.ndarray,
    camera_rotation: np.ndarray,
    hfov_rad: np.ndarray,
    image_hw: Tuple[int, int],
    max_range_m: float,
    cone_rad: float = 0.0,
    rays: Optional[np.ndarray] = None,
) -> np.ndarray:
    """z-depth images (B, H, W), m, of B pinhole cameras.

    agent_scene: (B,) index of each agent's world in ``scene``. origins: (B, 3) optical centres,
    m. camera_rotation: (B, 3, 3) optical frame (x right, y down, z forward) -> world.
    hfov_rad: (B,) horizontal fields of view (square pixels, centred principal point, pixel
    centres as ``CameraIntrinsics.from_fov``). cone_rad: fat-ray half-angle (module docstring).
    rays: ``optical_rays(hfov_rad, image_hw)`` if already computed. Pixels with nothing within
    ``max_range_m`` (z-depth) are +inf.
    """
    h, w = image_hw
    origins = np.asarray(origins, dtype=np.float64)
    rot = np.asarray(camera_rotation, dtype=np.float64)
    agent_scene = np.asarray(agent_scene, dtype=np.int64)
    b = origins.shape[0]
    if rays is None:
        rays = optical_rays(hfov_rad, image_hw)  # (B, R, 3), z = 1
    inv_norm = 1.0 / np.sqrt(np.einsum("brk,brk->br", rays, rays))  # = cos(ray, optical axis)
    dirs = np.matmul(rays, rot.transpose(0, 2, 1)) * inv_norm[..., None]
    focal = 0.5 * w / np.tan(0.5 * np.asarray(hfov_rad, dtype=np.float64))
    cull_range = max_range_m / float(inv_norm.min())  # the longest ray with z-depth in range
    t = np.full(b * h * w, np.inf)
    pairs = _candidate_pixels(scene, agent_scene, origins, rot, focal, image_hw, cull_range, cone_rad)
    if pairs is not None:
        _cast_pairs(scene, agent_scene, origins, dirs, pairs, t)
    t = t.reshape(b, h * w)
    _cast_planes(scene, agent_scene, origins, dirs, cone_rad, t)
    z = t * inv_norm
    z[z > max_range_m] = np.inf
    return z.reshape(b, h, w)
