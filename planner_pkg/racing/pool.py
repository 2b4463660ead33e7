"""The rollout worker pool of ``race train``: :class:`RolloutWorker` objects on the package's
worker pool (:mod:`planner_pkg.pool`: Ray actors for ``--workers N --ray-address
local|auto|ray://host:port``, in-process when ``workers == 1`` or Ray is not installed).

Each worker is one actor holding its environments; per iteration the learner puts the policy
weights in the object store once, every actor collects its steps, and the batches come back in
worker order (so a run is deterministic given the seed and the worker count, wherever the actors
run). :meth:`WorkerPool.states` / :meth:`WorkerPool.load_states` read and restore every worker's
environments and random streams (a checkpoint's resume point).
"""
from __future__ import annotations

from typing import Dict, List, Optional

from planner_pkg.pool import RAY_ADDRESS_HELP, ActorPool, check_ray_address, ray_available
from planner_pkg.racing.rollout import RolloutWorker

__all__ = ["WorkerPool", "ray_available", "check_ray_address", "RAY_ADDRESS_HELP"]


class WorkerPool:
    """``workers`` rollout workers of ``envs`` environments each (module docstring).

    ``in_process`` forces the in-process workers (tests compare the two modes). ``mode`` is "ray"
    or "in-process" once built.
    """

    def __init__(self, config: dict, workers: int, envs: int, seed: int, ray_address: str = "local",
                 ray_init_kwargs: Optional[dict] = None, in_process: bool = False):
        self.workers = int(workers)
        self._pool = ActorPool(RolloutWorker, [(config, i, envs, seed) for i in range(self.workers)],
                               ray_address, ray_init_kwargs, in_process)
        self.mode = self._pool.mode

    def collect(self, params: Dict[str, object], steps: int) -> List[dict]:
        """One batch per worker, in worker order."""
        return self._pool.call("collect", params, steps)

    def states(self) -> List[dict]:
        """Every worker's :meth:`RolloutWorker.get_state`, in worker order."""
        return self._pool.call("get_state")

    def load_states(self, states: List[dict]) -> None:
        """Restore what :meth:`states` returned (one state per worker; ValueError if one does not fit)."""
        if len(states) != self.workers:
            raise ValueError(f"{len(states)} worker states for {self.workers} workers")
        self._pool.call_each("set_state", [(s,) for s in states])

    def close(self) -> None:
        self._pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
