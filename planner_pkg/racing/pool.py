"""The rollout worker pool: Ray actors (``--workers N --ray-address local|auto|ray://host:port``),
or the workers in this process when ``workers == 1`` or Ray is not installed.

``local`` starts a private Ray instance on this machine (``ray.init(num_cpus=workers)``);
``auto`` joins the cluster started with ``ray start --head`` on this machine; ``ray://host:port``
joins a remote cluster through Ray Client (its nodes need this package installed). The same
code runs on a laptop and on a cluster: each worker is one actor holding its environments; per
iteration the learner puts the policy weights in the object store once, every actor collects its
steps, and the batches come back in worker order (so a run is deterministic given the seed and
the worker count, wherever the actors run).
"""
from __future__ import annotations

import logging
import re
from typing import Dict, List, Optional

from planner_pkg.racing.rollout import RolloutWorker

__all__ = ["WorkerPool", "ray_available", "check_ray_address", "RAY_ADDRESS_HELP"]

logger = logging.getLogger(__name__)

RAY_ADDRESS_HELP = "local (a private Ray instance), auto (the cluster on this machine) or ray://host:port"
_RAY_URL = re.compile(r"^ray://[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def check_ray_address(address: str) -> str:
    """``address`` if it is one of the accepted forms; ValueError otherwise."""
    if address in ("local", "auto") or _RAY_URL.match(address or ""):
        return address
    raise ValueError(f"--ray-address must be {RAY_ADDRESS_HELP}, got {address!r}")


#: Attempts at starting a local Ray instance. Ray waits a fixed 30 s for its raylet to register;
#: on a loaded machine (measured here: load average 17 on 2 cores) that start-up can miss it.
LOCAL_START_ATTEMPTS = 3


def _init_local(ray, kwargs) -> None:
    for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
        try:
            ray.init(**kwargs)
            return
        except Exception as exc:  # ray raises a bare Exception for a start-up timeout
            if "timed out during startup" not in str(exc) or attempt == LOCAL_START_ATTEMPTS:
                raise
            logger.warning("local Ray instance did not start in time (attempt %d of %d: %s); retrying",
                           attempt, LOCAL_START_ATTEMPTS, " ".join(str(exc).split()))
            ray.shutdown()


class WorkerPool:
    """``workers`` rollout workers of ``envs`` environments each (module docstring).

    ``in_process`` forces the in-process workers (tests compare the two modes). ``mode`` is "ray"
    or "in-process" once built (in-process when workers == 1, or when Ray is
    missing: then a warning is logged and the workers run one after another here).
    """

    def __init__(self, config: dict, workers: int, envs: int, seed: int, ray_address: str = "local",
                 ray_init_kwargs: Optional[dict] = None, in_process: bool = False):
        check_ray_address(ray_address)
        self.workers = int(workers)
        self._ray = None
        self._started_ray = False
        if self.workers > 1 and not in_process and not ray_available():
            logger.warning("ray is not installed (pip install -e '.[ray]'): running the %d workers in-process, "
                           "one after another", self.workers)
        if self.workers > 1 and not in_process and ray_available():
            import ray

            self._ray = ray
            if not ray.is_initialized():
                kwargs = dict(ray_init_kwargs or {})
                kwargs.setdefault("include_dashboard", False)
                kwargs.setdefault("log_to_driver", False)
                if ray_address == "local":
                    kwargs.setdefault("num_cpus", self.workers)
                    _init_local(ray, kwargs)
                else:
                    ray.init(address=ray_address, **kwargs)
                self._started_ray = True
            actor_cls = ray.remote(num_cpus=1)(RolloutWorker)
            self._actors = [actor_cls.remote(config, i, envs, seed) for i in range(self.workers)]
            self.mode = "ray"
        else:
            self._local = [RolloutWorker(config, i, envs, seed) for i in range(self.workers)]
            self.mode = "in-process"

    def collect(self, params: Dict[str, object], steps: int) -> List[dict]:
        """One batch per worker, in worker order."""
        if self._ray is not None:
            ref = self._ray.put(params)
            return self._ray.get([a.collect.remote(ref, steps) for a in self._actors])
        return [w.collect(params, steps) for w in self._local]

    def close(self) -> None:
        if self._ray is not None:
            for a in self._actors:
                self._ray.kill(a)
            self._actors = []
            if self._started_ray:
                self._ray.shutdown()
            self._ray = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
