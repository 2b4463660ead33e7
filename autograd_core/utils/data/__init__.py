"""`autograd_core.utils.data`: datasets, samplers and the DataLoader with torch.utils.data's names.

Batches are made in the calling process. `num_workers > 0` is accepted and runs in-process (one
logged note): loading here is NumPy slicing, where worker processes would cost more than they save.
"""
from ._collate import default_collate, default_convert
from .dataloader import DataLoader, get_worker_info
from .dataset import (ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                      WeightedRandomSampler)

__all__ = ["BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset", "RandomSampler",
           "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset",
           "WeightedRandomSampler", "default_collate", "default_convert", "get_worker_info", "random_split"]
