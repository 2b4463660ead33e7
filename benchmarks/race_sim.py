"""The racing policy in its training model vs the embedded simulator's rigid body (no ROS).

    python benchmarks/race_sim.py [--tracks 8] [--first 0] [--radius 0.19] [--model M.agm]

For each of ``--tracks`` unseen random tracks (seeds ``[EVAL_SEED_OFFSET, first + k]``, the
evaluation tracks of ``race fly``'s statistics) it flies 2 laps from hover twice:
``race fly``'s environment (``racing.evaluate.fly_tracks``) and the embedded simulator
(``EmbeddedSim``: 1 kg rigid body, RK4 at 500 Hz, the body-rate loop of ``sim/rate_control.py``
at 250 Hz) on a world of the track's gate frames, the network at its control period through
``racing.pilot.RacerPilot``, exactly what the ``racer`` node does over ROS minus the messages.
``--radius`` is the simulator's collision radius (0.19 m, the airframe's; the policy was
trained with 0.15 m). Prints one row per track and the success counts. Never asserts.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner_pkg.sim.embedded import EmbeddedSim  # noqa: E402
from planner_pkg.racing.export import default_model_path  # noqa: E402
from planner_pkg.racing.config import TrackGenConfig  # noqa: E402
from planner_pkg.racing.evaluate import eval_tracks, fly_tracks  # noqa: E402
from planner_pkg.racing.export import load_racer  # noqa: E402
from planner_pkg.racing.pilot import RacerPilot, start_pose, track_world  # noqa: E402
from planner_pkg.sim.rate_control import BodyRateCommand  # noqa: E402
from planner_pkg.world.io import world_from_dict  # noqa: E402


def fly_in_sim(racer, track, radius_m, laps=2, timeout_s=30.0):
    cfg = racer.config.env
    p, yaw = start_pose(track)
    sim = EmbeddedSim(world_from_dict(track_world(track, cfg)), p, yaw, camera_rate_hz=0.0)
    sim.monitor.radius_m = radius_m
    pilot = RacerPilot(racer, track)
    while sim.t < timeout_s and not sim.crashed and pilot.progress.passed < laps * len(track):
        s = sim.state()
        thrust, rates, _ = pilot.act(s.position, s.velocity, s.rotation, s.angular_velocity)
        sim.set_body_rate_command(BodyRateCommand(thrust, tuple(rates)))
        for o in sim.advance(cfg.quad.dt_s).odometry:
            pilot.progress.update(o.t, o.position)
    return pilot.progress, sim


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracks", type=int, default=8)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--radius", type=float, default=0.19, help="the simulator's collision radius, m")
    ap.add_argument("--model", help="racing model (default: the shipped one)")
    args = ap.parse_args(argv)
    racer = load_racer(args.model or default_model_path())
    tracks = eval_tracks(args.tracks, TrackGenConfig(), args.first)
    ref = fly_tracks(racer.act, tracks, racer.config.env, laps=2)
    print(f"{'track':>5} {'gates':>5} | {'race fly laps s':>15} {'ok':>3} | {'sim laps s':>13} {'ok':>3} "
          f"{'min clear m':>11}  sim crash")
    ok_ref = ok_sim = 0
    t0 = time.perf_counter()
    for k, (track, r) in enumerate(zip(tracks, ref)):
        progress, sim = fly_in_sim(racer, track, args.radius)
        ok = not sim.crashed and progress.passed >= 2 * len(track)
        ok_ref += r.success
        ok_sim += ok
        print(f"{args.first + k:>5} {len(track):>5} | {'/'.join(f'{t:.2f}' for t in r.lap_times_s) or '-':>15} "
              f"{'yes' if r.success else 'no':>3} | {'/'.join(f'{t:.2f}' for t in progress.lap_times_s) or '-':>13} "
              f"{'yes' if ok else 'no':>3} {sim.monitor.min_clearance_m:>11.3f}  {sim.crash_reason or ''}")
    print(f"success: race fly {ok_ref}/{len(tracks)}, embedded simulator {ok_sim}/{len(tracks)} "
          f"(radius {args.radius} m); {time.perf_counter() - t0:.1f} s wall for the simulator flights")


if __name__ == "__main__":
    main()
