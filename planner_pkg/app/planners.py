"""The planner registry: one place that turns a planner name into a planner object (used by
``fly``, the planner node and the tests).

To plug a new planner in, add one builder to ``_BUILDERS``: a function taking
:class:`PlannerOptions` and returning an object that follows the runner's Planner protocol
(see :mod:`planner_pkg.sim.runner`). Import the planner's module *inside* the builder so that
choosing ``direct`` never imports (or fails on) the others. The simulator knows no planner: this
registry sits above it, in the composition layer (docs/architecture.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional

from planner_pkg.config_schema import Config, positive

PLANNER_NAMES = ("direct", "ego", "policy")


class PlannerNotAvailableError(RuntimeError):
    """The named planner is not part of this installation (or its options are unusable)."""


@dataclass(frozen=True)
class PlannerOptions(Config):
    """Options every planner may honour.

    max_vel_mps: overrides the planner's speed limit (the policy's commanded speed; EGO's
        acceleration limit goes with it, see ``ego_config.speed_scaled_max_acc``); None = the
        planner's default.
    model_path: a trained model file (the learned policy); None when not needed.
    seed: for planners with randomness, so episodes are reproducible.
    """

    max_vel_mps: Optional[float] = positive(None)
    model_path: Optional[str] = None
    seed: int = 0


def _direct(options: PlannerOptions):
    from planner_pkg.planning.direct import DirectConfig, DirectPlanner

    if options.max_vel_mps is None:
        return DirectPlanner()
    return DirectPlanner(DirectConfig(max_vel_mps=options.max_vel_mps))


def _ego(options: PlannerOptions):
    from planner_pkg.planning.ego_planner import EgoConfig, EgoPlanner

    config = EgoConfig(seed=options.seed)
    if options.max_vel_mps is None:
        return EgoPlanner(config)
    # a speed limit alone comes with the acceleration limit for that speed (EGO's 3 m/s^2 at 2 m/s)
    return EgoPlanner(config.at_speed(options.max_vel_mps))


def _policy(options: PlannerOptions):
    from planner_pkg.policy.export import default_model_path
    from planner_pkg.policy.export import PolicyModelError
    from planner_pkg.policy.planner import PolicyPlanner, PolicyPlannerConfig

    path = options.model_path or default_model_path()
    if path is None:
        raise PlannerNotAvailableError(
            "planner 'policy' needs a trained model: pass --model FILE (train one with "
            "'python -m planner_pkg policy train --config config/policy/default.yaml --out model.agm')"
        )
    try:
        return PolicyPlanner(path, PolicyPlannerConfig(speed_mps=options.max_vel_mps))
    except PolicyModelError as exc:
        raise PlannerNotAvailableError(f"planner 'policy': {exc}") from None


def _not_installed(name: str, arrives_with: str) -> Callable[[PlannerOptions], object]:
    def build(options: PlannerOptions):
        raise PlannerNotAvailableError(
            f"planner '{name}' is not installed in this version of planner_pkg (it arrives with "
            f"{arrives_with}); available now: {', '.join(available_planners())}"
        )

    build.not_installed = True  # type: ignore[attr-defined]
    return build


_BUILDERS: Dict[str, Callable[[PlannerOptions], object]] = {
    "direct": _direct,
    "ego": _ego,
    "policy": _policy,
}


def available_planners() -> tuple:
    """Names whose planner can be built in this installation."""
    return tuple(n for n, b in _BUILDERS.items() if not getattr(b, "not_installed", False))


def make_planner(name: str, options: PlannerOptions = PlannerOptions()):
    """Build the planner called ``name`` (one of ``PLANNER_NAMES``).

    Raises ValueError for an unknown name and PlannerNotAvailableError for a known planner
    that this installation does not provide.
    """
    try:
        build = _BUILDERS[name]
    except KeyError:
        raise ValueError(f"unknown planner {name!r}; choose one of {', '.join(PLANNER_NAMES)}") from None
    return build(options)
