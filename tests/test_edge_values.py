"""Values and layouts at the edges: any value of a field's type as a ``nulls=`` sentinel
(to_soa) or a ``fill=`` value (from_arrow), layouts with no data bytes, and error
builders that must not fail while describing a bad value."""

import os

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import layouts as lo

TYPES = [
    "<i1",
    "<i2",
    ">i4",
    "<i8",
    "<u1",
    ">u2",
    "<u4",
    "<u8",
    ">u8",
    "<f2",
    "<f4",
    ">f4",
    "<f8",
    ">f8",
    "<M8[ns]",
    ">M8[us]",
    "<M8[s]",
    "<m8[ns]",
    ">m8[ms]",
]
EDGES = {
    "f": [-1.0, -0.0, 0.0, float("-inf"), float("inf"), float("nan")],
    "u": ["max", 2**63, 2**63 + 1, 0],
    "i": ["min", "max", -1, 0],
    "M": ["NaT", "min", "max"],
    "m": ["NaT", "min", "max", -1],
}


def _edge(dt, which):
    """An edge value of dtype ``dt`` as a NumPy scalar."""
    if which == "NaT":
        return np.array("NaT", dtype=dt)[()]
    if dt.kind in "Mm":
        info = np.iinfo(np.int64)
        return np.array(info.min + 1 if which == "min" else info.max if which == "max" else which, "i8").view(
            dt.newbyteorder("=")
        )[()]
    if which in ("min", "max"):
        return getattr(np.iinfo(dt), which)
    return np.array(which).astype(dt)[()]


def _bits(values, dt):
    """Raw bits of values (native order) as unsigned integers, for exact comparison."""
    return np.asarray(values, dtype=dt.newbyteorder("=")).view(f"u{dt.itemsize}")


@st.composite
def value_of(draw, dt):
    """A value of ``dt``: an edge (negative zero, infinities, NaN, NaT, uint64 above
    2**63, extremes) or any value, as a NumPy scalar or the Python object for it."""
    edges = EDGES[dt.kind]
    if draw(st.booleans()):
        v = _edge(dt, draw(st.sampled_from(edges)))
    else:
        v = draw(hnp.from_dtype(dt.newbyteorder("="), allow_nan=True, allow_infinity=True))
    v = np.array(v, dtype=dt.newbyteorder("="))[()]
    if draw(st.booleans()) and dt.kind in "iuf":
        return v.item()  # a Python int or float (uint64 above 2**63 included)
    return v


@st.composite
def column_case(draw):
    dt = np.dtype(draw(st.sampled_from(TYPES)))
    sentinel = draw(value_of(dt))
    n = draw(st.integers(0, 40))
    values = [draw(value_of(dt)) if draw(st.integers(0, 3)) else sentinel for _ in range(n)]
    return dt, sentinel, values


def _is_nan(v):
    return isinstance(v, (float, np.floating)) and np.isnan(v)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(column_case())
def test_any_value_is_a_sentinel(case):
    dt, sentinel, values = case
    records = np.zeros(len(values), [("x", dt), ("k", "<i2")])
    records["x"] = np.array(values, dtype=dt.newbyteorder("=")).astype(dt) if values else records["x"]
    records["k"] = np.arange(len(values))
    if dt.kind in "Mm" and not np.isnat(sentinel):
        with pytest.raises(lo.ConversionError, match=r"nulls\['x'\]=.*is a datetime, whose null is NaT already"):
            lo.AoS(records).to_soa(nulls={"x": sentinel})
        return
    soa = lo.AoS(records).to_soa(nulls={"x": sentinel})
    col = soa.to_arrow().column("x")
    raw = _bits(records["x"], dt)
    if _is_nan(sentinel):
        want = np.isnan(records["x"].astype(dt.newbyteorder("=")))  # any NaN, any payload or sign
    else:
        want = raw == _bits(sentinel, dt)
    if dt.kind in "Mm":
        want |= np.isnat(records["x"])
    assert np.asarray(col.is_null()).tolist() == want.tolist()
    back = soa.to_aos().to_numpy()
    got = _bits(back["x"], dt)
    if _is_nan(sentinel):
        # NaN payloads are canonicalised: every NaN comes back as the sentinel's bits
        assert (got[want] == _bits(sentinel, dt)).all() and (got[~want] == raw[~want]).all()
    else:
        assert got.tolist() == raw.tolist()
    assert back["k"].tolist() == records["k"].tolist()


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(column_case(), st.data())
def test_any_value_is_a_fill(case, data):
    dt, fill, values = case
    native = dt.newbyteorder("=")
    present = [data.draw(st.booleans()) for _ in values]
    arrow_type = lo.Layout.from_dtype(np.dtype([("x", dt)])).schema.field("x").type
    if native.kind in "Mm":
        ints = np.array(values, dtype=native).view("i8") if values else np.zeros(0, "i8")
        arr = pa.array(ints, pa.int64(), mask=~np.array(present, bool) | (ints == np.iinfo(np.int64).min)).cast(
            arrow_type
        )
    else:
        arr = pa.array(np.array(values, dtype=native), arrow_type, mask=~np.array(present, bool))
    table = pa.table({"x": arr})
    back = lo.SoA.from_arrow(table, np.dtype([("x", dt)]), fill={"x": fill}).to_aos().to_numpy()
    got = _bits(back["x"], dt)
    nulls = np.asarray(arr.is_null(), dtype=bool) if len(arr) else np.zeros(0, bool)
    assert (got[nulls] == _bits(fill, dt)).all()
    assert got[~nulls].tolist() == _bits(np.array(values, dtype=native), dt)[~nulls].tolist()


@pytest.mark.parametrize(
    "dt, value, match",
    [
        ("<i1", 300, r"nulls\['x'\]=300 does not fit field 'x' of type int8"),
        ("<u8", -1, r"nulls\['x'\]=-1 does not fit field 'x' of type uint64"),
        ("<u8", 2**64, r"nulls\['x'\]=18446744073709551616 does not fit field 'x' of type uint64"),
        ("<i4", 1.5, r"nulls\['x'\]=1.5 is not exactly representable as int32"),
        ("<f4", 0.1, r"nulls\['x'\]=0.1 is not exactly representable as float32"),
        ("<i4", "abc", r"nulls\['x'\]='abc' does not fit field 'x' of type int32"),
        ("<i4", None, r"nulls\['x'\]=None does not fit field 'x' of type int32"),
    ],
)
def test_sentinels_that_are_not_values_of_the_field(dt, value, match):
    records = np.zeros(3, [("x", dt)])
    with pytest.raises(lo.ConversionError, match=match):
        lo.AoS(records).to_soa(nulls={"x": value})
    table = pa.table({"x": pa.array([1, None, 2], pa.from_numpy_dtype(np.dtype(dt)))})
    with pytest.raises(lo.ConversionError, match=match.replace("nulls", "fill")):
        lo.SoA.from_arrow(table, records.dtype, fill={"x": value}).to_aos()


def test_nan_sentinel_canonicalises_payloads():
    records = np.zeros(4, [("px", "<f8")])
    payloads = np.array([0x7FF8000000000001, 0xFFF8000000000000, 0x7FF0000000000001, 0x3FF0000000000000], "u8")
    records.view("u8")[:] = payloads  # a quiet NaN with payload, -NaN, a signalling NaN, 1.0
    soa = lo.AoS(records).to_soa(nulls={"px": float("nan")})
    assert soa["px"].null_count == 3
    back = soa.to_aos().to_numpy().view("u8")
    canonical = np.array(float("nan")).view("u8")[()]
    assert back.tolist() == [canonical] * 3 + [0x3FF0000000000000]


def test_bit_field_fills_at_the_edges():
    layout = lo.Layout.from_c("struct r { unsigned long long a : 64; int s : 4; unsigned u : 3; };", "struct r")
    table = pa.table(
        {
            "a": pa.array([2**64 - 1, None, 5], pa.uint64()),
            "s": pa.array([-8, 7, None], pa.int32()),
            "u": pa.array([None, 7, 0], pa.uint32()),
        }
    )
    back = lo.SoA.from_arrow(table, layout, fill={"a": 2**63 + 1, "s": -8, "u": 7}).to_aos()
    got = back.to_soa().to_arrow()
    assert got.column("a").to_pylist() == [2**64 - 1, 2**63 + 1, 5]
    assert got.column("s").to_pylist() == [-8, 7, -8] and got.column("u").to_pylist() == [7, 7, 0]
    with pytest.raises(lo.ConversionError, match=r"fill\['s'\]=8 does not fit the 4-bit field 's' \(-8..7\)"):
        lo.SoA.from_arrow(table, layout, fill={"a": 0, "s": 8, "u": 0}).to_aos()


def test_sentinels_on_bit_fields_and_enums_are_refused():
    # the forward kernels apply sentinels to plain values only: a bit-field or enum
    # sentinel used to give a column of nulls, whatever the values
    layout = lo.Layout.from_c("enum e { A = 1, B = 2 }; struct r { int s : 4; enum e x; };", "struct r")
    records = np.zeros(3, layout.dtype)
    with pytest.raises(
        lo.ConversionError,
        match=r"nulls\['s'\]: field 's' .* is a C bit-field, and sentinel nulls "
        r"are not applied to those yet",
    ):
        lo.AoS(records, layout).to_soa(nulls={"s": -8})
    with pytest.raises(lo.ConversionError, match=r"nulls\['x'\]: field 'x' .* is a C enum .*enum_as='int'"):
        lo.AoS(records, layout).to_soa(nulls={"x": "B"})
    as_int = lo.Layout.from_c("enum e { A = 1, B = 2 }; struct r { int s : 4; enum e x; };", "struct r", enum_as="int")
    records = np.array([(0, 1), (0, 2)], as_int.dtype)
    assert lo.AoS(records, as_int).to_soa(nulls={"x": 2}).to_arrow().column("x").to_pylist() == [1, None]


@pytest.mark.parametrize(
    "dtype, column, fill, want",
    [
        ("<M8[m]", pa.array([60, None], pa.timestamp("s")), np.datetime64("2020-01-01T00:00"), "2020-01-01T00:00"),
        ("<M8[m]", pa.array([60, None], pa.timestamp("s")), np.datetime64("NaT"), "NaT"),
        (">M8[D]", pa.array([1, None], pa.date32()), np.datetime64("1960-01-01"), "1960-01-01"),
        ("<M8[M]", pa.array([0, None], pa.date32()), np.datetime64("1960-02"), "1960-02"),
        ("<m8[h]", pa.array([3600, None], pa.duration("s")), np.timedelta64(-3, "h"), "-3 hours"),
        ("<m8[h]", pa.array([3600, None], pa.duration("s")), 5, "5 hours"),
        ("<M8[ps]", pa.array([1, None], pa.int64()), np.datetime64(-5, "ps"), "1969-12-31T23:59:59.999999999995"),
    ],
)
def test_fills_of_fields_in_other_time_units(dtype, column, fill, want):
    # these fields travel as another Arrow unit (M8[m] as timestamp[s], M8[D] as date32...):
    # the fill is a value of the field's own type
    out = lo.SoA.from_arrow(pa.table({"x": column}), [("x", dtype)], fill={"x": fill}).to_aos().to_numpy()["x"]
    assert str(out[1]) == want


# ------------------------------------------------------------------ layouts with no data bytes


@pytest.mark.parametrize(
    "dtype, match",
    [
        (np.dtype([]), r"record type \[\] has 0 bytes per record"),
        (np.dtype([("a", "<i4", (0,))]), r"has 0 bytes per record.*a \(0,\) sub-array holds none"),
        (np.dtype([("a", "<f8", (0, 3))]), r"has 0 bytes per record"),
        (np.dtype({"names": [], "formats": [], "itemsize": 8}), r"\(8 bytes\) has no fields to convert, only padding"),
        (np.dtype([("", "V4")]), r"\(4 bytes\) has no fields to convert, only padding.*void_as='bytes'"),
        (np.dtype([("pad", "V4")]), r"\(4 bytes\) has no fields to convert"),
    ],
)
def test_layouts_with_no_data_bytes_are_refused(dtype, match, tmp_path):
    kwargs = {"void_as": "skip"} if dtype.names == ("pad",) else {}
    with pytest.raises(lo.LayoutError, match=match):
        lo.Layout.from_dtype(dtype, **kwargs)
    if not kwargs:
        with pytest.raises(lo.LayoutError, match=match):
            lo.AoS(np.zeros(5, dtype)).to_soa()
        (tmp_path / "r.bin").write_bytes(bytes(5 * dtype.itemsize))
        with pytest.raises(lo.LayoutError, match=match):
            lo.convert(tmp_path / "r.bin", dtype, tmp_path / "r.arrow")
        assert os.listdir(tmp_path) == ["r.bin"]


def test_empty_sub_arrays_beside_data_round_trip(tmp_path):
    dtype = np.dtype([("e", "<i4", (0,)), ("b", "<i4"), ("z", "<f8", (2, 0))])
    records = np.zeros(5, dtype)
    records["b"] = np.arange(5)
    table = lo.AoS(records).to_soa().to_arrow()
    assert table.num_rows == 5 and table.column("e").to_pylist() == [[]] * 5
    assert lo.SoA.from_arrow(table, dtype).to_aos().to_numpy().tobytes() == records.tobytes()
    records.tofile(tmp_path / "r.bin")
    assert lo.convert(tmp_path / "r.bin", dtype, tmp_path / "r.arrow").records == 5
    assert lo.convert(tmp_path / "r.arrow", dtype, tmp_path / "back.bin").records == 5
    assert (tmp_path / "back.bin").read_bytes() == records.tobytes()


# ------------------------------------------------------------------ error builders never fail


def test_invalid_utf8_for_a_unicode_field_is_described():
    text = pa.array([b"ok", b"\xff\xfe"], pa.binary()).view(pa.string())
    with pytest.raises(
        lo.ConversionError,
        match=r"column 'u', row 1: b'\\xff\\xfe' is not valid UTF-8 and cannot be "
        r"written to field 'u' \(<U3 at offset 0\)",
    ):
        lo.SoA.from_arrow(pa.table({"u": text}), [("u", "<U3")]).to_aos()


@pytest.mark.parametrize("order", "<>")
def test_invalid_code_points_in_records_are_described(order):
    records = np.zeros(3, [("u", f"{order}U2"), ("i", "<i4")])
    raw = records.view(np.uint8)
    raw[12:16] = np.frombuffer(np.array([0x110000], f"{order}u4").tobytes(), np.uint8)
    with pytest.raises(
        lo.ConversionError,
        match=rf"field 'u' \({order}U2 at offset 0\), record 1: 'UTF-32 code "
        r"units 0x110000 0x0' holds a value that is not a Unicode code",
    ):
        lo.AoS(records).to_soa()


# UTF-8 that pyarrow's full validation refuses but a decoder that only checks the
# continuation bytes would take: overlong forms, a surrogate, above U+10FFFF, F8 on (attack7)
NOT_UTF8 = [
    b"\xc1\x81",
    b"\xe0\x80\x81",
    b"\xf0\x80\x81\x81",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xf8\x88\x80\x80",
]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("bad", NOT_UTF8, ids=lambda b: b.hex())
def test_utf8_that_is_not_utf8_is_refused_for_unicode_and_ebcdic_fields(bad, device):
    """Never written as the character it would decode to ("A" for C1 81), nor as a code
    point no UTF-8 holds: the error of any other invalid UTF-8, naming column and row."""
    text = pa.array([b"ok", bad], pa.binary()).view(pa.string())
    for layout in (
        lo.Layout.from_dtype(np.dtype([("u", "<U4")])),
        lo.Layout.from_dtype(np.dtype([("u", "V6")]), encodings={"u": lo.Encoding("text", codepage="cp037")}),
    ):
        soa = lo.SoA.from_arrow(pa.table({"u": text}), layout).to_device(device)
        with pytest.raises(lo.ConversionError, match=r"column 'u', row 1: .* is not valid UTF-8"):
            soa.to_aos()
