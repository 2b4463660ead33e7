#!/usr/bin/env python3
"""Bring the graph up and stop it, N times; count how every node exited.

    python scripts/shutdown_cycles.py [--cycles 50] [--profile sim] [--planner ego] [--json out.json]

One cycle: ``python -m planner_pkg bringup PROFILE --namespace NS`` in its own process group;
wait until every node of the profile has published on ``NS/status`` (so each one is up and
spinning); wait a random 0-``--jitter`` s more, so that the stop lands at a different point of
the nodes' work each time; SIGINT the bringup (it forwards one SIGINT to each node). In every
second cycle (``--double-every 2``) each node also gets a SIGINT of its own ``--gap`` s (50 ms)
later, as a terminal's Ctrl-C reaches every process while the launcher forwards its own. The
node exit codes come from the bringup's "NAME stopped (exit N)" lines; a "Traceback" anywhere
in the output counts against the cycle too.

A clean cycle: every node exited 0, no traceback, the bringup exited 0. The script exits 0 when
every cycle was clean, else 1. Each run claims a ROS_DOMAIN_ID as the test suite's tests do
(``test/ros_domains.py``: an exclusive lock per id, so a test run beside it never gets the same
one) and uses a namespace of its own, so it neither sees nor disturbs other graphs on the machine
(``/clock`` is global).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

STARTED = re.compile(r"\[bringup\] started (\w+) \(pid (\d+)\)")
STOPPED = re.compile(r"\[bringup\] (\w+) stopped \(exit (-?\d+)\)")


@dataclass
class CycleResult:
    """One bringup/shutdown cycle. exit_codes: {node: exit code} from the bringup's log."""

    index: int
    double_sigint: bool
    exit_codes: Dict[str, int] = field(default_factory=dict)
    bringup_exit: Optional[int] = None
    tracebacks: int = 0
    error: str = ""  # the cycle could not be run as planned (not up in time, bringup hung)
    log_tail: str = ""

    @property
    def clean(self) -> bool:
        return (not self.error and self.bringup_exit == 0 and self.tracebacks == 0 and bool(self.exit_codes)
                and all(code == 0 for code in self.exit_codes.values()))


class StatusWatcher:
    """Which node names have published on ``<namespace>/status``: an rclpy node on its own
    context (no signal handlers: Ctrl-C stays this script's), spun in a thread."""

    def __init__(self, namespace: str):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        from planner_pkg.nodes import common as c

        self._rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
        self.node = Node("shutdown_cycles", namespace=namespace, context=self.context)
        self.seen: set = set()
        self._lock = threading.Lock()
        self.node.create_subscription(DiagnosticArray, c.TOPIC_STATUS, self._on_status, c.STATUS_QOS)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True, name="status-watcher")
        self.thread.start()

    def _on_status(self, msg) -> None:
        with self._lock:
            self.seen.update(s.name for s in msg.status)

    def reset(self) -> None:
        with self._lock:
            self.seen.clear()

    def has_all(self, names) -> bool:
        with self._lock:
            return set(names) <= self.seen

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        if self.context.ok():
            self.context.shutdown()
        self.thread.join(timeout=2.0)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_cycle(index: int, double_sigint: bool, *, profile: str, namespace: str, watcher: StatusWatcher,
              extra_args: List[str], env: dict, gap_s: float = 0.05, jitter_s: float = 1.0,
              ready_timeout_s: float = 120.0, stop_timeout_s: float = 60.0,
              rng: Optional[random.Random] = None) -> CycleResult:
    """Start the bringup, wait for every node's status, SIGINT (twice for ``double_sigint``),
    collect the exit codes. Never leaves a process behind."""
    from planner_pkg.nodes import bringup

    rng = rng or random.Random()
    planner = extra_args[extra_args.index("--planner") + 1] if "--planner" in extra_args else None
    expected = [s.name for s in bringup.profile_specs(profile, planner)]
    result = CycleResult(index, double_sigint)
    watcher.reset()
    cmd = [sys.executable, "-m", "planner_pkg", "bringup", profile, "--namespace", namespace, *extra_args]
    with tempfile.TemporaryDirectory(prefix="shutdown_cycles_") as tmp:
        log_path = Path(tmp) / "bringup.log"
        with open(log_path, "ab") as log:  # append mode: reading it here never moves the child's offset
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        started: Dict[str, int] = {}
        try:
            deadline = time.monotonic() + ready_timeout_s
            while not watcher.has_all(expected):
                if proc.poll() is not None:
                    result.error = f"the bringup ended (exit {proc.returncode}) before every node was up"
                    break
                if time.monotonic() > deadline:
                    result.error = f"not every node published status within {ready_timeout_s:g} s: {expected}"
                    break
                time.sleep(0.05)
            if not result.error:
                time.sleep(rng.uniform(0.0, jitter_s))
                started = {m.group(1): int(m.group(2)) for m in STARTED.finditer(log_path.read_text())}
                os.kill(proc.pid, signal.SIGINT)
                if double_sigint:
                    time.sleep(gap_s)
                    for pid in started.values():  # each node is its own process group
                        _kill_group(pid, signal.SIGINT)
            try:
                result.bringup_exit = proc.wait(timeout=stop_timeout_s)
            except subprocess.TimeoutExpired:
                result.error = result.error or f"the bringup did not exit within {stop_timeout_s:g} s of SIGINT"
        finally:
            if proc.poll() is None:
                _kill_group(proc.pid, signal.SIGKILL)
                proc.wait()
            text = log_path.read_text(errors="replace")
            started.update({m.group(1): int(m.group(2)) for m in STARTED.finditer(text)})
            for pid in started.values():
                if _alive(pid):
                    _kill_group(pid, signal.SIGKILL)
                    result.error = result.error or f"node process {pid} outlived the bringup"
    result.exit_codes = {m.group(1): int(m.group(2)) for m in STOPPED.finditer(text)}
    missing = set(expected) - set(result.exit_codes)
    if missing and not result.error:
        result.error = f"no exit code reported for {sorted(missing)}"
    result.tracebacks = text.count("Traceback (most recent call last)")
    if not result.clean:
        result.log_tail = text[-4000:]
    return result


def claim_domain():
    """A ROS domain id claimed as the tests claim theirs (test/ros_domains.py; held until released)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ros_domains", Path(__file__).resolve().parents[1] / "test"
                                                  / "ros_domains.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.claim_ros_domain()


def ros_env(domain_id: int) -> dict:
    from planner_pkg.nodes.bringup import ros_environment

    env = ros_environment()
    env["ROS_DOMAIN_ID"] = str(int(domain_id))
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["PYTHONUNBUFFERED"] = "1"  # the bringup's "started NAME (pid N)" lines, as they happen
    return env


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=50)
    p.add_argument("--profile", default="sim", choices=("sim", "gazebo", "hardware"))
    p.add_argument("--planner", help="passed to bringup --planner (e.g. policy)")
    p.add_argument("--double-every", type=int, default=2, metavar="K",
                   help="every K-th cycle also SIGINTs each node directly (0: never)")
    p.add_argument("--gap", type=float, default=0.05, help="seconds between the two SIGINTs (0.05)")
    p.add_argument("--jitter", type=float, default=1.0, help="random extra wait after all nodes are up, s")
    p.add_argument("--ready-timeout", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="FILE", help="write every cycle's result")
    args = p.parse_args(argv)
    if args.cycles < 1:
        p.error("--cycles must be at least 1")

    domain = claim_domain()
    env = ros_env(domain.id)
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "AMENT_PREFIX_PATH",
                                           "RMW_IMPLEMENTATION")})
    namespace = f"/cycles{os.getpid()}"  # absolute: bringup passes it to rcl as given
    extra = ["--planner", args.planner] if args.planner else []
    rng = random.Random(args.seed)
    watcher = StatusWatcher(namespace)
    results: List[CycleResult] = []
    try:
        for i in range(args.cycles):
            double = args.double_every > 0 and i % args.double_every == args.double_every - 1
            r = run_cycle(i, double, profile=args.profile, namespace=namespace, watcher=watcher, extra_args=extra,
                          env=env, gap_s=args.gap, jitter_s=args.jitter, ready_timeout_s=args.ready_timeout, rng=rng)
            results.append(r)
            codes = " ".join(f"{n}={c}" for n, c in sorted(r.exit_codes.items()))
            extra = (f" tracebacks={r.tracebacks}" if r.tracebacks else "") + (f" error: {r.error}" if r.error else "")
            print(f"cycle {i + 1:3d}/{args.cycles} {'2xSIGINT' if double else '1xSIGINT'} "
                  f"{'clean' if r.clean else 'FAILED'}: {codes} bringup={r.bringup_exit}{extra}", flush=True)
            if not r.clean:
                print(r.log_tail, flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        watcher.close()
        domain.release()
    exits = [c for r in results for c in r.exit_codes.values()]
    clean = sum(r.clean for r in results)
    doubles = sum(r.double_sigint for r in results)
    print(f"\n{clean}/{len(results)} cycles clean ({doubles} with a second SIGINT {args.gap * 1000:g} ms later); "
          f"node exits: {len(exits)}, exit 0: {exits.count(0)}; tracebacks: {sum(r.tracebacks for r in results)}; "
          f"profile {args.profile}{' --planner ' + args.planner if args.planner else ''}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps([dict(asdict(r), clean=r.clean) for r in results], indent=1))
    return 0 if results and clean == len(results) == args.cycles else 1


if __name__ == "__main__":
    sys.exit(main())
