"""The way back to records names every column that holds a value its field cannot take, in
one error (the kernel stops at the first; it runs again over the columns not yet named),
as the column checks before a conversion do: ``to_aos``, ``convert`` (CPU and the GPU's
slots), ``write_stream`` and the command."""

import decimal
import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import layouts as lo
import layouts._soa as soa_module
from layouts._cli import main

BOOK = """\
       01  REC.
           05  NAME      PIC X(4).
           05  AMT       PIC S9(3)V99 COMP-3.
           05  CITY      PIC X(3).
           05  QTY       PIC S9(3) COMP.
"""
D = decimal.Decimal


def _table(name=("ABCD", "AB", "A"), amt=("1.00", "2.00", "3.00"), city=("ABC", "DE", "F"), qty=(1, 2, 3)):
    return pa.table(
        {
            "NAME": list(name),
            "AMT": pa.array([D(v) for v in amt], pa.decimal128(9, 2)),
            "CITY": list(city),
            "QTY": pa.array(qty, pa.int64()),
        }
    )


BAD = dict(name=("ABCD", "A\u0100", "A"), amt=("1.00", "1234.50", "3.00"), city=("ABC", "DE", "X€"))


@pytest.mark.parametrize("threads", [1, 2])
def test_every_bad_column_is_named_once_with_its_row(device, threads):
    layout = lo.Layout.from_copybook(BOOK)
    soa = lo.SoA.from_arrow(_table(**BAD), layout)
    with pytest.raises(lo.ConversionError) as got:
        soa.to_aos(threads=threads, device=device)
    err = got.value
    said = {c: str(e) for c, e in err.problems}
    assert len(err.problems) == 3 and set(said) == {"NAME", "AMT", "CITY"}
    assert "row 1: Decimal('1234.50') does not fit field 'AMT'" in said["AMT"]
    assert "row 2: 'X€' holds '€' (U+20AC), which code page cp037 has no byte for" in said["CITY"]
    assert "row 1: 'A\u0100' holds '\u0100' (U+0100)" in said["NAME"]
    assert str(err).startswith("3 problems with the Arrow data's columns, all of them: (1) column ")
    assert "no option fixes them" in str(err) and dict(err.fixes) == {}


def test_one_bad_column_is_the_same_error_as_before():
    layout = lo.Layout.from_copybook(BOOK)
    with pytest.raises(lo.ConversionError) as got:
        lo.SoA.from_arrow(_table(amt=BAD["amt"]), layout).to_aos()
    assert str(got.value).startswith("column 'AMT', row 1: Decimal('1234.50') does not fit field 'AMT'")
    assert [c for c, _ in got.value.problems] == ["AMT"]


def test_good_columns_still_convert_and_each_rerun_leaves_out_what_was_found(monkeypatch):
    layout = lo.Layout.from_copybook(BOOK)
    good = lo.SoA.from_arrow(_table(), layout).to_aos().to_numpy()
    assert lo.AoS(good, layout=layout).to_soa().to_arrow().column("CITY").to_pylist() == ["ABC", "DE ", "F  "]
    monkeypatch.setattr(soa_module, "RERUNS", 1)  # the cap: two columns named, and it says there may be more
    with pytest.raises(lo.ConversionError) as got:
        lo.SoA.from_arrow(_table(**BAD), layout).to_aos(threads=1)
    assert len(got.value.problems) == 2
    assert str(got.value).startswith("2 problems with the Arrow data's columns, the first of them: ")


def test_numpy_layouts_too():
    """A NUL inside C-string columns (bytes_as='string'): each column named by the kernel."""
    dt = np.dtype([("a", "S4"), ("n", "<i4"), ("b", "S4"), ("c", "S4")])
    table = pa.table({"a": ["ok", "x\0y"], "n": pa.array([1, 2], pa.int32()), "b": ["z\0", "ok"], "c": ["\0", "\0"]})
    with pytest.raises(lo.ConversionError) as got:
        lo.SoA.from_arrow(table, dt).to_aos()
    said = {c: str(e) for c, e in got.value.problems}
    assert set(said) == {"a", "b", "c"}, str(got.value)
    assert all("holds a NUL byte" in text for text in said.values())


def test_the_command_names_every_column_and_writes_nothing(tmp_path, capsys):
    book = tmp_path / "rec.cob"
    book.write_text(BOOK)
    table = tmp_path / "bad.parquet"
    pq.write_table(_table(**BAD), table)
    out = tmp_path / "out.dat"
    assert main(["convert", str(table), "--copybook", str(book), "--to", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "3 problems" in err, err
    assert "'AMT'" in err and "'CITY'" in err and "'NAME'" in err
    assert "(--codepage NAME)" in err and "Encoding(" not in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bad.parquet", "rec.cob"]


def test_write_stream_names_every_column():
    rec = np.dtype([("id", ">u4"), ("a", "S4"), ("b", "S4")])
    data = b"".join(struct.pack(">HH", 16, 0) + struct.pack(">I", i) + b"AAAA" + b"BBBB" for i in range(2))
    spec = lo.Stream.rdw(rec)
    t = lo.read_stream(data, spec)["record"].to_arrow()
    for name, values in (("a", [b"AA\0A", b"AAAA"]), ("b", [b"BBBB", b"\0BBB"])):
        t = t.set_column(t.schema.get_field_index(name), name, pa.array(values, pa.binary()))
    with pytest.raises(lo.ConversionError) as got:
        lo.write_stream({"record": t}, spec)
    text = str(got.value)
    assert "2 columns hold values their fields cannot: (1) column " in text, text
    assert "column 'a', row 0" in text and "column 'b', row 1" in text
    assert "truncate" not in text and "at offset" not in text


def test_convert_to_records_names_every_column_on_either_device(device, tmp_path):
    """``convert`` to records, on the CPU and in the GPU's slots (the CUDA simulator here)."""
    layout = lo.Layout.from_copybook(BOOK)
    table = tmp_path / "bad.parquet"
    pq.write_table(_table(**BAD), table)
    out = tmp_path / "out.dat"
    with pytest.raises(lo.ConversionError) as got:
        lo.convert(table, layout, out, format="records", device=device)
    assert {c for c, _ in got.value.problems} == {"NAME", "AMT", "CITY"}, str(got.value)
    assert str(got.value).startswith(f"{table}, ") and "3 problems" in str(got.value)
    assert not out.exists()


def test_out_is_left_as_the_failed_run_left_it():
    """The runs that look for more problems write elsewhere: ``out`` keeps what the first
    (failed) run wrote, each record as it was or whole (docs/python-api.md)."""
    layout = lo.Layout.from_copybook(BOOK)
    out = np.full(3 * layout.itemsize, 0xAA, np.uint8)
    with pytest.raises(lo.ConversionError) as got:
        lo.SoA.from_arrow(_table(**BAD), layout).to_aos(out=out, threads=1)
    assert len(got.value.problems) == 3
    assert (out == 0xAA).all()  # (the three records are one block: none written)


def test_column_problems_and_value_problems_in_one_error(tmp_path, capsys):
    """attack8: an extra column and a null (the column checks) hid a decimal too large for
    its PICTURE and a NaN for a COMP-2 until those were fixed: now one error names all four,
    and the options for the two that have one."""
    book = "       01  ACCOUNT.\n           05  NAME  PIC X(10).\n           05  BALANCE  PIC S9(7)V99 COMP-3.\n"
    book += "           05  RATE  COMP-2.\n"
    layout = lo.Layout.from_copybook(book)
    table = pa.table(
        {
            "NAME": pa.array(["ALICE", None]),
            "NOTE": pa.array(["x", "y"]),
            "BALANCE": pa.array([D("123456789.00"), D("1.00")], pa.decimal128(12, 2)),
            "RATE": pa.array([float("nan"), 1.0]),
        }
    )
    with pytest.raises(lo.ConversionError) as got:
        lo.SoA.from_arrow(table, layout)
    assert [c for c, _ in got.value.problems] == [None, "NAME", "BALANCE", "RATE"] or {
        c for c, _ in got.value.problems
    } >= {"NAME", "BALANCE", "RATE"}
    assert dict(got.value.fixes) == {"extra": ["NOTE"], "fill": {"NAME": "value"}}
    assert "prepared" not in vars(got.value)  # (the columns are not kept alive by the error)
    fixed = lo.SoA.from_arrow(table, layout, extra=["NOTE"], fill={"NAME": " "})  # the column checks pass
    with pytest.raises(lo.ConversionError) as again:
        fixed.to_aos()
    assert {c for c, _ in again.value.problems} == {"BALANCE", "RATE"}
    (tmp_path / "a.cob").write_text(book)
    pq.write_table(table, tmp_path / "t.parquet")
    args = [
        "convert",
        str(tmp_path / "t.parquet"),
        "--copybook",
        str(tmp_path / "a.cob"),
        "--to",
        str(tmp_path / "t.dat"),
    ]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "4 problems" in err and "add --drop-extra NOTE --fill NAME=VALUE and change the data or the layout" in err


def test_a_column_problem_alone_is_said_as_before():
    layout = lo.Layout.from_copybook(BOOK)
    with pytest.raises(lo.ConversionError, match=r"^the Arrow data has no column 'QTY'") as got:
        lo.SoA.from_arrow(_table().drop_columns(["QTY"]), layout)
    assert len(got.value.problems) == 1


def test_the_search_goes_a_block_of_rows_at_a_time_and_names_the_right_rows(monkeypatch):
    """The runs that look for more problems write a block of rows at a time into bounded
    scratch memory and stop at the first block with one: rows are counted from the table's
    first, in every block (text, decimals, nulls with fills, an Arrow offset)."""
    monkeypatch.setattr(soa_module, "CHECK_BYTES", 7 * 16)  # 7 records of 16 bytes a block
    layout = lo.Layout.from_copybook(BOOK)
    n = 50
    names, amts, cities = ["ABCD"] * n, ["1.00"] * n, ["ABC"] * n
    names[23], amts[37], cities[41] = "A\u0100", "9999.00", "X€"
    table = _table(name=names, amt=amts, city=cities, qty=[1] * n)
    table = pa.concat_tables([_table(), table]).combine_chunks().slice(3)  # (the rows after an offset of 3)
    with pytest.raises(lo.ConversionError) as got:
        lo.SoA.from_arrow(table, layout).to_aos(threads=2)
    said = {c: str(e) for c, e in got.value.problems}
    assert set(said) == {"NAME", "AMT", "CITY"}
    assert "row 23:" in said["NAME"] and "row 37:" in said["AMT"] and "row 41:" in said["CITY"], said
    extra = table.append_column("X", pa.array([1] * n))  # a column problem: the others found by blocks
    with pytest.raises(lo.ConversionError) as got:
        lo.SoA.from_arrow(extra, layout)
    assert {c: str(e).split(":")[0] for c, e in got.value.problems if c != "X"} == {
        "NAME": "column 'NAME', row 23",
        "AMT": "column 'AMT', row 37",
        "CITY": "column 'CITY', row 41",
    }


def test_fill_values_are_exact_and_every_bad_one_is_named():
    """attack9: fill=1.5 for an integer mainframe field was written as 1; several bad fill
    values were said one at a time, with no ``problems``."""
    E = lo.Encoding
    layout = lo.Layout.from_dtype(
        np.dtype([("B", "V2"), ("J", "<i4")]), encodings={"B": E("binary", 4, signed=True, as_integer=True)}
    )
    t = pa.table({"B": pa.array([1, None], pa.int64()), "J": pa.array([1, 2], pa.int32())})
    for bad in (1.5, -1.5, D("2.5")):
        with pytest.raises(lo.ConversionError, match=r"fill\['B'\]=.* it would be written as -?[12]"):
            lo.SoA.from_arrow(t, layout, fill={"B": bad})
    back = lo.SoA.from_arrow(t, layout, fill={"B": -7}).to_aos().to_numpy()
    assert bytes(back[1]["B"]) == (-7).to_bytes(2, "big", signed=True)
    plain = lo.Layout.from_dtype(np.dtype([("I", "<u1"), ("J", "<i4"), ("K", "<i2")]))
    nulls = pa.table({n: pa.array([1, None], t) for n, t in (("I", pa.uint8()), ("J", pa.int32()), ("K", pa.int16()))})
    with pytest.raises(lo.ConversionError) as got:
        lo.SoA.from_arrow(nulls, plain, fill={"I": 300, "J": 2**40, "K": 1.5})
    assert [c for c, _ in got.value.problems] == ["I", "J", "K"]
    assert str(got.value).startswith("3 problems with the Arrow data's columns, all of them: (1) fill['I']=300")


def test_convert_names_the_values_of_later_row_groups_too(device, tmp_path):
    """attack9: a NUL in a C string in row group 0 stopped the conversion there; one in
    another column in row group 2 went unnamed (nulls of later parts were named)."""
    layout = lo.Layout.from_dtype(np.dtype([("A", "<i2"), ("CS", "S6"), ("CT", "S6")]), bytes_as="string")
    n = 3000
    cs, ct = ["x"] * n, ["y"] * n
    cs[20], ct[2500] = "b\0c", "d\0e"
    src, out = tmp_path / "in.parquet", tmp_path / "out.bin"
    pq.write_table(
        pa.table({"A": pa.array([1] * n, pa.int16()), "CS": pa.array(cs), "CT": pa.array(ct)}), src, row_group_size=1000
    )
    with pytest.raises(lo.ConversionError) as got:
        lo.convert(src, layout, out, format="records", device=device)
    said = {c: str(e) for c, e in got.value.problems}
    assert set(said) == {"CS", "CT"}, str(got.value)
    assert said["CS"].startswith("rows 0 to 1000: column 'CS', row 20: ")
    assert said["CT"].startswith("rows 2000 to 3000: column 'CT', row 2500: ")
    assert str(got.value).startswith(f"{src}: 2 problems") and not out.exists()
