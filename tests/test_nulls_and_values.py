"""Sentinel nulls, NaT, and values that cannot convert without changing: clear errors."""

import math

import numpy as np
import pyarrow as pa
import pytest
from conftest import TICK, ticks

import layouts as lo


def test_sentinels_become_validity_and_come_back():
    a = ticks(1000)
    a["px"][::7] = np.nan
    soa = lo.AoS(a).to_soa(nulls={"qty": -1, "px": float("nan")})
    t = soa.to_arrow()
    assert t.column("qty").null_count == int((a["qty"] == -1).sum()) > 0
    assert t.column("px").null_count == int(np.isnan(a["px"]).sum())
    assert t.column("qty").to_pylist()[:20] == [None if q == -1 else int(q) for q in a["qty"][:20]]
    assert soa["qty"].null_count == t.column("qty").null_count
    back = soa.to_aos().array
    assert (back["qty"] == a["qty"]).all() and np.array_equal(back["px"], a["px"], equal_nan=True)


def test_sentinel_errors():
    a = lo.AoS(ticks(4))
    with pytest.raises(lo.ConversionError, match=r"nulls\['side'\]=-1 does not fit field 'side' of type uint8"):
        a.to_soa(nulls={"side": -1})
    with pytest.raises(lo.ConversionError, match=r"nulls\['qty'\]=1.5 is not exactly representable as int32"):
        a.to_soa(nulls={"qty": 1.5})
    with pytest.raises(lo.ConversionError, match=r"nulls\['flag'\]: field 'flag' .* is converted as 'bool'"):
        a.to_soa(nulls={"flag": False})
    with pytest.raises(lo.LayoutError, match=r"nulls names \['nope'\], which are not leaf fields"):
        a.to_soa(nulls={"nope": 0})


def test_nat_is_null_both_ways():
    a = np.array([1, "NaT", 3], dtype="M8[ns]").astype([("t", ">M8[ns]")][0][1]).view([("t", ">M8[ns]")])
    soa = lo.AoS(a).to_soa()
    assert soa.to_arrow().column("t").null_count == 1
    assert soa.to_aos().array.tobytes() == a.tobytes()
    w = np.array(["2024-01-04", "NaT"], dtype="M8[W]").view([("w", "<M8[W]")])
    t = lo.AoS(w).to_soa().to_arrow().column("w")
    assert t.type == pa.date32() and t.to_pylist()[0].isoformat() == "2024-01-04" and t.null_count == 1


def test_time_values_that_do_not_fit():
    big = np.array([0, 2**40], dtype="<i8").view([("t", "<M8[W]")])
    with pytest.raises(
        lo.ConversionError, match=r"field 't' \(<M8\[W\] at offset 0\), record 1: value .* does not fit Arrow date32"
    ):
        lo.AoS(big).to_soa()
    days = pa.table({"t": pa.array([0, 3], pa.date32())})
    with pytest.raises(
        lo.ConversionError, match=r"column 't', row 1: .* is not a whole number of the unit of field 't'"
    ):
        lo.SoA.from_arrow(days, np.dtype([("t", "<M8[W]")])).to_aos()
    months = pa.table({"m": pa.array([0, 31], pa.date32())})
    out = lo.SoA.from_arrow(months, np.dtype([("m", ">M8[M]")])).to_aos().array
    assert out["m"].astype("M8[D]").astype(str).tolist() == ["1970-01-01", "1970-02-01"]


def test_strings_that_do_not_convert():
    bad = np.zeros(2, [("u", "<U2")])
    bad.view("<u4")[2] = 0xD800  # a lone surrogate in record 1
    with pytest.raises(
        lo.ConversionError, match=r"field 'u' \(<U2 at offset 0\), record 1: .* not a Unicode code point"
    ):
        lo.AoS(bad).to_soa()
    raw = np.array([b"ok", b"\xff\xfe"], dtype="S2").view([("s", "S2")])
    L = lo.Layout.from_dtype(raw.dtype, bytes_as="string")
    with pytest.raises(
        lo.ConversionError,
        match=r"record 1: .* is not valid UTF-8; map the field to bytes with bytes_as=\{'s': 'binary'\}",
    ):
        lo.AoS(raw, L).to_soa()
    assert lo.AoS(raw, L.replace(bytes_as="binary")).to_soa().to_arrow().column("s").to_pylist() == [b"ok", b"\xff\xfe"]


def test_null_without_fill_in_to_aos_names_the_row():
    soa = lo.AoS(ticks(10)).to_soa()
    ok = soa.to_arrow()
    qty = pa.array([1, None] + [3] * 8, pa.int32())
    table = ok.set_column(2, "qty", qty)
    with pytest.raises(lo.ConversionError, match=r"column 'qty' has 1 nulls \(first at row 1\)"):
        lo.SoA.from_arrow(table, TICK)
    assert lo.SoA.from_arrow(table, TICK, fill={"qty": 0}).to_aos().array["qty"][1] == 0
    assert math.isnan(
        lo.SoA.from_arrow(ok.set_column(1, "px", pa.array([None] * 10, pa.float64())), TICK, fill={"px": float("nan")})
        .to_aos()
        .array["px"][0]
    )
