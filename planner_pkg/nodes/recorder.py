"""Node ``recorder``: the graph's topics into one MCAP file (ROS 2 profile) that Foxglove and ``ros2 bag`` open.

Every topic is subscribed *serialized* (``raw=True``): the CDR bytes that came over DDS are
written as they are, so recording costs no deserialization and the file holds exactly what was
on the wire (what ``ros2 bag record`` does). The MCAP follows the ``ros2`` profile that
``mcap-ros2-support``'s writer produces and ``rosbag2_storage_mcap`` reads:

* one Schema per message type, encoding ``ros2msg``, name ``pkg/msg/Type``, data = the type's
  ``.msg`` text followed by every type it uses (``====...`` + ``MSG: pkg/msg/Type`` blocks), read
  from the installed interface packages' ``share/<pkg>/msg/*.msg`` (ament index);
* one Channel per topic (fully qualified name, ``/drone1/odom`` in a namespace), encoding ``cdr``,
  metadata ``offered_qos_profiles`` (the publishers' QoS as rosbag2 writes it);
* messages with ``log_time`` = receive time on the node's clock (sim time under
  ``use_sim_time``, like ``ros2 bag record --use-sim-time``) and ``publish_time`` = the message's
  ``header.stamp`` (``Clock``: its ``clock``) where the type has one, else the receive time.

The default topics are every topic of DESIGN.md's graph with its contract QoS (``common``); the
subscription keeps a deeper history than the publishers (``MIN_DEPTH``) so a busy moment does
not drop messages. A topic outside that table is subscribed once it appears on the graph (type
and QoS from its publishers, the way ``ros2 bag`` adapts). ``max_size_mb`` / ``max_duration_s``
(0 = no limit) end the recording (the file is finished and stays readable); so does a write
error (disk full...), which is logged once while the node keeps running and reports it in
``status``. The file is finished (summary, index, CRCs) when the node is closed or destroyed:
Ctrl-C / SIGTERM via :func:`~planner_pkg.nodes.common.run_node` and the bringup's stop both
go through :meth:`Recorder.close`.
"""
from __future__ import annotations

import importlib
import re
import struct
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import QoSProfile

from planner_pkg.config_schema import Config
from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes.params import ConfigParameters, ParameterConfigError

NODE_NAME = "recorder"
MIN_DEPTH = 50  # history kept by the recorder's subscriptions (reliable topics are never dropped below this)

# DESIGN.md's graph: topic -> (type, contract QoS)
KNOWN_TOPICS: Dict[str, Tuple[str, QoSProfile]] = {
    c.TOPIC_CLOCK: ("rosgraph_msgs/msg/Clock", c.CLOCK_QOS),
    c.TOPIC_ODOM: ("nav_msgs/msg/Odometry", c.ODOM_QOS),
    c.TOPIC_DEPTH: ("sensor_msgs/msg/Image", c.SENSOR_QOS),
    c.TOPIC_CLOUD: ("sensor_msgs/msg/PointCloud2", c.SENSOR_QOS),
    c.TOPIC_GOAL: ("geometry_msgs/msg/PoseStamped", c.GOAL_QOS),
    c.TOPIC_SETPOINT: ("trajectory_msgs/msg/MultiDOFJointTrajectory", c.SETPOINT_QOS),
    c.TOPIC_TRAJECTORY: ("trajectory_msgs/msg/MultiDOFJointTrajectory", c.TRAJECTORY_QOS),
    c.TOPIC_PLANNING_MARKERS: ("visualization_msgs/msg/MarkerArray", c.MARKERS_QOS),
    c.TOPIC_MAP_MARKERS: ("visualization_msgs/msg/MarkerArray", c.LATCHED_QOS),
    c.TOPIC_STATUS: ("diagnostic_msgs/msg/DiagnosticArray", c.STATUS_QOS),
}
DEFAULT_TOPICS = tuple(KNOWN_TOPICS)


def known_topic(name: str) -> Optional[Tuple[str, QoSProfile]]:
    """(type, contract QoS) of a topic of DESIGN.md's graph: by its relative name (``odom``) or in a
    namespace (``/drone1/odom``, a swarm drone's); None for any other topic (found by discovery)."""
    if name in KNOWN_TOPICS:
        return KNOWN_TOPICS[name]
    if name.startswith("/"):
        parts = name[1:].split("/", 1)
        if len(parts) == 2 and parts[0] and parts[1] in KNOWN_TOPICS:
            return KNOWN_TOPICS[parts[1]]
    return None
COMPRESSIONS = ("zstd", "lz4", "none")


@dataclass(frozen=True)
class RecorderConfig(Config, prefix=""):
    """Parameters of the ``recorder`` node."""

    output: str = field(default="", metadata={"read_only": True, "description":
                        "MCAP file to write (parent folders are created; an existing file is replaced)"})
    topics: Tuple[str, ...] = field(default=DEFAULT_TOPICS, metadata={"read_only": True, "description":
                                    "topics to record (relative names follow the node's namespace)"})
    max_size_mb: float = field(default=0.0, metadata={"range": (0.0, 1.0e6), "description":
                               "stop recording when the file reaches this size, MB (0 = no limit)"})
    max_duration_s: float = field(default=0.0, metadata={"range": (0.0, 1.0e7), "description":
                                  "stop recording after this long on the node's clock, s (0 = no limit)"})
    compression: str = field(default="zstd", metadata={"choices": COMPRESSIONS, "read_only": True,
                                                       "description": "chunk compression"})
    chunk_size_kb: int = field(default=1024, metadata={"range": (16, 65536), "read_only": True, "description":
                               "chunk size, KiB (what a killed recorder can lose at most)"})
    discovery_period_s: float = field(default=1.0, metadata={"range": (0.1, 60.0), "description":
                                      "how often topics outside the known graph are looked for, s"})
    status_rate_hz: float = field(default=1.0, metadata={"range": (0.1, 50.0), "description": "status rate, Hz"})

    def _check(self):
        if not self.topics or any(not t.strip() for t in self.topics):
            raise self._error("topics", "must name at least one topic, and no empty names")
        if len(set(self.topics)) != len(self.topics):
            raise self._error("topics", f"lists a topic twice: {list(self.topics)}")


# ---------------------------------------------------------------------------------------------
# message definitions (ros2msg schemas)
# ---------------------------------------------------------------------------------------------
_PRIMITIVES = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
               "uint32", "int64", "uint64", "string", "wstring"}
_SEPARATOR = "=" * 80


def _msg_file(full_type: str) -> Path:
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    pkg, _, name = full_type.split("/")
    try:
        share = Path(get_package_share_directory(pkg))
    except (PackageNotFoundError, LookupError, ValueError) as exc:
        raise LookupError(f"no interface package {pkg!r} in the ament index ({exc})") from None
    path = share / "msg" / f"{name}.msg"
    if not path.is_file():
        raise LookupError(f"no message definition {path}")
    return path


def _field_types(text: str, pkg: str) -> List[str]:
    """``pkg/msg/Type`` of each non-primitive field of a .msg text (in order, repeats kept)."""
    out = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) < 2 or "=" in parts[1]:
            continue  # a constant
        base = re.sub(r"\[.*?\]$", "", parts[0])  # arrays
        base = re.sub(r"<=\d+$", "", base)  # bounded strings
        if base in _PRIMITIVES:
            continue
        if "/" in base:
            bits = base.split("/")
            dep_pkg, dep_name = bits[0], bits[-1]
        else:
            dep_pkg, dep_name = ("std_msgs", "Header") if base == "Header" else (pkg, base)
        out.append(f"{dep_pkg}/msg/{dep_name}")
    return out


def message_definition(full_type: str) -> str:
    """The complete ``ros2msg`` definition of ``pkg/msg/Type`` (rosbag2's message_definition_encoding).

    LookupError when a definition is not installed."""
    texts: Dict[str, str] = {}
    order: List[str] = []
    pending = [full_type]
    while pending:
        t = pending.pop(0)
        if t in texts:
            continue
        text = _msg_file(t).read_text()
        texts[t] = text.rstrip("\n")
        order.append(t)
        pending.extend(d for d in _field_types(text, t.split("/")[0]) if d not in texts)
    parts = [texts[full_type]]
    for t in order[1:]:
        parts.append(f"{_SEPARATOR}\nMSG: {t}\n{texts[t]}")
    return "\n".join(parts) + "\n"


def _stamp_offset(full_type: str) -> Optional[int]:
    """Byte offset of a leading ``builtin_interfaces/Time`` in the CDR payload (after the 4-byte
    encapsulation header), or None: types whose first field is a ``std_msgs/Header``, and Clock."""
    if full_type == "rosgraph_msgs/msg/Clock":
        return 4
    try:
        text = _msg_file(full_type).read_text()
    except LookupError:
        return None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            return 4 if line.split()[0] in ("std_msgs/Header", "Header") else None
    return None


def header_stamp_ns(data: bytes, offset: Optional[int]) -> Optional[int]:
    """Nanoseconds of the stamp at ``offset`` in a CDR message, or None."""
    if offset is None or len(data) < offset + 8:
        return None
    endian = "<" if data[1] & 1 else ">"  # encapsulation: 0x0001 CDR_LE, 0x0000 CDR_BE
    sec, nsec = struct.unpack_from(endian + "iI", data, offset)
    if sec < 0 or nsec >= 1_000_000_000:
        return None
    return sec * 1_000_000_000 + nsec


# ---------------------------------------------------------------------------------------------
# QoS as rosbag2 writes it (offered_qos_profiles, metadata version 9+)
# ---------------------------------------------------------------------------------------------
def _duration(d) -> str:
    ns = d.nanoseconds if hasattr(d, "nanoseconds") else int(d)
    if ns < 0:
        ns = 0x7FFFFFFFFFFFFFFF
    return f"{{sec: {ns // 1_000_000_000}, nsec: {ns % 1_000_000_000}}}"


def _policy(value) -> str:
    return getattr(value, "name", str(value)).lower()


def qos_profiles_yaml(profiles) -> str:
    """``offered_qos_profiles`` text for the MCAP channel metadata (a YAML list)."""
    lines = []
    for q in profiles:
        lines += [f"- history: {_policy(q.history)}", f"  depth: {int(q.depth)}",
                  f"  reliability: {_policy(q.reliability)}", f"  durability: {_policy(q.durability)}",
                  f"  deadline: {_duration(q.deadline)}", f"  lifespan: {_duration(q.lifespan)}",
                  f"  liveliness: {_policy(q.liveliness)}",
                  f"  liveliness_lease_duration: {_duration(q.liveliness_lease_duration)}",
                  f"  avoid_ros_namespace_conventions: {'true' if q.avoid_ros_namespace_conventions else 'false'}"]
    return "\n".join(lines) + ("\n" if lines else "")


def _import_type(full_type: str):
    pkg, sub, name = full_type.split("/")
    return getattr(importlib.import_module(f"{pkg}.{sub}"), name)


class McapFile:
    """The MCAP writer of the recorder: schemas, channels and raw CDR messages (no ROS import)."""

    def __init__(self, path: Path, compression: str = "zstd", chunk_size: int = 1 << 20):
        from mcap.well_known import MessageEncoding, SchemaEncoding
        from mcap.writer import CompressionType, Writer

        self.path = path
        self._fh = open(path, "wb")  # OSError for a bad path
        kind = {"zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4, "none": CompressionType.NONE}[compression]
        self._writer = Writer(self._fh, chunk_size=chunk_size, compression=kind)
        try:
            import mcap_ros2

            library = f"planner_pkg recorder (mcap-ros2-support {mcap_ros2.__version__})"
        except ImportError:  # pragma: no cover - the bringup requires it
            library = "planner_pkg recorder"
        self._writer.start(profile="ros2", library=library)
        self._schema_encoding, self._cdr = SchemaEncoding.ROS2, MessageEncoding.CDR
        self._schemas: Dict[str, int] = {}
        self.finished = False

    def add_channel(self, topic: str, full_type: str, definition: str, qos_yaml: str) -> int:
        schema_id = self._schemas.get(full_type)
        if schema_id is None:
            schema_id = self._writer.register_schema(full_type, self._schema_encoding, definition.encode())
            self._schemas[full_type] = schema_id
        return self._writer.register_channel(topic, self._cdr, schema_id, {"offered_qos_profiles": qos_yaml})

    def write(self, channel_id: int, data: bytes, log_time: int, publish_time: int, sequence: int) -> None:
        self._writer.add_message(channel_id, log_time, data, publish_time, sequence)

    def size(self) -> int:
        return self._fh.tell()

    def finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        try:
            self._writer.finish()
        finally:
            self._fh.close()

    def abandon(self) -> None:
        """After a write error: close the file without the summary (best effort)."""
        self.finished = True
        try:
            self._fh.close()
        except OSError:
            pass


class _Topic:
    __slots__ = ("name", "full_type", "channel", "stamp_offset", "count", "sequence", "definition", "qos")

    def __init__(self, name, full_type, definition, stamp_offset, qos):
        self.name, self.full_type, self.definition = name, full_type, definition
        self.stamp_offset, self.qos = stamp_offset, qos
        self.channel: Optional[int] = None
        self.count = 0
        self.sequence = 0


class Recorder(Node):
    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.params = ConfigParameters(self, RecorderConfig)
        cfg = self.params.config
        self.log = self.get_logger()
        self.throttle = c.Throttle(30.0)
        self._lock = threading.Lock()
        self.file: Optional[McapFile] = None
        self.state = "starting"
        self.error = ""
        self.messages = 0
        self.t0_ns: Optional[int] = None
        self.topics: Dict[str, _Topic] = {}
        self._waiting: List[str] = []
        self.output = self._open(cfg)
        self.pub_status = self.create_publisher(DiagnosticArray, c.TOPIC_STATUS, c.STATUS_QOS)
        for name in cfg.topics:
            known = known_topic(name)
            if known is None:
                self._waiting.append(name)
            else:
                self._subscribe(name, known[0], known[1])
        if self._waiting:
            self.create_timer(cfg.discovery_period_s, self._discover)
        self.create_timer(1.0 / cfg.status_rate_hz, self._publish_status)
        self.state = "recording"
        self.log.info(f"recording {len(cfg.topics)} topics to {self.output}")

    # -- setup ------------------------------------------------------------------------------------
    def _open(self, cfg: RecorderConfig) -> Path:
        if not cfg.output.strip():
            raise ParameterConfigError("parameter 'output' refused: give the MCAP file to write (-p output:=run.mcap)")
        path = Path(cfg.output).expanduser()
        if path.is_dir():
            raise ParameterConfigError(f"parameter 'output' = {cfg.output!r} refused: it is a directory")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.file = McapFile(path, cfg.compression, cfg.chunk_size_kb * 1024)
        except OSError as exc:
            raise ParameterConfigError(
                f"parameter 'output' = {cfg.output!r} refused: cannot write it ({exc})") from None
        return path

    def _subscribe(self, name: str, full_type: str, qos: QoSProfile) -> None:
        try:
            msg_type = _import_type(full_type)
            definition = message_definition(full_type)
        except (ImportError, AttributeError, LookupError, ValueError, OSError) as exc:
            self.log.error(f"cannot record {name} ({full_type}): {exc}")
            return
        deep = QoSProfile(history=qos.history, depth=max(int(qos.depth), MIN_DEPTH), reliability=qos.reliability,
                          durability=qos.durability)
        topic = _Topic(name, full_type, definition, _stamp_offset(full_type), qos)
        sub = self.create_subscription(msg_type, name, lambda data, t=topic: self._on_message(t, data), deep, raw=True)
        topic.name = sub.topic_name  # fully qualified
        self.topics[name] = topic

    def _discover(self) -> None:
        """Subscribe topics outside the known graph once they are published (QoS adapted to the offers)."""
        from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

        if not self._waiting:
            return
        for name in list(self._waiting):
            full = self.resolve_topic_name(name)
            infos = self.get_publishers_info_by_topic(full)
            if not infos:
                continue
            types = {i.topic_type for i in infos}
            if len(types) != 1:
                if self.throttle(name):
                    self.log.warning(f"{full} has publishers of several types {sorted(types)}; not recorded")
                continue
            profiles = [i.qos_profile for i in infos]
            reliable = all(p.reliability == ReliabilityPolicy.RELIABLE for p in profiles)
            latched = all(p.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in profiles)
            qos = QoSProfile(depth=MIN_DEPTH,
                             reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)
            self._waiting.remove(name)
            self._subscribe(name, types.pop(), qos)

    # -- recording --------------------------------------------------------------------------------
    def _on_message(self, topic: _Topic, data: bytes) -> None:
        now = self.get_clock().now().nanoseconds
        with self._lock:
            if self.file is None or self.file.finished:
                return
            try:
                if topic.channel is None:
                    topic.channel = self.file.add_channel(topic.name, topic.full_type, topic.definition,
                                                          self._offered_qos(topic))
                stamp = header_stamp_ns(data, topic.stamp_offset)
                self.file.write(topic.channel, data, now, now if stamp is None else stamp, topic.sequence)
                topic.sequence += 1
                topic.count += 1
                self.messages += 1
                if self.t0_ns is None:
                    self.t0_ns = now
                if self.messages % 64 == 0:
                    self._check_limits(now)
            except Exception as exc:  # noqa: BLE001 - any write failure ends the recording, not the node
                self.error = f"{type(exc).__name__}: {exc}"
                self.state = "write error"
                self.file.abandon()
                self.log.error(f"recording stopped: cannot write {self.output}: {self.error}")

    def _offered_qos(self, topic: _Topic) -> str:
        try:
            profiles = [i.qos_profile for i in self.get_publishers_info_by_topic(topic.name)]
        except Exception:  # noqa: BLE001 - graph query during shutdown
            profiles = []
        return qos_profiles_yaml(profiles or [topic.qos])

    def _check_limits(self, now_ns: int) -> None:
        cfg = self.params.config
        reason = ""
        if cfg.max_size_mb > 0 and self.file.size() >= cfg.max_size_mb * 1e6:
            reason = f"the file reached max_size_mb = {cfg.max_size_mb:g}"
        elif cfg.max_duration_s > 0 and self.t0_ns is not None and now_ns - self.t0_ns >= cfg.max_duration_s * 1e9:
            reason = f"max_duration_s = {cfg.max_duration_s:g} s passed"
        if reason:
            self.file.finish()
            self.state = "limit reached"
            self.log.warning(f"recording stopped ({self.messages} messages in {self.output}): {reason}")

    def _publish_status(self) -> None:
        level = {"recording": "ok", "limit reached": "warn", "closed": "ok"}.get(self.state, "error")
        values = [("file", str(self.output)), ("messages", self.messages),
                  ("bytes", self.file.size() if self.file is not None and not self.file.finished else "n/a"),
                  ("topics_recorded", sum(1 for t in self.topics.values() if t.count)),
                  ("topics_waiting", ",".join(self._waiting) or "none")]
        if self.error:
            values.append(("error", self.error))
        self.pub_status.publish(conv.make_status(self.get_name(), level, self.state, values, c.now_s(self)))

    def counts(self) -> Dict[str, int]:
        """Messages written per fully qualified topic."""
        return {t.name: t.count for t in self.topics.values()}

    # -- shutdown ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Finish the file (summary, indexes): it is then complete and readable. Idempotent."""
        with self._lock:
            if self.file is None or self.file.finished:
                return
            try:
                self.file.finish()
                if self.state == "recording":
                    self.state = "closed"
                print(f"[recorder] wrote {self.messages} messages to {self.output}", file=sys.stderr, flush=True)
            except Exception as exc:  # noqa: BLE001
                self.file.abandon()
                self.error = f"{type(exc).__name__}: {exc}"
                print(f"[recorder] cannot finish {self.output}: {self.error}", file=sys.stderr, flush=True)

    def destroy_node(self) -> None:
        self.close()
        super().destroy_node()


def main(args=None) -> int:
    return c.run_node(Recorder, args)


if __name__ == "__main__":
    sys.exit(main())
