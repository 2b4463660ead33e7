"""Reading a recorded run (the ``recorder`` node's MCAP) back, without ROS: flight log, goal, summary, plot.

Only ``mcap`` and ``mcap-ros2-support`` (the ``record`` extra) are needed: messages are decoded
from the schemas stored in the file, so no ROS message package is imported. The recorded
``odom`` becomes the :class:`~planner_pkg.sim.flight_log.FlightLog` the plot and ``flight.csv``
use (time = ``header.stamp``, world velocity = the body twist rotated by the orientation, as
``conversions.odometry_to_state`` does); the first ``goal_pose`` is the goal, sent at its receive
time. :func:`summarize` judges the flight from that goal with the bringup mission's own judge
(:class:`~planner_pkg.sim.mission_judge.MissionJudge`: the simulator's recorded ground truth, the
``sim_bridge`` status, where there is one; odometry in time order, inside the flight envelope)
and cuts the log where the mission would have ended.

``python -m planner_pkg plot RUN.mcap --world W.yaml -o flight.png [--summary out.json]`` (the
command lives in :mod:`planner_pkg.cli`) draws the same figure as ``fly --plot`` / ``bringup
--plot`` from a recording with :func:`read_run` and :func:`summarize`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from planner_pkg.envelope import DEFAULT_ENVELOPE
from planner_pkg.sim.flight_log import EpisodeSummary, FlightLog
from planner_pkg.sim.mission_judge import (GOAL_TOLERANCE_M, MISSION_TIMEOUT_S, GroundTruth, MissionJudge,
                                           ground_truth_from_status)

TOPIC_ODOM, TOPIC_GOAL, TOPIC_STATUS = "odom", "goal_pose", "status"


class RecordingError(ValueError):
    """The file is missing, not a readable MCAP, or lacks what was asked for."""


def _require_mcap():
    try:
        from mcap.reader import make_reader
        from mcap_ros2.decoder import DecoderFactory
    except ImportError:
        raise RecordingError("reading MCAP recordings needs mcap-ros2-support: "
                             "pip install 'planner_pkg[record]' (or pip install mcap-ros2-support)") from None
    return make_reader, DecoderFactory


def _matches(topic: str, name: str) -> bool:
    """``/odom`` and ``/drone1/odom`` match ``odom``; an absolute name matches only itself."""
    if name.startswith("/"):
        return topic == name
    return topic == "/" + name or topic.endswith("/" + name)


def iter_messages(path, topics: Optional[Sequence[str]] = None) -> Iterator[Tuple[str, int, int, object]]:
    """``(topic, log_time_ns, publish_time_ns, decoded message)`` in log-time order.

    ``topics``: relative names (any namespace) or absolute ones; None = all. Only the messages
    asked for are decoded (images and clouds cost nothing when only odometry is wanted)."""
    make_reader, DecoderFactory = _require_mcap()
    p = Path(path)
    if not p.is_file():
        raise RecordingError(f"recording {str(path)!r} does not exist")
    factory = DecoderFactory()
    decoders: dict = {}
    with open(p, "rb") as fh:
        try:
            reader, complete = make_reader(fh), True
            try:
                complete = reader.get_summary() is not None
            except Exception:  # noqa: BLE001 - no footer/summary: the recorder was killed
                complete = False
            if not complete:  # read the chunks that made it to disk, in file order
                from mcap.reader import NonSeekingReader

                fh.seek(0)
                reader = NonSeekingReader(fh)
            for schema, channel, message in _tolerant(reader.iter_messages(log_time_order=complete), complete):
                if topics is not None and not any(_matches(channel.topic, t) for t in topics):
                    continue
                decode = decoders.get(channel.id)
                if decode is None:
                    decode = factory.decoder_for(channel.message_encoding, schema)
                    if decode is None:
                        raise RecordingError(f"{channel.topic}: cannot decode {channel.message_encoding!r} "
                                             f"messages with a {getattr(schema, 'encoding', None)!r} schema")
                    decoders[channel.id] = decode
                yield channel.topic, message.log_time, message.publish_time, decode(message.data)
        except RecordingError:
            raise
        except Exception as exc:  # noqa: BLE001 - the mcap readers raise many types for a bad file
            raise RecordingError(f"cannot read {str(path)!r} as an MCAP recording: {type(exc).__name__}: {exc}") \
                from None


def _tolerant(records, complete: bool):
    """All records of a finished file; those before the damage in an unfinished one."""
    if complete:
        yield from records
        return
    count = 0
    try:
        for record in records:
            count += 1
            yield record
    except Exception:  # noqa: BLE001 - truncated chunk / missing footer: stop at the last good record
        if count == 0:
            raise


def _stamp_s(stamp) -> float:
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


def _quat_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    n = math.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def odom_sample(msg) -> Optional[Tuple[float, np.ndarray, np.ndarray]]:
    """``(t, position, world velocity)`` of a decoded nav_msgs/Odometry, or None when unusable
    (what ``conversions.odometry_to_state`` refuses: non-finite, outside the flight envelope, a
    frame other than ``map`` / ``base_link``)."""
    if str(msg.header.frame_id).lstrip("/") not in ("", "map") or \
            str(msg.child_frame_id).lstrip("/") not in ("", "base_link"):
        return None
    pose, twist = msg.pose.pose, msg.twist.twist
    p, q, v = pose.position, pose.orientation, twist.linear
    values = (p.x, p.y, p.z, q.x, q.y, q.z, q.w, v.x, v.y, v.z)
    if not all(math.isfinite(c) for c in values) or not 1e-6 <= max(abs(c) for c in values[3:7]) <= 1e6:
        return None
    try:
        DEFAULT_ENVELOPE.check_position("odometry position", values[0:3])
        DEFAULT_ENVELOPE.check_speed("odometry velocity", values[7:10])
    except ValueError:
        return None
    velocity = _quat_matrix(q.x, q.y, q.z, q.w) @ np.array([v.x, v.y, v.z])
    return _stamp_s(msg.header.stamp), np.array([p.x, p.y, p.z]), velocity


@dataclass
class RecordedRun:
    """What a recording says about one flight."""

    log: FlightLog
    goal: Optional[np.ndarray] = None
    goal_time_s: Optional[float] = None  # receive time (recorder's clock: sim time in the sim graph)
    replan_ms: List[float] = field(default_factory=list)  # the planner's replan_ms_median status values
    counts: dict = field(default_factory=dict)  # odom, goal_pose, status messages per topic
    truth: List[GroundTruth] = field(default_factory=list)  # the simulator's status reports, in order


def read_run(path) -> RecordedRun:
    """The odometry, goal and planner status of a recording (RecordingError without odometry)."""
    log = FlightLog()
    run = RecordedRun(log)
    for topic, log_time, _pub, msg in iter_messages(path, (TOPIC_ODOM, TOPIC_GOAL, TOPIC_STATUS)):
        run.counts[topic] = run.counts.get(topic, 0) + 1
        if _matches(topic, TOPIC_ODOM):
            sample = odom_sample(msg)
            if sample is not None:
                log.append(*sample)
        elif _matches(topic, TOPIC_GOAL) and run.goal is None:
            p = msg.pose.position
            run.goal = np.array([p.x, p.y, p.z], dtype=float)
            run.goal_time_s = log_time * 1e-9
        elif _matches(topic, TOPIC_STATUS) and msg.status:
            st = msg.status[0]
            values = {kv.key: kv.value for kv in st.values}
            if st.name.endswith("planner"):
                try:
                    run.replan_ms.append(float(values.get("replan_ms_median", "n/a")))
                except ValueError:
                    pass
            elif st.name.endswith("sim_bridge"):
                try:
                    truth = ground_truth_from_status(dict(values, message=st.message))
                except ValueError:
                    truth = None  # a malformed report is no ground truth
                if truth is not None and truth.position is not None:
                    run.truth.append(truth)
    if len(log) == 0:
        raise RecordingError(f"{str(path)!r} has no odometry ('odom' messages); recorded topics: "
                             f"{sorted(run.counts) or 'none'}")
    return run


def summarize(run: RecordedRun, world, goal=None, tolerance_m: float = GOAL_TOLERANCE_M,
              timeout_s: float = MISSION_TIMEOUT_S, radius_m: Optional[float] = None, planner: str = "(recorded)",
              world_name: str = "") -> Tuple[EpisodeSummary, FlightLog]:
    """The flight judged like the bringup mission (same judge, fed the recording in time order):
    from the goal's time, the first of collision, reached (by the recorded simulator ground truth
    where the recording has it) or timeout; the returned log is that flight, from the goal to
    there (``MissionJudge.flight_log``, as ``bringup --log`` writes it). Without a goal (none
    recorded nor given) the whole run is plotted and the reason is ``no_goal``."""
    if radius_m is None:
        from planner_pkg.sim.params import QuadrotorParams

        radius_m = QuadrotorParams().collision_radius_m
    goal = run.goal if goal is None else np.asarray(goal, dtype=float)
    data = run.log.as_array()
    if goal is None:
        summary = EpisodeSummary(
            reached=False, collided=False, time_s=0.0, path_length_m=0.0, min_clearance_m=None,
            replan_ms_median=None, replan_ms_p95=None, reason="no_goal", mean_speed_mps=None, max_speed_mps=None,
            final_goal_distance_m=None, seed=None, planner=planner, vehicle="quadrotor", world=world_name,
            start=data[0, 1:4].tolist() if len(data) else [], planner_calls=None, bad_setpoints=None,
            depth_frames=None, wall_time_s=None, message="from a recording (MCAP); no goal")
        return summary, run.log
    judge = MissionJudge(world, goal, tolerance_m, timeout_s, radius_m, ground_truth_expected=bool(run.truth))
    t_goal = run.goal_time_s if run.goal_time_s is not None else (float(data[0, 0]) if len(data) else 0.0)
    events = [(float(row[0]), 0, i) for i, row in enumerate(data)] + \
        [(truth.t, 1, i) for i, truth in enumerate(run.truth)]
    for t, kind, i in sorted(events):  # time order; at equal times odometry first
        if judge.done:
            break
        if not judge.started and t >= t_goal:
            judge.start(t_goal)
        if kind == 0:
            judge.odometry(t, data[i, 1:4], data[i, 4:7])
        else:
            judge.ground_truth(run.truth[i])
    if not judge.started:
        judge.start(t_goal)
    summary = judge.summary(planner, world_name, replan_ms=run.replan_ms,
                            message="from a recording (MCAP)" + ("; simulator ground truth" if run.truth else ""))
    summary.wall_time_s = None  # not in a recording
    return summary, judge.flight_log()
