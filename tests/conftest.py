"""Shared fixtures: the backends to run on, and the foundation's example record.

Without a GPU (no /dev/nvidia0, as in CI) the CUDA backend runs in Numba's CUDA
simulator: ``NUMBA_ENABLE_CUDASIM=1`` is set here, before anything imports
``numba.cuda``. Tests marked ``cuda`` need the real thing and skip. With a GPU the
``cuda`` backend runs on it; ``NUMBA_ENABLE_CUDASIM=1`` in the environment forces
the simulator anyway.
"""

import os

import fast_simulator
import numpy as np
import pytest
from hypothesis import settings

# Property tests run with fixed seeds (derived from each test's name), so a run is
# repeatable and CI cannot turn red by chance; `pytest --hypothesis-profile=explore`
# draws new examples each run, to hunt for new failures.
settings.register_profile("fixed", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("LAYOUTS_HYPOTHESIS_PROFILE", "fixed"))

REAL_GPU = os.path.exists("/dev/nvidia0") and os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0")
if not REAL_GPU:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    fast_simulator.install()

DEVICES = ["cpu", "cuda"]


# The files with the longest tests (each over ~15 s in the full suite: the sm_90 report, the
# command page's 44 commands, the wheel build, the benchmarks' smoke runs, the simulated
# reduction, the interrupt and kill loops, ...) go first: the workers (a file's tests stay on
# one) then end together on the many short files, instead of one waiting for the other.
FIRST = (
    "test_cuda.py",
    "test_cli.py",
    "test_packaging.py",
    "test_benchmarks_smoke.py",
    "test_reduce.py",
    "test_concurrent_writers.py",
    "test_interrupts.py",
    "test_streams_bounded.py",
    "test_streams_formats.py",
    "test_streams_cli.py",
    "test_cobol_variable.py",
)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: FIRST.index(item.path.name) if item.path.name in FIRST else len(FIRST))
    skip = pytest.mark.skip(reason="needs a real NVIDIA GPU (the CUDA simulator stands in elsewhere)")
    for item in items:
        if item.get_closest_marker("cuda") is not None and not REAL_GPU:
            item.add_marker(skip)


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


TICK = np.dtype(
    [("ts", "<i8"), ("px", "<f8"), ("qty", "<i4"), ("side", "u1"), ("sym", "S8"), ("pos", "<f4", (3,)), ("flag", "?")],
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


@pytest.fixture(params=[True, False], ids=["unnamed", "named"])
def temp_kind(request, monkeypatch):
    """Both ways of writing a file whole: O_TMPFILE + linkat, and a named temporary file."""
    from layouts import _files

    if request.param and not _files.UNNAMED:
        pytest.skip("no O_TMPFILE here")
    monkeypatch.setattr(_files, "UNNAMED", request.param)
    return request.param
