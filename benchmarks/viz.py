"""Cost of the Foxglove live view per simulation step (printed table, no asserts).

    python benchmarks/viz.py [--planner direct|ego] [--repeat N] [--world forest|small]

The same embedded-simulator episode (fixed seed, so the same steps every run) is flown:

* ``off``: no live view (plain ``fly``);
* ``server``: ``fly --viz`` with nobody connected (the rate limit and the queue still run);
* ``server+client``: a Foxglove WebSocket client (``websockets``, in its own process, as the
  Foxglove app would be) subscribed to every topic, so each message is encoded and sent;
* ``unlimited+client``: the same with every rate limit at 1000 Hz (what the rate limit saves).

``cpu us/step`` is this process's CPU time (every thread: the simulation, the publisher thread,
the SDK's sender threads) per step, less sensitive to other load on the machine than wall time;
``pub cpu s`` is the CPU time of the view's publisher thread (encoding and handing messages to
the SDK); ``dropped`` counts samples the rate limit or the full queue dropped before any work.
Wall time per simulated dynamics step (500 Hz) is the median over ``--repeat`` runs; ``ratio`` is
against ``off``. The client shares this machine's CPUs (on a small onboard computer the viewer would
run elsewhere).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from planner_pkg.app.planners import PlannerOptions, make_planner  # noqa: E402
from planner_pkg.sim.runner import ClosedLoopRunner, RunnerConfig  # noqa: E402
from planner_pkg.viz.config import LiveViewConfig  # noqa: E402
from planner_pkg.viz.foxglove_live import LiveView  # noqa: E402
from planner_pkg.viz.tap import VizTap  # noqa: E402
from planner_pkg.world import Box, Cylinder, Sphere, World, generate_world  # noqa: E402


def _world(kind: str):
    if kind == "forest":
        return generate_world("forest", 3), (-20.0, 0.0, 1.0), (20.0, 0.0, 1.0)
    world = World((-10.0, -6.0, 0.0), (10.0, 6.0, 4.0), [
        Cylinder((0.0, 3.0), 0.5, 3.0), Box((3.0, -3.0, 1.0), (1.0, 2.0, 2.0), 0.3), Sphere((-3.0, -3.0, 2.0), 0.5)])
    return world, (-8.0, 0.0, 1.0), (8.0, 0.0, 1.0)


CLIENT = r"""
import asyncio, json, sys
import websockets

async def main(url):
    n = 0
    try:
        async with websockets.connect(url, subprotocols=["foxglove.sdk.v1", "foxglove.websocket.v1"],
                                      max_size=None) as ws:
            async for frame in ws:
                if isinstance(frame, str):
                    op = json.loads(frame)
                    if op["op"] == "advertise":
                        subs = [{"id": ch["id"], "channelId": ch["id"]} for ch in op["channels"]]
                        await ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
                else:
                    n += 1
    except websockets.ConnectionClosed:
        pass
    print(n)

asyncio.run(main(sys.argv[1]))
"""


class Client:
    """A Foxglove client in its own process (as the Foxglove app is): subscribes to every
    advertised channel and counts the data messages it receives."""

    def __init__(self, url: str):
        self.proc = subprocess.Popen([sys.executable, "-c", CLIENT, url], stdout=subprocess.PIPE, text=True)

    def received(self) -> int:
        out, _ = self.proc.communicate(timeout=60)
        return int(out.strip() or 0)


def run_once(mode: str, planner_name: str, world_kind: str):
    world, start, goal = _world(world_kind)
    planner = make_planner(planner_name, PlannerOptions(seed=0))
    view = client = None
    if mode != "off":
        rates = {} if mode != "unlimited+client" else {k: 1000.0 for k in (
            "pose_rate_hz", "trajectory_rate_hz", "image_rate_hz", "cloud_rate_hz", "path_rate_hz", "replan_rate_hz")}
        view = LiveView(LiveViewConfig(port=0, **rates))
        view.start()
        view.set_world(world)
        if mode.endswith("client"):
            client = Client(view.url)
            if not view.wait_for_subscriber("/tf", 60.0):
                raise RuntimeError("the benchmark client did not subscribe")
        planner = VizTap(planner, view)
    cfg = RunnerConfig(timeout_s=40.0, seed=0)
    runner = ClosedLoopRunner(world, planner, cfg)
    t0, c0 = time.perf_counter(), time.process_time()
    result = runner.run(start, goal)
    wall, proc_cpu = time.perf_counter() - t0, time.process_time() - c0
    sent = dropped = 0
    cpu = 0.0
    if view is not None:
        view.stop()
        cpu = view.stats.thread_cpu_s
        sent = sum(view.stats.sent.values())
        dropped = view.stats.rate_dropped + view.stats.queue_dropped
    steps = round(result.summary.time_s * cfg.dynamics_rate_hz)
    received = client.received() if client is not None else 0
    return wall, steps, sent, dropped, received, result.summary, cpu, proc_cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--planner", default="direct", choices=("direct", "ego"))
    ap.add_argument("--world", default="small", choices=("small", "forest"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    modes = ("off", "server", "server+client", "unlimited+client")
    rows = {}
    for _ in range(args.repeat):  # interleaved, so load changes hit every mode alike
        for mode in modes:
            rows.setdefault(mode, []).append(run_once(mode, args.planner, args.world))
    base = statistics.median(r[0] / r[1] for r in rows["off"])
    cpu_base = statistics.median(r[7] / r[1] for r in rows["off"])
    s = rows["off"][0][5]
    print(f"planner {args.planner}, world {args.world}: {s.time_s:.2f} sim s ({rows['off'][0][1]} steps at 500 Hz), "
          f"reason {s.reason}; median of {args.repeat}")
    print(f"{'mode':<18} {'wall s':>8} {'us/step':>9} {'ratio':>7} {'cpu us/step':>12} {'cpu ratio':>10} "
          f"{'sent':>7} {'dropped':>8} {'received':>9} {'pub cpu s':>10}")
    for mode in modes:
        per = [r[0] / r[1] for r in rows[mode]]
        med = statistics.median(per)
        wall = statistics.median(r[0] for r in rows[mode])
        sent = int(statistics.median(r[2] for r in rows[mode]))
        dropped = int(statistics.median(r[3] for r in rows[mode]))
        received = int(statistics.median(r[4] for r in rows[mode]))
        cpu = statistics.median(r[6] for r in rows[mode])
        proc = statistics.median(r[7] / r[1] for r in rows[mode])
        print(f"{mode:<18} {wall:>8.2f} {1e6 * med:>9.1f} {med / base:>7.3f} {1e6 * proc:>12.1f} {proc / cpu_base:>10.3f} "
              f"{sent:>7} {dropped:>8} {received:>9} {cpu:>10.3f}")


if __name__ == "__main__":
    main()
