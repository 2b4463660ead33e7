"""Configuration of the live view (:class:`planner_pkg.viz.foxglove_live.LiveView`)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from planner_pkg.config_schema import Config, setting

__all__ = ["LiveViewConfig", "DEFAULT_PORT"]

#: Foxglove's usual WebSocket port (foxglove_bridge uses it too).
DEFAULT_PORT = 8765

_INF = math.inf


def _rate(default: float, what: str):
    return setting(default, range=(0.0, 1000.0), low_open=True,
                   description=f"most {what} messages per wall second, Hz")


@dataclass(frozen=True)
class LiveViewConfig(Config):
    """Port, host and rate limits of the Foxglove live server.

    port: TCP port of the WebSocket server; 0 = any free port (the server reports which).
    host: address to bind: ``127.0.0.1`` (this machine only) or ``0.0.0.0`` (every interface,
        to watch from another machine).
    *_rate_hz: the most messages of each kind per *wall* second; a newer sample within the period
        is dropped before it is queued (the viewer cannot show more, and the simulation must not
        pay for them).
    queue_size: the publisher thread's queue; when it is full the oldest sample is dropped.
    max_cloud_points: a larger point cloud is thinned with a regular stride to at most this many.
    trajectory_samples: points per drawn trajectory; trajectory_horizon_s: how far ahead a
        trajectory without an end time is drawn, s.
    path_spacing_m: the flown path keeps a point every this many metres; max_path_points: when
        it has this many, every other point is dropped (the whole flight stays drawn).
    """

    port: int = setting(DEFAULT_PORT, range=(0, 65535), description="WebSocket port (0 = any free port)")
    host: str = setting("127.0.0.1", description="address to bind (0.0.0.0 = every interface)")
    pose_rate_hz: float = _rate(30.0, "vehicle pose and speed")
    trajectory_rate_hz: float = _rate(5.0, "planned trajectory")
    image_rate_hz: float = _rate(10.0, "depth image")
    cloud_rate_hz: float = _rate(5.0, "point cloud")
    path_rate_hz: float = _rate(2.0, "flown path")
    replan_rate_hz: float = _rate(20.0, "replan time")
    queue_size: int = setting(64, range=(1, 100_000), description="publisher queue length (oldest dropped)")
    max_cloud_points: int = setting(20_000, range=(1, 10_000_000), description="most points per cloud")
    trajectory_samples: int = setting(60, range=(2, 10_000), description="points per drawn trajectory")
    trajectory_horizon_s: float = setting(4.0, range=(0.0, 600.0), low_open=True,
                                          description="drawn horizon of a trajectory without an end, s")
    path_spacing_m: float = setting(0.1, range=(0.0, _INF), low_open=True,
                                    description="flown path: least distance between kept points, m")
    max_path_points: int = setting(5000, range=(2, 10_000_000), description="flown path: most points kept")
    map_frame: str = setting("map", description="world frame (ENU)")
    base_frame: str = setting("base_link", description="vehicle body frame (FLU)")
    camera_frame: str = setting("camera_optical", description="depth camera optical frame")

    def _check(self):
        if not self.host.strip():
            raise self._error("host", "must be an address such as 127.0.0.1 or 0.0.0.0")
        frames = (self.map_frame, self.base_frame, self.camera_frame)
        if any(not f for f in frames) or len(set(frames)) != 3:
            raise self._error("map_frame", f"the three frames must be distinct non-empty names, got {frames}")
