"""Seeds for the MAVLink fuzz tests: random per run, printed, reproducible.

The session seed comes from ``MAVLINK_FUZZ_SEED`` or, without it, from the OS. It is shown in
the pytest header and printed by every test that uses ``fuzz_rng`` (pytest shows that output
when the test fails). Each test draws from its own generator seeded with ``(seed, crc32(test
name))``, so one test replays identically on its own: ``MAVLINK_FUZZ_SEED=N pytest -k name``.
"""
import os
import secrets
import zlib

import numpy as np
import pytest

FUZZ_SEED_ENV = "MAVLINK_FUZZ_SEED"


def _session_seed() -> int:
    text = os.environ.get(FUZZ_SEED_ENV, "").strip()
    if not text:
        return secrets.randbits(32)
    try:
        return int(text, 0)
    except ValueError:
        raise pytest.UsageError(f"{FUZZ_SEED_ENV}={text!r} is not an integer seed") from None


FUZZ_SEED = _session_seed()


def pytest_report_header(config):
    return f"mavlink fuzz seed: {FUZZ_SEED} (reproduce with {FUZZ_SEED_ENV}={FUZZ_SEED})"


@pytest.fixture
def fuzz_rng(request) -> np.random.Generator:
    """A generator for this test, reproducible from the printed seed."""
    print(f"fuzz seed {FUZZ_SEED} for {request.node.name}: reproduce with "
          f"{FUZZ_SEED_ENV}={FUZZ_SEED} pytest -k '{request.node.name}'")
    return np.random.default_rng([FUZZ_SEED, zlib.crc32(request.node.name.encode())])
