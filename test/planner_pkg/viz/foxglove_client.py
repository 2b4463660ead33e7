"""A minimal Foxglove WebSocket client for the tests, written from the protocol spec
(foxglove/ws-protocol ``docs/spec.md``) on top of the ``websockets`` library: no SDK code.

Text frames are JSON ops (``serverInfo``, ``advertise``, ...); binary frames start with an opcode
byte: 0x01 message data = subscription id (uint32 LE), log time (uint64 LE ns), payload;
0x02 time = uint64 LE ns. Protobuf payloads are decoded with the FileDescriptorSet the server
advertised (``schema``, base64), through google.protobuf's own descriptor pool.
"""
from __future__ import annotations

import asyncio
import base64
import json
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional

#: Sub-protocols a Foxglove client offers: the SDK (0.30) speaks ``foxglove.sdk.v1``; older
#: servers (foxglove_bridge) ``foxglove.websocket.v1``.
SUBPROTOCOLS = ("foxglove.sdk.v1", "foxglove.websocket.v1")


@dataclass
class Received:
    topic: str
    schema_name: str
    encoding: str
    log_time_ns: int
    payload: bytes


@dataclass
class Session:
    subprotocol: Optional[str] = None
    server_info: dict = field(default_factory=dict)
    channels: Dict[int, dict] = field(default_factory=dict)  # channel id -> advertised channel
    messages: List[Received] = field(default_factory=list)
    times_ns: List[int] = field(default_factory=list)
    closed: bool = False


def decoder(channel: dict):
    """A function payload -> decoded message for an advertised channel (protobuf or JSON)."""
    if channel["encoding"] == "json":
        return lambda payload: json.loads(payload.decode("utf-8"))
    assert channel["encoding"] == "protobuf" and channel["schemaEncoding"] == "protobuf", channel
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(channel["schema"]))
    pool = descriptor_pool.DescriptorPool()
    for proto in fds.file:
        pool.Add(proto)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(channel["schemaName"]))
    return cls.FromString


async def collect(url: str, subscribe_first: List[str], subscribe_last: List[str], until, timeout_s: float,
                  session: Session) -> Session:
    """Connect, wait for every topic in ``subscribe_first + subscribe_last`` to be advertised,
    subscribe to ``subscribe_first`` in one op and then ``subscribe_last`` in a second, and record
    messages until ``until(session)`` is true, the server closes, or ``timeout_s`` passes."""
    import websockets

    wanted = set(subscribe_first) | set(subscribe_last)
    async with websockets.connect(url, subprotocols=list(SUBPROTOCOLS), max_size=None,
                                  open_timeout=timeout_s) as ws:
        session.subprotocol = ws.subprotocol
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        sub_ids: Dict[int, int] = {}
        subscribed = False
        try:
            while loop.time() < deadline:
                try:
                    frame = await asyncio.wait_for(ws.recv(), timeout=max(0.01, deadline - loop.time()))
                except asyncio.TimeoutError:
                    break
                if isinstance(frame, str):
                    op = json.loads(frame)
                    if op["op"] == "serverInfo":
                        session.server_info = op
                    elif op["op"] == "advertise":
                        for ch in op["channels"]:
                            session.channels[ch["id"]] = ch
                    elif op["op"] == "unadvertise":
                        for cid in op["channelIds"]:
                            session.channels.pop(cid, None)
                    topics = {ch["topic"]: cid for cid, ch in session.channels.items()}
                    if not subscribed and wanted <= set(topics):
                        for group in (subscribe_first, subscribe_last):
                            subs = []
                            for topic in group:
                                sid = len(sub_ids) + 1
                                sub_ids[sid] = topics[topic]
                                subs.append({"id": sid, "channelId": topics[topic]})
                            if subs:
                                await ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
                        subscribed = True
                    continue
                opcode = frame[0]
                if opcode == 0x01:
                    sid, log_time = struct.unpack_from("<IQ", frame, 1)
                    ch = session.channels[sub_ids[sid]]
                    session.messages.append(Received(ch["topic"], ch["schemaName"], ch["encoding"], log_time,
                                                     bytes(frame[13:])))
                elif opcode == 0x02:
                    session.times_ns.append(struct.unpack_from("<Q", frame, 1)[0])
                if until(session):
                    break
        except websockets.ConnectionClosed:
            session.closed = True
    return session


def run_client(url: str, subscribe_first, subscribe_last, until=lambda s: False, timeout_s: float = 120.0) -> Session:
    session = Session()
    asyncio.run(collect(url, list(subscribe_first), list(subscribe_last), until, timeout_s, session))
    return session
