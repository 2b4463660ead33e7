"""Configuration of the EGO-style planner: one typed, validated dataclass (YAML / ROS parameters
are views of it, see :class:`planner_pkg.config_schema.Config`)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional, Tuple

from planner_pkg.config_schema import Config, non_negative, positive, setting
from planner_pkg.planning import EGO_MAX_ACC_MPS2, EGO_MAX_VEL_MPS
from planner_pkg.planning.frontier import UnknownSpaceConfig
from planner_pkg.planning.grid_map import GridMapConfig, InflationShape
from planner_pkg.planning.rebound import OptimizerConfig
from planner_pkg.planning.stall import StallConfig
from planner_pkg.planning.swarm import SwarmConfig
from planner_pkg.planning.trajectory import YawConfig

__all__ = ["EgoConfig", "speed_scaled_max_acc", "TRACKABLE_MAX_ACC_MPS2"]

# The highest acceleration limit speed_scaled_max_acc gives, m/s^2: ~0.7 g tan(45 deg), for a
# vehicle tilt-limited to 45 deg (the simulated one; PX4's MPC_TILTMAX default).
TRACKABLE_MAX_ACC_MPS2 = 7.0


def speed_scaled_max_acc(max_vel_mps: float) -> float:
    """The acceleration limit, m/s^2, to fly the forest at ``max_vel_mps``: EGO's 3 m/s^2 at its
    2 m/s default, 1.5 x the speed above that (6 m/s^2 at 4 m/s: the same trunk spacing needs ~2x
    the lateral acceleration at 2x the speed to dodge in time), at most
    :data:`TRACKABLE_MAX_ACC_MPS2`.

    The cap is what the vehicle can *track*, not what it can reach. Tilted to 45 deg it has
    g tan(45 deg) = 9.8 m/s^2 of horizontal thrust in level flight, less while the plan also
    descends, and the controller needs some of it for feedback. Measured at 6 m/s in the forest
    benchmark (``benchmarks/forest.py --speeds 6 --max-acc 8|7``, 200 forests): with 8 m/s^2, 10
    flights collided, and in the 8 flights traced the vehicle rode its tilt limit for 17-23 % of
    the time with a tracking error p95 of 0.18-0.27 m (0.08 m at 4 m/s with 6 m/s^2); with
    7 m/s^2, 2 collisions, 6-13 % and 0.15-0.20 m (6 m/s^2: no collision, but 3 flights gave the
    goal up and the mean speed fell 7 %).
    Even at 7 m/s^2 the swerves at 6 m/s ride the 45 deg limit (the plan's 7 plus 1-2 m/s^2 of rotor
    drag plus the feedback): with a 55 deg limit (``benchmarks/forest.py --max-tilt-deg 55``) 3 of
    200 flights passed under 0.1 m beyond the radius against 7, no collision against 1 (stop 41).
    """
    v = float(max_vel_mps)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"max_vel_mps must be a positive finite number, got {max_vel_mps!r}")
    return min(TRACKABLE_MAX_ACC_MPS2, max(EGO_MAX_ACC_MPS2, 1.5 * v))


@dataclass(frozen=True)
class EgoConfig(Config):
    """Parameters of :class:`EgoPlanner` (EGO-Planner's defaults where it has one).

    max_vel_mps, max_acc_mps2: speed and acceleration limits (they override the optimiser's).
    speed_headroom: plans cruise at ``(1 - speed_headroom) x max_vel_mps`` (:attr:`plan_vel_mps`,
        what the optimiser gets): max_vel_mps bounds the *flown* speed, and the tracking
        controller overshoots a reference that re-accelerates at the acceleration limit (it
        tilts late, then catches the lag up: measured up to +10.4 % over the reference at 4 m/s
        with 6 m/s^2 in the forest benchmark); 0 = plan at max_vel_mps.
    planning_horizon_m: distance of the local target, m.
    reuse_retime_acc_fraction: a replan's initial guess reuses the current trajectory from now
        on; with this > 0 its path is re-timed to speed up toward the cruise speed at this
        fraction of max_acc_mps2 (never slower than its own timing; not on the final approach to
        the goal). 0 = EGO, which keeps the old timing: a plan slowed by the refine step for one
        swerve hands its slower timing on to every replan that reuses it, and only the new part
        toward the target comes at cruise speed (traced at 6 m/s: plans of 7.5 m lasting 1.8-2.2
        s, the vehicle at 3.3-3.5 m/s on average). Measured with ``emergency_clearance_m`` 0.25
        against neither (stop 43, ``benchmarks/forest.py --time-scale 1000``, seeds 0-399, 800
        flights at 4 and 6 m/s, paired): mean speed +3.8-3.9 % at 4 m/s and +7.7-9.1 % at 6 m/s
        (3.79 / 3.66 against 3.48 / 3.40 m/s on seeds 0-199 / 200-399), 796 reached against 793,
        2 collisions against 2, 17 flights under 0.1 m beyond the radius against 16, 75 under 0.15
        m against 77; at 2 m/s (seeds 0-99) 100 % both, mean +2 %, 1 flight under 0.1 m against 0
        (seed 79, 0.078 m). Alone (0.5 or 1.0, seeds 0-199) it was as fast, with 3 collisions at 6
        m/s against none: the emergency stops it met more often were for the inflation alone
        (``emergency_clearance_m``).
    ctrl_pt_dist_m: control point spacing at full speed, m; knot interval =
        ctrl_pt_dist_m / max_vel_mps * 1.2 s (EGO).
    rate_hz: how often the runner calls update(), Hz.
    replan_period_s, replan_progress_m: replan after this long / this much progress.
    emergency_time_s: a failed replan with a collision closer than this is an emergency, s.
    safety_horizon_s: the trajectory ahead is checked for collisions over its first 2/3 (EGO)
        and at least this far ahead, s.
    emergency_decel_mps2: braking deceleration of an emergency stop, m/s^2 (None = 2 max_acc).
        The stop starts from the vehicle's own position and velocity (before stop 37: from the
        reference, which the controller led by 0.2 m and 0.5 m/s in the closest call traced at
        6 m/s; that stop ended 0.6 m short of where the vehicle could stop). In 100 forests
        (seeds 0-99, ``benchmarks/forest.py``, deterministic at time-scale 1000; braking
        straight both): 100 / 99 % at 4 / 6 m/s, lowest clearance 0.080 / 0.070 m, 2 / 6 flights
        under 0.1 m, against 99 / 99 %, 0.081 / 0.015 m and 1 / 6 from the reference; on seeds
        100-199 97 / 96 %, 0.079 / 0.049 m, 2 / 3 against 98 / 96 %, 0.059 / 0.083 m, 3 / 3 (seed
        173 at 4 m/s stops inside a trunk's inflation and times out): over the 400 flights a
        wash, kept as the physically right start. 9 m/s^2 (what a 45 deg tilt can do) instead of
        2 max_acc: the same outcomes.
    emergency_ramp_s: an emergency stop starts at the acceleration the vehicle was commanded (the
        reference's) and turns it to the braking linearly over this time, s (0-1; 0 = brakes at once,
        the default). A quadrotor changes its acceleration by tilting, and one accelerating forward
        pitches back before it brakes: traced in the forest at 6 m/s (seeds 100, 142, 61, 164), the
        vehicle flew 0.54-1.28 m off the instant stop's reference, the closest calls of those flights
        (two collisions); with a 0.1 s ramp 0.34-0.48 m (100 and 142 then reach the goal with 0.26 /
        0.18 m, 61 passes at 0.11 m, 164 times out). Over 400 flights (seeds 0-199 at 4 and 6 m/s, stop
        42, ``benchmarks/forest.py --time-scale 1000 --ego-variant r emergency_ramp_s=0.1``) a wash: 398
        reached against 397, no collision against 2, 8 flights under 0.1 m beyond the radius against 7;
        with ``emergency_decel_mps2`` 11 (about what a 45 deg tilt brakes at with the rotor drag) 397, 2
        collisions, 8 under; over 0.15 s 396, 0, 8. 0.1 s on seeds 200-399: 396 reached against 395, 3
        collisions against 4, 13 under against 13. The stops that matter start 0.18-0.98 s before the
        collision, too late for any stop; what the ramp changes is which steered stop is judged best,
        flight by flight, so the default stays 0. Set it to the airframe's time to turn its acceleration
        (the simulated one took 0.15-0.3 s from full forward acceleration to full braking) where its
        attitude loop is slower.
    emergency_clearance_m: a failed replan whose trajectory is blocked within emergency_time_s
        stops the vehicle only where the trajectory over that time passes closer than this to the
        centre of an occupied voxel, m (None = at every blocked point, EGO; so does a value at
        or above ``map.inflation_m``, e.g. with the 0.2 m cube). Farther, only the inflation's
        outer band is in its way (a surface voxel seen from a new angle grows the inflation by a
        voxel into a path that kept the margin): the vehicle flies on while the planner keeps
        replanning (not where the trajectory leaves the floor-to-ceiling band or the map's window:
        those blocks are not the inflation's). Set it to the vehicle's radius plus half a voxel
        diagonal (0.19 + 0.06 m here: a voxel centre lies within that of the surface it saw). Traced at 6 m/s (stop 43, ``benchmarks/forest.py`` seeds 0-99, 18 and
        22 emergency stops with and without ``reuse_retime_acc_fraction``): every emergency stop but
        one was for a trajectory that kept 0.11-0.22 m beyond the radius from the real trunks over
        the next second (0.23-0.39 m from the nearest voxel centre), and the stop, braking at 14
        m/s^2 from a vehicle that was accelerating, is what the vehicle could not track (0.6-0.8 m
        off it in the two collisions traced). Over seeds 0-399 at 4 and 6 m/s (800 flights) alone:
        794 reached against 793, 1 collision against 2, 14 flights under 0.1 m beyond the radius
        against 16, 82 under 0.15 m against 77, the same mean speed.
    emergency_steer_deg: an emergency stop may turn its deceleration this far sideways, deg, to
        either side (each angle is a candidate; empty = brake straight along the velocity): it
        stops 1 / cos farther along but up to a metre aside (planning/emergency.py). A steered
        stop is taken when its whole path was observed and it keeps ``emergency_steer_gain_m``
        more clearance from occupied voxels than the straight one (through never-observed space
        only when braking straight comes within the map's inflation of an occupied voxel). Paired
        with ``[]`` on seeds 0-99: the same success (100 / 99 % at 4 / 6 m/s), flights under 0.1 m
        beyond the radius 2 / 5 against 2 / 6. Emergency stops are rare (a trunk seen late and a
        failed replan) and most are already clear straight ahead, so the effect is small.
    emergency_steer_gain_m: see ``emergency_steer_deg``, m.
    inflation_block_braking: where the vehicle flies on past a block of the inflation's outer band
        (``emergency_clearance_m``), it brakes on the trajectory's own curve to stop
        ``unknown_space.margin_m`` short of the blocked point instead of flying into it at full
        speed (:func:`~planner_pkg.planning.frontier.brake_before`: the stop limit's deceleration
        with its jerk-limited onset, as late as that still stops in time, the full ``max_acc_mps2``
        where the speed needs more room); the planner keeps replanning, and a replan that succeeds
        takes over from the slower reference. Needs ``unknown_space.braking_jerk_time_s`` > 0. Off by
        default: these blocks are seen late (0.02-0.3 s ahead in the close passes traced at stop 45),
        so the braking mostly starts too late to stop short. Measured at 6 m/s (``benchmarks/forest.py``,
        time-scale 1000, seeds 0-399, paired with off): 400 of 400 reached against 398 (seed 121's
        collision became a 0.003 m pass, seed 126's timeout reached), 10 flights under 0.1 m beyond the
        radius against 9, 35 under 0.15 m against 33, the same mean speed (3.88 / 3.77 m/s).
    goal_search_radius_m: how far a goal inside an obstacle may be moved, m.
    target_search_radius_m: same for a local target, m.
    reached_tolerance_m: the mission is complete within this distance of the goal, m.
    max_tracking_error_m: replan from odometry instead of the reference beyond this error, m.
    lag_resync_m: a replan from the reference starts where the vehicle actually is along it (the
        point of the last ``max_resync_s`` of the reference closest to the vehicle) once the
        vehicle is farther than this from the reference's point now, m. Continuing from the
        reference's own point keeps the lag, and the controller then flies faster than the plan
        to catch it up: at 6 m/s, after a take-off at 8 m/s^2, 0.6 m of lag gave a 12 % speed
        overshoot over the plan.
    max_resync_s: how far back along the reference the vehicle is looked for, s.
    lag_replan_m, lag_replan_period_s: replan at once (not only on the timer or after
        ``replan_progress_m``) when the vehicle is farther than ``lag_replan_m`` from the
        reference, at most every ``lag_replan_period_s``; 0 = never. The replan starts where the
        vehicle is (``lag_resync_m``), which ends the controller's catch-up sprint early.
    latch_hold: a hold (turning on the spot, plans from rest failing, the goal given up) stays at
        the vehicle's position when it began until a trajectory is flown again; False: the
        vehicle's position re-read every tick (the vehicle then drifts on with any speed left).
    max_consecutive_failures: give up the goal (WAIT_TARGET) after this many failed plans in a
        row (at rate_hz = 10: 4 s).
    retry_budget_s: after a failed plan, other initial guesses are tried in the same tick until
        this much wall time has been spent on it, s (a safety net: a routine replan tries two
        guesses, a plan from a hover or after failures all of them).
    replan_iterations: L-BFGS iteration budget of one replan while flying, over all the initial
        guesses it tries: the next guess starts only while some is left, and each of its two
        optimiser stages (rebound, refit) gets what is left, so a replan spends at most twice
        this. After failed plans the next tick starts from the next guess (the budget grows
        only with ``flight_failure_time_scale_step``); the vehicle flies on along its current
        trajectory meanwhile. It bounds the replan time deterministically (one iteration costs
        ~0.13 ms here, benchmarks/ego_optimizer.py; a cost evaluation ~80 us, 2/3 of it the
        distance term; the rebound's guide-path searches are charged to it too, see
        ``OptimizerConfig.guide_expansions_per_iteration``). A plan from a hover (GEN_NEW_TRAJ)
        or from below ``turn_first_speed_mps`` has each guess's own budgets instead. 50 (80
        before): in 100 forests at 4 m/s (benchmarks/forest.py) the same 98 %, replan CPU p95 19.4 ms against
        25.2 (the tail there is replans that spend their budget), mean 3.24 against 3.25 m/s;
        at 6 m/s over 200 forests 195 against 193 reached, p95 22-23 ms against 30-31, mean
        3.74 against 3.77 m/s, but 30 flights under 0.1 m against 22; 40 cost collisions
        (96 % at 6 m/s).
    rest_plan_iterations: L-BFGS iteration budget of one plan from a hover or (nearly) at rest
        over all its initial guesses, as ``replan_iterations`` is in flight (not scaled by
        ``max_time_scale``); the vehicle holds its position meanwhile and the next tick starts
        from the next guess. 0: each guess has its own budgets (x ``max_time_scale``, 250 x 4
        iterations): a recovery next to a trunk then took up to 0.3-0.5 s. 200: in 100 forests
        at 6 m/s (``benchmarks/forest.py``, the 0.3 m cylinder inflation, paired) the plans from
        rest take p95 56-60 ms against 267 ms, 99 % against 98 % reached, the same 6 flights
        under 0.1 m; at 60 / 100 iterations 95 / 97 % (recoveries that need more than the
        budget fail tick after tick until the goal is given up).
    rest_guess_rotation: after failed plans in flight, a plan from a hover or (nearly) at rest
        starts from the next initial guess in turn on the in-flight count, as a replan in flight
        does (before stop 36). False: it starts from the A*-guided guess, and only failed plans
        from rest in a row move it on to the next guess (every guess still gets its tick when
        one spends the whole budget). Over the plans from rest in 100 forests at 4 m/s (seeds
        0-99) the guided guess succeeded in 150 of 200 tries as the first guess, the quintics
        through a waypoint beside the obstacle in 11 of 114: after an emergency stop the
        in-flight count put them first in two plans of three, each spending the whole
        ``rest_plan_iterations``. Paired in ``benchmarks/forest.py --episodes 100 --time-scale
        1000 --ego-variant rotate rest_guess_rotation=true`` (stop 36, with the guided guess
        first on every plan from rest): at 4 / 6 m/s 253 / 364 plans from rest against 333 /
        436 (seeds 0-99), replan CPU p95 over all plans 21.9 / 26.2 ms against 27.6 / 30.6
        (seeds 100-199: 20.4 / 24.6 against 22.3 / 29.3); reached 199 / 196 of 200 against 198
        / 197; at 2 m/s the same flights. Flights under 0.1 m clearance 4 / 10 of 200 against
        1 / 8: the ones traced are emergency stops for a trunk seen late and close passes in
        flight, not plans from rest (the flights diverge after the first changed plan). With
        the rotation among failures from rest added (the shipped rule; 4 m/s, seeds 0-99,
        a scratch count of the same flights): 99 % reached, 265 plans from rest, 116 of them
        over 20 ms (guided first always: 253 / 104; the in-flight count: 333 / 189); on seeds
        100-199 at 4 m/s 98 % (stop 37, per seed), not the 100 % of guided first always.
    crawl_after_rest_failures, crawl_speed_fraction: after this many failed plans from rest in a
        row (0: never) every other plan from rest first tries the A*-guided guess cruising at
        ``crawl_speed_fraction`` x the speed limit (the plans between leave the whole budget to the
        usual guesses): its control points lie closer together along the guide path, so the curve
        can follow a tight way through that the full-speed guess cuts (forest seed 111 at 6 m/s:
        stopped beside trunks, every guess from rest failed the same way every three ticks until
        the goal was given up; with the crawl it reaches the goal). In 400 forest flights
        (``benchmarks/forest.py``, seeds 0-199 at 4 and 6 m/s, with
        ``OptimizerConfig.guided_wide_margin_m``): 199 / 198 of 200 reached against 198 / 197 with
        the wider search alone; flights under 0.1 m beyond the radius 5 / 9 against 4 / 8 (flights
        that took another course after a crawl plan; the two traced, 0.068 m at 4 m/s and 0.052 m
        at 6 m/s, are emergency stops 3.6 s and 11 s after it).
    flight_brake_after_failures, flight_brake_speed_fraction: in flight, after this many failed
        replans in a row (0: never) every other replan first tries the A*-guided guess that slows
        from the vehicle's speed (at 0.7 max_acc_mps2) to ``flight_brake_speed_fraction`` x the
        speed limit along the guide path. The guesses at cruise speed keep failing where the way
        round a cluster of trunks is too tight for the curve at that speed (traced with the true
        map, forest seed 13 at 6 m/s: nine replans in a row spent their budget still in
        collision, 0.9 s during which the vehicle braked on its last plan from 5.9 to 1.9 m/s,
        and the first plan that succeeded came at 1.9 m/s); a slower guess has its control points
        closer together and can bend round them while the vehicle keeps moving. 1 and 0.7 (0 =
        EGO, every guess at cruise speed), measured in the forest benchmark
        (``benchmarks/forest.py --episodes 200 [--first-seed 200] --speeds 4 6 --time-scale 1000
        --ego-variant ...``, paired with 0, seeds 0-399): at 6 m/s 396 of 400 reached against
        396 (1 collision against 2), 9 flights under 0.1 m beyond the radius against 12, 45 under
        0.15 m against 45, mean speed 3.97 / 3.80 m/s against 3.79 / 3.66 (+3.8-4.5 %), the
        failed replans in flight halved (1839 against 3643 of ~11000 plans, seeds 0-199), replan
        CPU p95 over all plans 15.7 against 15.1 ms; at 4 m/s 400 / 400 both, 5 under 0.1 m
        both, mean speed -1.0 / -1.2 %. A fraction of 0.5 brought no gain at 6 m/s (9 under 0.1
        m against 12, +0.2-0.6 %) and lost 2.5 % at 4 m/s with 8 under 0.1 m against 5.
    max_time_scale: the optimiser, A* and retry time budgets are multiplied by up to this much
        when planning from a hover (GEN_NEW_TRAJ) and after consecutive failed replans.
    flight_failure_time_scale_step: after ``k`` failed plans in a row, the next replan in flight
        gets the time scale ``1 + k x`` this (at most ``max_time_scale``; a plan from (nearly)
        rest gets ``1 + k / 2``). 0: a replan in flight keeps its budgets after failures (the
        next tick, 0.1 s later, tries again from its next guess), which bounds its time: with
        0.5 (before) the replans after failed ones made the replan time's tail: at 6 m/s
        (benchmarks/forest.py, seeds 0-199) replan CPU p95 42-43 ms at 0.5 against 30 ms at 0,
        L-BFGS iterations per replan p95 144-160 against 81-88, the same mean speed, 194 / 193
        of 200 forests reached, flights under 0.1 m 30 / 22; at 4 m/s (seeds 0-99, where
        failures are rare) 97 / 98 %, 25.7 / 24.7 ms.
    turn_first_rad, turn_first_speed_mps, max_turn_s: a plan from (nearly) rest, below
        turn_first_speed_mps, that leaves more than turn_first_rad away from where the camera
        looks first turns the vehicle on the spot (for at most max_turn_s), then plans again.
    turn_replan_period_s: while the vehicle turns on the spot toward a plan's heading, plan
        again only once the camera is within 0.2 rad of it or after this long, s (0: every
        tick, each plan a full plan from rest). 0.5 s, paired in 100 forests
        (``benchmarks/forest.py``): the same outcomes at 4 and 6 m/s; 13 % fewer plans from rest
        at 6 m/s but 4 % more at 4 m/s, replan CPU p95 -6 % / +21 %: no gain, so 0.
    retry_offset_m: (min, max) lateral offset of the retry waypoints, m.
    seed: seeds the retry waypoints.
    use_depth: fuse the depth image (also clears space along no-return rays) when a frame has
        one; otherwise the point cloud.
    depth_pixel_stride: fuse every k-th pixel row and column of the depth image.
    map, optimizer, yaw: the parts' configurations. The map's default here is not
        :class:`GridMapConfig`'s (EGO's 0.2 m cube, 2 voxels, which guarantees only ~0.01 m
        beyond the 0.19 m radius) but a 0.3 m vertical cylinder (3 voxels; the cube of that
        half-width is 0.42 m wide along a horizontal diagonal and closes gaps a round vehicle
        fits through: 92 % at 6 m/s). In 100 seeded forests (``benchmarks/forest.py --episodes
        100 --speeds 2 4 6 --time-scale 1000 --ego-variant ...``, seeds 0-99, paired, with
        ``rest_plan_iterations`` 200) against the 0.2 m cube: flights closer than 0.1 m beyond the
        radius 0 / 0 / 6 against 3 / 10 / 16 at 2 / 4 / 6 m/s, collisions 0 / 0 / 0 against 0 / 1
        / 2, reached 99 / 98 / 99 % against 100 / 98 / 96 %, mean speed 1-4 % lower, replan CPU
        p95 +30-55 % (the recoveries from rest next to a trunk; the replans in flight +10-15 %).
        Its depth fusion erodes free space by 2 pixels (``free_space_erosion_px``: a ray clears
        only up to the nearest return within 2 pixels of its own; EGO's fusion, 0, lets the rays
        passing beside a trunk's edge carve the trunk's own edge voxels free, so the inflation
        around the edge the path passes is missing until the trunk is seen close up). Paired over
        seeds 0-399 at 4 and 6 m/s (``benchmarks/forest.py``'s flights, stop 49): 799 of 800
        reached against 799, flights closer than 0.1 m beyond the radius 2 against 7, under
        0.15 m 25 against 44, mean speed -0.8 / -0.8 % at 4 m/s and -1.7 / -1.6 % at 6 m/s
        (seeds 0-199 / 200-399); 1 pixel: 799, 6, 27, -0.5 to -2.0 %; 3 pixels at 6 m/s: 400 of
        400, 1, 11, -1.6 %, like 2.
        The optimiser's default here is not :class:`OptimizerConfig`'s either: it limits the
        jerk (``jerk_time_s`` 0.15 s: the acceleration turns by at most its limit in 0.15 s), so a
        swerve is a curve the vehicle tracks (see ``OptimizerConfig.jerk_time_s`` for the figures).
    unknown_space: an :class:`~planner_pkg.planning.frontier.UnknownSpaceConfig`: how the
        planner treats space its camera never observed (:mod:`planner_pkg.planning.frontier`).
        With ``stop_before_unknown`` (default on, once a depth image has been fused) every new
        trajectory is re-timed so that from each point the vehicle can brake at
        ``decel_fraction`` x max_acc_mps2, after ``latency_s``, to rest ``margin_m`` short of the
        first never-observed or blocked point along its path (EGO counts unknown as free and
        flies into it at cruise speed); ``start_radius_m`` around the start is exempt (the camera
        cannot see beside or below itself); ``history_frames`` / ``history_period_s``: the recent
        depth frames kept to answer "was this point seen free?" where the voxel map's rays leave
        gaps. A plan that can stop inside observed free space anyway is left exactly as EGO's.
        From rest, a plan refused for having no observed space to fly into turns the camera
        toward it (when more than 0.2 rad off; within max_turn_s) rather than flying a detour
        that another initial guess found.
    stall: a :class:`~planner_pkg.planning.stall.StallConfig`: with ``enabled`` (default), after
        ``time_s`` (10 s) without the distance to the goal coming down by ``progress_m`` (2 m), or
        after ``max_consecutive_failures`` failed plans in a row where EGO gives the goal up, the
        local targets come from an A* route through the map (0.3 m cells with more clearance,
        within ``corridor_m`` of the start-goal segment, searched again every
        ``reroute_period_s``) instead of the start-goal line, until that progress comes
        (:mod:`planner_pkg.planning.stall`). In the forest benchmark (``OMP_NUM_THREADS=1 python
        benchmarks/forest.py --episodes 200 [--first-seed 200] --speeds 4 6 --planners ego
        --time-scale 1000 --ego-variant ...``, seeds 0-399 at 4 and 6 m/s and 0-99 at 2 m/s,
        paired with it off) it acts in one flight of the 900, forest seed 61, where the line's
        local target lay in a pocket of trunks and the plans swung between two ways round a row
        of them for 29 s: reached in 27.8 / 26.8 / 45.3 s at 4 / 6 / 2 m/s against a timeout /
        27.6 s / a timeout; every other flight is the same flight. With ``time_s`` 6 s it also
        routed 24 flights that got out by themselves (6 of them faster, 13 slower, 5 in the same
        time; 4 m/s seed 371: 31.3 s against 22.3), and with no corridor the route ran round the forest's edge and
        out of the flight area (seed 241 at 4 m/s).
    """

    max_vel_mps: float = positive(EGO_MAX_VEL_MPS)
    max_acc_mps2: float = positive(EGO_MAX_ACC_MPS2)
    speed_headroom: float = setting(0.03, range=(0.0, 0.5))
    planning_horizon_m: float = positive(7.5)
    reuse_retime_acc_fraction: float = setting(1.0, range=(0.0, 1.0))
    ctrl_pt_dist_m: float = positive(0.4)
    rate_hz: float = positive(10.0)
    replan_period_s: float = positive(1.0)
    replan_progress_m: float = positive(1.5)
    emergency_time_s: float = positive(1.0)
    safety_horizon_s: float = positive(2.0)
    emergency_decel_mps2: Optional[float] = positive(None)
    emergency_ramp_s: float = setting(0.0, range=(0.0, 1.0))
    emergency_clearance_m: Optional[float] = positive(0.25)
    emergency_steer_deg: Tuple[float, ...] = setting((25.0, 45.0), range=(0.0, 75.0))
    emergency_steer_gain_m: float = non_negative(0.05)
    inflation_block_braking: bool = False
    goal_search_radius_m: float = non_negative(1.0)
    target_search_radius_m: float = non_negative(1.5)
    reached_tolerance_m: float = positive(0.2)
    max_tracking_error_m: float = positive(1.0)
    lag_resync_m: float = positive(0.1)
    max_resync_s: float = positive(1.0)
    lag_replan_m: float = non_negative(0.2)
    lag_replan_period_s: float = non_negative(0.2)
    latch_hold: bool = True
    max_consecutive_failures: int = setting(40, range=(1, math.inf))
    retry_budget_s: float = positive(0.05)
    replan_iterations: int = setting(50, range=(1, math.inf))
    rest_plan_iterations: int = setting(200, range=(0, math.inf))
    rest_guess_rotation: bool = False
    crawl_after_rest_failures: int = setting(3, range=(0, math.inf))
    crawl_speed_fraction: float = setting(0.3, range=(0.0, 1.0), low_open=True)
    flight_brake_after_failures: int = setting(1, range=(0, math.inf))
    flight_brake_speed_fraction: float = setting(0.7, range=(0.0, 1.0), low_open=True)
    max_time_scale: float = positive(4.0)
    flight_failure_time_scale_step: float = non_negative(0.0)
    turn_first_rad: float = positive(0.8)
    turn_first_speed_mps: float = positive(0.5)
    max_turn_s: float = positive(3.0)
    turn_replan_period_s: float = non_negative(0.0)
    retry_offset_m: Tuple[float, float] = setting((1.0, 2.5), range=(0.0, math.inf), pair=True)
    seed: int = setting(0, range=(0, math.inf))
    use_depth: bool = True
    depth_pixel_stride: int = setting(1, range=(1, math.inf))
    map: GridMapConfig = field(default_factory=lambda: GridMapConfig(inflation_m=0.3,
                                                                     inflation_shape=InflationShape.CYLINDER,
                                                                     free_space_erosion_px=2))
    optimizer: OptimizerConfig = setting(default_factory=lambda: OptimizerConfig(jerk_time_s=0.15), derived={
        "max_vel_mps": "set by EgoConfig.max_vel_mps (the optimiser plans at plan_vel_mps)",
        "max_acc_mps2": "set by EgoConfig.max_acc_mps2"})
    yaw: YawConfig = field(default_factory=YawConfig)
    unknown_space: UnknownSpaceConfig = field(default_factory=UnknownSpaceConfig)
    stall: StallConfig = field(default_factory=StallConfig)
    # EGO-Swarm (planning/swarm.py): used only once a swarm is attached (EgoPlanner.attach_swarm)
    swarm: SwarmConfig = field(default_factory=SwarmConfig)

    def _check(self) -> None:
        if self.inflation_block_braking and self.unknown_space.braking_jerk_time_s <= 0.0:
            raise self._error("inflation_block_braking", "the braking before an inflation-only block needs a "
                              "jerk-limited onset: set unknown_space.braking_jerk_time_s above 0")

    def at_speed(self, max_vel_mps: float) -> "EgoConfig":
        """This config flying ``max_vel_mps`` with the acceleration limit that speed needs
        (:func:`speed_scaled_max_acc`): what a speed limit given alone means (``fly --max-vel``,
        ``swarm fly --max-vel``, the planner node's ``max_vel_mps``). ValueError for a speed that
        is not positive and finite."""
        return replace(self, max_vel_mps=float(max_vel_mps), max_acc_mps2=speed_scaled_max_acc(max_vel_mps))

    def with_time_limits_scaled(self, factor: float) -> "EgoConfig":
        """This config with every wall-clock safety net multiplied by ``factor`` (>= 1): the
        optimiser's ``max_time_s``, A*'s ``max_time_s`` and ``retry_budget_s``. The deterministic
        budgets (L-BFGS iterations, A* expansions) are unchanged and then decide the result alone
        unless the machine is ``factor`` times slower than the limits assume. Used where the clock
        stands still while the planner thinks (a lockstep simulation)."""
        if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor >= 1.0):
            raise ValueError(f"time limit scale must be a finite number >= 1, got {factor!r}")
        if factor == 1.0:
            return self
        opt = self.optimizer
        astar = replace(opt.astar, max_time_s=opt.astar.max_time_s * factor)
        route = replace(self.stall.astar, max_time_s=self.stall.astar.max_time_s * factor)
        return replace(self, retry_budget_s=self.retry_budget_s * factor,
                       optimizer=replace(opt, max_time_s=opt.max_time_s * factor, astar=astar),
                       stall=replace(self.stall, astar=route))

    @property
    def plan_vel_mps(self) -> float:
        """The speed plans cruise at, m/s: ``max_vel_mps`` less the ``speed_headroom``."""
        return self.max_vel_mps * (1.0 - self.speed_headroom)

    @property
    def knot_dt_s(self) -> float:
        return self.ctrl_pt_dist_m / self.max_vel_mps * 1.2
