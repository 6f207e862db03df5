"""The reduction cases under pytest-benchmark (statistics, comparisons between runs):

    pytest tests/bench_reductions.py --benchmark-only
    LAYOUTS_BENCH_RECORDS=10000000 pytest tests/bench_reductions.py --benchmark-only \\
        --benchmark-group-by=param:itemsize,param:field,param:op --benchmark-json=out.json

Each case checks its answer against NumPy on the contiguous column before it is timed.
The report with break-even and plots is ``python -m benchmarks`` (``layouts bench``).
"""

import functools
import os

import numpy as np
import pytest

import layouts as lo

from .reductions import FIELDS, ITEMSIZES, OPS, THRESHOLDS, cpu_methods, make_records

RECORDS = int(os.environ.get("LAYOUTS_BENCH_RECORDS", 1_000_000))
METHODS = [
    ("AoS", "numpy"),
    ("AoS", "kernel"),
    ("SoA", "numpy"),
    ("SoA", "kernel"),
    ("SoA", "pyarrow"),
    ("SoA", "polars"),
]


@functools.lru_cache(maxsize=1)
def data(itemsize):
    records = make_records(itemsize, RECORDS)
    return records, lo.AoS(records).to_soa()


def expected(column, op, x):
    return {
        "sum": column.sum(),
        "mean": column.mean(),
        "min": column.min(),
        "max": column.max(),
        "count>x": np.count_nonzero(column > x),
    }[op]


@pytest.mark.parametrize("method", METHODS, ids=lambda m: "-".join(m))
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("field", list(FIELDS.values()))
@pytest.mark.parametrize("itemsize", ITEMSIZES)
def test_reduction(benchmark, itemsize, field, op, method):
    records, soa = data(itemsize)
    methods = cpu_methods(records, soa, field)
    if method not in methods:
        pytest.skip(f"{method[1]} is not installed")
    fn = methods[method][op]
    answer = fn()
    answer = answer.as_py() if hasattr(answer, "as_py") else answer
    want = expected(np.ascontiguousarray(records[field]), op, THRESHOLDS[field])
    assert np.isclose(float(answer), float(want), rtol=1e-9), (answer, want)
    benchmark.extra_info.update(useful_bytes=RECORDS * records.dtype[field].itemsize, layout=method[0])
    benchmark(fn)


@pytest.mark.parametrize("itemsize", ITEMSIZES)
def test_to_soa(benchmark, itemsize):
    records, _ = data(itemsize)
    benchmark.extra_info.update(bytes=records.nbytes)
    benchmark(lambda: lo.AoS(records).to_soa().to_arrow())


@pytest.mark.parametrize("itemsize", ITEMSIZES)
def test_copy_ceiling(benchmark, itemsize):
    records, _ = data(itemsize)
    benchmark.extra_info.update(bytes=records.nbytes)
    benchmark(np.copy, records)
