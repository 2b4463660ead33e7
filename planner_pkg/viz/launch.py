"""The ``--viz`` options that ``fly`` and ``bringup`` share, and starting a live view for ``fly``.

``--viz`` starts the Foxglove live server (:class:`~planner_pkg.viz.foxglove_live.LiveView`) and
prints the URL to open; ``--viz-port`` (default 8765, 0 = any free port), ``--viz-host``
(default 127.0.0.1; 0.0.0.0 to watch from another machine). ``fly`` also takes ``--viz-wait S``:
wait up to S wall seconds for a Foxglove client before flying (0 = fly at once).
"""
from __future__ import annotations

import argparse
import math
import socket
import sys
from typing import Optional

from planner_pkg.viz.config import DEFAULT_PORT, LiveViewConfig

__all__ = ["add_viz_arguments", "port", "host", "check_port_free", "start_live_view", "viz_config_from_args"]


def port(text: str) -> int:
    """argparse type: a TCP port 0..65535 (0 = any free port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a TCP port 0..65535, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port 0..65535, got {text!r}")
    return value


def host(text: str) -> str:
    """argparse type: an address this machine can bind (127.0.0.1, 0.0.0.0, a local name)."""
    text = text.strip()
    try:
        socket.getaddrinfo(text, None)
    except (socket.gaierror, UnicodeError):
        raise argparse.ArgumentTypeError(f"expected an address to bind such as 127.0.0.1 or 0.0.0.0, "
                                         f"got {text!r}") from None
    return text


def _wait_s(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}") from None
    if not (math.isfinite(value) and 0 <= value <= 7 * 24 * 3600):
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def add_viz_arguments(parser: argparse.ArgumentParser, wait: bool = False) -> None:
    """Add ``--viz``, ``--viz-port``, ``--viz-host`` (and, with ``wait``, ``--viz-wait``)."""
    group = parser.add_argument_group("live view (Foxglove WebSocket; needs the viz extra: pip install '.[viz]')")
    group.add_argument("--viz", action="store_true",
                       help="serve the flight live to Foxglove and print the URL to open (ws://HOST:PORT)")
    group.add_argument("--viz-port", type=port, default=DEFAULT_PORT, metavar="P",
                       help=f"WebSocket port (default {DEFAULT_PORT}; 0 = any free port)")
    group.add_argument("--viz-host", type=host, default="127.0.0.1", metavar="ADDR",
                       help="address to bind (default 127.0.0.1; 0.0.0.0 to watch from another machine)")
    if wait:
        group.add_argument("--viz-wait", type=_wait_s, default=0.0, metavar="S",
                           help="wait up to S wall seconds for a Foxglove client before flying (default 0)")


def viz_config_from_args(args) -> LiveViewConfig:
    return LiveViewConfig(port=args.viz_port, host=args.viz_host)


def check_port_free(host_name: str, port_number: int) -> Optional[str]:
    """None when ``host_name:port_number`` can be listened on now, else a one-line reason."""
    if port_number == 0:
        return None
    family = socket.AF_INET6 if ":" in host_name else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host_name, port_number))
        except OSError as exc:
            return (f"cannot serve the live view on {host_name}:{port_number} ({exc.strerror or exc}); "
                    f"choose another port with --viz-port")
    return None


def start_live_view(args, world, out=sys.stderr):
    """Start a :class:`LiveView` for ``fly`` with the world drawn, print ``live view: URL`` on
    ``out``, and wait ``--viz-wait`` s for a client. Raises VizUnavailableError / VizServerError."""
    from planner_pkg.viz.foxglove_live import LiveView

    view = LiveView(viz_config_from_args(args), name="planner_pkg fly")
    url = view.start()
    view.set_world(world)
    print(f"live view: {url}  (Foxglove: Open connection > Foxglove WebSocket; layout: "
          f"config/foxglove/planner_live.json)", file=out, flush=True)
    wait = getattr(args, "viz_wait", 0.0)
    if wait > 0:
        print(f"live view: waiting up to {wait:g} s for a client to subscribe to /tf", file=out, flush=True)
        if not view.wait_for_subscriber("/tf", wait):
            print("live view: no client came; flying anyway", file=out, flush=True)
    return view
