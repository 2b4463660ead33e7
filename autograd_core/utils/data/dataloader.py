"""`DataLoader`: batches from a dataset through a sampler and a collate function (torch's API).

Everything runs in the calling process. `num_workers > 0` is accepted (the work is NumPy slicing:
worker processes would cost more than they save); the loader logs one note and, if given, calls
`worker_init_fn(0)` once per pass, as a single worker would.
"""
import logging

from ._collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info"]

_log = logging.getLogger(__name__)
_noted = [False]


def get_worker_info():
    """None: batches are always loaded in the main process here."""
    return None


class DataLoader:
    """`DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
    collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None, ...,
    generator=None)`.

    Iterating yields `collate_fn([dataset[i] for i in batch])` for each batch of indices;
    `batch_size=None` turns automatic batching off (each sample passes `default_convert`).
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)

        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None:
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                                 "drop_last")
        elif isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")

        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None or (self._iterable and self.batch_size is not None)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)  # TypeError when the stream has no length, as torch
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)

    def __iter__(self):
        if self.num_workers > 0:
            if not _noted[0]:
                _log.info("DataLoader(num_workers=%d): autograd_core loads batches in the main process",
                          self.num_workers)
                _noted[0] = True
            if self.worker_init_fn is not None:
                self.worker_init_fn(0)
        return _Iter(self)


class _Iter:
    """One pass over a DataLoader."""

    def __init__(self, loader):
        self._loader = loader
        self._collate = loader.collate_fn
        ds = loader.dataset
        self._ds = ds
        if loader._iterable:
            self._it = iter(ds)
            self._batched_stream = loader.batch_size is not None
        else:
            self._it = iter(loader.batch_sampler if loader.batch_sampler is not None else loader.sampler)
        self._getitems = getattr(ds, "__getitems__", None) if not loader._iterable else None
        self._len = None

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        ld = self._loader
        if ld._iterable:
            if not self._batched_stream:
                return self._collate(next(self._it))
            batch = []
            for sample in self._it:
                batch.append(sample)
                if len(batch) == ld.batch_size:
                    break
            if not batch or (ld.drop_last and len(batch) < ld.batch_size):
                raise StopIteration
            return self._collate(batch)
        idx = next(self._it)
        if ld._auto_collation:
            samples = self._getitems(idx) if self._getitems is not None else [self._ds[i] for i in idx]
            return self._collate(samples)
        return self._collate(self._ds[idx])
