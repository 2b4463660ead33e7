"""``flight.png``: top-down map (obstacles, flown path, start, goal, collision) and speed vs time.

matplotlib is an optional dependency (the ``plots`` extra) and is imported only here, lazily,
with the Agg backend so plotting works on headless machines.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from planner_pkg.sim.flight_log import EpisodeSummary, FlightLog


class PlottingUnavailableError(RuntimeError):
    """matplotlib is not installed."""


def require_pyplot():
    try:
        import matplotlib
    except ImportError:
        raise PlottingUnavailableError(
            "plotting needs matplotlib, which is not installed: pip install 'planner_pkg[plots]' "
            "(or pip install matplotlib), or drop --plot"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _draw_obstacles(ax, world, patches) -> None:
    for ob in world.obstacles:
        kind = getattr(ob, "TYPE", type(ob).__name__.lower())
        style = dict(facecolor="0.55", edgecolor="0.3", linewidth=0.5)
        if kind == "cylinder":
            ax.add_patch(patches.Circle(ob.center, ob.radius, **style))
        elif kind == "sphere":
            ax.add_patch(patches.Circle(ob.center[:2], ob.radius, alpha=0.7, **style))
        elif kind == "box":
            sx, sy, _ = ob.size
            c, s = math.cos(ob.yaw), math.sin(ob.yaw)
            half = np.array([[-sx, -sy], [sx, -sy], [sx, sy], [-sx, sy]]) * 0.5
            corners = half @ np.array([[c, s], [-s, c]]) + np.asarray(ob.center[:2])
            ax.add_patch(patches.Polygon(corners, closed=True, **style))
        else:
            raise ValueError(f"cannot draw obstacle type {kind!r}")


def plot_flight(path, world, log: FlightLog, summary: Optional[EpisodeSummary] = None, title: str = "") -> None:
    """Write a PNG to ``path``: the map seen from above and the speed over time."""
    plt = require_pyplot()
    from matplotlib import patches

    data = log.as_array()
    t, pos, vel = data[:, 0], data[:, 1:4], data[:, 4:7]
    lo, hi = np.asarray(world.bounds_min), np.asarray(world.bounds_max)
    map_height = float(np.clip(9.0 * (hi[1] - lo[1]) / (hi[0] - lo[0]), 2.5, 8.0))  # keep the map's aspect
    fig, (ax_map, ax_speed) = plt.subplots(
        2, 1, figsize=(10, map_height + 3.0), gridspec_kw={"height_ratios": [map_height, 2.2]}, constrained_layout=True
    )
    _draw_obstacles(ax_map, world, patches)
    ax_map.add_patch(patches.Rectangle(lo[:2], *(hi - lo)[:2], fill=False, linestyle="--", edgecolor="0.5"))
    if len(pos):
        ax_map.plot(pos[:, 0], pos[:, 1], "-", color="tab:blue", linewidth=1.5, label="flown path")
    if summary is not None:
        if summary.start:
            ax_map.plot(*summary.start[:2], "o", color="tab:green", markersize=8, label="start")
        if summary.goal:
            ax_map.plot(*summary.goal[:2], "*", color="tab:orange", markersize=14, label="goal")
        if summary.collision_position:
            ax_map.plot(*summary.collision_position[:2], "x", color="tab:red", markersize=12, mew=3, label="collision")
        outcome = f"{summary.reason}, {summary.time_s:.1f} s, {summary.path_length_m:.1f} m"
        title = f"{title} ({outcome})" if title else outcome
    ax_map.set_xlim(lo[0], hi[0])
    ax_map.set_ylim(lo[1], hi[1])
    ax_map.set_aspect("equal")
    ax_map.set_xlabel("x east [m]")
    ax_map.set_ylabel("y north [m]")
    ax_map.set_title(title)
    ax_map.legend(loc="upper right", fontsize=8)
    ax_speed.plot(t, np.linalg.norm(vel, axis=1), color="tab:blue")
    ax_speed.set_xlabel("t [s]")
    ax_speed.set_ylabel("speed [m/s]")
    ax_speed.grid(True, alpha=0.3)
    fig.savefig(path, dpi=110)
    plt.close(fig)
