"""A privileged guide for training: the direction of the cheapest way to the goal around obstacles.

The network only sees its depth image and the straight-line target velocity. The velocity loss
normally pulls it along that straight line, so near a group of trunks ahead the only gradient that
turns it comes from the (local) avoidance terms, and braking is often the cheaper answer. With
``loss.velocity_guidance`` the velocity loss instead pulls towards a teacher's direction: the
steepest descent of a cost-weighted geodesic distance to the goal, computed from the whole world
(which the network never sees), so the loss asks for the way round a group before it is close.

The guide is planned on a 2-D grid over the world's horizontal extent (``cell_m``). A cell is
blocked when a vehicle of radius ``vehicle_radius_m`` centred there would touch an obstacle at any
altitude of the flight band ``z_range`` (sampled at its ends and middle; the band keeps clear of the
ground and the ceiling); within ``clearance_m`` more, moving costs up to ``1 + cost``
times the distance (a quadratic ramp), so the way round prefers clearance but still takes a narrow
gap when there is no other. Dijkstra over the grid (16 neighbours) from the goal's cell gives every
reachable cell's next cell on its cheapest way to the goal. A grid path's direction is quantised
to its moves, so the guide does not follow the path cell by cell: it aims at the goal when the
straight line ahead (``lookahead_m``, or to the goal) stays out of every clearance band, and
otherwise at the farthest point of the cheapest path within ``lookahead_m`` that it can see along a
line keeping a quarter of the band (string pulling), e.g. the edge of the way round a group of
trunks. In open space it is exactly the straight-line target. Where the vehicle's cell does not
reach the goal (inside an obstacle's footprint, an enclosed pocket) there is no guide, and the
caller keeps the straight line.

Only the training loss uses this (``rollout.run_rollout``); it is not differentiated (a target).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra

from planner_pkg.world.distance import DISTANCE_KERNELS
from planner_pkg.world.packed import pack

__all__ = ["GuidanceGrid", "guidance_grid", "guide_directions", "NEIGHBOURS"]

#: Grid moves of the Dijkstra graph: the 8 neighbours and the 8 knight moves (16 directions).
NEIGHBOURS = np.array([(1, 0), (0, 1), (1, 1), (1, -1), (2, 1), (1, 2), (2, -1), (1, -2)])


@dataclass(frozen=True)
class GuidanceGrid:
    """The cheapest ways to one or more goals in one world.

    origin: (2,) m, centre of cell (0, 0); cell_m: cell size, m; open: (nx, ny) bool, cells beyond
    the clearance band of every solid (what the straight line to the goal must pass through to be
    taken); clear: (nx, ny) bool, cells at least a quarter of the band from every solid (what a line
    of sight to a point of the cheapest way must pass through);
    distance: (G, nx, ny) cost-weighted distance to each goal, m (inf where it cannot be reached);
    next_cell: (G, nx * ny) flat index of each cell's next cell towards the goal (-1 at the goal
    and where it cannot be reached).
    """

    origin: np.ndarray
    cell_m: float
    open: np.ndarray
    clear: np.ndarray
    distance: np.ndarray
    next_cell: np.ndarray

    @property
    def shape(self) -> Tuple[int, int]:
        return self.clear.shape


def _cell_cost(world, xs, ys, cell_m: float, z_range, vehicle_radius_m: float, clearance_m: float, cost: float):
    """(nx, ny) cost multiplier per cell (inf where blocked, 1 + cost x ramp in the clearance band,
    1 elsewhere) and (nx, ny) distance of each cell's centre to the nearest obstacle over the flight
    band (inf where no obstacle's footprint is within the band's reach). Distances are evaluated
    only near each obstacle's footprint (its xy bounding disc)."""
    nx, ny = xs.size, ys.size
    reach = vehicle_radius_m + clearance_m
    nearest = np.full((nx, ny), np.inf)
    zs = np.linspace(z_range[0], z_range[1], 3)
    for block in pack(world.obstacles):
        cx, cy, rad, zmin, zmax = block.hull
        keep = (zmax >= z_range[0] - reach) & (zmin <= z_range[1] + reach)
        for k in np.nonzero(keep)[0]:
            r = rad[k] + reach
            i0 = max(0, int(np.floor((cx[k] - r - xs[0]) / cell_m)))
            i1 = min(nx, int(np.ceil((cx[k] + r - xs[0]) / cell_m)) + 1)
            j0 = max(0, int(np.floor((cy[k] - r - ys[0]) / cell_m)))
            j1 = min(ny, int(np.ceil((cy[k] + r - ys[0]) / cell_m)) + 1)
            if i0 >= i1 or j0 >= j1:
                continue
            gx, gy = np.meshgrid(xs[i0:i1], ys[j0:j1], indexing="ij")
            params = block.params[:, k:k + 1]
            d = np.full(gx.shape, np.inf)
            for z in zs:
                d = np.minimum(d, DISTANCE_KERNELS[block.kind](gx[..., None], gy[..., None], z, params)[..., 0])
            view = nearest[i0:i1, j0:j1]
            np.minimum(view, d, out=view)
    ramp = np.clip((reach - nearest) / max(clearance_m, 1e-9), 0.0, 1.0)
    out = 1.0 + cost * ramp * ramp
    out[nearest < vehicle_radius_m] = np.inf
    return out, nearest


def _shifted(a: np.ndarray, di: int, dj: int, fill):
    """``out[i, j] = a[i + di, j + dj]``, ``fill`` where that lies outside the grid."""
    nx, ny = a.shape
    out = np.full(a.shape, fill, dtype=a.dtype)
    out[max(0, -di):nx - max(0, di), max(0, -dj):ny - max(0, dj)] = \
        a[max(0, di):nx - max(0, -di), max(0, dj):ny - max(0, -dj)]
    return out


def _graph(cell_cost: np.ndarray, cell_m: float):
    """Sparse symmetric graph of the free cells: edge weight = length x mean cost of its ends. A
    diagonal or knight move also needs the cells it cuts between free (no corner cutting)."""
    nx, ny = cell_cost.shape
    idx = np.arange(nx * ny).reshape(nx, ny)
    free = np.isfinite(cell_cost)
    rows, cols, weights = [], [], []
    for dx, dy in NEIGHBOURS:
        ok = free & _shifted(free, dx, dy, False)
        sy = int(np.sign(dy))
        if dx == 2:  # passes between (i + 1, j) and (i + 1, j + dy)
            ok &= _shifted(free, 1, 0, False) & _shifted(free, 1, dy, False)
        elif abs(dy) == 2:  # passes between (i, j + sy) and (i + 1, j + sy)
            ok &= _shifted(free, 0, sy, False) & _shifted(free, 1, sy, False)
        elif dx and dy:  # diagonal: both side cells
            ok &= _shifted(free, dx, 0, False) & _shifted(free, 0, dy, False)
        length = cell_m * float(np.hypot(dx, dy))
        w = length * 0.5 * (cell_cost + _shifted(cell_cost, dx, dy, np.inf))
        rows.append(idx[ok])
        cols.append(_shifted(idx, dx, dy, -1)[ok])
        weights.append(w[ok])
    r, c, w = np.concatenate(rows), np.concatenate(cols), np.concatenate(weights)
    return coo_matrix((w, (r, c)), shape=(nx * ny, nx * ny)).tocsr()


def guidance_grid(world, goals: np.ndarray, cell_m: float, vehicle_radius_m: float, clearance_m: float,
                  cost: float, z_range: Sequence[float]) -> GuidanceGrid:
    """The cheapest ways to each of ``goals`` (G, 3) m in ``world`` (module docstring)."""
    lo, hi = np.asarray(world.bounds_min, dtype=float), np.asarray(world.bounds_max, dtype=float)
    nx = max(2, int(np.floor((hi[0] - lo[0]) / cell_m)))
    ny = max(2, int(np.floor((hi[1] - lo[1]) / cell_m)))
    xs = lo[0] + (np.arange(nx) + 0.5) * cell_m
    ys = lo[1] + (np.arange(ny) + 0.5) * cell_m
    cell_cost, nearest = _cell_cost(world, xs, ys, cell_m, z_range, vehicle_radius_m, clearance_m, cost)
    origin = np.array([xs[0], ys[0]])
    goals = np.atleast_2d(np.asarray(goals, dtype=float))
    gi, gj = _cell_index(origin, cell_m, (nx, ny), goals[:, :2])
    cell_cost[gi, gj] = np.where(np.isfinite(cell_cost[gi, gj]), cell_cost[gi, gj], 1.0)  # a goal is never blocked
    dist, pred = dijkstra(_graph(cell_cost, cell_m), directed=False, indices=gi * ny + gj, return_predecessors=True)
    pred = np.where(pred < 0, -1, pred)
    return GuidanceGrid(origin=origin, cell_m=float(cell_m),
                        open=nearest >= vehicle_radius_m + clearance_m,
                        clear=nearest >= vehicle_radius_m + 0.25 * clearance_m,
                        distance=dist.reshape(len(goals), nx, ny), next_cell=pred)


def _cell_index(origin: np.ndarray, cell_m: float, shape, xy: np.ndarray):
    """Indices (i, j) of the cells (centre of (0, 0) at ``origin``) holding points ``xy`` (..., 2) m,
    clipped to a grid of ``shape``."""
    i = np.clip(np.rint((xy[..., 0] - origin[0]) / cell_m).astype(int), 0, shape[0] - 1)
    j = np.clip(np.rint((xy[..., 1] - origin[1]) / cell_m).astype(int), 0, shape[1] - 1)
    return i, j


def _cells(grid: GuidanceGrid, xy: np.ndarray):
    """Grid indices (i, j) of points ``xy`` (..., 2) m, clipped to the grid."""
    return _cell_index(grid.origin, grid.cell_m, grid.shape, xy)


def _line_of_sight(mask: np.ndarray, grid: GuidanceGrid, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """(...) bool: the segments ``start`` -> ``end`` (..., 2) m pass only through cells where
    ``mask`` (nx, ny) is true (sampled every half cell; the start's own cell is not checked: the
    vehicle may be in the band)."""
    length = np.linalg.norm(end - start, axis=-1)
    n = max(2, int(np.ceil(float(np.max(length, initial=0.0)) / (0.5 * grid.cell_m))) + 1)
    f = np.linspace(0.0, 1.0, n)[1:]
    pts = start[..., None, :] + f[:, None] * (end - start)[..., None, :]
    i, j = _cells(grid, pts)
    return mask[i, j].all(axis=-1)


def guide_directions(grid: GuidanceGrid, goal_index: np.ndarray, positions: np.ndarray, goals: np.ndarray,
                     lookahead_m: float):
    """Guide directions at ``positions`` (B, 3) m towards ``goals`` (B, 3) m, goal ``goal_index``
    (B,) of ``grid`` (module docstring).

    Returns (directions (B, 2) unit horizontal vectors, valid (B,) bool); not valid where the
    vehicle's cell has no way to the goal (the caller keeps its straight-line target there)."""
    positions = np.atleast_2d(np.asarray(positions, dtype=float))[:, :2]
    goals = np.atleast_2d(np.asarray(goals, dtype=float))[:, :2]
    goal_index = np.asarray(goal_index, dtype=int)
    _, ny = grid.shape
    i, j = _cells(grid, positions)
    node = i * ny + j
    valid = np.isfinite(grid.distance[goal_index, i, j])
    to_goal = goals - positions
    d_goal = np.linalg.norm(to_goal, axis=1)
    straight = to_goal / np.maximum(d_goal, 1e-9)[:, None]
    aim = positions + straight * np.minimum(d_goal, lookahead_m)[:, None]
    out = straight.copy()
    bent = valid & ~_line_of_sight(grid.open, grid, positions, aim) & (d_goal > grid.cell_m)
    if bent.any():
        k = np.nonzero(bent)[0]
        steps = max(1, int(np.ceil(lookahead_m / grid.cell_m)))
        path = np.empty((k.size, steps), dtype=int)
        cur = node[k]
        for s in range(steps):  # the cheapest path's cells, one move at a time (the goal repeats at the end)
            nxt = grid.next_cell[goal_index[k], cur]
            cur = np.where(nxt >= 0, nxt, cur)
            path[:, s] = cur
        centres = np.stack([grid.origin[0] + (path // ny) * grid.cell_m,
                            grid.origin[1] + (path % ny) * grid.cell_m], axis=-1)
        along = np.cumsum(np.linalg.norm(np.diff(np.concatenate([positions[k, None], centres], axis=1), axis=1),
                                         axis=-1), axis=1)
        # candidate aims: the next cell and every second one after it, within the look-ahead
        cand = np.arange(0, steps, 2)
        seen = _line_of_sight(grid.clear, grid, np.repeat(positions[k, None], cand.size, axis=1), centres[:, cand])
        seen &= along[:, cand] <= lookahead_m
        seen[:, 0] = True  # the next cell is always a valid aim
        far = cand[cand.size - 1 - np.argmax(seen[:, ::-1], axis=1)]
        target = centres[np.arange(k.size), far]
        delta = target - positions[k]
        norm = np.linalg.norm(delta, axis=1)
        ok = norm > 1e-6
        out[k[ok]] = delta[ok] / norm[ok, None]
    return out, valid
