"""Costs grow linearly: with the number of columns, and with the size of one record.

No absolute time is asserted: each test times a small and a large case (the best of a
few runs, the kernels warmed first) and checks that the large one takes well under the
square of the size ratio. A 4x larger case may take at most 8x the time where a
quadratic cost would take 16x. One 32 MB record is compared against the same bytes in
32 records of 1 MB: a cost linear in the record's size converts them in a few times
the time at most (one record is not split between threads, and the element offsets of
its sub-array no longer stay in cache), a quadratic one in 32x. Values are checked to
come back exactly, so a fast wrong answer fails too.
"""

import time

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo

MB = 1_000_000


def best_time(fn, runs=3):
    """The fastest of ``runs`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def assert_grows_within(small, large, bound, what):
    """Assert that ``large()`` takes under ``bound`` times as long as ``small()``, each
    timed as the best of 3 after a warm-up call (kernel compilation, first touch of
    memory). A ratio over the bound is measured again, twice at most, before failing:
    another process on a shared machine can slow one round, not a quadratic cost."""
    small(), large()
    ratios = []
    for _ in range(3):
        ratios.append(best_time(large) / best_time(small))
        if ratios[-1] < bound:
            return
    pytest.fail(f"{what} took {min(ratios):.1f}x as long (at best of {len(ratios)} rounds); at most {bound}x expected")


def wide_records(ncols, n=20):
    """n records of ncols scalar columns (int32, float64, big-endian int64), distinct values."""
    kinds = ("<i4", "<f8", ">i8")
    dtype = np.dtype([(f"c{i}", kinds[i % 3]) for i in range(ncols)])
    raw = np.arange(n * dtype.itemsize, dtype=np.uint64).astype(np.uint8)
    records = raw.view(dtype).copy()
    for name in dtype.names[1::3]:  # float64: finite values (any bits would do, NaN compares unequal)
        records[name] = np.arange(n) * 0.5 - 3
    return records


@pytest.fixture(scope="module", autouse=True)
def warm_kernels():
    small = wide_records(6, 3)
    lo.SoA.from_arrow(lo.AoS(small).to_soa().to_arrow(), small.dtype).to_aos()


@pytest.mark.slow
def test_wide_layout_to_arrow_grows_linearly():
    small, large = wide_records(2_500), wide_records(10_000)

    def forward(records):
        return lambda: lo.AoS(records, lo.Layout(records.dtype)).to_soa().to_arrow()

    assert_grows_within(forward(small), forward(large), 8, "2,500 -> 10,000 columns: Layout + to_soa + to_arrow")
    table = forward(large)()
    assert table.num_columns == 10_000 and table.column_names[-1] == "c9999"
    for name in ("c0", "c4999", "c9997", "c9998"):
        assert table.column(name).to_numpy().tolist() == large[name].tolist()


@pytest.mark.slow
def test_wide_arrow_back_to_records_grows_linearly():
    small, large = wide_records(2_500), wide_records(10_000)
    tables = {r.dtype.itemsize: lo.AoS(r).to_soa().to_arrow() for r in (small, large)}

    def back(records):
        table = tables[records.dtype.itemsize]
        return lambda: lo.SoA.from_arrow(table, lo.Layout(records.dtype)).to_aos()

    assert_grows_within(back(small), back(large), 8, "2,500 -> 10,000 columns: from_arrow + to_aos")
    assert back(large)().to_numpy().tobytes() == large.tobytes()


def test_wide_column_lookup_is_direct():
    records = wide_records(10_000)
    soa = lo.AoS(records).to_soa()
    names = [f"c{i}" for i in range(0, 10_000, 7)]
    taken = best_time(lambda: [soa[name] for name in names])
    first = best_time(lambda: [soa["c0"] for _ in names])
    assert taken < 8 * first + 0.01, f"soa[name] took {taken / first:.1f}x longer for late columns than for the first"
    assert np.asarray(soa["c9997"]).tolist() == records["c9997"].tolist()
    assert soa.layout["c9998"].offset == records.dtype.fields["c9998"][1]
    with pytest.raises(KeyError, match="no leaf column 'nope'"):
        soa["nope"]


def big_dtype(record_bytes):
    """An id, a float32 sub-array of record_bytes, a scalar, a 6-byte hole and a
    big-endian sub-array."""
    count = record_bytes // 4
    return np.dtype([("id", "<i8"), ("a", "<f4", (count,)), ("b", "<i2"), ("c", ">f8", (2, 3))], align=True)


def big_records(record_bytes, n):
    """n records of :func:`big_dtype`, with distinct values in the sub-array."""
    records = np.zeros(n, big_dtype(record_bytes))
    count = record_bytes // 4
    records["id"] = np.arange(n) - 7
    records["a"] = np.arange(n * count, dtype=np.float32).reshape(n, count)
    records["b"] = 12
    records["c"] = np.arange(6).reshape(2, 3) + 0.25
    return records


@pytest.mark.slow
def test_big_record_round_trip_grows_linearly():
    many, one = big_records(MB, 32), big_records(32 * MB, 1)  # the same bytes

    def round_trip(records):
        return lambda: lo.AoS(records).to_soa().to_aos()  # a new Layout each time: holes and aliases too

    assert_grows_within(round_trip(many), round_trip(one), 8, "32 records of 1 MB -> one of 32 MB: the round trip")
    for records in (many, one):
        assert round_trip(records)().to_numpy().tobytes() == records.tobytes()
    soa = lo.AoS(one).to_soa()
    assert soa.to_arrow().column("a").type == pa.list_(pa.float32(), 8 * MB)
    assert np.asarray(soa["a"])[0, -1] == 8 * MB - 1


def struct_array_dtype(record_bytes):
    """A record of a sub-array of 8-byte structs with a 2-byte hole each: runs of bytes
    that grow in number with the record, and so does the work of holes/aliases."""
    point = np.dtype({"names": ["x", "y"], "formats": ["<f4", "<i2"], "offsets": [0, 4], "itemsize": 8})
    return np.dtype([("id", "<i8"), ("pts", point, (record_bytes // 8,)), ("tail", "u1")])


@pytest.mark.slow
def test_holes_and_aliases_of_big_records_grow_linearly():
    def coverage(dtype):
        return lambda: (lo.Layout(dtype).holes, lo.Layout(dtype).aliases)

    assert_grows_within(
        coverage(struct_array_dtype(MB // 4)),
        coverage(struct_array_dtype(MB)),
        8,
        "records of 0.25 MB -> 1 MB of small structs: holes and aliases",
    )
    holes = lo.Layout(struct_array_dtype(MB)).holes
    assert len(holes) == MB // 8 and holes[0] == (8 + 6, 2) and holes[-1] == (8 + MB - 2, 2)

    plain = [big_dtype(size) for size in (MB, 32 * MB)]  # one run per leaf, whatever the size
    assert_grows_within(coverage(plain[0]), coverage(plain[1]), 8, "records of 1 MB -> 32 MB: holes and aliases")
    layout = lo.Layout(plain[1])
    assert layout.holes == ((8 + 32 * MB + 2, 6),) and layout.aliases == ()


def test_aliases_of_big_overlapping_sub_arrays():
    """Two sub-arrays over the same bytes (a union): found without a pass per byte."""

    def union(count):
        return np.dtype(
            {"names": ["n", "f", "i"], "formats": ["<i8", ("<f4", (count,)), ("<i4", (count,))], "offsets": [0, 8, 8]}
        )

    def aliases(count):
        return lambda: lo.Layout(union(count)).aliases

    assert_grows_within(aliases(MB // 4), aliases(8 * MB), 8, "1 MB -> 32 MB of overlapping sub-arrays: aliases")
    assert aliases(8 * MB)() == (("f", "i"),)
    records = np.zeros(2, union(4))
    with pytest.raises(lo.LayoutError, match="fields 'f' and 'i' share bytes of the record"):
        lo.AoS(records).to_soa().to_aos()
