"""No silent surprises on the way back to records (issue 25): time units are named, never
guessed; extra columns are an error unless dropped by name; every column problem comes
in one error with its fix; ``offset`` back to records writes the header or is refused."""

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import layouts as lo

TICK = np.dtype([("ts_ns", "<i8"), ("qty", "<i4")])


def pandas_like():
    """What pandas 3 writes: timestamps in microseconds, nullable integers, an extra column."""
    return pa.table(
        {
            "ts_ns": pa.array([0, 1500, None], pa.timestamp("us")),
            "qty": pa.array([5, None, 7], pa.int32()),
            "note": ["a", "b", "c"],
        }
    )


# ------------------------------------------------------------------- time units


@pytest.mark.parametrize("cast", ["strict", "parse"])
def test_a_time_column_needs_a_named_unit_for_an_integer_field(cast):
    table = pa.table({"ts_ns": pa.array([1, 2], pa.timestamp("us"))})
    with pytest.raises(
        lo.ConversionError,
        match=r"column 'ts_ns' has Arrow type timestamp\[us\] \(time\); field "
        r"'ts_ns' \(<i8\) needs int64 \(number\), and times become numbers "
        r"only as counts of a unit you name, never silently in the column's "
        r"unit.*pass time_unit=\{'ts_ns': 'ns'\} to count nanoseconds \(the "
        r"unit its name says\)",
    ):
        lo.SoA.from_arrow(table, [("ts_ns", "<i8")], cast=cast)


def test_parse_says_it_does_not_choose_a_unit():
    with pytest.raises(lo.ConversionError, match=r"\(cast='parse' does not choose one\): pass time_unit=\{'t': 'us'\}"):
        lo.SoA.from_arrow(pa.table({"t": pa.array([1], pa.timestamp("us"))}), [("t", "<i8")], cast="parse")


@pytest.mark.parametrize("time_unit", [{"ts_ns": "ns"}, "ns", "name"])
def test_named_units_convert_the_counts(time_unit):
    table = pa.table({"ts_ns": pa.array([1, 2], pa.timestamp("us", tz="UTC"))})
    out = lo.SoA.from_arrow(table, [("ts_ns", "<i8")], time_unit=time_unit).to_aos().to_numpy()
    assert out["ts_ns"].tolist() == [1000, 2000]


@pytest.mark.parametrize(
    "column, dtype, unit, want",
    [
        (pa.array([3], pa.duration("s")), "<i8", "ms", [3000]),
        (pa.array([1], pa.date32()), "<i8", "s", [86400]),
        (pa.array([2_000_000], pa.time64("us")), "<i4", "ms", [2000]),
        (pa.array([7], pa.timestamp("s")), "<u4", "s", [7]),
    ],
)
def test_durations_dates_and_times_of_day_become_counts(column, dtype, unit, want):
    out = lo.SoA.from_arrow(pa.table({"x": column}), [("x", dtype)], time_unit={"x": unit}).to_aos().to_numpy()
    assert out["x"].tolist() == want


def test_unit_from_a_name_without_one_is_an_error():
    with pytest.raises(
        lo.ConversionError,
        match=r"time_unit='name' takes field 'stamp''s unit from its name, but the "
        r"name ends in no unit \(like ts_ns, t_us, t_ms, t_s\)",
    ):
        lo.SoA.from_arrow(pa.table({"stamp": pa.array([1], pa.timestamp("s"))}), [("stamp", "<i8")], time_unit="name")


def test_a_unit_that_contradicts_the_name_is_a_warning():
    table = pa.table({"ts_ns": pa.array([1], pa.timestamp("us"))})
    with pytest.warns(
        UserWarning,
        match=r"time_unit=\{'ts_ns': 'us'\} gives field 'ts_ns' the unit 'us', but its name "
        r"says 'ns': the counts written are microseconds",
    ):
        out = lo.SoA.from_arrow(table, [("ts_ns", "<i8")], time_unit={"ts_ns": "us"}).to_aos().to_numpy()
    assert out["ts_ns"].tolist() == [1]


def test_a_unit_too_coarse_or_out_of_range_names_the_row():
    with pytest.raises(
        lo.ConversionError,
        match=r"column 't' row 1: .* \(timestamp\[ms\]\) is not a whole number of "
        r"seconds or is out of their range, the unit time_unit=\{'t': 's'\} gives field "
        r"'t' \(<i8\)",
    ):
        lo.SoA.from_arrow(pa.table({"t": pa.array([1000, 1500], pa.timestamp("ms"))}), [("t", "<i8")], time_unit="s")
    with pytest.raises(
        lo.ConversionError,
        match=r"column 't' row 0: .* is not a whole number of nanoseconds or is out "
        r"of their range",
    ):
        lo.SoA.from_arrow(pa.table({"t": pa.array([2**62], pa.timestamp("us"))}), [("t", "<i8")], time_unit="ns")
    with pytest.raises(
        lo.ConversionError,
        match=r"column 't' row 0: datetime.timedelta\(seconds=5\) \(duration\[s\]\) "
        r"is 5000000000 nanoseconds \(time_unit=\{'t': 'ns'\}\), which field "
        r"'t' \(<i4, int32\) cannot hold",
    ):
        lo.SoA.from_arrow(pa.table({"t": pa.array([5], pa.duration("s"))}), [("t", "<i4")], time_unit="ns")


def test_integers_for_a_datetime_field_need_a_unit_too():
    table = pa.table({"at": pa.array([5], pa.int64())})
    with pytest.raises(
        lo.ConversionError,
        match=r"column 'at' has Arrow type int64 \(number\); field 'at' "
        r"\(<M8\[ns\]\) needs timestamp\[ns\] \(time\), and numbers become "
        r"times only as counts of a unit you name \(cast='parse' does not "
        r"choose one\): pass time_unit=\{'at': 'ns'\}",
    ):
        lo.SoA.from_arrow(table, [("at", "<M8[ns]")], cast="parse")
    out = lo.SoA.from_arrow(table, [("at", "<M8[ns]")], time_unit={"at": "us"}).to_aos().to_numpy()
    assert out["at"][0] == np.datetime64(5, "us")


@pytest.mark.parametrize(
    "time_unit, match",
    [
        ("minutes", r"time_unit must be one of \('s', 'ms', 'us', 'ns', 'name'\) or \{field: unit\}, got 'minutes'"),
        ({"nope": "ns"}, r"time_unit names 'nope', which is not a leaf field; leaves are \['ts_ns', 'qty'\]"),
        ({"qty": "hours"}, r"time_unit\['qty'\] must be one of \('s', 'ms', 'us', 'ns', 'name'\), got 'hours'"),
        (5, r"time_unit must be one of .* got 5"),
    ],
)
def test_time_unit_is_checked(time_unit, match):
    with pytest.raises(lo.LayoutError, match=match):
        lo.SoA.from_arrow(pa.table({"ts_ns": [1], "qty": [1]}), TICK, time_unit=time_unit)


def test_time_unit_only_for_integer_and_datetime_fields():
    with pytest.raises(
        lo.LayoutError,
        match=r"time_unit names field 'px' \(<f8\), but a time unit applies to integer "
        r"fields",
    ):
        lo.SoA.from_arrow(pa.table({"px": [1.0]}), [("px", "<f8")], time_unit={"px": "s"})


# --------------------------------------------------------------- extra columns


def test_extra_columns_are_an_error_naming_them():
    table = pa.table({"a": [1], "b": [2], "c": [3]})
    with pytest.raises(
        lo.ConversionError,
        match=r"the Arrow data has columns \['b', 'c'\] that the layout does not "
        r"have \(it has \['a'\]\), which would be lost: pass "
        r"extra=\['b', 'c'\] to drop them, or change the layout",
    ):
        lo.SoA.from_arrow(table, [("a", "<i8")])
    assert lo.SoA.from_arrow(table, [("a", "<i8")], extra="drop").to_aos().to_numpy()["a"].tolist() == [1]
    assert lo.SoA.from_arrow(table, [("a", "<i8")], extra=["b", "c"]).to_aos().to_numpy()["a"].tolist() == [1]
    with pytest.raises(lo.ConversionError, match=r"has a column 'c' that the layout does not have"):
        lo.SoA.from_arrow(table, [("a", "<i8")], extra=["b"])


def test_extra_struct_children_are_named_too():
    table = pa.table({"pos": pa.array([{"x": 1.0, "y": 2.0, "z": 3.0}])})
    dtype = np.dtype([("pos", [("x", "<f8"), ("y", "<f8")])])
    with pytest.raises(
        lo.ConversionError,
        match=r"column 'pos' has a column 'pos.z' that the layout does not have "
        r"\(it has \['x', 'y'\]\).*extra=\['pos.z'\]",
    ):
        lo.SoA.from_arrow(table, dtype)
    assert lo.SoA.from_arrow(table, dtype, extra=["pos.z"]).to_aos().to_numpy()["pos"]["y"].tolist() == [2.0]


def test_extra_names_only_columns_the_layout_does_not_have():
    with pytest.raises(
        lo.LayoutError,
        match=r"extra names \['a'\], which the layout has: only columns the layout does "
        r"not have are dropped",
    ):
        lo.SoA.from_arrow(pa.table({"a": [1]}), [("a", "<i8")], extra=["a"])


@pytest.mark.parametrize("extra", ["ignore", 5, [1]])
def test_extra_is_checked(extra):
    with pytest.raises(lo.LayoutError, match=r"extra must be 'error', 'drop' or a list of column names to drop"):
        lo.SoA.from_arrow(pa.table({"a": [1]}), [("a", "<i8")], extra=extra)


# ---------------------------------------------------------- every problem at once


def test_every_column_problem_in_one_error_with_every_fix():
    table = pandas_like().append_column("px", pa.array(["1.5", "2", "3"]))
    dtype = np.dtype([("ts_ns", "<i8"), ("qty", "<i4"), ("px", "<f8"), ("side", "<i4")])
    with pytest.raises(
        lo.ConversionError,
        match=r"^5 problems with the Arrow data's columns, all of them: \(1\) the "
        r"Arrow data has a column 'note'.*\(2\) column 'ts_ns'.*\(3\) column "
        r"'qty' has 1 nulls.*\(4\) column 'px' has Arrow type string.*\(5\) "
        r"the Arrow data has no column 'side'.*; to convert, pass "
        r"extra=\['note'\], time_unit=\{'ts_ns': 'ns'\}, "
        r"fill=\{'ts_ns': value, 'qty': value\}, "
        r"cast='parse' and change the data or the layout of 'side' "
        r"\(no option fixes it\)$",
    ) as caught:
        lo.SoA.from_arrow(table, dtype)
    err = caught.value
    assert [column for column, _ in err.problems] == ["note", "ts_ns", "qty", "px", "side"]
    assert err.fixes == {
        "extra": ["note"],
        "time_unit": {"ts_ns": "ns"},
        "fill": {"ts_ns": "value", "qty": "value"},
        "cast": "parse",
    }
    assert "(2) column 'ts_ns' has Arrow type timestamp[us] (time)" in str(err)
    assert "; and column 'ts_ns' has 1 nulls (first at row 2)" in str(err)  # one column, both of its problems


def test_one_column_with_two_problems_reports_both():
    table = pa.table({"x": pa.array(["1", None])})
    with pytest.raises(
        lo.ConversionError,
        match=r"column 'x' has Arrow type string \(text\).*cast='parse'.*; and "
        r"column 'x' has 1 nulls.*fill=\{'x': value\}",
    ) as caught:
        lo.SoA.from_arrow(table, [("x", "<i4")])
    assert caught.value.fixes == {"cast": "parse", "fill": {"x": "value"}}


def test_the_fixes_make_it_go_through():
    table = pandas_like()
    with pytest.raises(lo.ConversionError) as caught:
        lo.SoA.from_arrow(table, TICK)
    fixes = dict(caught.value.fixes, fill={"qty": -1, "ts_ns": -1})
    out = lo.SoA.from_arrow(table, TICK, **fixes).to_aos().to_numpy()
    assert out.tolist() == [(0, 5), (1_500_000, -1), (-1, 7)]


def test_convert_keeps_every_problem_and_its_fixes(tmp_path):
    pq.write_table(pandas_like(), tmp_path / "p.parquet")
    with pytest.raises(lo.ConversionError, match=r"p.parquet, row group 0, rows 0 to 3: 3 problems") as caught:
        lo.convert(tmp_path / "p.parquet", TICK, tmp_path / "p.bin")
    assert caught.value.fixes == {
        "extra": ["note"],
        "time_unit": {"ts_ns": "ns"},
        "fill": {"ts_ns": "value", "qty": "value"},
    }
    assert not (tmp_path / "p.bin").exists()
    done = lo.convert(
        tmp_path / "p.parquet", TICK, tmp_path / "p.bin", time_unit="name", extra="drop", fill={"qty": -1, "ts_ns": 0}
    )
    assert done.records == 3 and np.fromfile(tmp_path / "p.bin", TICK)["ts_ns"].tolist() == [0, 1_500_000, 0]


def test_pandas_parquet_through_convert(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(
        {
            "ts_ns": pd.to_datetime([0, 1500], unit="us").astype("datetime64[us]"),
            "qty": pd.array([5, None], dtype="Int32"),
        },
        index=[10, 11],
    )
    df.to_parquet(tmp_path / "pd.parquet")
    with pytest.raises(lo.ConversionError, match=r"has a column '__index_level_0__' that the layout does not have"):
        lo.convert(tmp_path / "pd.parquet", TICK, tmp_path / "pd.bin")
    lo.convert(
        tmp_path / "pd.parquet",
        TICK,
        tmp_path / "pd.bin",
        time_unit={"ts_ns": "ns"},
        fill={"qty": -1},
        extra=["__index_level_0__"],
    )
    assert np.fromfile(tmp_path / "pd.bin", TICK).tolist() == [(0, 5), (1_500_000, -1)]


# --------------------------------------------------------------------- the header


@pytest.fixture
def headed(tmp_path):
    """A records file with a 16-byte header, and its Parquet (the header skipped)."""
    records = np.array([(1, 2), (3, 4)], TICK)
    (tmp_path / "h.bin").write_bytes(b"HEADER 16 BYTES\n" + records.tobytes())
    lo.convert(tmp_path / "h.bin", TICK, tmp_path / "h.parquet", offset=16)
    return tmp_path


def test_the_header_from_the_original_file(headed):
    done = lo.convert(headed / "h.parquet", TICK, headed / "back.bin", offset=16, header=headed / "h.bin")
    assert (headed / "back.bin").read_bytes() == (headed / "h.bin").read_bytes()
    assert done.records == 2 and done.bytes_out == 16 + 2 * TICK.itemsize
    with open(headed / "h.bin", "rb") as f:
        lo.convert(headed / "h.parquet", TICK, headed / "back2.bin", offset=16, header=f)
    assert (headed / "back2.bin").read_bytes() == (headed / "h.bin").read_bytes()


def test_the_header_as_bytes_and_to_a_stream(headed):
    out = io.BytesIO()
    lo.convert(headed / "h.parquet", TICK, out, format="records", header=b"HEADER 16 BYTES\n")
    assert out.getvalue() == (headed / "h.bin").read_bytes()


@pytest.mark.parametrize(
    "options, match",
    [
        (
            dict(offset=16),
            r"offset=16 skips a header when reading records, but this writes records from Arrow data, "
            r"where it would do nothing; to write a 16-byte header before the records, pass header= as the "
            r"original records file \(its first 16 bytes are copied\) or as the header's bytes",
        ),
        (dict(offset=8, header=b"0123"), r"header= is 4 bytes, but offset=8: give the header's bytes alone"),
        (dict(header="h.bin"), r"header= a file needs offset=N, the header's size in bytes"),
        (dict(offset=4096, header="h.bin"), r"the header file .*h.bin is 40 bytes, shorter than the 4096-byte header"),
        (dict(offset=16, header="missing.bin"), r"cannot read the header from .*missing.bin.*: No such file"),
        (dict(offset=16, header=3.5), r"header= takes bytes, a path or a binary file object, got float"),
    ],
)
def test_header_errors(headed, options, match):
    if isinstance(options.get("header"), str):
        options["header"] = headed / options["header"]
    with pytest.raises(lo.LayoutError, match=match):
        lo.convert(headed / "h.parquet", TICK, headed / "back.bin", **options)
    assert not (headed / "back.bin").exists()


@pytest.mark.parametrize(
    "options, name", [(dict(header=b"x"), "header"), (dict(time_unit="ns"), "time_unit"), (dict(extra="drop"), "extra")]
)
def test_way_back_options_are_refused_on_the_way_in(headed, options, name):
    with pytest.raises(
        lo.LayoutError,
        match=rf"{name}= applies when writing records \(Arrow -> records\), but this "
        rf"writes parquet",
    ):
        lo.convert(headed / "h.bin", TICK, headed / "again.parquet", offset=16, **options)


# ----------------------------------------------------------- the summary's figures


def test_small_conversions_show_their_size_and_speed():
    r = lo.ConvertResult(records=10, bytes_in=480, bytes_out=1500, seconds=0.25, dst="x.parquet")
    assert str(r) == "10 records, 480 bytes in, 1.5 kB out, 0.25 s, 1.92 kB/s -> x.parquet"
    r = lo.ConvertResult(records=1, bytes_in=4_800_000, bytes_out=3_900_000, seconds=0.5, dst="x")
    assert str(r) == "1 records, 4.8 MB in, 3.9 MB out, 0.50 s, 9.60 MB/s -> x"
    r = lo.ConvertResult(records=1, bytes_in=4_800_000, bytes_out=4_800_000, seconds=0.01, dst="x")
    assert "0.48 GB/s" in str(r) and "0.00" not in str(r)


def test_convert_reports_the_problems_of_every_row_group(tmp_path):
    n = 300
    pq.write_table(
        pa.table(
            {
                "ts_ns": pa.array(range(n), pa.timestamp("us")),
                "qty": pa.array([None if i in (5, 250) else i for i in range(n)], pa.int32()),
                "px": pa.array([None if i == 280 else 1.0 for i in range(n)]),
                "big": pa.array([2**40 if i == 290 else 1 for i in range(n)]),
            }
        ),
        tmp_path / "m.parquet",
        row_group_size=100,
    )
    dtype = np.dtype([("ts_ns", "<i8"), ("qty", "<i4"), ("px", "<f8"), ("big", "<i4")])
    with pytest.raises(
        lo.ConversionError,
        match=r"m.parquet, row group 0, rows 0 to 100: 4 problems with the Arrow "
        r"data's columns, all of them: \(1\) column 'ts_ns'.*\(2\) column 'qty' "
        r"has 1 nulls \(first at row 5\).*\(3\) row group 2, rows 200 to 300: "
        r"column 'px' has 1 nulls \(first at row 280\).*\(4\) row group 2, rows "
        r"200 to 300: column 'big' has Arrow type int64; field 'big' \(<i4\) "
        r"needs int32, and row 290 holds 1099511627776.*; to convert, pass "
        r"time_unit=\{'ts_ns': 'ns'\}, fill=\{'qty': value, 'px': value\} and "
        r"change the data or the layout of 'big' \(no option fixes it\)$",
    ) as err:
        lo.convert(tmp_path / "m.parquet", dtype, tmp_path / "m.bin", chunk_bytes=100 * dtype.itemsize)
    assert err.value.fixes == {"time_unit": {"ts_ns": "ns"}, "fill": {"qty": "value", "px": "value"}}
    assert not (tmp_path / "m.bin").exists()


def test_an_interval_is_no_count_of_a_unit():
    table = pa.table({"x": pa.array([(1, 2, 3)], pa.month_day_nano_interval())})
    with pytest.raises(
        lo.ConversionError,
        match=r"column 'x' has Arrow type month_day_nano_interval; field 'x' \(<i8\) "
        r"takes timestamps, durations, dates or times of day as counts of "
        r"nanoseconds",
    ):
        lo.SoA.from_arrow(table, [("x", "<i8")], time_unit="ns")


def test_a_negative_offset_back_to_records_is_refused(headed):
    with pytest.raises(lo.LayoutError, match=r"offset=-3 is negative: .*give an int >= 0"):
        lo.convert(headed / "h.parquet", TICK, headed / "back.bin", offset=-3, header=headed / "h.bin")


@pytest.mark.slow
def test_ibm_floats_that_come_back_as_other_bytes_are_counted(tmp_path):
    """attack6: COMP-1/COMP-2 values that the way back writes otherwise (a value below
    float32's normal range, a zero fraction with an exponent, unnormalized values) came
    back changed without a word; float_counts counts them (each read and written back by
    the conversion itself) and the command says so per field."""
    import subprocess
    import sys

    import layouts.cobol  # noqa: F401 - lo.cobol

    book = "       01 R.\n           05 A COMP-1.\n           05 B COMP-2.\n           05 C COMP-1 OCCURS 2 TIMES.\n"
    layout = lo.Layout.from_copybook(book)
    records = bytes.fromhex(
        "00100000"
        "7F00000000000000"
        "41100000"
        "41000001"  # A tiny (-> 0.0), B a dirty zero, C[1] unnormalized
        "41000001"
        "4100000000000001"
        "41100000"
        "41100000"  # A and B unnormalized
        "7FFFFFFF"
        "0000000000000000"
        "00000000"
        "80000000"  # A beyond float32 (null, not counted); zeros of both signs
        "C2123456"
        "C412345678ABCDEF"
        "3F100000"
        "BF800000"  # normalized values: back byte for byte
    )
    assert lo.cobol.float_counts(records, layout) == {"A": 2, "B": 2, "C": 1}
    exact = records[:20] + records[40:60]
    assert lo.cobol.float_counts(records[60:], layout) == {}
    assert lo.cobol.float_counts(np.frombuffer(exact, layout.dtype), layout) == {"A": 1, "B": 1, "C": 1}
    (tmp_path / "f.cob").write_text(book)
    (tmp_path / "f.dat").write_bytes(records[:40] + records[60:])
    run = subprocess.run(
        [sys.executable, "-m", "layouts", "convert", "f.dat", "--copybook", "f.cob", "--to", "f.parquet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()[1:]
    assert [line.split(" will come back")[0] for line in lines] == [
        "  2 values of A",
        "  2 values of B",
        "  1 value of C",
    ]
    assert "as other bytes (IBM floats are read as IEEE floats and written back normalized" in lines[0]


def test_bytes_where_no_field_is_are_counted(tmp_path, capsys):
    """attack6: FILLER bytes, a REDEFINES alternative left out and record start/end bytes
    came back as zeros on the fixed-length round trip without a word; uncovered_count
    counts the records that hold other bytes there, and the command says so."""
    import layouts.cobol  # noqa: F401 - lo.cobol
    from layouts._cli import main

    filler = lo.Layout.from_copybook("       01 R.\n           05 A PIC X(2).\n           05 FILLER PIC X(3).\n")
    assert lo.cobol.uncovered_count(bytes.fromhex("c1c2404040c1c2000000c1c2000001"), filler) == 2
    kept = lo.Layout.from_copybook(
        "       01 R.\n           05 A PIC X(2).\n           05 FILLER PIC X(3).\n", fillers="keep"
    )
    assert lo.cobol.uncovered_count(bytes.fromhex("c1c2404040"), kept) == 0
    book = "       01 R.\n           05 A PIC X(2).\n           05 B REDEFINES A PIC X(4).\n"
    assert lo.cobol.uncovered_count(bytes.fromhex("c1c2c3c4"), lo.Layout.from_copybook(book)) == 0
    assert lo.cobol.uncovered_count(bytes.fromhex("c1c2c3c4"), lo.Layout.from_copybook(book, redefines={"A": "A"})) == 1
    edges = lo.Layout.from_copybook(
        "       01 R.\n           05 B PIC S9(3) COMP-3.\n", record_start_offset=2, record_end_offset=1
    )
    assert lo.cobol.uncovered_count(bytes.fromhex("aabb123ccc0000123c00"), edges) == 1
    (tmp_path / "f.cob").write_text("       01 R.\n           05 A PIC X(2).\n           05 FILLER PIC X(3).\n")
    (tmp_path / "f.dat").write_bytes(bytes.fromhex("c1c2404040") * 3)
    assert (
        main(
            [
                "convert",
                str(tmp_path / "f.dat"),
                "--copybook",
                str(tmp_path / "f.cob"),
                "--to",
                str(tmp_path / "f.parquet"),
            ]
        )
        == 0
    )
    assert (
        "  3 records hold bytes other than zero where no field is (FILLER, a REDEFINES alternative left out, record "
        "start or end bytes): the way back writes zeros there; --fillers keep keeps FILLER's"
    ) in capsys.readouterr().out.splitlines()


def test_an_integer_column_for_a_decimal_field_is_checked_value_by_value():
    """attack6: an int64 column for a PIC S9(3)V99 field was refused whatever its values
    (pyarrow casts integers only to decimals wide enough for every integer)."""
    layout = lo.Layout.from_copybook("       01 R.\n           05 A PIC S9(3)V99 COMP-3.\n")
    back = lo.SoA.from_arrow(pa.table({"A": [3, -999, 0]}), layout).to_aos().array
    assert back.tobytes().hex() == "00300c99900d00000c"
    for bad in (1000, -1000):
        with pytest.raises(lo.ConversionError, match=rf"row 1 holds {bad}, which does not fit it \(more than 3 digits"):
            lo.SoA.from_arrow(pa.table({"A": [3, bad]}), layout).to_aos()
