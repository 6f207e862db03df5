"""Strict types on the way back: a column is cast to its field's type only within its
kind of value (numbers, booleans, times, text) unless ``cast="parse"`` asks for more."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import layouts as lo


@pytest.mark.parametrize(
    "column, dtype, match",
    [
        (
            pa.array(["7", "8"]),
            "<i4",
            r"column 'x' has Arrow type string \(text\); field 'x' \(<i4\) needs int32 "
            r"\(number\), and text values are not converted to number unless asked: pass "
            r"cast='parse'",
        ),
        (pa.array(["1.5"]), "<f8", r"column 'x' has Arrow type string \(text\); field 'x' \(<f8\) needs double"),
        (
            pa.array([True, False]),
            "<i4",
            r"column 'x' has Arrow type bool \(boolean\); field 'x' \(<i4\) needs int32 "
            r"\(number\), and boolean values are not converted to number",
        ),
        (pa.array([True, False]), "|u1", r"Arrow type bool \(boolean\); field 'x' \(\|u1\) needs uint8"),
        (pa.array([0, 1], pa.int8()), "?", r"Arrow type int8 \(number\); field 'x' \(\|b1\) needs bool \(boolean\)"),
        (pa.array([12, 3]), "<U4", r"Arrow type int64 \(number\); field 'x' \(<U4\) needs string \(text\)"),
        (pa.array([12, 3]), "S4", r"Arrow type int64 \(number\); field 'x' \(\|S4\) needs binary \(text\)"),
        (pa.array(["2024-01-01"]), "<M8[s]", r"Arrow type string \(text\); field 'x' \(<M8\[s\]\) needs timestamp"),
        (
            pa.array([5], pa.int64()),
            "<M8[ns]",
            r"Arrow type int64 \(number\); field 'x' \(<M8\[ns\]\) needs "
            r"timestamp\[ns\] \(time\)",
        ),
        (
            pa.array(["7"]).dictionary_encode(),
            "<i2",
            r"Arrow type dictionary<values=string.*\(text\); field 'x' "
            r"\(<i2\) needs int16 \(number\)",
        ),
    ],
)
def test_other_kinds_of_values_are_refused_by_default(column, dtype, match):
    table = pa.table({"x": column})
    with pytest.raises(lo.ConversionError, match=match):
        lo.SoA.from_arrow(table, [("x", dtype)])


@pytest.mark.parametrize(
    "column, dtype, want",
    [
        (pa.array(["7", "-8"]), "<i4", [7, -8]),
        (pa.array(["1.5", "-0.25"]), ">f8", [1.5, -0.25]),
        (pa.array([True, False]), "<i4", [1, 0]),
        (pa.array([0, 1], pa.int8()), "?", [False, True]),
        (pa.array([12, 3]), "<U4", ["12", "3"]),
        (pa.array(["7"]).dictionary_encode(), "<i2", [7]),
    ],
)
def test_parse_converts_other_kinds_when_no_value_changes(column, dtype, want):
    out = lo.SoA.from_arrow(pa.table({"x": column}), [("x", dtype)], cast="parse").to_aos().to_numpy()
    assert out["x"].tolist() == want


def test_parse_still_refuses_changed_or_unparsable_values():
    with pytest.raises(lo.ConversionError, match=r"column 'x' row 1: '012' \(string\) becomes 12 as int32"):
        lo.SoA.from_arrow(pa.table({"x": ["1", "012"]}), [("x", "<i4")], cast="parse")
    with pytest.raises(
        lo.ConversionError,
        match=r"column 'x' has Arrow type string; field 'x' \(<i4\) needs int32, "
        r"and casting would change values or is not possible",
    ):
        lo.SoA.from_arrow(pa.table({"x": ["1", "one"]}), [("x", "<i4")], cast="parse")
    with pytest.raises(lo.ConversionError, match=r"column 'x' row 0: 2 \(int8\) becomes True as bool"):
        lo.SoA.from_arrow(pa.table({"x": pa.array([2], pa.int8())}), [("x", "?")], cast="parse")


def test_casts_within_a_kind_stay_allowed():
    table = pa.table(
        {
            "i": pa.array([1, -2], pa.int64()),  # int64 -> int16, values fit
            "f": pa.array([0.5, 2.0], pa.float64()),  # double -> float32, exact
            "g": pa.array([3, 4], pa.int32()),  # integers -> float64, exact
            "t": pa.array([1, None], pa.timestamp("ms")),  # ms -> ns
            "s": pa.array(["ab", "c"], pa.large_string()),  # text -> S4
            "u": pa.array([b"xy", b"z"], pa.binary()),  # binary -> U2 (valid UTF-8)
            "d": pa.array(["p", "q"]).dictionary_encode(),  # dictionary of text -> S2
            "n": pa.nulls(2, pa.null()),  # all null, with a fill
        }
    )
    dtype = np.dtype(
        [
            ("i", "<i2"),
            ("f", "<f4"),
            ("g", "<f8"),
            ("t", "<M8[ns]"),
            ("s", "S4"),
            ("u", "<U2"),
            ("d", "S2"),
            ("n", "<i4"),
        ]
    )
    out = lo.SoA.from_arrow(table, dtype, fill={"n": -1}).to_aos().to_numpy()
    assert out["i"].tolist() == [1, -2] and out["f"].tolist() == [0.5, 2.0] and out["g"].tolist() == [3.0, 4.0]
    assert out["t"][0] == np.datetime64(1, "ms") and np.isnat(out["t"][1])
    assert out["s"].tolist() == [b"ab", b"c"] and out["u"].tolist() == ["xy", "z"] and out["d"].tolist() == [b"p", b"q"]
    assert out["n"].tolist() == [-1, -1]
    with pytest.raises(
        lo.ConversionError,
        match=r"column 'u' has Arrow type binary; field 'u' \(<U2\) needs string.*"
        r"Invalid UTF8",
    ):
        lo.SoA.from_arrow(pa.table({"u": pa.array([b"\xff"])}), [("u", "<U2")])


def test_enum_fields_take_names_and_integers():
    layout = lo.Layout.from_c("enum e { A = 1, B = 2 }; struct r { enum e x; };", "struct r")
    for column in (pa.array(["A", "B"]), pa.array(["A", "B"]).dictionary_encode(), pa.array([1, 2], pa.int16())):
        assert lo.SoA.from_arrow(pa.table({"x": column}), layout).to_aos().to_numpy()["x"].tolist() == [1, 2]


def test_cast_option_is_checked():
    with pytest.raises(lo.LayoutError, match=r"cast must be one of \('strict', 'parse'\), got 'lenient'"):
        lo.SoA.from_arrow(pa.table({"x": [1]}), [("x", "<i8")], cast="lenient")


def test_convert_is_strict_by_default_and_parses_when_asked(tmp_path):
    src = tmp_path / "text.parquet"
    pq.write_table(pa.table({"qty": ["10", "20", "30"], "px": [1.0, 2.0, 3.0]}), src)
    dtype = np.dtype([("qty", "<i4"), ("px", "<f8")])
    with pytest.raises(
        lo.ConversionError,
        match=r"text.parquet, row group 0, rows 0 to 3: column 'qty' has Arrow "
        r"type string \(text\); field 'qty' \(<i4\) needs int32 \(number\)",
    ):
        lo.convert(src, dtype, tmp_path / "out.bin")
    assert not (tmp_path / "out.bin").exists()
    assert lo.convert(src, dtype, tmp_path / "out.bin", cast="parse").records == 3
    assert np.fromfile(tmp_path / "out.bin", dtype)["qty"].tolist() == [10, 20, 30]
