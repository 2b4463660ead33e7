"""The worker pool: Ray actors (``--workers N --ray-address local|auto|ray://host:port``), or the
workers in this process when ``workers == 1``, when asked to (``in_process``) or when Ray is not
installed. One mechanism for every scale-out of the package: PPO rollouts (``race train``),
closed-loop evaluation episodes (``policy eval``) and benchmark episodes (``benchmarks/forest.py``).

``local`` starts a private Ray instance on this machine (``ray.init(num_cpus=workers)``) and shuts
it down on :meth:`ActorPool.close`; ``auto`` joins the cluster started with ``ray start --head``
on this machine; ``ray://host:port`` joins a remote cluster through Ray Client (its nodes need
this package installed). An instance that is already running (``ray.is_initialized()``) is used
as it is and left running.

Two ways to use it:

* :class:`ActorPool`: ``workers`` stateful objects of one class (each built with its own
  arguments); :meth:`ActorPool.call` calls one method on every worker with the same arguments
  (put in the object store once) and returns the results in worker order, so a computation is
  deterministic given the worker count wherever the actors run.
* :func:`map_items`: ``fn(context, item)`` for every item, spread over the workers one item at a
  time (a worker that finishes takes the next), results in item order. ``context`` is built once
  per worker by ``setup(shared)`` (e.g. load a model file). When ``fn`` depends only on its item
  (a seeded episode), the results equal the in-process run's for any worker count.

Functions and classes from outside ``planner_pkg`` (a benchmark script) are shipped to the workers
by value, so the workers need only this package installed.
"""
from __future__ import annotations

import logging
import re
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

__all__ = ["ActorPool", "map_items", "ray_available", "check_ray_address", "RAY_ADDRESS_HELP",
           "LOCAL_START_ATTEMPTS"]

logger = logging.getLogger(__name__)

RAY_ADDRESS_HELP = "local (a private Ray instance), auto (the cluster on this machine) or ray://host:port"
_RAY_URL = re.compile(r"^ray://[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")

#: Attempts at starting a local Ray instance. Ray waits a fixed 30 s for its raylet to register;
#: on a loaded machine (measured here: load average 17 on 2 cores) that start-up can miss it.
LOCAL_START_ATTEMPTS = 3


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


def _ship_by_value(obj) -> None:
    """Let cloudpickle send ``obj``'s module by value when it is not part of this package (a
    script or a test module the Ray workers cannot import)."""
    module = getattr(obj, "__module__", None) or ""
    if module == "__main__" or module == "planner_pkg" or module.startswith("planner_pkg."):
        return  # __main__ goes by value anyway; the package is importable on every worker
    mod = sys.modules.get(module)
    if mod is not None:
        from ray import cloudpickle

        cloudpickle.register_pickle_by_value(mod)


class ActorPool:
    """``len(init_args)`` workers ``cls(*init_args[i])`` (module docstring).

    ``mode`` is "ray" or "in-process" (in-process when there is one worker, ``in_process`` is
    set, or Ray is missing: then a warning is logged and the workers run one after another here).
    """

    def __init__(self, cls, init_args: Sequence[tuple], ray_address: str = "local",
                 ray_init_kwargs: Optional[dict] = None, in_process: bool = False):
        check_ray_address(ray_address)
        self.workers = len(init_args)
        if self.workers < 1:
            raise ValueError("a worker pool needs at least one worker")
        self._ray = None
        self._started_ray = False
        self._actors: List[Any] = []
        self._local: List[Any] = []
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
            _ship_by_value(cls)
            actor_cls = ray.remote(num_cpus=1)(cls)
            self._actors = [actor_cls.remote(*args) for args in init_args]
            self.mode = "ray"
        else:
            self._local = [cls(*args) for args in init_args]
            self.mode = "in-process"

    def call(self, method: str, *args) -> List[Any]:
        """``worker.method(*args)`` on every worker; the results in worker order."""
        if self._ray is not None:
            refs = [self._ray.put(a) for a in args]
            return self._ray.get([getattr(a, method).remote(*refs) for a in self._actors])
        return [getattr(w, method)(*args) for w in self._local]

    def call_each(self, method: str, args: Sequence[tuple]) -> List[Any]:
        """``worker_i.method(*args[i])``; the results in worker order."""
        if len(args) != self.workers:
            raise ValueError(f"need one argument tuple per worker: {self.workers} workers, {len(args)} given")
        if self._ray is not None:
            return self._ray.get([getattr(a, method).remote(*x) for a, x in zip(self._actors, args)])
        return [getattr(w, method)(*x) for w, x in zip(self._local, args)]

    def submit(self, index: int, method: str, *args):
        """Start ``method`` on worker ``index``; returns a handle for :meth:`wait_one` (Ray mode only:
        in-process workers run in :meth:`call`)."""
        if self._ray is None:
            raise RuntimeError("submit() needs the Ray workers; this pool runs in-process")
        return getattr(self._actors[index], method).remote(*args)

    def wait_one(self, handles: list):
        """(position in ``handles`` of one finished call, its result); Ray mode only."""
        done, _ = self._ray.wait(handles, num_returns=1)
        pos = handles.index(done[0])
        return pos, self._ray.get(done[0])

    def put(self, value):
        return self._ray.put(value) if self._ray is not None else value

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


class _ItemWorker:
    """One worker of :func:`map_items`: its context, built once."""

    def __init__(self, setup: Optional[Callable[[Any], Any]], shared: Any):
        self.context = setup(shared) if setup is not None else shared

    def run(self, fn: Callable[[Any, Any], Any], item: Any) -> Any:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):  # one CPU per worker: no BLAS threads competing for it
            return fn(self.context, item)


def map_items(fn: Callable[[Any, Any], Any], items: Sequence[Any], workers: int = 1,
              setup: Optional[Callable[[Any], Any]] = None, shared: Any = None, ray_address: str = "local",
              ray_init_kwargs: Optional[dict] = None, in_process: bool = False,
              on_result: Optional[Callable[[int, Any], None]] = None) -> Dict[str, Any]:
    """``fn(context, item)`` for every item on ``workers`` workers (module docstring).

    Returns {"results": [...] in item order, "mode": "ray" | "in-process"}. ``on_result(i,
    result)`` is called once per item, in item order, as soon as that item and all before it are
    done. ``fn``, ``setup`` and ``shared`` must be picklable for Ray (functions at module level).
    """
    items = list(items)
    n = max(1, min(int(workers), len(items)))
    results: List[Any] = [None] * len(items)
    if not items:
        return {"results": results, "mode": "in-process"}
    if n == 1 or in_process or not ray_available():
        if n > 1 and not in_process:
            logger.warning("ray is not installed (pip install -e '.[ray]'): running the %d items in-process, "
                           "one after another", len(items))
        worker = _ItemWorker(setup, shared)
        for i, item in enumerate(items):
            results[i] = worker.run(fn, item)
            if on_result is not None:
                on_result(i, results[i])
        return {"results": results, "mode": "in-process"}
    _ship_by_value(fn)
    if setup is not None:
        _ship_by_value(setup)
    with ActorPool(_ItemWorker, [(setup, shared)] * n, ray_address, ray_init_kwargs) as pool:
        fn_ref = pool.put(fn)
        pending = []  # (handle, worker, item index)
        next_item = 0
        for w in range(n):
            pending.append((pool.submit(w, "run", fn_ref, items[next_item]), w, next_item))
            next_item += 1
        done = [False] * len(items)
        reported = 0
        while pending:
            pos, value = pool.wait_one([p[0] for p in pending])
            _, w, i = pending.pop(pos)
            results[i], done[i] = value, True
            if next_item < len(items):
                pending.append((pool.submit(w, "run", fn_ref, items[next_item]), w, next_item))
                next_item += 1
            while reported < len(items) and done[reported]:
                if on_result is not None:
                    on_result(reported, results[reported])
                reported += 1
        return {"results": results, "mode": pool.mode}
