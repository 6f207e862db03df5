"""``to_soa(out=old)``: never a structurally invalid export.

Writing other records over an arena that a pyarrow table still shows used to leave that
table invalid (string offsets running backwards past the new records, null counts that
no longer match), and pandas/polars crashed on it. Reuse is now refused while an export
is alive, and the SoAs made earlier over the arena refuse to be read once it is reused.
"""

import gc

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo

DT = np.dtype([("a", "<i4"), ("s", "S7"), ("u", "U3"), ("q", "<i2")])
LAYOUT = lo.Layout.from_dtype(DT, bytes_as={"s": "string"})
NULLS = {"q": 0}


def records(n, text, seed):
    rng = np.random.default_rng(seed)
    a = np.zeros(n, DT)
    a["a"] = np.arange(n)
    a["s"], a["u"] = text, text[:3].decode()
    a["q"] = rng.integers(0, 3, n)
    return a


def test_reuse_is_refused_while_an_export_is_alive_and_the_export_stays_valid():
    old = lo.AoS(records(1000, b"a", 1), LAYOUT).to_soa(nulls=NULLS)
    table = old.to_arrow()
    nulls_before = table.column("q").null_count
    longer = records(10, b"abcdefg", 2)  # fewer records, longer strings: offsets would run backwards
    with pytest.raises(
        lo.LayoutError,
        match=r"out= is still exported: 1 export\(s\) of its arena .* drop them "
        r"first \(del table\), or pass out=None for a new arena",
    ):
        lo.AoS(longer, LAYOUT).to_soa(nulls=NULLS, out=old)
    table.validate(full=True)
    assert table.column("q").null_count == nulls_before
    assert table.column("s").to_pylist() == ["a"] * 1000
    del table
    new = lo.AoS(longer, LAYOUT).to_soa(nulls=NULLS, out=old)
    assert new.arena is old.arena
    t = new.to_arrow()
    t.validate(full=True)
    assert t.column("s").to_pylist() == ["abcdefg"] * 10
    assert (new.to_aos().array == longer).all()


@pytest.mark.parametrize("export", ["column", "capsule", "batch", "polars"])
@pytest.mark.slow
def test_every_kind_of_arrow_export_is_tracked(export):
    soa = lo.AoS(records(100, b"xy", 3), LAYOUT).to_soa(nulls=NULLS)
    if export == "column":
        kept = soa["s"].to_arrow()
    elif export == "capsule":
        kept = soa.__arrow_c_stream__()
    elif export == "batch":
        kept = soa.to_record_batch()
    else:
        pl = pytest.importorskip("polars")
        kept = pl.DataFrame(soa)
    with pytest.raises(lo.LayoutError, match="out= is still exported"):
        lo.AoS(records(50, b"z", 4), LAYOUT).to_soa(nulls=NULLS, out=soa)
    del kept
    gc.collect()
    assert len(lo.AoS(records(50, b"z", 4), LAYOUT).to_soa(nulls=NULLS, out=soa)) == 50


def test_an_soa_whose_arena_was_reused_refuses_to_be_read():
    old = lo.AoS(records(1000, b"abc", 5), LAYOUT).to_soa(nulls=NULLS)
    view = np.asarray(old["a"])  # NumPy views are not tracked: they show the new values
    new = lo.AoS(records(10, b"abcdefg", 6), LAYOUT).to_soa(nulls=NULLS, out=old)
    message = r"this SoA's arena was reused by a later to_soa\(out=...\), so its buffers now hold other records"
    for read in (
        old.to_arrow,
        old.to_aos,
        lambda: old["s"].to_arrow(),
        lambda: old["a"].to_numpy(),
        lambda: old["q"].null_count,
        old.__arrow_c_stream__,
    ):
        with pytest.raises(lo.LayoutError, match=message):
            read()
    assert view[:10].tolist() == list(range(10))
    # the arena can be passed on again, from the old SoA or the new one
    third = lo.AoS(records(20, b"q", 7), LAYOUT).to_soa(nulls=NULLS, out=old)
    with pytest.raises(lo.LayoutError, match=message):
        new.to_arrow()
    third.to_arrow().validate(full=True)


def test_exported_buffers_end_where_the_records_do():
    soa = lo.AoS(records(100, b"abcd", 8), LAYOUT).to_soa(nulls=NULLS)
    s = soa.to_arrow().column("s").chunks[0]
    validity, offsets, data = s.buffers()
    assert (offsets.size, data.size) == (101 * 4, 400)  # not the arena's 700 bytes of room
    del s, validity, offsets, data  # exports: reuse would be refused while they live
    reused = lo.AoS(records(30, b"ab", 9), LAYOUT).to_soa(nulls=NULLS, out=soa)
    q = reused.to_arrow().column("q").chunks[0]
    assert [b.size for b in q.buffers()] == [4, 60]  # 30 records, not the capacity of 100
    raw = reused.arena
    for bufs, sizes in zip(reused._arena.buffers, reused._arena.used(raw, 30)):
        for name, (start, _) in bufs.items():  # zeros from the end of the used bytes to 64-byte alignment
            end = start + sizes[name]
            assert not raw[end : end + (-end % 64)].any(), name
    assert isinstance(q, pa.Array)
