"""Records as long as their OCCURS DEPENDING ON counts make them (Cobrix's
``variable_size_occurs``): layouts.cobol.read_variable / write_variable, Cobrix's test21
and test25 decoded by layouts, RDW framing, and damaged data."""

import struct
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from cobrix_oracle import DATA, expected, render, same

import layouts as lo
from layouts import cobol

MAPPINGS = {"DETAIL1": {"A": 0, "B": 1}, "DETAIL2": {"A": 1, "B": 2}}
T21 = DATA / "test21_copybook.cob"
T25 = DATA / "test25_copybook.cob"


def test21_nested_variable_occurs_decoded_by_layouts():
    """Every value equals Cobrix's; the way back gives the file byte for byte."""
    path = DATA / "test21_data/data.dat"
    table = cobol.read_variable(path, T21, codepage="ascii")
    assert table.column("_offset").to_pylist() == [0, 1, 3, 7, 13]
    ours = [{"RECORD": render({k: v for k, v in r.items() if k != "_offset"})} for r in table.to_pylist()]
    theirs = expected("test21_expected/test21.txt")
    assert len(ours) == len(theirs) == 5
    for a, b in zip(ours, theirs):
        same(a, b)
    assert cobol.write_variable(table, T21, codepage="ascii") == path.read_bytes()


@pytest.mark.parametrize("name", ["data.dat", "data2.dat"])
def test25_occurs_mappings_decoded_by_layouts(name):
    """data.dat: records as long as their counts (read_variable); data2.dat: at their
    maximum (Layout.from_copybook, cut by cut_depending_on with the same mappings)."""
    path = DATA / "test25_data" / name
    if name == "data.dat":
        table = cobol.read_variable(path, T25, codepage="ascii", occurs_mappings=MAPPINGS).drop_columns(["_offset"])
        assert cobol.write_variable(table, T25, codepage="ascii", occurs_mappings=MAPPINGS) == path.read_bytes()
    else:
        layout = lo.Layout.from_copybook(T25, codepage="ascii")
        table = lo.AoS(np.frombuffer(path.read_bytes(), layout.dtype), layout).to_soa().to_arrow()
        table = cobol.cut_depending_on(table, cobol.read_copybook(T25), occurs_mappings=MAPPINGS)
    ours = [{"RECORD": render(r)} for r in table.to_pylist()]
    theirs = expected("test25_expected/test25.txt")
    assert len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs):
        same(a, b)


ORDERS = """
       01  ORDER.
           05  N-ITEMS         PIC S9(3) COMP-3.
           05  ITEM OCCURS 0 TO 3 TIMES DEPENDING ON N-ITEMS.
               10  SKU         PIC X(4).
               10  QTY         PIC S9(3) COMP-3.
           05  TOTAL           PIC S9(5)V99 COMP-3.
"""


def _order(n, total):
    items = b"".join("AB1{}".format(k).encode("cp037") + bytes.fromhex(f"{k:03d}C") for k in range(n))
    return bytes.fromhex(f"{n:03d}C") + items + bytes.fromhex(f"{total:07d}C")


def test_fields_after_the_table_move_and_come_back():
    data = _order(2, 12345) + _order(0, 1) + _order(3, 99)
    table = cobol.read_variable(data, ORDERS)
    assert table.column("_offset").to_pylist() == [0, 18, 24]
    assert table.column("TOTAL").to_pylist() == [Decimal("123.45"), Decimal("0.01"), Decimal("0.99")]
    assert table.column("ITEM").to_pylist()[0] == [
        {"SKU": "AB10", "QTY": Decimal(0)},
        {"SKU": "AB11", "QTY": Decimal(1)},
    ]
    assert cobol.write_variable(table, ORDERS) == data


@pytest.mark.parametrize("framing", ["rdw", "rdw-little", "bdw"])
def test_variable_records_in_rdws(tmp_path, framing):
    bodies = [_order(1, 5), _order(3, 7), _order(0, 0)]
    if framing == "rdw":
        data = b"".join(struct.pack(">HH", len(b) + 4, 0) + b for b in bodies)
    elif framing == "bdw":  # two blocks: the first two records, then the third
        rdws = [struct.pack(">HH", len(b) + 4, 0) + b for b in bodies]
        data = b"".join(struct.pack(">HH", len(x) + 4, 0) + x for x in (rdws[0] + rdws[1], rdws[2]))
    else:
        data = b"".join(struct.pack("<HH", 0, len(b)) + b for b in bodies)
    (tmp_path / "in.dat").write_bytes(data)
    table = cobol.read_variable(tmp_path / "in.dat", ORDERS, framing=framing)
    assert table.column("TOTAL").to_pylist() == [Decimal("0.05"), Decimal("0.07"), Decimal("0.00")]
    cobol.write_variable(table, ORDERS, tmp_path / "out.dat", framing=framing)
    assert (tmp_path / "out.dat").read_bytes() == data
    if framing == "bdw":  # the blocks travel in the table's metadata, through Parquet too
        import pyarrow.parquet as pq

        pq.write_table(table, tmp_path / "t.parquet")
        assert cobol.write_variable(pq.read_table(tmp_path / "t.parquet"), ORDERS, framing="bdw") == data
        with pytest.raises(lo.ConversionError, match=r"framing='bdw': the table has no block list"):
            cobol.write_variable(table.replace_schema_metadata(None), ORDERS, framing="bdw")


@pytest.mark.parametrize(
    "data, message",
    [
        (_order(2, 1)[:-1], r"record 0 \(byte 0\): the data ends inside the record: its bytes from byte 14 on"),
        (_order(1, 1) + bytes.fromhex("004C") + b"\0" * 20, r"record 1 \(byte 12\): the count N-ITEMS .* is 4 "),
        (bytes.fromhex("001D") + _order(0, 0)[2:], r"record 0 \(byte 0\): the count N-ITEMS of ITEM .*outside 0..3"),
        (bytes.fromhex("0A1C") + _order(0, 0)[2:], r"the count N-ITEMS of ITEM .*bytes 0A 1C.* not a whole number"),
    ],
)
def test_damaged_counts_and_truncated_records(data, message):
    with pytest.raises(lo.ConversionError, match=message):
        cobol.read_variable(data, ORDERS)


def test_ascii_counts_beyond_the_maximum_and_not_digits(tmp_path):
    (tmp_path / "bad.dat").write_bytes(b"0" + b"3" + b"0" * 9)
    with pytest.raises(
        lo.ConversionError,
        match=r"bad.dat: record 1 \(byte 1\): the count COUNT of GROUP .* is 3 \(bytes 33\), outside 0..2",
    ):
        cobol.read_variable(tmp_path / "bad.dat", T21, codepage="ascii")
    with pytest.raises(lo.ConversionError, match=r"record 1 \(byte 1\): the count COUNT .*bytes 78.*not a whole"):
        cobol.read_variable(b"0x", T21, codepage="ascii")
    with pytest.raises(lo.ConversionError, match=r"record 0 \(byte 0\).*\(bytes 43\) is no key of"):
        cobol.read_variable(b"1C", T25, codepage="ascii", occurs_mappings=MAPPINGS)


def test_the_way_back_checks_every_list_against_its_count():
    table = cobol.read_variable(_order(2, 1), ORDERS)
    items = table.column("ITEM").combine_chunks()
    one = pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()), items.flatten().slice(0, 1))
    short = table.set_column(table.column_names.index("ITEM"), "ITEM", one)
    with pytest.raises(lo.ConversionError, match=r"row 0: ITEM holds 1 elements and its count says 2"):
        cobol.write_variable(short, ORDERS)


def test_errors_name_the_option():
    with pytest.raises(lo.LayoutError, match=r"occurs_mappings: 'NOPE' is no table of the record"):
        cobol.read_variable(b"1A", T25, occurs_mappings={"NOPE": {"A": 1}})
    with pytest.raises(lo.LayoutError, match=r"has no OCCURS DEPENDING ON table"):
        cobol.read_variable(b"12", "       01 R.\n          05 A PIC X(2).\n")
    with pytest.raises(lo.LayoutError, match=r"cannot read .*nope.dat: No such file"):
        cobol.read_variable("nope.dat", T21)
    with pytest.raises(lo.LayoutError, match=r"framing must be None"):
        cobol.read_variable(b"1A", T21, framing="vb")


def test_an_rdw_longer_than_its_counts():
    body = _order(1, 5) + b"\x00\x00"
    data = struct.pack(">HH", len(body) + 4, 0) + body
    with pytest.raises(lo.ConversionError, match=r"the record at byte 0 is 14 bytes; its counts make it 12"):
        cobol.read_variable(data, ORDERS, framing="rdw")


@pytest.mark.slow
def test_mutated_records_give_tables_or_conversion_errors():
    """Random bytes changed, dropped or added (fixed seed): a table whose way back is the
    bytes read, or a ConversionError; never a crash, a hang or a read past the end."""
    rng = np.random.default_rng(27)
    good = (DATA / "test21_data/data.dat").read_bytes()
    for _ in range(200):
        data = bytearray(good)
        at = int(rng.integers(len(data)))
        what = rng.integers(3)
        if what == 0:
            data[at] = int(rng.choice([0x30, 0x31, 0x32, 0x33, 0x39, 0x41, 0x20, 0x00]))
        elif what == 1:
            del data[at:]
        else:
            data.insert(at, int(rng.choice([0x30, 0x32, 0x41])))
        try:
            table = cobol.read_variable(bytes(data), T21, codepage="ascii")
        except lo.ConversionError:
            continue
        assert cobol.write_variable(table, T21, codepage="ascii") == bytes(data)


def test_rdw_records_shorter_than_their_counts_or_with_bad_counts():
    body = _order(2, 5)
    short = struct.pack(">HH", len(body) + 2, 0) + body[:-2]
    data = struct.pack(">HH", 16, 0) + _order(1, 1) + short
    with pytest.raises(
        lo.ConversionError, match=r"the record at byte 16 is 16 bytes; its counts make it longer .*byte 34"
    ):
        cobol.read_variable(data, ORDERS, framing="rdw")
    bad = struct.pack(">HH", 16, 0) + _order(1, 1) + struct.pack(">HH", 10, 0) + bytes.fromhex("009C") + b"\0" * 4
    with pytest.raises(
        lo.ConversionError,
        match=r"record 1 \(byte 20\): the count N-ITEMS .* is 9 .*outside 0..3, for its table at byte 22",
    ):
        cobol.read_variable(bad, ORDERS, framing="rdw")


@pytest.mark.slow
def test_benchmark_runs_small(tmp_path):
    """benchmarks.mainframe_variable at a smoke size writes well-formed JSON (no figure asserted)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "r.json"
    root = Path(__file__).parent.parent
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.mainframe_variable",
        "--records",
        "2000",
        "--rounds",
        "1",
        "--out",
        str(out),
    ]
    subprocess.run(cmd, check=True, cwd=root, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert result["records"] == 2000 and len(result["cases"]) == 6 and result["load_average_before"]


SHRINK_CHILD = r"""
import os, sys
import layouts as lo, layouts.cobol as C
from layouts import _occurs
book = '''
       01  R.
           05  N   PIC 9.
           05  A OCCURS 0 TO 9 TIMES DEPENDING ON N PIC X(4).
           05  T   PIC S9(5) COMP-3.
'''
rec = b"\xf5" + b"\x81\x82\x83\x84" * 5 + b"\x00\x00\x1c"
path = sys.argv[1]
with open(path, "wb") as f:
    f.write(rec * 100000)
scan, pieces = _occurs.VariableRecord.scan, _occurs.read_pieces
def truncating(self, data, *a, **k):  # another program truncates the file while it is mapped
    os.truncate(path, 5000)
    return scan(self, data, *a, **k)
def truncating_pieces(var, data, *a, **k):  # (the one-pass read, the same)
    os.truncate(path, 5000)
    return pieces(var, data, *a, **k)
_occurs.VariableRecord.scan = truncating
_occurs.read_pieces = truncating_pieces
try:
    C.read_variable(path, book)
    print("read whole")
except lo.ConversionError as e:
    print("ConversionError", e)
"""


@pytest.mark.slow
def test_a_file_that_shrinks_while_read_is_an_error_not_sigbus(tmp_path):
    """Finding 03: the pages gone past the new end read as zeros (no SIGBUS) and the read
    says the file shrank (a child process: a crash must not take pytest with it)."""
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-c", SHRINK_CHILD, str(tmp_path / "x.dat")], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr[-500:]
    assert "x.dat: the file shrank while it was read" in p.stdout, p.stdout


TINY = "       01  R.\n           05  N   PIC 9.\n           05  A OCCURS 0 TO 9 TIMES DEPENDING ON N PIC 9.\n"


def test_strided_arrays_memoryviews_and_file_objects():
    """Findings 16, 18: a strided view is read as its own bytes; a binary file object as
    read_stream reads it; an int (a descriptor?) is a LayoutError, not a path."""
    import io

    want = cobol.read_variable(b"1010", TINY, codepage="ascii").to_pylist()
    base = np.frombuffer(b"10001000", np.uint8)
    assert cobol.read_variable(base[::2], TINY, codepage="ascii").to_pylist() == want
    assert cobol.read_variable(memoryview(b"10001000")[::2], TINY, codepage="ascii").to_pylist() == want
    assert cobol.read_variable(io.BytesIO(b"1010"), TINY, codepage="ascii").to_pylist() == want
    with pytest.raises(lo.LayoutError, match=r"read_variable reads a path, a bytes-like object or a binary file"):
        cobol.read_variable(3, TINY)
    with pytest.raises(lo.LayoutError, match=r"open the file in binary mode"):
        cobol.read_variable(io.StringIO("1010"), TINY)


def test_records_are_spread_a_batch_at_a_time(monkeypatch):
    """Finding 11: the maximum layout is bounded per batch of records (the table is the
    same however the records are batched), and a maximum layout too large for any batch
    is a LayoutError naming the table and its size, before any memory is taken."""
    from layouts import _occurs

    data = _order(2, 12345) + _order(0, 1) + _order(3, 99) + _order(1, 7)
    whole = cobol.read_variable(data, ORDERS)
    monkeypatch.setattr(cobol, "_BATCH_BYTES", 1)
    assert cobol.read_variable(data, ORDERS).to_pylist() == whole.to_pylist()
    assert cobol.write_variable(cobol.read_variable(data, ORDERS), ORDERS) == data
    monkeypatch.setattr(_occurs, "MAX_RECORD_BYTES", 16)
    with pytest.raises(
        lo.LayoutError,
        match=r"ORDER is 24 bytes at its maximum, mostly ITEM \(OCCURS 0 TO 3 TIMES DEPENDING ON N-ITEMS",
    ):
        cobol.read_variable(data, ORDERS)
    big = "       01  R.\n           05  N   PIC 9(7).\n           05  A OCCURS 0 TO 1000000 TIMES DEPENDING ON N PIC X(1000).\n"
    monkeypatch.undo()
    # a maximum of 1 GB: laid out with the most elements the data holds (here none)
    assert cobol.read_variable(b"\xf0" * 21, big).column("N").to_pylist() == [0, 0, 0]
    monkeypatch.setattr(_occurs, "MAX_RECORD_BYTES", 40_000)
    with pytest.raises(
        lo.ConversionError,
        match=r"^the data: record 0 \(byte 0\): the data's counts make the record R 50,007 bytes, mostly A \(50 elements of 1,000",
    ):
        cobol.read_variable(b"\xf0" * 5 + b"\xf5\xf0" + b"\x40" * 50_000, big)


SIGNED = "       01  R.\n           05  N   PIC S9.\n           05  A OCCURS 0 TO 3 TIMES DEPENDING ON N PIC X.\n"


@pytest.mark.parametrize(
    "sign, data, codepage",
    [
        ("PIC S9.", b"\xc2\x81\x82\xc0", "cp037"),  # EBCDIC overpunch: C2 = +2, what COBOL writes
        ("PIC S9.", b"Bab{", "ascii"),  # ASCII overpunch: 'B' = +2, '{' = +0
        ("PIC S9 SIGN LEADING.", b"\xc1\x81", "cp037"),
        ("PIC S9 SIGN LEADING SEPARATE.", b"+2ab+0", "ascii"),
        ("PIC S99 SIGN TRAILING SEPARATE.", b"\xf0\xf2\x4e\x81\x82", "cp037"),
    ],
)
def test_signed_zoned_counts_are_read_as_their_value_and_written_back(sign, data, codepage):
    """Findings 01, 02: a signed zoned count (overpunched or SIGN SEPARATE, EBCDIC and
    ASCII) is its value, as the fixed-length path reads it; the way back writes it with
    the field's sign, byte for byte."""
    book = SIGNED.replace("PIC S9.", sign, 1)
    table = cobol.read_variable(data, book, codepage=codepage)
    assert table.column("A").to_pylist()[0] == ["a", "b"][: int(table.column("N").to_pylist()[0])]
    assert cobol.write_variable(table, book, codepage=codepage) == data


def test_signed_zoned_counts_negative_and_plain_digits():
    # plain digits F2 in a signed field: 2; the way back writes the field's positive sign (C)
    table = cobol.read_variable(b"\xf2\x81\x82", SIGNED)
    assert table.column("A").to_pylist() == [["a", "b"]]
    back = cobol.write_variable(table, SIGNED)
    assert back == b"\xc2\x81\x82" and cobol.read_variable(back, SIGNED).to_pylist() == table.to_pylist()
    with pytest.raises(
        lo.ConversionError, match=r"record 0 \(byte 0\): the count N .* is -2 \(bytes D2\), outside 0..3"
    ):
        cobol.read_variable(b"\xd2\x81\x82", SIGNED)
    with pytest.raises(lo.ConversionError, match=r"the count N .* is -2 \(bytes 4B\), outside 0..3"):
        cobol.read_variable(b"Kab", SIGNED, codepage="ascii")
    with pytest.raises(lo.ConversionError, match=r"\(bytes D2\) is not a whole number"):  # D: no sign of PIC 9
        cobol.read_variable(b"\xd2\x81\x82", SIGNED.replace("S9", "9"))


def test_changing_the_framing_does_not_copy_old_length_bytes(tmp_path):
    """Finding 20: the RDW's spare bytes are kept for the framing they were read with
    (rdw and bdw share the RDW) and zero in another: a little-endian length is no
    segment control."""
    import pyarrow.parquet as pq

    little = cobol.read_variable(struct.pack("<HH", 0, 2) + b"11", TINY, codepage="ascii", framing="rdw-little")
    assert cobol.write_variable(little, TINY, codepage="ascii", framing="rdw") == bytes.fromhex("0006 0000") + b"11"
    assert (
        cobol.write_variable(little, TINY, codepage="ascii", framing="rdw-little") == bytes.fromhex("00000200") + b"11"
    )
    big = cobol.read_variable(struct.pack(">HH", 6, 0x0102) + b"11", TINY, codepage="ascii", framing="rdw")
    assert cobol.write_variable(big, TINY, codepage="ascii", framing="rdw") == bytes.fromhex("0006 0102") + b"11"
    assert cobol.write_variable(big, TINY, codepage="ascii", framing="rdw-little") == bytes.fromhex("00000200") + b"11"
    pq.write_table(little, tmp_path / "t.parquet")  # the framing read travels with the table
    again = pq.read_table(tmp_path / "t.parquet")
    assert cobol.write_variable(again, TINY, codepage="ascii", framing="rdw") == bytes.fromhex("0006 0000") + b"11"


def test_record_start_and_end_bytes_are_kept_for_the_way_back():
    """Finding 12: the bytes record_start_offset=/record_end_offset= skip are columns
    _record_start and _record_end, written back byte for byte; a table without them is a
    ConversionError (the bytes would be made up)."""
    data = b"SS" + _order(1, 5) + b"EEE" + b"TT" + _order(2, 7) + b"FFF"
    opts = {"record_start_offset": 2, "record_end_offset": 3}
    table = cobol.read_variable(data, ORDERS, **opts)
    assert table.column("_record_start").to_pylist() == [b"SS", b"TT"]
    assert table.column("_record_end").to_pylist() == [b"EEE", b"FFF"]
    assert table.column("_offset").to_pylist() == [0, 17]
    assert cobol.write_variable(table, ORDERS, **opts) == data
    with pytest.raises(lo.ConversionError, match=r"record_end_offset=3: the table has no column '_record_end'"):
        cobol.write_variable(table.drop_columns(["_record_end"]), ORDERS, **opts)


def test_value_errors_name_the_file_byte_and_the_records_own_offset(tmp_path):
    """Finding 04: a bad value is reported at the file's byte and its offset in the record
    as the data holds it, not in the internal maximum-layout copy; the advice is
    read_variable's (invalid=...)."""
    book = ORDERS + "           05  Z               PIC S9(3).\n"
    one = _order(1, 12345) + b"\xf1\xf2\xc3"
    (tmp_path / "z.dat").write_bytes(one + one[:-3] + b"\xf1\x40\xc3")
    with pytest.raises(
        lo.ConversionError,
        match=r"z.dat: field 'Z', record 1 \(byte 15\): byte 27 of the file \(offset 12 in the record\), bytes F1 40 C3"
        r".*read_variable\(\.\.\., invalid='null'\)",
    ):
        cobol.read_variable(tmp_path / "z.dat", book)
    rdw = b"".join(struct.pack(">HH", len(r) + 4, 0) + r for r in (one, one[:-3] + b"\xf1\x40\xc3"))
    with pytest.raises(
        lo.ConversionError, match=r"record 1 \(byte 23\): byte 35 of the data \(offset 12 in the record\)"
    ):
        cobol.read_variable(rdw, book, framing="rdw")


def test_count_messages_unsigned_and_null():
    """Finding 08: an unsigned 8-byte count is shown unsigned; finding 09: a count made
    null by invalid='null' names the file's byte and read_variable's own fix."""
    book = "       01  R.\n           05  N   PIC 9(18) COMP.\n           05  A OCCURS 0 TO 5 TIMES DEPENDING ON N PIC X.\n"
    with pytest.raises(lo.ConversionError, match=r"is 18446744073709551615 \(bytes FF FF FF FF FF FF FF FF\), outside"):
        cobol.read_variable(b"\xff" * 8 + b"\x81", book)
    book = (
        "       01  R.\n           05  N   PIC 9 COMP.\n           05  A OCCURS 0 TO 20 TIMES DEPENDING ON N PIC X.\n"
    )
    data = b"\x00\x02" + b"\x81" * 2 + b"\x00\x0c" + b"\x81" * 12
    with pytest.raises(lo.ConversionError, match=r"record 1 \(byte 4\): the count N .*\(bytes 00 0C at byte 4\)") as e:
        cobol.read_variable(data, book, invalid="null")
    assert "maximum size" not in str(e.value)


def test_way_back_messages_redefines_counts_and_empty_tables():
    """Finding 13: a REDEFINES set on the way back is a LayoutError with write_variable's
    own options (the template no longer makes up an invalid count); a count outside its
    range names the row and the fix of a value; finding 14: OCCURS 0 TO 0 names the line."""
    book = TINY.replace("PIC 9.\n", "PIC 9.\n           05  NX REDEFINES N PIC X.\n", 1)
    table = cobol.read_variable(b"1212", book, codepage="ascii")
    with pytest.raises(lo.LayoutError, match=r"redefines=\{'N': 'N'\}.*table.drop_columns\(\['NX'\]\)"):
        cobol.write_variable(table, book, codepage="ascii")
    with pytest.raises(lo.LayoutError, match=r"the table has columns \['NX'\] .*drop them"):
        cobol.write_variable(table, book, codepage="ascii", redefines={"N": "N"})
    kept = table.drop_columns(["NX"])
    assert cobol.write_variable(kept, book, codepage="ascii", redefines={"N": "N"}) == b"1212"
    n = kept.column_names.index("N")
    bad = kept.set_column(n, "N", pa.array([Decimal(-1), Decimal(2)], kept.schema.field("N").type))
    with pytest.raises(lo.ConversionError, match=r"^row 0: the count N of A .* is -1, outside 0..9; fix the value$"):
        cobol.write_variable(bad, book, codepage="ascii", redefines={"N": "N"})
    with pytest.raises(lo.LayoutError, match=r"copybook line 3: .*OCCURS 0 TO 0: a table of at most 0 elements"):
        cobol.read_variable(b"0", TINY.replace("0 TO 9", "0 TO 0"))


def test_rdw_messages_in_read_variables_terms():
    """Finding 19: RDW problems are told with the data, the byte, the row and the RDW's
    limit, never the record-stream machinery's record type, section, _tail or settings."""
    book = TINY.replace("PIC 9.\n", "PIC 9(5).\n", 1).replace("0 TO 9 TIMES", "0 TO 70000 TIMES")
    table = cobol.read_variable(struct.pack(">HH", 11, 0) + b"0000212", book, codepage="ascii", framing="rdw")
    n, a = table.column_names.index("N"), table.column_names.index("A")
    table = table.set_column(n, "N", pa.array([Decimal(66000)], table.schema.field("N").type))
    table = table.set_column(a, "A", pa.array([[Decimal(1)] * 66000], table.schema.field("A").type))
    with pytest.raises(lo.ConversionError, match=r"^row 0: the record is 66,005 bytes .* at most 65,531 bytes") as e:
        cobol.write_variable(table, book, codepage="ascii", framing="rdw")
    messages = [str(e.value)]
    for framing, data in (
        ("rdw", struct.pack(">HH", 2, 0) + b"0000212"),
        ("rdw", struct.pack(">HH", 20, 0) + b"0000212"),
        ("rdw-little", struct.pack("<HH", 0, 20) + b"0000212"),
    ):
        with pytest.raises(lo.ConversionError, match=r"^the data: byte 0: the RDW's length field") as e:
            cobol.read_variable(data, book, codepage="ascii", framing=framing)
        messages.append(str(e.value))
    for m in messages:
        assert "'records'" not in m and "_tail" not in m and "counts_itself" not in m and "section" not in m, m


ONE_LEVEL = """
       01  R.
           05  HEAD.
               10  N1      PIC 9(2).
               10  TAG     PIC X(2).
           05  T1 OCCURS 0 TO 4 TIMES DEPENDING ON N1.
               10  SKU     PIC X(3).
               10  QTY     PIC S9(3) COMP-3.
               10  FIX     PIC 9 OCCURS 2 TIMES.
           05  G.
               10  N2      PIC S9(2) COMP.
               10  T2 OCCURS 1 TO 3 TIMES DEPENDING ON N2 PIC S9(3).
               10  AFTER   PIC X(3).
           05  TOTAL       PIC S9(5)V99 COMP-3.
"""


def _one_level_records(rng, n, bad=False):
    out = []
    for _ in range(n):
        n1, n2 = int(rng.integers(0, 5)), int(rng.integers(1, 4))
        rec = f"{n1:02d}".encode("cp037") + "AB".encode("cp037")
        for _ in range(n1):
            rec += "".join(rng.choice(list("XYZ"), 3)).encode("cp037") + bytes.fromhex(
                f"{int(rng.integers(0, 1000)):03d}C"
            )
            rec += f"{int(rng.integers(0, 100)):02d}".encode("cp037")
        rec += n2.to_bytes(2, "big")
        for _ in range(n2):
            rec += f"{int(rng.integers(0, 1000)):03d}".encode("cp037")[:2] + bytes([0xD0 | int(rng.integers(0, 10))])
        rec += "END".encode("cp037") + bytes.fromhex(f"{int(rng.integers(0, 10**7)):07d}C")
        out.append(rec)
    if bad:
        out[-1] = out[-1][:-1] + b"\xac"  # a bad digit nibble in the last TOTAL
    return out


@pytest.mark.parametrize("framing", [None, "rdw"])
@pytest.mark.parametrize("invalid", ["error", "null"])
def test_one_pass_read_equals_the_exact_way(framing, invalid, monkeypatch):
    """read_variable's one pass (the pieces between tables and each table's elements
    transposed where they lie, kernels.occurs.scan_places) gives the table the exact way
    (spread into the maximum layout, transposed, cut) gives; with a bad value or a count
    the walk refuses, the exact way's error."""
    import struct

    from layouts import _occurs

    rng = np.random.default_rng(27)
    recs = _one_level_records(rng, 300, bad=invalid == "null")
    data = b"".join(struct.pack(">HH", len(r) + 4, 0) + r for r in recs) if framing else b"".join(recs)

    def exact_way(*a, **k):
        raise AssertionError("the one pass fell back to the exact way")

    monkeypatch.setattr(_occurs.VariableRecord, "scan", exact_way)
    monkeypatch.setattr(_occurs.VariableRecord, "check_framed", exact_way)
    fast = cobol.read_variable(data, ONE_LEVEL, framing=framing, invalid=invalid)
    monkeypatch.setattr(_occurs, "_SPLIT_BYTES", 1)  # the records split among the kernels' threads
    split = cobol.read_variable(data, ONE_LEVEL, framing=framing, invalid=invalid)
    assert split.equals(fast)
    monkeypatch.undo()
    calls = []
    monkeypatch.setattr(_occurs, "one_level", lambda var: calls.append(1) and False)
    exact = cobol.read_variable(data, ONE_LEVEL, framing=framing, invalid=invalid)
    assert calls and fast.schema == exact.schema and fast.equals(exact)
    assert cobol.write_variable(fast, ONE_LEVEL, framing=framing) == data if invalid == "error" else True
    monkeypatch.undo()
    if invalid == "error":
        with pytest.raises(lo.ConversionError, match=r"field 'TOTAL', record 299 \(byte \d+\).*digit nibble A"):
            cobol.read_variable(b"".join(_one_level_records(rng, 300, bad=True)), ONE_LEVEL)
        with pytest.raises(
            lo.ConversionError,
            match=r"record 0 \(byte 0\): the count HEAD.N1 of T1 .* is 9 \(bytes F0 F9\), outside 0\.\.4",
        ):
            cobol.read_variable(b"\xf0\xf9" + b"".join(recs)[2:], ONE_LEVEL)


def test_variable_sign_counts_count_the_elements_the_counts_hold():
    """variable_sign_counts: the signs write_variable writes otherwise, of the elements within
    each record's count only (those past it are not in the record), packed and zoned
    (trailing and leading overpunch, signed and unsigned), framed or not."""
    book = (
        "       01 R.\n          05 N PIC 9.\n          05 T OCCURS 0 TO 3 TIMES DEPENDING ON N.\n"
        "             10 AMT PIC S9(3) COMP-3.\n             10 ZZ PIC S9(2).\n"
        "             10 ZL PIC S9(2) SIGN LEADING.\n             10 U PIC 9(2) COMP-3.\n"
        "          05 Z PIC S9(2).\n"
    )

    def e(text):
        return text.encode("cp037")

    def rec(n, elements, z):
        return e(str(n)) + b"".join(elements) + z

    data = (
        rec(2, [b"\x12\x3f" + e("1BB1") + b"\x01\x2f", b"\x00\x0d" + e("1BB1") + b"\x01\x2c"], e("1B"))
        + rec(1, [b"\x45\x6c" + e("1212") + b"\x00\x1f"], e("12"))
        + rec(0, [], b"\xf0\xc3")
    )
    want = {"T.AMT": 2, "T.ZZ": 1, "T.ZL": 1, "T.U": 1, "Z": 1}
    assert cobol.variable_sign_counts(data, book) == want
    framed = b"".join(struct.pack(">HH", len(r) + 4, 0) + r for r in (data[:19], data[19:30], data[30:]))
    assert cobol.variable_sign_counts(framed, book, framing="rdw") == want
    back = cobol.write_variable(cobol.read_variable(data, book), book)
    assert len(back) == len(data) and sum(a != b for a, b in zip(back, data)) == 6  # one byte each
    assert cobol.variable_sign_counts(back, book) == {}


def test_a_count_inside_a_table_is_named_with_its_value_and_bytes():
    """A nested DEPENDING ON count out of range or no number: its value and bytes (the
    message had 'is, outside 0..4'), and the byte where its table starts."""
    book = (
        "       01  R.\n           05  N  PIC 9.\n           05  G OCCURS 0 TO 3 DEPENDING ON N.\n"
        "               10  M PIC 9.\n               10  H PIC X OCCURS 0 TO 4 DEPENDING ON M.\n"
        "           05  T PIC X.\n"
    )
    with pytest.raises(
        lo.ConversionError, match=r"count G.M of G.H .* is 9 \(bytes F9\), outside 0..4, for its table at byte 4;"
    ):
        cobol.read_variable(b"\xf2\xf1\xc1\xf9\xc1\xc2" + b"\xc3" * 20, book)
    with pytest.raises(
        lo.ConversionError, match=r"count G.M of G.H .* \(bytes C1\) is not a whole number, for its table"
    ):
        cobol.read_variable(b"\xf2\xf1\xc1\xc1\xf9\xc1\xc2" + b"\xc3" * 20, book)
