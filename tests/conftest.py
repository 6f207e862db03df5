"""Shared fixtures: the backends to run on, and the foundation's example record."""

import numpy as np
import pytest

DEVICES = ["cpu"]  # the CUDA backend joins here, with the `cuda` marker


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


TICK = np.dtype(
    [("ts", "<i8"), ("px", "<f8"), ("qty", "<i4"), ("side", "u1"), ("sym", "S8"),
     ("pos", "<f4", (3,)), ("flag", "?")],
    align=True,
)


def ticks(n, seed=0):
    rng = np.random.default_rng(seed)
    a = np.zeros(n, TICK)
    a["ts"] = np.arange(n) * 1000 + 1_700_000_000_000
    a["px"] = rng.normal(100, 5, n)
    a["qty"] = rng.integers(-1, 500, n)
    a["side"] = rng.integers(0, 2, n)
    a["sym"] = rng.choice([b"AAPL", b"MSFT", b"GOOGLE00", b""], n)
    a["pos"] = rng.normal(size=(n, 3))
    a["flag"] = rng.random(n) < 0.3
    return a
