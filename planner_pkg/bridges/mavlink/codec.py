"""MAVLink 2 framing: encode our messages (signed when a key is set) and decode received bytes
into messages plus a count of what was rejected and why.

Wraps pymavlink's generated parser (``ardupilotmega`` dialect, a superset of ``common`` that
both PX4 and ArduPilot speak) in robust mode, where bad input comes back as ``BAD_DATA``
objects instead of exceptions, and adds what a hostile network needs:

* per-datagram parsing for UDP: a truncated frame at the end of a datagram is dropped (and
  counted) instead of swallowing the start of the next, valid datagram;
* a signature check that cannot be poisoned by forged timestamps (``signing.verify_signature``);
* one counter per rejection reason: ``garbage`` (bytes outside any frame), ``crc``,
  ``signature``, ``malformed`` (bad length/flags/payload), ``unknown_message`` (a message id
  not in the dialect: its CRC cannot be checked), ``truncated``.

Not thread-safe by itself: the bridge encodes under its transmit lock and decodes only in its
I/O thread.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from pymavlink.dialects.v20 import ardupilotmega as mavlink2

from .signing import signing_timestamp_now, verify_signature

__all__ = ["mavlink2", "MavCodec", "DecodeResult", "REJECT_REASONS"]

REJECT_REASONS = ("garbage", "crc", "signature", "malformed", "unknown_message", "truncated")
_HEADER_V1 = 6


class _VerifyingMAVLink(mavlink2.MAVLink):
    """pymavlink's parser with our replay-safe signature check (see signing.verify_signature)."""

    def check_signature(self, msgbuf, srcSystem, srcComponent):  # noqa: N802, N803 - pymavlink's names
        return verify_signature(self.signing, msgbuf, srcSystem, srcComponent)


@dataclass
class DecodeResult:
    """What one chunk of received bytes held: valid messages, and reasons for each rejection."""

    messages: List[object] = field(default_factory=list)
    rejected: List[str] = field(default_factory=list)


def _classify(bad) -> str:
    reason = str(getattr(bad, "reason", ""))
    if reason.startswith("Bad prefix"):
        return "garbage"
    if "CRC" in reason:
        return "crc"
    if "signature" in reason:
        return "signature"
    return "malformed"


class MavCodec:
    """Encoder/decoder for one link.

    Args:
        system_id, component_id: our MAVLink address (1..255 each).
        signing_key: 32-byte secret, or None for an unsigned link.
        link_id: our signing link id (0..255), distinguishes our streams to the FCU.
    """

    def __init__(self, system_id: int, component_id: int, signing_key: Optional[bytes] = None, link_id: int = 0):
        self._mav = _VerifyingMAVLink(None, srcSystem=system_id, srcComponent=component_id)
        self._mav.robust_parsing = True
        self.signing = signing_key is not None
        if signing_key is not None:
            if len(signing_key) != 32:
                raise ValueError(f"signing key must be 32 bytes, got {len(signing_key)}")
            sig = self._mav.signing
            sig.secret_key = bytes(signing_key)
            sig.sign_outgoing = True
            sig.link_id = int(link_id)
            sig.timestamp = signing_timestamp_now()
            sig.allow_unsigned_callback = None  # nothing unsigned gets through, not even RADIO_STATUS
        self.rx_messages = 0
        self.rx_rejected: Dict[str, int] = {r: 0 for r in REJECT_REASONS}
        self.tx_messages = 0

    @property
    def mav(self) -> mavlink2.MAVLink:
        """The pymavlink object: use its ``*_encode`` methods to build messages."""
        return self._mav

    @property
    def rx_rejected_total(self) -> int:
        return sum(self.rx_rejected.values())

    def encode(self, msg) -> bytes:
        """Wire bytes of ``msg`` (built with ``codec.mav.<name>_encode(...)``), signed if a key
        is set. Advances the sequence number; call under the link's transmit lock."""
        if self.signing:
            # The spec wants signing timestamps to follow the clock, not just count messages:
            # otherwise they fall behind real time and the FCU rejects us as a stale stream
            # after a reconnect.
            self._mav.signing.timestamp = max(self._mav.signing.timestamp, signing_timestamp_now())
        data = msg.pack(self._mav)
        self._mav.seq = (self._mav.seq + 1) % 256
        self.tx_messages += 1
        return data

    def decode(self, data: bytes, datagram: bool) -> DecodeResult:
        """Parse ``data``; for a ``datagram`` (UDP) leftover partial frames are dropped.

        Never raises on content: every malformed input lands in ``DecodeResult.rejected``.
        """
        result = DecodeResult()
        mav = self._mav
        try:
            messages = mav.parse_buffer(data) or []
        except (mavlink2.MAVError, struct.error, IndexError, ValueError):
            # Robust mode turns frame errors into BAD_DATA; this is the residue (e.g. a header
            # too short to unpack). Drop the buffer so the next chunk starts clean.
            self._reset()
            result.rejected.append("malformed")
            self.rx_rejected["malformed"] += 1
            return result
        garbage_run = False
        for msg in messages:
            if isinstance(msg, mavlink2.MAVLink_bad_data):
                reason = _classify(msg)
                if reason == "garbage" and garbage_run:
                    continue  # one run of junk bytes is one rejection, not one per byte
                garbage_run = reason == "garbage"
                result.rejected.append(reason)
            elif isinstance(msg, mavlink2.MAVLink_unknown):
                garbage_run = False
                result.rejected.append("unknown_message")
            else:
                garbage_run = False
                result.messages.append(msg)
        if datagram and mav.buf_len() > 0:
            self._reset()
            result.rejected.append("truncated")
        for reason in result.rejected:
            self.rx_rejected[reason] += 1
        self.rx_messages += len(result.messages)
        return result

    def _reset(self) -> None:
        """Forget buffered bytes (the parser's public state fields, see pymavlink MAVLink)."""
        self._mav.buf = bytearray()
        self._mav.buf_index = 0
        self._mav.expected_length = _HEADER_V1 + 2
