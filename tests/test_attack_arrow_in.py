"""What an attacker found in Arrow -> records: times copied across units, problems found
one at a time, options taken silently, raw exceptions, messages that said the wrong thing."""

import io
import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pytest

import layouts as lo
from layouts._cli import main


def one(column, dtype, **kw):
    return lo.SoA.from_arrow(pa.table({"t": column}), [("t", dtype)], **kw).to_aos().to_numpy()["t"]


def run(capsys, *argv):
    rc = main([*map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


# 1. times into units Arrow has no type for (ps, fs, as; timedelta months and years)


@pytest.mark.parametrize(
    "column, dtype, expected",
    [
        (pa.array([5, None], pa.timestamp("ns")), "<M8[ps]", np.array([5000, "NaT"], "M8[ps]")),
        (pa.array([5], pa.timestamp("s")), "<M8[as]", np.array([5 * 10**18], "M8[as]")),
        (pa.array([-7], pa.timestamp("us")), "<M8[fs]", np.array([-7 * 10**9], "M8[fs]")),
        (pa.array([3], pa.timestamp("ns")), "<M8[3ps]", np.array([1000], "M8[3ps]")),
        (pa.array([2], pa.date32()), "<M8[ps]", np.array([2 * 86400 * 10**12], "M8[ps]")),
        (pa.array([5], pa.duration("ms")), "<m8[ps]", np.array([5 * 10**9], "m8[ps]")),
        (pa.array([5], pa.duration("ns")), ">m8[as]", np.array([5 * 10**9], "m8[as]")),
    ],
)
@pytest.mark.parametrize("cast", ["strict", "parse"])
def test_times_are_scaled_to_the_fields_unit(column, dtype, expected, cast):
    out = one(column, dtype, cast=cast)
    assert out.dtype == np.dtype(dtype) and np.array_equal(out.astype(expected.dtype), expected, equal_nan=True)


@pytest.mark.parametrize(
    "unit, dtype, count", [("ns", "<M8[ps]", 5000), ("s", "<M8[fs]", 5 * 10**15), ("ms", "<m8[as]", 5 * 10**15)]
)
def test_counts_of_a_named_unit_are_scaled(unit, dtype, count):
    out = one(pa.array([5]), dtype, time_unit=unit)
    assert out.view(np.int64).tolist() == [count]
    assert one(pa.array([5]), dtype).view(np.int64).tolist() == [5]  # no unit named: the field's own counts


@pytest.mark.parametrize(
    "column, dtype, kw, match",
    [
        (
            pa.array([0, 2**62], pa.timestamp("ns")),
            "<M8[fs]",
            {},
            r"column 't' row 1: 4611686018427387904 ns \(Arrow type timestamp\[ns\]\) is more than 9223372036854775807 "
            r"counts of fs \(int64\) when scaled by 1000000, so field 't' \(<M8\[fs\], counts of 1fs\) cannot hold it "
            r"exactly: change the field's unit or the data",
        ),
        (
            pa.array([10], pa.timestamp("s")),
            "<M8[as]",
            {"cast": "parse"},
            r"row 0: 10 s .* is more than 9223372036854775807 counts of as",
        ),
        (
            pa.array([3, 5], pa.timestamp("ns")),
            "<M8[3ps]",
            {},
            r"column 't' row 1: 5 ns \(Arrow type timestamp\[ns\]\) is not a whole number of 3ps",
        ),
        (
            pa.array([5], pa.duration("s")),
            "<m8[M]",
            {"cast": "parse"},
            r"column 't' has Arrow type duration\[s\]; field 't' \(<m8\[M\], counts of 1M\) counts months, and a month "
            r"or a year is not a whole number of seconds, so no value can be converted exactly",
        ),
        (pa.array([5], pa.duration("s")), "<m8[Y]", {}, r"counts months, and a month or a year is not"),
        (
            pa.array([5]),
            "<m8[Y]",
            {"time_unit": "s"},
            r"column 't' has integers counted in seconds; field 't' \(<m8\[Y\], counts of 1Y\) counts months",
        ),
        (
            pa.array([5], pa.duration("ns")),
            "<M8[ps]",
            {"cast": "parse"},
            r"column 't' has Arrow type duration\[ns\] \(durations\); field 't' \(<M8\[ps\], counts of 1ps\) holds "
            r"points in time: change the field's type or the data",
        ),
        (pa.array([5], pa.timestamp("ns")), "<m8[ps]", {}, r"\(points in time\); field 't' .* holds durations"),
        (pa.array([5], pa.time64("ns")), "<M8[ps]", {}, r"\(times of day\); field 't' .* holds points in time"),
        (pa.array([5], pa.timestamp("s")), "<M8[M]", {"cast": "parse"}, r"becomes datetime.date\(1970, 1, 1\)"),
        (pa.array([5], pa.timestamp("s")), "<M8[Y]", {}, r"becomes datetime.date\(1970, 1, 1\)"),
    ],
)
def test_times_that_do_not_fit_exactly_are_refused(column, dtype, kw, match):
    with pytest.raises(lo.ConversionError, match=match) as caught:
        one(column, dtype, **kw)
    assert "cast='parse'" not in str(caught.value).replace("(cast='parse' does not", "")


@pytest.mark.parametrize(
    "dtype", ["<M8[ps]", "<M8[fs]", "<M8[as]", "<m8[ps]", "<m8[fs]", "<m8[as]", "<m8[M]", "<m8[Y]", "<M8[M]", "<M8[Y]"]
)
def test_records_arrow_records_keeps_every_unit(dtype):
    x = np.zeros(3, [("t", dtype)])
    x["t"] = np.array([5, -3, 7]).astype(x.dtype["t"])
    table = lo.AoS(x).to_soa().to_arrow()
    back = lo.SoA.from_arrow(table, x.dtype).to_aos().to_numpy()
    assert back.tobytes() == x.tobytes()


@pytest.mark.parametrize("dtype, ok", [("<M8[fs]", 5000 * 1000), ("<M8[as]", 5000 * 10**6), ("<M8[ns]", 5)])
def test_to_arrow_counts_are_read_in_their_own_unit(dtype, ok):
    """``to_arrow`` writes ps as int64 counts marked ``layouts.dtype``; another field's unit scales them."""
    x = np.array([(5000,)], [("t", "<M8[ps]")])
    table = lo.AoS(x).to_soa().to_arrow()
    assert table.schema.field("t").type == pa.int64()
    assert table.schema.field("t").metadata == {b"layouts.dtype": b"datetime64[ps]"}
    assert lo.SoA.from_arrow(table, [("t", dtype)]).to_aos().to_numpy()["t"].view(np.int64).tolist() == [ok]
    with pytest.raises(
        lo.ConversionError,
        match=r"row 0: 5000 ps \(int64 counts of datetime64\[ps\] \(its "
        r"layouts.dtype metadata, from to_arrow\)\) is not a whole number "
        r"of 1us",
    ):
        lo.SoA.from_arrow(table, [("t", "<M8[us]")])
    with pytest.raises(lo.ConversionError, match=r"holds int64 counts of datetime64\[ps\] .* holds durations"):
        lo.SoA.from_arrow(table, [("t", "<m8[ps]")])


def test_the_command_scales_too(tmp_path, capsys):
    feather.write_feather(pa.table({"t": pa.array([5], pa.timestamp("ns"))}), tmp_path / "ts.arrow")
    feather.write_feather(pa.table({"t": pa.array([5])}), tmp_path / "n.arrow")
    dtype = "[('t', '<M8[ps]')]"
    for src, extra in (("ts.arrow", ["--cast", "parse"]), ("ts.arrow", []), ("n.arrow", ["--time-unit", "ns"])):
        rc, _, err = run(
            capsys,
            "convert",
            tmp_path / src,
            "--dtype",
            dtype,
            "--to",
            tmp_path / "o.bin",
            "--overwrite",
            "--quiet",
            *extra,
        )
        assert rc == 0, err
        assert np.fromfile(tmp_path / "o.bin", "<i8").tolist() == [5000]
    rc, _, err = run(
        capsys,
        "convert",
        tmp_path / "ts.arrow",
        "--dtype",
        "[('t', '<m8[M]')]",
        "--to",
        tmp_path / "m.bin",
        "--cast",
        "parse",
        "--quiet",
    )
    assert rc == 1 and not (tmp_path / "m.bin").exists()
    assert (
        "column 't' has Arrow type timestamp[ns] (points in time); field 't' (<m8[M], counts of 1M) holds "
        "durations" in err
    )


# 2. a string longer than its field is one of the column problems, listed with the others


def _columns(table, dtype, **kw):
    from layouts._aos import as_layout
    from layouts._arrow_in import columns_from_arrow

    return columns_from_arrow(table, as_layout(dtype), {}, **kw)


def test_over_long_strings_are_listed_with_the_other_problems():
    table = pa.table({"s": ["ab", "abcd", "abcdef"], "q": [1, None, 3], "u": ["é", "ééé", ""]})
    dtype = [("s", "S3"), ("q", "<i4"), ("u", "<U2")]
    with pytest.raises(
        lo.ConversionError,
        match=r"^3 problems with the Arrow data's columns, all of them: \(1\) column "
        r"'s', row 1: 'abcd' \(4 bytes\) is longer than field 's' \(\|S3 at "
        r"offset 0, 3 bytes; the longest value has 6\): pass truncate=True to "
        r"cut such values to 3 bytes, or change the field's width; \(2\) .*"
        r"\(3\) column 'u', row 1: 'ééé' \(3 characters\) is longer than field "
        r"'u' \(<U2 at offset 7, 2 characters\).* to convert, pass "
        r"truncate=True, fill=\{'q': value\}$",
    ) as caught:
        _columns(table, dtype, truncate=False)
    assert caught.value.fixes == {"truncate": True, "fill": {"q": "value"}}
    assert [c for c, _ in caught.value.problems] == ["s", "q", "u"]
    _columns(pa.table({"s": ["abcd"], "q": [1], "u": ["ééé"]}), dtype, truncate=True)  # the fix: no problem left
    _columns(pa.table({"s": ["abc"], "q": [1], "u": ["éé"]}), dtype, truncate=False)  # exactly the width fits


def test_an_over_long_string_and_nulls_in_one_column():
    with pytest.raises(
        lo.ConversionError,
        match=r"column 's', row 1: b'abcd' \(4 bytes\) is longer than field 's' .*; "
        r"and column 's' has 1 nulls \(first at row 0\)",
    ) as caught:
        _columns(pa.table({"s": pa.array([None, b"abcd"], pa.binary())}), [("s", "S3")], truncate=False)
    assert caught.value.fixes == {"truncate": True, "fill": {"s": "value"}}


# 3. --time-unit twice for one field (or twice without a field) is a usage error


@pytest.mark.parametrize(
    "first, second, match",
    [
        (
            "t=ns",
            "t=us",
            r"--time-unit t=ns and --time-unit t=us give field 't' two units; give one --time-unit t=UNIT",
        ),
        ("ns", "s", r"--time-unit ns and --time-unit s give the default unit two units; give one --time-unit UNIT"),
    ],
)
def test_a_time_unit_given_twice(tmp_path, capsys, first, second, match):
    feather.write_feather(pa.table({"t": pa.array([5])}), tmp_path / "n.arrow")
    rc, _, err = run(
        capsys,
        "convert",
        tmp_path / "n.arrow",
        "--dtype",
        "[('t', '<M8[ps]')]",
        "--to",
        tmp_path / "o.bin",
        "--time-unit",
        first,
        "--time-unit",
        second,
    )
    assert rc == 2 and not (tmp_path / "o.bin").exists()
    assert re.search(match, err), err
    rc, _, err = run(
        capsys,
        "convert",
        tmp_path / "n.arrow",
        "--dtype",
        "[('t', '<M8[ps]')]",
        "--to",
        tmp_path / "o.bin",
        "--time-unit",
        first,
        "--time-unit",
        first,
        "--quiet",
    )
    assert rc == 0, err  # the same unit twice is no contradiction


# 4. raw exceptions: dates Python cannot hold, headers too large or not files, pandas' duplicate names


@pytest.mark.parametrize("dtype", ["<M8[D]", "<M8[W]", "<M8[M]", "<M8[Y]"])
@pytest.mark.parametrize("big", [86400 * 2**31, 86400 * 2**40])
def test_a_date_python_cannot_hold_is_shown_as_its_count(dtype, big):
    table = pa.table({"t": pa.array([0, big], pa.timestamp("s"))})
    with pytest.raises(
        lo.ConversionError,
        match=rf"column 't' row 1: {big} s \(timestamp\[s\]\) becomes .* as "
        rf"date32\[day\]; field 't' \(<M8\[{dtype[-2]}\]\) needs date32\[day\]",
    ):
        lo.SoA.from_arrow(table, [("t", dtype)]).to_aos()


@pytest.fixture
def arrow_in(tmp_path):
    feather.write_feather(pa.table({"a": pa.array([1], pa.int32())}), tmp_path / "in.arrow")
    (tmp_path / "h.hdr").write_bytes(b"HEAD")
    return tmp_path


@pytest.mark.parametrize(
    "offset, header, match",
    [
        (
            2**63 - 1,
            "h.hdr",
            r"offset=9223372036854775807 asks for a header of 9223372036854775807 bytes, more than the "
            r"1073741824 bytes \(1 GiB\) a header may have: give offset= as the header's size",
        ),
        (
            2**40,
            "/dev/zero",
            r"offset=1099511627776 asks for a header of 1099511627776 bytes, more than the 1073741824",
        ),
        (
            8,
            "/dev/zero",
            r"'/dev/zero' is a character device, not a regular file; header= is the original records "
            r"file, whose first 8 bytes \(offset=8\) are copied",
        ),
        (4, ".", r"is a directory, not a regular file"),
        (
            10**6,
            "h.hdr",
            r"the header file .*h.hdr is 4 bytes, shorter than the 1000000-byte header \(offset=1000000\)",
        ),
        (2**40, io.BytesIO(b"HEAD"), r"offset=1099511627776 asks for a header of 1099511627776 bytes"),
        (
            5,
            io.BytesIO(b"HEAD"),
            r"the header file \(a BytesIO\) is 4 bytes, shorter than the 5-byte header \(offset=5\)",
        ),
    ],
)
def test_headers_that_cannot_be_read_whole(arrow_in, offset, header, match):
    where = header if not isinstance(header, str) or header.startswith("/") else str(arrow_in / header)
    with pytest.raises(lo.LayoutError, match=match):
        lo.convert(arrow_in / "in.arrow", [("a", "<i4")], arrow_in / "out.bin", offset=offset, header=where)
    assert not (arrow_in / "out.bin").exists()
    lo.convert(arrow_in / "in.arrow", [("a", "<i4")], arrow_in / "out.bin", offset=4, header=arrow_in / "h.hdr")
    assert (arrow_in / "out.bin").read_bytes() == b"HEAD\x01\x00\x00\x00"


def test_the_commands_header_checks(arrow_in, capsys):
    rc, _, err = run(
        capsys,
        "convert",
        arrow_in / "in.arrow",
        "--dtype",
        "[('a', '<i4')]",
        "--to",
        arrow_in / "o.bin",
        "--header",
        arrow_in / "h.hdr",
        "--offset",
        "99999999999999999999",
    )
    assert (
        rc == 1
        and "--offset 99999999999999999999 asks for a header of 99999999999999999999 bytes, more than "
        "the 1073741824 bytes (1 GiB) a header may have: give --offset as the header's size"
        in err
    )


@pytest.mark.slow
def test_a_fifo_header_is_refused_at_once(arrow_in):
    os.mkfifo(arrow_in / "h.fifo")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "layouts",
            "convert",
            str(arrow_in / "in.arrow"),
            "--dtype",
            "[('a', '<i4')]",
            "--to",
            str(arrow_in / "o.bin"),
            "--header",
            str(arrow_in / "h.fifo"),
            "--offset",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and not (arrow_in / "o.bin").exists()
    assert re.search(
        r"h.fifo' is a FIFO \(named pipe\), not a regular file; --header is the original records file, "
        r"whose first 4 bytes \(--offset 4\) are copied",
        done.stderr,
    ), done.stderr


def test_duplicate_pandas_columns_are_named():
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame([[1, 2, 3]], columns=["a", "a", "b"])
    with pytest.raises(
        lo.LayoutError,
        match=r"^the DataFrame has 2 columns named 'a' \(columns \[0, 1\]\) of \['a', "
        r"'a', 'b'\]; a field is found by name, which would not say which one to "
        r"read: rename all but one first \(pandas: df.columns = \[...\]\)",
    ):
        lo.SoA.from_arrow(frame, [("a", "<i8")])


# 5. messages that said the wrong thing


def test_a_time_of_day_too_big_for_its_field_names_its_own_type():
    with pytest.raises(
        lo.ConversionError,
        match=r"^column 't' row 1: datetime.time\(23, 59, 59\) \(time32\[s\]\) is "
        r"86399 seconds \(time_unit=\{'t': 's'\}\), which field 't' \(<i2, "
        r"int16\) cannot hold: name a coarser unit, widen the field, or change "
        r"the data$",
    ):
        one(pa.array([5, 86399], pa.time32("s")), "<i2", time_unit="s")
    with pytest.raises(
        lo.ConversionError,
        match=r"\(time32\[s\]\) is 86399000000000 nanoseconds \(time_unit=\{'t': "
        r"'ns'\}\), which field 't' \(<i4, int32\) cannot hold",
    ):
        one(pa.array([86399], pa.time32("s")), "<i4", time_unit="ns")


def test_a_nanosecond_time_of_day_is_shown_as_its_count():
    with pytest.raises(
        lo.ConversionError,
        match=r"^column 't' row 0: 1 ns \(time64\[ns\]\) is not a whole number of "
        r"microseconds or is out of their range, the unit time_unit=\{'t': "
        r"'us'\} gives field 't' \(<i8\)",
    ):
        one(pa.array([1], pa.time64("ns")), "<i8", time_unit="us")


def test_the_command_names_its_time_unit_flag(tmp_path, capsys):
    feather.write_feather(pa.table({"t": pa.array([1000, 1500], pa.timestamp("ms"))}), tmp_path / "t.arrow")
    rc, _, err = run(
        capsys,
        "convert",
        tmp_path / "t.arrow",
        "--dtype",
        "[('t', '<i8')]",
        "--to",
        tmp_path / "o.bin",
        "--time-unit",
        "s",
    )
    assert rc == 1 and "the unit --time-unit t=s gives field 't' (<i8)" in err and "time_unit" not in err, err


def test_an_extra_column_named_twice_is_named_once():
    table = pa.table([[1], [1], [2]], names=["t", "b", "b"])
    with pytest.raises(
        lo.ConversionError,
        match=r"the Arrow data has a column 'b' that the layout does not have "
        r"\(it has \['t'\]\), which would be lost: pass extra=\['b'\] to drop",
    ):
        lo.SoA.from_arrow(table, [("t", "<i8")])


def test_a_partial_record_of_a_file_object_counts_from_its_position(tmp_path):
    f = io.BytesIO(bytes(17 + 80 + 3))
    f.seek(17)
    with pytest.warns(
        UserWarning,
        match=r"the input has 83 bytes of records: 10 records of 8 bytes and 3 bytes left "
        r"over, from byte 80 counted from where reading began \(a file object's "
        r"position when it was given\); skipped those 3 bytes: ",
    ):
        lo.convert(f, [("a", "<i8")], tmp_path / "o.arrow", trailing="ignore")
    f.seek(17)
    with pytest.warns(
        UserWarning,
        match=r"from byte 80 counted from where reading began \(a file object's position "
        r"when it was given, the 8-byte header offset included\)",
    ):
        lo.convert(f, [("a", "<i8")], tmp_path / "p.arrow", trailing="ignore", offset=8)


@pytest.mark.parametrize("chunk", [1.5, True, "64", 64.0])
def test_chunk_bytes_must_be_an_int(tmp_path, chunk):
    (tmp_path / "c.bin").write_bytes(bytes(16))
    with pytest.raises(
        lo.LayoutError,
        match=rf"^chunk_bytes must be a whole number of bytes \(an int, e.g. 64 << 20\), "
        rf"got {re.escape(repr(chunk))} \({type(chunk).__name__}\)$",
    ):
        lo.convert(tmp_path / "c.bin", [("a", "<i8")], tmp_path / "o.arrow", chunk_bytes=chunk)
    assert not (tmp_path / "o.arrow").exists()
    lo.convert(tmp_path / "c.bin", [("a", "<i8")], tmp_path / "o.arrow", chunk_bytes=np.int64(8))


def test_count_on_the_way_back_says_what_is_wrong(tmp_path, capsys):
    (tmp_path / "z.bin").write_bytes(bytes(32))
    feather.write_feather(pa.table({"a": pa.array([1])}), tmp_path / "in.arrow")
    rc, _, err = run(
        capsys,
        "convert",
        tmp_path / "z.bin",
        "--dtype",
        "[('a', '<i8')]",
        "--to",
        tmp_path / "z.out",
        "--format",
        "records",
        "--count",
        "1",
    )
    assert (
        rc == 2
        and "--count 1 applies to an input of records (records -> Arrow), whose first 1 records it takes, "
        "but this writes records (--format records, or a records destination), which it makes only "
        "from Parquet or Arrow data, and "
        in err
        and "z.bin is neither (it has no Parquet or Arrow "
        "magic bytes: records, it seems): records -> records is no conversion; to convert records to "
        "Arrow, give an Arrow destination (.parquet, .feather, .arrow, .arrows) or --format parquet"
        in err
    )
    rc, _, err = run(
        capsys,
        "convert",
        tmp_path / "in.arrow",
        "--dtype",
        "[('a', '<i8')]",
        "--to",
        tmp_path / "o.bin",
        "--count",
        "1",
    )
    assert rc == 2 and "in.arrow is an Arrow IPC file, whose every row is written: leave --count out" in err, err
    with pytest.raises(
        lo.LayoutError,
        match=r"count=1 applies to an input of records .* and its input is Parquet or "
        r"Arrow data, whose every row is written: leave count= out",
    ):
        lo.convert(io.BytesIO(bytes(8)), [("a", "<i8")], tmp_path / "o.bin", count=1)
    assert not (tmp_path / "o.bin").exists() and not (tmp_path / "z.out").exists()


# 6. usage errors: the unknown option first, bench's one line, --count the other way exits 2


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["convert", "z.bin", "--to", "z.arrow", "--bogus", "--dtype"],
            "layouts convert: error: unrecognized arguments: --bogus; and argument --dtype: expected one argument "
            "(see layouts convert --help)\n",
        ),
        (
            ["convert", "z.bin", "--bogus", "--to", "z.arrow"],
            "layouts convert: error: unrecognized arguments: --bogus (see layouts convert --help)\n",
        ),
        (
            ["convert", "z.bin", "--to", "z.arrow", "--dtype"],
            "layouts convert: error: argument --dtype: expected one argument (see layouts convert --help)\n",
        ),
        (["bench", "--bogus"], "layouts bench: error: unrecognized arguments: --bogus (see layouts bench --help)\n"),
        (
            ["bench", "--records", "x"],
            "layouts bench: error: argument --records: invalid int value: 'x' (see layouts bench --help)\n",
        ),
    ],
)
def test_usage_errors_are_one_line_with_the_unknown_option_first(tmp_path, capsys, argv, line):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    out, err = capsys.readouterr()
    assert err == line and out == ""


def test_scaled_times_from_slices_dictionaries_and_sub_arrays():
    sliced = pa.array([1, None, 3, 4], pa.timestamp("ns")).slice(1)
    out = one(sliced, "<M8[ps]")
    assert np.isnat(out[0]) and out[1:].view(np.int64).tolist() == [3000, 4000]
    coded = pa.array([1, 2, 1], pa.timestamp("ns")).dictionary_encode()
    assert one(coded, "<M8[ps]").view(np.int64).tolist() == [1000, 2000, 1000]
    lists = pa.array([[1, 2], [3, 4]], pa.list_(pa.timestamp("ns"), 2))
    out = lo.SoA.from_arrow(pa.table({"t": lists}), [("t", "<M8[ps]", (2,))]).to_aos().to_numpy()["t"]
    assert out.view(np.int64).tolist() == [[1000, 2000], [3000, 4000]]
    lists = pa.array([[1, 2], [3, 2**62]], pa.list_(pa.timestamp("ns"), 2))
    with pytest.raises(
        lo.ConversionError,
        match=r"^column 't' row 1: 4611686018427387904 ns \(Arrow type "
        r"timestamp\[ns\]\) is more than 9223372036854775807 counts of fs",
    ):
        lo.SoA.from_arrow(pa.table({"t": lists}), [("t", "<M8[fs]", (2,))])


def test_from_arrow_lists_an_over_long_string_with_the_other_problems():
    """SoA.from_arrow (and so convert and the command) reports a string longer than its
    field in the one error, with the other column problems, and truncate among the fixes."""
    table = pa.table({"qty": pa.array([5, None], pa.int32()), "sym": ["abcd", "x"]})
    dtype = [("qty", "<i4"), ("sym", "S3")]
    with pytest.raises(
        lo.ConversionError,
        match=r"2 problems .*\(1\) column 'qty' has 1 nulls .*\(2\) column 'sym', "
        r"row 0: b?'abcd' \(4 bytes\) is longer than field 'sym'",
    ) as caught:
        lo.SoA.from_arrow(table, dtype)
    assert "truncate" in caught.value.fixes
    back = lo.SoA.from_arrow(table, dtype, fill={"qty": -1}, truncate=True).to_aos().to_numpy()
    assert back.tolist() == [(5, b"abc"), (-1, b"x")]
