"""Zero-copy export (addresses, PyCapsule consumers, columns) and Arrow import rules."""

import numpy as np
import pyarrow as pa
import pytest
from conftest import TICK, ticks

import layouts as lo


def test_to_arrow_points_into_the_arena():
    soa = lo.AoS(ticks(1000)).to_soa()
    base, end = soa.arena.ctypes.data, soa.arena.ctypes.data + soa.arena.nbytes
    table = soa.to_arrow()
    seen = []
    for column in table.columns:
        for buf in column.chunks[0].buffers():  # children's buffers included
            if buf is not None and buf.size:
                assert base <= buf.address < end
                assert (buf.address - base) % 64 == 0
                seen.append(buf.address)
    assert len(set(seen)) == len(seen) >= 7
    assert base % 64 == 0


def test_table_keeps_the_arena_alive():
    table = lo.AoS(ticks(2000)).to_soa().to_arrow()
    import gc

    gc.collect()
    assert table.column("px").to_pylist() == ticks(2000)["px"].tolist()


def test_pycapsule_consumers():
    a = ticks(500)
    soa = lo.AoS(a).to_soa()
    assert pa.table(soa).column("qty").to_pylist() == a["qty"].tolist()
    assert pa.record_batch(soa).num_rows == 500
    assert pa.schema(soa.layout) == soa.layout.schema
    polars = pytest.importorskip("polars")
    df = polars.DataFrame(soa)
    assert df["px"].to_list() == a["px"].tolist()
    assert df["pos"].to_list()[3] == pytest.approx(a["pos"][3].tolist())
    duckdb = pytest.importorskip("duckdb")
    total = duckdb.sql("select sum(qty) from soa").fetchall()[0][0]
    assert total == int(a["qty"].sum())


def test_column_is_a_view_with_dlpack():
    soa = lo.AoS(ticks(100)).to_soa()
    px = np.asarray(soa["px"])
    assert px.__array_interface__["data"][0] == soa.to_arrow().column("px").chunks[0].buffers()[1].address
    pos = np.asarray(soa["pos"])
    assert pos.shape == (100, 3) and np.shares_memory(pos, soa.arena)
    via_dlpack = np.from_dlpack(soa["qty"])
    assert np.shares_memory(via_dlpack, soa.arena)
    assert soa["qty"].__dlpack_device__() == (1, 0)


def test_column_copy_rules():
    soa = lo.AoS(ticks(16)).to_soa()
    assert np.asarray(soa["flag"]).tolist() == ticks(16)["flag"].tolist()
    with pytest.raises(ValueError, match="column 'flag' is bool in Arrow, which NumPy cannot view"):
        soa["flag"].to_numpy(copy=False)
    with pytest.raises(KeyError, match="no leaf column 'nope'"):
        soa["nope"]


def test_from_arrow_zero_copy_for_matching_types():
    table = lo.AoS(ticks(64)).to_soa().to_arrow()
    soa = lo.SoA.from_arrow(table, TICK)
    assert soa["px"].to_numpy().__array_interface__["data"][0] == table.column("px").chunks[0].buffers()[1].address


def test_from_arrow_capsule_objects_and_casts():
    polars = pytest.importorskip("polars")
    dt = np.dtype([("a", "<i4"), ("b", "<f4"), ("s", "S4"), ("u", "U3")])
    df = polars.DataFrame({"a": [1, 2], "b": [0.5, 1.5], "s": ["ab", "abcd"], "u": ["x", "\u00e9t\u00e9"]})
    out = lo.SoA.from_arrow(df, dt).to_aos().array
    assert out["a"].tolist() == [1, 2] and out["b"].tolist() == [0.5, 1.5]
    assert out["s"].tolist() == [b"ab", b"abcd"] and out["u"].tolist() == ["x", "\u00e9t\u00e9"]


def test_from_arrow_errors():
    dt = np.dtype([("a", "<i1"), ("s", "S2")])
    with pytest.raises(lo.ConversionError, match=r"column 'a' has 1 nulls \(first at row 1\).*fill=\{'a': value\}"):
        lo.SoA.from_arrow(pa.table({"a": [1, None], "s": [b"x", b"y"]}), dt)
    filled = lo.SoA.from_arrow(pa.table({"a": [1, None], "s": [b"x", b"y"]}), dt, fill={"a": -1}).to_aos()
    assert filled.array["a"].tolist() == [1, -1]
    with pytest.raises(lo.ConversionError, match=r"column 'a' has Arrow type int64; field 'a' \(\|i1\) needs int8"):
        lo.SoA.from_arrow(pa.table({"a": [1, 300], "s": [b"x", b"y"]}), dt)
    with pytest.raises(
        lo.ConversionError, match=r"column 's', row 1: b'xyz' \(3 bytes\) is longer than field 's'.*truncate=True"
    ):
        lo.SoA.from_arrow(pa.table({"a": [1, 2], "s": [b"x", b"xyz"]}), dt).to_aos()
    cut = lo.SoA.from_arrow(pa.table({"a": [1, 2], "s": [b"x", b"xyz"]}), dt, truncate=True).to_aos()
    assert cut.array["s"].tolist() == [b"x", b"xy"]
    with pytest.raises(lo.ConversionError, match=r"the Arrow data has no column 's' \(it has \['a'\]\)"):
        lo.SoA.from_arrow(pa.table({"a": [1]}), dt)
    with pytest.raises(lo.ConversionError, match=r"column 'b' row 0: 0.1 \(double\) becomes"):
        lo.SoA.from_arrow(pa.table({"b": [0.1]}), np.dtype([("b", "<f4")]))
    with pytest.raises(TypeError, match="SoA.from_arrow takes a pyarrow Table"):
        lo.SoA.from_arrow([1, 2], dt)
    with pytest.raises(lo.ConversionError, match=r"column 'p' has 1 null lists \(first at row 0\)"):
        lo.SoA.from_arrow(
            pa.table({"p": pa.array([None, [1.0, 2.0]], pa.list_(pa.float64(), 2))}), np.dtype([("p", "<f8", (2,))])
        )
    with pytest.raises(lo.LayoutError, match=r"fill names \['zz'\], which are not leaf fields"):
        lo.SoA.from_arrow(pa.table({"a": [1], "s": [b"x"]}), dt, fill={"zz": 0})
