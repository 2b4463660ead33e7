"""Seeded randomness: one global NumPy PCG64 generator, `manual_seed`, and `Generator` objects.

Numbers differ from torch's (its Philox/MT streams are not reproduced); the same seed gives the
same numbers here, on every machine.
"""
import numpy as np

__all__ = ["manual_seed", "seed", "initial_seed", "Generator", "default_generator", "get_rng_state",
           "set_rng_state"]


class Generator:
    """A random stream, like torch.Generator (CPU only)."""

    def __init__(self, device="cpu"):
        self._seed = 0
        self._rng = np.random.default_rng(0)

    def manual_seed(self, seed):
        seed = int(seed)
        if seed < 0:
            seed &= (1 << 64) - 1  # torch accepts negative seeds by wrapping them
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        return self

    def initial_seed(self):
        return self._seed

    def seed(self):
        s = int(np.random.SeedSequence().entropy) & ((1 << 63) - 1)
        self.manual_seed(s)
        return s

    def get_state(self):
        from .tensor import _wrap
        state = self._rng.bit_generator.state
        # Data-only encoding: [seed, state words..., inc words..., has_uint32, uinteger]
        s = state["state"]
        words = [self._seed, s["state"] >> 64, s["state"] & (2**64 - 1), s["inc"] >> 64, s["inc"] & (2**64 - 1),
                 state["has_uint32"], state["uinteger"]]
        return _wrap(np.array(words, dtype=np.uint64).view(np.int64))

    def set_state(self, new_state):
        w = [int(x) for x in np.asarray(new_state._data if hasattr(new_state, "_data") else new_state,
                                        dtype=np.int64).view(np.uint64)]
        if len(w) != 7:
            raise ValueError("invalid generator state: expected 7 words from get_state()")
        self._seed = w[0]
        self._rng = np.random.default_rng()
        self._rng.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": (w[1] << 64) | w[2], "inc": (w[3] << 64) | w[4]},
            "has_uint32": w[5], "uinteger": w[6]}
        return self

    @property
    def device(self):
        from .tensor import _CPU
        return _CPU


default_generator = Generator()


def manual_seed(seed):
    """Seed the global generator; returns it, as torch does."""
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


def rng(generator=None):
    """The NumPy generator behind `generator` (or the global one)."""
    return (generator or default_generator)._rng
