"""MAVLink 2 message signing: the secret key lives in a file only its owner can read.

The key is 32 bytes, stored as 64 hex characters (optionally followed by a newline) or as the
32 raw bytes. It is never a configuration value or a ROS parameter, because those are printed
in logs, dumped by ``ros2 param dump`` and copied into bug reports; the config only names the
file. The FCU gets the same key once over a trusted link (QGroundControl / MAVProxy
``signing setup``, which send SETUP_SIGNING).

With a key loaded, every incoming frame must carry a valid signature from a stream whose
timestamp moves forward; unsigned frames, frames signed with another key and replays are
rejected (counted as ``signature`` rejections by the codec).
"""
from __future__ import annotations

import errno
import hashlib
import hmac
import os
import re
import secrets
import stat
import struct
import time

__all__ = [
    "KEY_BYTES",
    "load_signing_key",
    "write_signing_key",
    "signing_timestamp_now",
    "verify_signature",
]

KEY_BYTES = 32
#: MAVLink signing timestamps count 10 us ticks since 2015-01-01T00:00:00Z.
_EPOCH_2015_S = 1420070400
#: A new stream may start at most this far (10 us ticks) behind our timestamp (MAVLink spec: 1 min).
_NEW_STREAM_WINDOW = 60 * 100_000


def signing_timestamp_now() -> int:
    """The current MAVLink signing timestamp (10 us ticks since 2015-01-01 UTC)."""
    return int((time.time() - _EPOCH_2015_S) * 100_000)


def load_signing_key(path: str) -> bytes:
    """Read the 32-byte signing key from ``path``.

    Raises:
        FileNotFoundError: no such file.
        PermissionError: the file is not a regular file owned by us, or group/others may read or
            write it (the fix is ``chmod 600 PATH``).
        ValueError: the content is neither 64 hex characters nor 32 raw bytes.
    """
    if not path:
        raise ValueError("signing key path is empty")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW: a symlink could be swapped to another file
            raise PermissionError(f"signing key {path!r} is a symbolic link; point signing_key_path at the file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PermissionError(f"signing key {path!r} is not a regular file")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise PermissionError(f"signing key {path!r} belongs to uid {info.st_uid}, not to us ({os.getuid()})")
        if info.st_mode & 0o077:
            raise PermissionError(
                f"signing key {path!r} has mode {stat.S_IMODE(info.st_mode):o}: group/others can access it; "
                f"run `chmod 600 {path}`"
            )
        data = os.read(fd, 4 * KEY_BYTES + 2)
    finally:
        os.close(fd)
    if len(data) == KEY_BYTES:
        return bytes(data)
    text = data.strip()
    if re.fullmatch(rb"[0-9a-fA-F]{%d}" % (2 * KEY_BYTES), text):
        return bytes.fromhex(text.decode("ascii"))
    raise ValueError(
        f"signing key {path!r} must hold {KEY_BYTES} raw bytes or {2 * KEY_BYTES} hex characters "
        f"(got {len(data)} bytes)"
    )


def write_signing_key(path: str, key: bytes = None) -> bytes:
    """Create ``path`` with mode 600 holding ``key`` (default: 32 fresh random bytes) as hex.

    Refuses to overwrite an existing file (FileExistsError). Returns the key.
    """
    key = secrets.token_bytes(KEY_BYTES) if key is None else bytes(key)
    if len(key) != KEY_BYTES:
        raise ValueError(f"a MAVLink signing key has {KEY_BYTES} bytes, got {len(key)}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key.hex().encode("ascii") + b"\n")
    finally:
        os.close(fd)
    return key


def verify_signature(signing, msgbuf: bytes, src_system: int, src_component: int) -> bool:
    """Check the signature block of a received MAVLink 2 frame against ``signing.secret_key``.

    ``signing`` is pymavlink's ``MAVLinkSigning`` state. Same rules as pymavlink's
    ``check_signature``, with one fix: the per-stream replay timestamp is updated only AFTER the
    signature verified. pymavlink updates it first, so one forged frame carrying a far-future
    timestamp would make every genuine frame of that stream look like a replay (a denial of
    service by anyone who can reach the port).
    """
    if len(msgbuf) < 13:
        return False
    expected = hashlib.sha256(signing.secret_key + bytes(msgbuf[:-6])).digest()[:6]
    if not hmac.compare_digest(expected, bytes(msgbuf[-6:])):
        return False
    link_id = msgbuf[-13]
    low, high = struct.unpack("<IH", bytes(msgbuf[-12:-6]))
    timestamp = low + (high << 32)
    stream = (link_id, src_system, src_component)
    last = signing.stream_timestamps.get(stream)
    if last is not None:
        if timestamp <= last:
            return False  # replayed or reordered
    elif timestamp + _NEW_STREAM_WINDOW < signing.timestamp:
        return False  # a "new" stream from more than a minute ago: a recorded session replayed
    signing.stream_timestamps[stream] = timestamp
    signing.timestamp = max(signing.timestamp, timestamp)
    return True
