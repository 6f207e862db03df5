"""Column reduction kernels (benchmarks.reduce, benchmarks.reduce_cuda) against NumPy, on AoS
field views and SoA columns."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layouts.benchmarks import reduce as kr

ROOT = Path(__file__).resolve().parent.parent


def check(v, x):
    exact = v.dtype.kind != "f"
    pairs = [
        (kr.column_sum(v), v.sum(dtype=np.float64 if not exact else None)),
        (kr.column_mean(v), v.mean(dtype=np.float64)),
        (kr.column_min(v), v.min()),
        (kr.column_max(v), v.max()),
        (kr.count_greater(v, x), np.count_nonzero(v > x)),
    ]
    for got, want in pairs:
        if exact:
            assert got == want
        else:
            assert np.isclose(got, want, rtol=1e-12, equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 5000),
    pad=st.integers(0, 40),
    seed=st.integers(0, 2**32 - 1),
    fmt=st.sampled_from(["<f8", "<f4", "<i4", "<i8", "u1", "<u2", "<i2"]),
)
def test_reductions_match_numpy_on_strided_and_contiguous(n, pad, seed, fmt):
    rng = np.random.default_rng(seed)
    dt = np.dtype(
        {
            "names": ["pre", "v"],
            "formats": ["u1", fmt],
            "offsets": [0, 1 + pad],
            "itemsize": 1 + pad + np.dtype(fmt).itemsize + 3,
        }
    )
    a = np.zeros(n, dt)
    a["v"] = (rng.normal(0, 1000, n) if dt["v"].kind == "f" else rng.integers(0, 100, n)).astype(dt["v"])
    for v in (a["v"], np.ascontiguousarray(a["v"])):
        check(v, 10)


def test_large_inputs_split_across_threads_and_nan():
    v = np.arange(3_000_000, dtype=np.int64) - 1_000_000
    check(v, 5)
    assert kr.column_sum(v[::3]) == v[::3].sum()
    f = np.linspace(-1, 1, 2_000_000)
    f[1_500_000] = np.nan
    assert np.isnan(kr.column_min(f)) and np.isnan(kr.column_max(f)) and np.isnan(kr.column_sum(f))
    assert kr.column_sum(np.array([True, False, True])) == 2


def test_empty_and_wrong_shapes_say_so():
    with pytest.raises(ValueError, match="min of an empty column has no value"):
        kr.column_min(np.zeros(0))
    with pytest.raises(ValueError, match=r"reductions take a 1-D column or field view, got shape \(2, 2\)"):
        kr.column_sum(np.zeros((2, 2)))
    assert kr.column_sum(np.zeros(0, np.int32)) == 0 and np.isnan(kr.column_mean(np.zeros(0)))


CUDASIM = """
import numpy as np
from numba import cuda
from layouts.benchmarks.reduce_cuda import field_matrix, reduce_field
from layouts.benchmarks.reductions import make_records, OFFSETS, THRESHOLDS, ITEMSIZES
for itemsize in (16, 64):
    r = make_records(itemsize, 700, seed=itemsize)
    for name, (offset, dtype) in OFFSETS.items():
        m, col = field_matrix(r.view(np.uint8).reshape(-1), itemsize, offset, dtype)
        d = cuda.to_device(m)
        v, x = r[name], THRESHOLDS[name]
        c = cuda.to_device(np.ascontiguousarray(v).reshape(-1, 1))
        # ("mean" is sum's kernel, divided on the host: its launch would test nothing more)
        want = {"sum": v.sum(dtype=np.float64 if v.dtype.kind == "f" else np.int64),
                "min": v.min(), "max": v.max(), "count>x": np.count_nonzero(v > x)}
        for op, w in want.items():  # (2 blocks of 256 threads for 700 records: the grid-stride loop too)
            for a, k in ((d, col), (c, 0)) if itemsize == 16 and name == "px" else ((d, col),):
                got = reduce_field(a, k, op, x, blocks=2)
                assert np.isclose(got, w, rtol=1e-12), (itemsize, name, op, got, w)
try:
    field_matrix(np.zeros(40, np.uint8), 20, 3, "<i4")
except ValueError as err:
    assert "not aligned to its width" in str(err), err
else:
    raise AssertionError("misaligned field accepted")
print("ok")
"""


@pytest.mark.slow
def test_cuda_reduction_kernel_under_the_simulator():
    pytest.importorskip("numba.cuda")
    site = ROOT / "tests" / "simulator_site"  # the tests' faster simulator (tests/fast_simulator.py)
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    run = subprocess.run(
        [sys.executable, "-c", CUDASIM], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
