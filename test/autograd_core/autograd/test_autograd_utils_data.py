"""autograd_core.utils.data against torch.utils.data: batching, collation, samplers, splits."""
import collections
import logging

import numpy as np
import pytest

import autograd_core as ac
from autograd_core.utils import data as D

torch = pytest.importorskip("torch")
import torch.utils.data as TD  # noqa: E402

Point = collections.namedtuple("Point", "x y")


def _tree(obj):
    """A comparable description of a collated batch: structure, dtypes and values."""
    if isinstance(obj, (ac.Tensor, torch.Tensor)):
        return ("tensor", str(obj.dtype), obj.detach().numpy().tolist())
    if isinstance(obj, dict):
        return ("dict", {k: _tree(v) for k, v in obj.items()})
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return ("namedtuple", type(obj).__name__, [_tree(v) for v in obj])
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [_tree(v) for v in obj])
    return ("value", obj)


class Squares(D.Dataset):
    def __len__(self):
        return 11

    def __getitem__(self, i):
        return {"i": i, "sq": float(i * i), "name": f"s{i}", "pair": (i, [i + 0.5, -i]), "pt": Point(i, 2.0 * i),
                "arr": np.full((2,), i, np.float32), "np_scalar": np.int64(i), "flag": i % 2 == 0}


class TSquares(TD.Dataset):
    __len__ = Squares.__len__
    __getitem__ = Squares.__getitem__


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (11, True), (20, False)])
def test_sequential_batches_and_collation_match_torch(batch_size, drop_last):
    ours = D.DataLoader(Squares(), batch_size=batch_size, drop_last=drop_last)
    theirs = TD.DataLoader(TSquares(), batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    a, b = [_tree(x) for x in ours], [_tree(x) for x in theirs]
    assert a == b


def test_tensor_dataset_and_default_convert_without_batching():
    x = np.arange(12.0, dtype=np.float32).reshape(6, 2)
    y = np.arange(6)
    ours = D.DataLoader(D.TensorDataset(ac.tensor(x), ac.tensor(y)), batch_size=4)
    theirs = TD.DataLoader(TD.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=4)
    assert [_tree(v) for v in ours] == [_tree(v) for v in theirs]
    assert isinstance(next(iter(ours)), list)  # torch collates the sample tuples into a list
    nb_a = list(D.DataLoader(Squares(), batch_size=None))
    nb_t = list(TD.DataLoader(TSquares(), batch_size=None))
    assert [_tree(v) for v in nb_a] == [_tree(v) for v in nb_t]
    assert D.default_collate([1.5, 2.5]).dtype == ac.float64
    with pytest.raises(ValueError, match="Size mismatch"):
        D.TensorDataset(ac.ones(3), ac.ones(4))


def test_shuffle_is_a_permutation_reproducible_with_a_generator_or_the_global_seed():
    ds = D.TensorDataset(ac.arange(50))
    g = ac.Generator().manual_seed(3)
    first = [b[0].tolist() for b in D.DataLoader(ds, batch_size=7, shuffle=True, generator=g)]
    second = [b[0].tolist() for b in D.DataLoader(ds, batch_size=7, shuffle=True, generator=g)]
    flat = sum(first, [])
    assert sorted(flat) == list(range(50)) and flat != list(range(50))
    assert first != second  # the generator's stream moves on, as torch's
    g.manual_seed(3)
    assert [b[0].tolist() for b in D.DataLoader(ds, batch_size=7, shuffle=True, generator=g)] == first
    ac.manual_seed(11)
    a = [b[0].tolist() for b in D.DataLoader(ds, batch_size=5, shuffle=True)]
    ac.manual_seed(11)
    assert [b[0].tolist() for b in D.DataLoader(ds, batch_size=5, shuffle=True)] == a
    dl = D.DataLoader(ds, batch_size=7, shuffle=True, drop_last=True)
    assert len(dl) == 7 and all(len(b[0]) == 7 for b in dl)


def test_samplers():
    src = list(range(10))
    assert list(D.SequentialSampler(src)) == list(TD.SequentialSampler(src))
    rs = D.RandomSampler(src, generator=ac.Generator().manual_seed(0))
    assert sorted(rs) == src and len(rs) == 10
    rr = list(D.RandomSampler(src, replacement=True, num_samples=25, generator=ac.Generator().manual_seed(1)))
    assert len(rr) == 25 and all(0 <= i < 10 for i in rr)
    long = list(D.RandomSampler(src, num_samples=23))
    assert len(long) == 23 and sorted(long[:10]) == src
    bs_a = D.BatchSampler(D.SequentialSampler(src), 4, False)
    bs_t = TD.BatchSampler(TD.SequentialSampler(src), 4, False)
    assert list(bs_a) == list(bs_t) and len(bs_a) == len(bs_t)
    assert list(D.BatchSampler(src, 4, True)) == list(TD.BatchSampler(src, 4, True))
    sub = list(D.SubsetRandomSampler([2, 4, 6], generator=ac.Generator().manual_seed(2)))
    assert sorted(sub) == [2, 4, 6]
    w = list(D.WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 30, generator=ac.Generator().manual_seed(0)))
    assert set(w) <= {1, 3} and len(w) == 30
    with pytest.raises(ValueError, match="num_samples"):
        D.RandomSampler(src, num_samples=0)
    with pytest.raises(ValueError, match="batch_size"):
        D.BatchSampler(src, 0, False)


def test_custom_sampler_and_batch_sampler_arguments():
    ds = Squares()
    out = [b["i"].tolist() for b in D.DataLoader(ds, batch_size=2, sampler=[5, 3, 1])]
    assert out == [b["i"].tolist() for b in TD.DataLoader(TSquares(), batch_size=2, sampler=[5, 3, 1])] == [[5, 3], [1]]
    out = [b["i"].tolist() for b in D.DataLoader(ds, batch_sampler=[[0, 10], [4]])]
    assert out == [[0, 10], [4]]
    assert len(D.DataLoader(ds, batch_sampler=[[0, 10], [4]])) == 2
    for kw, msg in [(dict(sampler=[0], shuffle=True), "mutually exclusive with shuffle"),
                    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
                    (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler option is mutually exclusive"),
                    (dict(batch_size=None, drop_last=True), "mutually exclusive with drop_last"),
                    (dict(num_workers=-1), "num_workers"),
                    (dict(prefetch_factor=2), "prefetch_factor"),
                    (dict(batch_size=0), "batch_size")]:
        with pytest.raises(ValueError, match=msg):
            D.DataLoader(ds, **kw)
        with pytest.raises(ValueError):
            TD.DataLoader(TSquares(), **kw)


def test_collate_fn_and_workers_run_in_process_with_a_note(caplog):
    ds = Squares()
    seen = []
    with caplog.at_level(logging.INFO, logger="autograd_core.utils.data.dataloader"):
        dl = D.DataLoader(ds, batch_size=4, num_workers=3, collate_fn=lambda b: [s["i"] for s in b],
                          worker_init_fn=seen.append, persistent_workers=True, prefetch_factor=2, pin_memory=True)
        assert list(dl) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
    assert seen == [0]
    assert D.get_worker_info() is None
    from autograd_core.utils.data import dataloader as dlmod
    assert dlmod._noted[0]


def test_iterable_dataset_batches():
    class Stream(D.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    class TStream(TD.IterableDataset):
        def __iter__(self):
            return iter(range(7))
    for kw in (dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None)):
        a = [_tree(x) for x in D.DataLoader(Stream(), **kw)]
        b = [_tree(x) for x in TD.DataLoader(TStream(), **kw)]
        assert a == b
    with pytest.raises(ValueError, match="shuffle"):
        D.DataLoader(Stream(), shuffle=True)


def test_random_split_subset_concat():
    ds = list(range(10))
    for lengths in ([3, 7], [0.3, 0.7], [0.5, 0.25, 0.25], [0.34, 0.33, 0.33]):
        ours = D.random_split(ds, lengths, generator=ac.Generator().manual_seed(0))
        theirs = TD.random_split(ds, lengths, generator=torch.Generator().manual_seed(0))
        assert [len(s) for s in ours] == [len(s) for s in theirs]
        assert sorted(sum((list(s) for s in ours), [])) == ds
    ac.manual_seed(5)
    a = [s.indices for s in D.random_split(ds, [5, 5])]
    ac.manual_seed(5)
    assert [s.indices for s in D.random_split(ds, [5, 5])] == a
    with pytest.raises(ValueError, match="Sum of input lengths"):
        D.random_split(ds, [3, 3])
    sub = D.Subset(Squares(), [4, 2])
    assert len(sub) == 2 and sub[1]["i"] == 2
    cat = D.ConcatDataset([ds, [100, 101]])
    assert len(cat) == 12 and cat[10] == 100 and cat[-1] == 101 and cat[3] == 3
    both = Squares() + Squares()
    assert len(both) == 22 and both[12]["i"] == 1
