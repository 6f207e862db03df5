"""What the seventh attack found (a user given only the README, docs and public API):
a table read in one code page or float format written back in the default one without a
word; float columns refused for decimals they hold exactly (pyarrow's decimal -> float
cast is not the nearest float); Dask errors counted from the partition, naming no file;
usage errors naming ``layouts`` instead of its subcommand; REDEFINES written back in three
rounds of errors; errors with no ``problems`` or ``fixes``."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import layouts as lo
from layouts._cli import main

BOOK = "       01  R.\n           05  NAME  PIC X(6).\n           05  AMT   PIC S9(3) COMP-3.\n"
FLOATS = "       01  R.\n           05  F1  COMP-1.\n           05  F2  COMP-2.\n"


def test_text_read_in_one_code_page_is_not_written_back_in_another(tmp_path, capsys):
    data, book = tmp_path / "cp.dat", tmp_path / "cp.cob"
    book.write_text(BOOK)
    data.write_bytes("ÄÖÜäöü".encode("cp273") + bytes.fromhex("012C"))
    table = tmp_path / "cp.parquet"
    assert main(["convert", str(data), "--copybook", str(book), "--codepage", "cp273", "--to", str(table)]) == 0
    back = tmp_path / "back.dat"
    capsys.readouterr()
    assert main(["convert", str(table), "--copybook", str(book), "--to", str(back)]) == 1
    err = capsys.readouterr().err
    assert "code page cp273" in err and "--codepage cp273" in err and not back.exists()
    assert main(["convert", str(table), "--copybook", str(book), "--codepage", "cp273", "--to", str(back)]) == 0
    assert back.read_bytes() == data.read_bytes()
    with pytest.raises(lo.ConversionError, match=r"column 'NAME' holds text read from code page cp273"):
        lo.SoA.from_arrow(pq.read_table(table), lo.Layout.from_copybook(BOOK))
    # without the metadata, written in the code page asked for, on purpose
    plain = pq.read_table(table).cast(pa.schema([pa.field("NAME", pa.string()), pq.read_table(table).schema[1]]))
    assert lo.SoA.from_arrow(plain, lo.Layout.from_copybook(BOOK)).to_aos().array.tobytes()[:6] == "ÄÖÜäöü".encode(
        "cp037"
    )


@pytest.mark.parametrize("read, write", [("ieee", "ibm"), ("ibm", "ieee")])
def test_floats_read_one_way_are_not_written_back_the_other(read, write):
    import struct

    raw = struct.pack(">fd", 1.5, -2.25) if read == "ieee" else bytes.fromhex("41180000c124000000000000")
    layout = lo.Layout.from_copybook(FLOATS, floating_point=read)
    table = lo.AoS(np.frombuffer(raw, layout.dtype), layout).to_soa().to_arrow()
    assert table.schema.metadata[b"cobol.floating_point"] == read.encode()
    with pytest.raises(lo.ConversionError, match=rf"floating_point={read!r}"):
        lo.SoA.from_arrow(table, lo.Layout.from_copybook(FLOATS, floating_point=write))
    assert lo.SoA.from_arrow(table, layout).to_aos().array.tobytes() == raw
    if read == "ibm":  # a file of before the schema's metadata: the columns' own says it
        with pytest.raises(lo.ConversionError, match=r"column 'F1' holds floats read from IBM"):
            lo.SoA.from_arrow(
                table.replace_schema_metadata(None), lo.Layout.from_copybook(FLOATS, floating_point=write)
            )


def test_floats_that_decimal_fields_hold_exactly_are_taken_both_widths():
    """float64 of random values with two decimals, and float32 0.1 into V9 and V99: each
    the nearest float of the decimal written (not refused as a changed value); a float
    that needs a third decimal is refused."""
    values = np.round(np.random.default_rng(1).integers(-(10**7), 10**7, 20_000) / 100, 2)
    layout = lo.Layout.from_copybook("       01  R.\n           05  P  PIC S9(7)V99 COMP-3.\n")
    records = lo.SoA.from_arrow(pa.table({"P": pa.array(values)}), layout).to_aos().array
    got = lo.AoS(records, layout).to_soa().to_arrow().column("P").to_pylist()
    assert [float(v) for v in got] == values.tolist()
    for pic in ("S9(5)V9", "S9(5)V99"):
        book = f"       01  R.\n           05  P  PIC {pic} COMP-3.\n           05  Z  PIC {pic}.\n"
        one = lo.Layout.from_copybook(book)
        f32 = pa.array([0.1], pa.float32())
        back = lo.AoS(lo.SoA.from_arrow(pa.table({"P": f32, "Z": f32}), one).to_aos().array, one).to_soa()
        assert [float(v) for v in back.to_arrow().column("Z").to_pylist()] == [0.1]
    with pytest.raises(lo.ConversionError, match=r"0.125 \(double\) becomes Decimal\('0.12'\)"):
        lo.SoA.from_arrow(pa.table({"P": pa.array([0.125])}), layout)


def test_a_dask_partition_error_names_the_file_record_and_byte(tmp_path):
    dd = pytest.importorskip("dask.dataframe")  # noqa: F841 - the partitions compute through dask
    from layouts import dask as ldask

    book = "       01  R.\n           05  ID  PIC S9(9) COMP.\n           05  AMT PIC S9(9)V99 COMP-3.\n"
    layout = lo.Layout.from_copybook(book)
    good = np.zeros(20_000, layout.dtype)
    raw = good.view(np.uint8).reshape(20_000, -1)
    raw[:, 4:10] = np.frombuffer(bytes.fromhex("00000000000C"), np.uint8)
    for i in range(2):
        (tmp_path / f"f{i}.dat").write_bytes(raw.tobytes())
    raw[15_000, 4] = 0xAB  # a digit nibble A in file f1, record 15000
    (tmp_path / "f1.dat").write_bytes(raw.tobytes())
    frame = ldask.read_records([str(tmp_path / "f0.dat"), str(tmp_path / "f1.dat")], layout, blocksize="64KiB")
    with pytest.raises(lo.ConversionError) as got:
        frame.compute()
    message = str(got.value)
    assert "f1.dat" in message and "record 15000" in message and f"byte {15_000 * 10 + 4} of the file" in message


@pytest.mark.parametrize(
    "argv, prog",
    [
        (["inspect", "r.cob", "--bogus"], "layouts inspect"),
        (["convert", "r.dat", "--copybook", "r.cob", "--bogus", "--to", "x.parquet"], "layouts convert"),
    ],
)
def test_usage_errors_name_the_subcommand(argv, prog, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}: error: unrecognized arguments: --bogus") and f"(see {prog} --help)" in err


def test_redefines_back_to_records_says_what_to_keep_and_drop_at_once(tmp_path, capsys):
    book = tmp_path / "rd.cob"
    book.write_text(
        "       01  R.\n           05  BODY     PIC X(6).\n           05  NUM      REDEFINES BODY PIC S9(11) COMP-3.\n"
    )
    data = tmp_path / "rd.dat"
    data.write_bytes("TEXT01".encode("cp037") + bytes.fromhex("00000012345C"))
    table, back = tmp_path / "rd.parquet", tmp_path / "back.dat"
    assert main(["convert", str(data), "--copybook", str(book), "--invalid", "null", "--to", str(table)]) == 0
    capsys.readouterr()
    assert main(["convert", str(table), "--copybook", str(book), "--to", str(back)]) == 1
    err = capsys.readouterr().err
    assert "--redefines BODY=BODY" in err and "--drop-extra NUM" in err and not back.exists()
    again = ["convert", str(table), "--copybook", str(book), "--redefines", "BODY=BODY", "--drop-extra", "NUM"]
    assert main([*again, "--to", str(back)]) == 0
    assert back.read_bytes() == data.read_bytes()


def test_every_conversion_error_has_problems_and_fixes():
    layout = lo.Layout.from_copybook("       01  R.\n           05  P  PIC S9(3) COMP-3.\n")
    with pytest.raises(lo.ConversionError) as got:
        lo.AoS(np.frombuffer(bytes.fromhex("ABCD"), layout.dtype), layout).to_soa()
    assert tuple(got.value.problems) == () and dict(got.value.fixes) == {}
