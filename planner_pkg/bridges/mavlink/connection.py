"""Byte transports to the flight controller, opened from a URL, with bounded reads and reconnects.

URLs (the pymavlink / MAVSDK spellings a user already knows):
    ``udpin:HOST:PORT``   listen on HOST:PORT; reply to the FCU once it is identified
                          (``udp:`` is an alias). PORT 0 picks a free port (tests).
    ``udpout:HOST:PORT``  send to HOST:PORT from an ephemeral port; the socket is connected,
                          so the kernel drops datagrams from any other address.
    ``tcp:HOST:PORT``     TCP client (SITL, mavlink-router); reconnects with backoff.
    ``/dev/ttyACM0:921600`` or ``serial:/dev/ttyAMA0:57600``  serial device and baud rate;
                          reopened with backoff after an unplug. POSIX termios, no pyserial.

We do not use ``pymavlink.mavutil`` for the link itself: its UDP server follows whoever sent
the last datagram (one spoofed packet redirects our setpoints), ``/dev/x:baud`` parses as UDP,
and its reads have no per-call timeout. Every operation here is bounded by a timeout.
"""
from __future__ import annotations

import errno
import os
import re
import select
import socket
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Optional, Tuple

__all__ = ["ConnectionUrl", "parse_url", "Transport", "UdpTransport", "TcpTransport", "SerialTransport", "open_transport"]

Address = Tuple[str, int]
_MAX_DATAGRAM = 65535
_SERIAL_NAME = re.compile(r"^(/dev/[\w./-]+|COM\d+)$")


@dataclass(frozen=True)
class ConnectionUrl:
    """A parsed FCU URL. ``kind`` is udpin/udpout/tcp/serial; for serial ``host`` is the device
    path and ``port`` the baud rate (bit/s)."""

    kind: str
    host: str
    port: int

    def __str__(self) -> str:
        if self.kind == "serial":
            return f"{self.host}:{self.port}"
        return f"{self.kind}:{self.host}:{self.port}"


def _split_host_port(rest: str, url: str) -> Tuple[str, int]:
    if rest.startswith("["):  # IPv6 literal: [::1]:14540
        host, sep, port_text = rest[1:].partition("]:")
        if not sep:
            raise ValueError(f"fcu_url {url!r}: IPv6 hosts are written [addr]:port")
    else:
        host, sep, port_text = rest.rpartition(":")
        if not sep:
            raise ValueError(f"fcu_url {url!r}: expected HOST:PORT after the scheme")
    if not host:
        raise ValueError(f"fcu_url {url!r}: empty host")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"fcu_url {url!r}: port {port_text!r} is not an integer") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"fcu_url {url!r}: port {port} is outside 0..65535")
    return host, port


def parse_url(url: str) -> ConnectionUrl:
    """Parse an FCU URL (see the module doc); raises ValueError naming what is wrong."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"fcu_url must be a non-empty string such as 'udpin:0.0.0.0:14540', got {url!r}")
    url = url.strip()
    scheme, sep, rest = url.partition(":")
    if scheme in ("udpin", "udp", "udpout", "tcp") and sep:
        host, port = _split_host_port(rest, url)
        kind = "udpin" if scheme == "udp" else scheme
        if kind != "udpin" and port == 0:
            raise ValueError(f"fcu_url {url!r}: {kind} needs the FCU's port, not 0")
        return ConnectionUrl(kind, host, port)
    device = rest if scheme == "serial" else url
    path, sep, baud_text = device.rpartition(":")
    if not sep or not _SERIAL_NAME.match(path):
        raise ValueError(
            f"fcu_url {url!r} is not understood; use udpin:HOST:PORT, udpout:HOST:PORT, tcp:HOST:PORT "
            f"or a serial device with its baud rate, e.g. /dev/ttyACM0:921600"
        )
    try:
        baud = int(baud_text)
    except ValueError:
        raise ValueError(f"fcu_url {url!r}: baud rate {baud_text!r} is not an integer") from None
    if baud <= 0:
        raise ValueError(f"fcu_url {url!r}: baud rate must be positive")
    return ConnectionUrl("serial", path, baud)


class Transport(ABC):
    """A bidirectional byte link. ``datagram`` is True when each read returns whole packets
    (UDP), so a parser may drop what is left of a packet instead of waiting for more bytes."""

    datagram = False

    def __init__(self, url: ConnectionUrl, reconnect_backoff_s: float = 0.5):
        self.url = url
        self.reconnect_backoff_s = reconnect_backoff_s
        self.reconnects = 0  # successful re-opens after a loss
        self.io_errors = 0
        self.last_error = ""

    @abstractmethod
    def open(self) -> None:
        """Open the link. Bind errors raise (OSError); an absent remote end does not: the
        transport keeps retrying from ``read``."""

    @abstractmethod
    def read(self, timeout_s: float) -> Tuple[bytes, Optional[Address]]:
        """Wait up to ``timeout_s`` for data; returns ``(b"", None)`` on timeout or while
        disconnected. The address is the sender's for UDP, None otherwise."""

    @abstractmethod
    def write(self, data: bytes) -> bool:
        """Send ``data``; False when it could not go out (no remote yet, disconnected)."""

    @abstractmethod
    def close(self) -> None:
        """Release the OS resources; idempotent."""

    @property
    def connected(self) -> bool:
        return True

    def set_remote(self, address: Address) -> None:
        """Where replies go (udpin only; others have a fixed remote)."""

    @property
    def local_address(self) -> Optional[Address]:
        return None

    def _note_error(self, exc: BaseException) -> None:
        self.io_errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"


class UdpTransport(Transport):
    """UDP: ``udpin`` binds and replies to the address the bridge trusts (``set_remote``);
    ``udpout`` connects to the FCU's address."""

    datagram = True

    def __init__(self, url: ConnectionUrl, reconnect_backoff_s: float = 0.5):
        super().__init__(url, reconnect_backoff_s)
        self._sock: Optional[socket.socket] = None
        self._remote: Optional[Address] = None

    def open(self) -> None:
        family = socket.AF_INET6 if ":" in self.url.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            if self.url.kind == "udpin":
                # no SO_REUSEADDR: on Linux it would let a second process bind the same UDP port
                # and silently take over the FCU's datagrams; a busy port must fail loudly
                sock.bind((self.url.host, self.url.port))
            else:
                sock.connect((self.url.host, self.url.port))
                self._remote = (self.url.host, self.url.port)
        except OSError as exc:
            sock.close()
            raise OSError(f"{self.url}: cannot open the UDP socket: {exc}") from exc
        self._sock = sock

    def read(self, timeout_s: float) -> Tuple[bytes, Optional[Address]]:
        if self._sock is None:
            return b"", None
        self._sock.settimeout(max(timeout_s, 0.0))
        try:
            data, address = self._sock.recvfrom(_MAX_DATAGRAM)
        except (socket.timeout, BlockingIOError):
            return b"", None
        except OSError as exc:
            # ECONNREFUSED: a connected udpout socket heard "port unreachable" because the
            # FCU is not up yet. Not fatal: the next heartbeat tries again.
            self._note_error(exc)
            return b"", None
        return data, address[:2]

    def write(self, data: bytes) -> bool:
        if self._sock is None or self._remote is None:
            return False
        try:
            if self.url.kind == "udpin":
                self._sock.sendto(data, self._remote)
            else:
                self._sock.send(data)
        except OSError as exc:
            self._note_error(exc)
            return False
        return True

    def set_remote(self, address: Address) -> None:
        if self.url.kind == "udpin":
            self._remote = (address[0], int(address[1]))

    @property
    def local_address(self) -> Optional[Address]:
        return None if self._sock is None else self._sock.getsockname()[:2]

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class _ReconnectingStream(Transport):
    """Shared reconnect logic for stream links (TCP, serial): on EOF or an I/O error the link
    is dropped, and ``read`` tries to reopen it at most every ``reconnect_backoff_s``."""

    def __init__(self, url: ConnectionUrl, reconnect_backoff_s: float = 0.5):
        super().__init__(url, reconnect_backoff_s)
        self._next_attempt = 0.0
        self._ever_connected = False
        self._closed = False

    @abstractmethod
    def _connect(self) -> None:
        """Open the OS handle; raises OSError on failure."""

    @abstractmethod
    def _disconnect(self) -> None:
        """Drop the OS handle."""

    @abstractmethod
    def _read_ready(self, timeout_s: float) -> bytes:
        """Read what is available within ``timeout_s``; raise EOFError on hang-up."""

    @abstractmethod
    def _write_all(self, data: bytes) -> None:
        """Write all of ``data`` or raise OSError."""

    def open(self) -> None:
        self._closed = False
        self._try_connect()

    def _try_connect(self) -> bool:
        self._next_attempt = time.monotonic() + self.reconnect_backoff_s
        try:
            self._connect()
        except OSError as exc:
            self._note_error(exc)
            return False
        if self._ever_connected:
            self.reconnects += 1
        self._ever_connected = True
        return True

    def _lost(self, exc: BaseException) -> None:
        self._note_error(exc)
        self._disconnect()

    def read(self, timeout_s: float) -> Tuple[bytes, Optional[Address]]:
        if self._closed:
            return b"", None
        if not self.connected:
            if time.monotonic() < self._next_attempt or not self._try_connect():
                time.sleep(min(max(timeout_s, 0.0), max(self._next_attempt - time.monotonic(), 0.0)))
                return b"", None
        try:
            return self._read_ready(max(timeout_s, 0.0)), None
        except (EOFError, OSError) as exc:
            self._lost(exc)
            return b"", None

    def write(self, data: bytes) -> bool:
        if self._closed or not self.connected:
            return False
        try:
            self._write_all(data)
        except OSError as exc:
            self._lost(exc)
            return False
        return True

    def close(self) -> None:
        self._closed = True
        self._disconnect()


class TcpTransport(_ReconnectingStream):
    """TCP client with a bounded connect (``connect_timeout_s``) and reconnect on loss."""

    def __init__(self, url: ConnectionUrl, reconnect_backoff_s: float = 0.5, connect_timeout_s: float = 1.0):
        super().__init__(url, reconnect_backoff_s)
        self.connect_timeout_s = connect_timeout_s
        self._sock: Optional[socket.socket] = None

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def _connect(self) -> None:
        sock = socket.create_connection((self.url.host, self.url.port), timeout=self.connect_timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # setpoints must not wait for Nagle
        self._sock = sock

    def _disconnect(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _read_ready(self, timeout_s: float) -> bytes:
        self._sock.settimeout(timeout_s)
        try:
            data = self._sock.recv(_MAX_DATAGRAM)
        except socket.timeout:
            return b""
        if not data:
            raise EOFError(f"{self.url}: the FCU closed the connection")
        return data

    def _write_all(self, data: bytes) -> None:
        self._sock.settimeout(self.connect_timeout_s)
        self._sock.sendall(data)

    @property
    def local_address(self) -> Optional[Address]:
        return None if self._sock is None else self._sock.getsockname()[:2]


class SerialTransport(_ReconnectingStream):
    """Raw 8N1 serial port without flow control, through POSIX termios (no pyserial needed)."""

    def __init__(self, url: ConnectionUrl, reconnect_backoff_s: float = 0.5, write_timeout_s: float = 0.2):
        super().__init__(url, reconnect_backoff_s)
        self.write_timeout_s = write_timeout_s
        self._fd: Optional[int] = None

    @property
    def connected(self) -> bool:
        return self._fd is not None

    def _connect(self) -> None:
        import termios  # POSIX only; imported here so the module loads on any OS

        speed = getattr(termios, f"B{self.url.port}", None)
        if speed is None:
            raise OSError(errno.EINVAL, f"{self.url}: baud rate {self.url.port} is not supported by termios")
        fd = os.open(self.url.host, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            attrs = termios.tcgetattr(fd)
            iflag, oflag, cflag, lflag = 0, 1, 2, 3
            attrs[iflag] = 0  # no parity checks, no CR/LF mangling, no XON/XOFF
            attrs[oflag] = 0
            attrs[lflag] = 0  # raw: no echo, no line editing, no signals
            attrs[cflag] = termios.CS8 | termios.CREAD | termios.CLOCAL
            attrs[4] = attrs[5] = speed  # ispeed, ospeed
            attrs[6][termios.VMIN] = 0
            attrs[6][termios.VTIME] = 0
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
        except (OSError, termios.error) as exc:
            os.close(fd)
            raise OSError(f"{self.url}: cannot configure the serial port: {exc}") from exc
        self._fd = fd

    def _disconnect(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _read_ready(self, timeout_s: float) -> bytes:
        ready, _, _ = select.select([self._fd], [], [], timeout_s)
        if not ready:
            return b""
        try:
            data = os.read(self._fd, 4096)
        except BlockingIOError:
            return b""
        if not data:
            raise EOFError(f"{self.url}: the serial device hung up")
        return data

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        deadline = time.monotonic() + self.write_timeout_s
        while view:
            try:
                n = os.write(self._fd, view)
                view = view[n:]
            except BlockingIOError:
                pass
            if view:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise OSError(errno.ETIMEDOUT, f"{self.url}: serial write timed out (link saturated?)")
                select.select([], [self._fd], [], remaining)


def open_transport(url, reconnect_backoff_s: float = 0.5, connect_timeout_s: float = 1.0) -> Transport:
    """Create and open the transport for ``url`` (a string or :class:`ConnectionUrl`)."""
    parsed = url if isinstance(url, ConnectionUrl) else parse_url(url)
    if parsed.kind in ("udpin", "udpout"):
        transport: Transport = UdpTransport(parsed, reconnect_backoff_s)
    elif parsed.kind == "tcp":
        transport = TcpTransport(parsed, reconnect_backoff_s, connect_timeout_s)
    else:
        transport = SerialTransport(parsed, reconnect_backoff_s)
    transport.open()
    return transport
