"""RViz markers (``visualization_msgs``) of the planner's and the simulator's views: one marker,
the delete-all marker, a world's obstacles."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from planner_pkg.nodes.conversions import MAP_FRAME, seconds_to_stamp
from planner_pkg.types import quaternion_from_yaw

__all__ = ["marker", "delete_all_marker", "world_to_markers"]


def _color(rgba: Sequence[float]) -> ColorRGBA:
    return ColorRGBA(r=float(rgba[0]), g=float(rgba[1]), b=float(rgba[2]), a=float(rgba[3]))


def _points(points: np.ndarray) -> list:
    return [Point(x=x, y=y, z=z) for x, y, z in np.asarray(points, dtype=np.float64).reshape(-1, 3).tolist()]


def marker(ns: str, marker_id: int, kind: int, stamp_s: float, frame_id: str = MAP_FRAME, *, points=None,
           position=(0.0, 0.0, 0.0), scale=(0.1, 0.1, 0.1), rgba=(1.0, 1.0, 1.0, 1.0), yaw: float = 0.0) -> Marker:
    """One ADD marker. ``points`` (N, 3) for LINE_STRIP / SPHERE_LIST / CUBE_LIST / POINTS."""
    m = Marker()
    m.header.stamp = seconds_to_stamp(stamp_s)
    m.header.frame_id = frame_id
    m.ns, m.id, m.type, m.action = ns, int(marker_id), int(kind), Marker.ADD
    m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in position)
    q = quaternion_from_yaw(yaw)
    m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z, m.pose.orientation.w = q.tolist()
    m.scale.x, m.scale.y, m.scale.z = (float(v) for v in scale)
    m.color = _color(rgba)
    if points is not None:
        m.points = _points(points)
    return m


def delete_all_marker() -> Marker:
    m = Marker()
    m.action = Marker.DELETEALL
    return m


def world_to_markers(world, stamp_s: float = 0.0, frame_id: str = MAP_FRAME) -> MarkerArray:
    """Obstacles of a World as CYLINDER / CUBE / SPHERE markers (namespace ``obstacles``)."""
    from planner_pkg.world import Box, Cylinder, Sphere

    out = MarkerArray()
    out.markers.append(delete_all_marker())
    grey = (0.45, 0.35, 0.25, 0.9)
    for i, ob in enumerate(world.obstacles):
        if isinstance(ob, Cylinder):
            cx, cy = (float(v) for v in ob.center)
            h = float(ob.height)
            m = marker("obstacles", i, Marker.CYLINDER, stamp_s, frame_id, position=(cx, cy, 0.5 * h),
                       scale=(2 * ob.radius, 2 * ob.radius, h), rgba=grey)
        elif isinstance(ob, Box):
            m = marker("obstacles", i, Marker.CUBE, stamp_s, frame_id, position=tuple(ob.center),
                       scale=tuple(ob.size), rgba=grey, yaw=float(getattr(ob, "yaw", 0.0)))
        elif isinstance(ob, Sphere):
            d = 2 * float(ob.radius)
            m = marker("obstacles", i, Marker.SPHERE, stamp_s, frame_id, position=tuple(ob.center),
                       scale=(d, d, d), rgba=grey)
        else:  # pragma: no cover - World only holds the three primitives
            continue
        out.markers.append(m)
    return out
