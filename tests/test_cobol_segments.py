"""Variable-length and multi-segment files: layouts.cobol.read_segments / write_segments
(RDW, BDW+RDW, little-endian RDW), round trips and errors. The Cobrix case (test4) is in
test_cobol_cobrix.py."""

import struct

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo
from layouts import cobol

A = lo.Layout.from_dtype(np.dtype([("SEG", "S1"), ("QTY", ">u4")]))
B = lo.Layout.from_dtype(np.dtype([("SEG", "S1"), ("N", ">u2"), ("NAME", "S3")]))
TYPES = {"A": A, "B": B}  # segment ids as text: encoded in the code page (EBCDIC 'A' is 0xC1)


def rdw(body, spare=b"\0\0"):
    return struct.pack(">H", len(body) + 4) + spare + body


DATA = (
    rdw(b"\xc1" + struct.pack(">I", 7))
    + rdw(b"\xc2" + struct.pack(">H", 9) + b"xyz", b"\1\2")
    + rdw(b"\xc1" + struct.pack(">I", 8))
)


def test_rdw_and_bdw_round_trip():
    t = cobol.read_segments(DATA, TYPES, segment=(0, 1))
    assert t["A"].column("QTY").to_pylist() == [7, 8] and t["A"].column("_offset").to_pylist() == [0, 19]
    assert t["B"].to_pylist() == [
        {"_offset": 9, "_prefix": b"\x00\x0a\x01\x02", "_length": 6, "SEG": b"\xc2", "N": 9, "NAME": b"xyz"}
    ]
    assert cobol.write_segments(t, TYPES, segment=(0, 1)) == DATA
    vb = struct.pack(">HH", 4 + len(DATA), 0) + DATA
    t = cobol.read_segments(vb, TYPES, segment=(0, 1), framing="bdw")
    assert "_blocks" in t and cobol.write_segments(t, TYPES, segment=(0, 1), framing="bdw") == vb
    # attack5: the blocks were dropped without a word when written back as plain RDW records
    with pytest.raises(
        lo.ConversionError,
        match=r"tables holds '_blocks', the blocks of a file read with framing='bdw', but framing is 'rdw': the blocks would be lost",
    ):
        cobol.write_segments(t, TYPES, segment=(0, 1))


def test_short_records_pad_or_fail():
    short = rdw(b"\xc1" + b"\0\0")  # 3 bytes of a 5-byte segment
    with pytest.raises(
        lo.ConversionError,
        match=r"segment 'A': the record at byte 0 is 3 bytes; its Layout needs 5 "
        r"to 5 \(short='pad' reads it with zeros past its end\)",
    ):
        cobol.read_segments(short, TYPES, segment=(0, 1))
    t = cobol.read_segments(short, TYPES, segment=(0, 1), short="pad")
    assert t["A"].column("_length").to_pylist() == [3]
    assert cobol.write_segments(t, TYPES, segment=(0, 1)) == short


def test_argument_errors():
    with pytest.raises(lo.LayoutError, match=r"framing must be one of \('rdw', 'bdw', 'rdw-little'\), got 'v'"):
        cobol.read_segments(DATA, TYPES, segment=(0, 1), framing="v")
    with pytest.raises(lo.LayoutError, match=r"segment id 'AB' is 2 bytes in cp037; the segment field has 1"):
        cobol.read_segments(DATA, {"AB": A}, segment=(0, 1))
    with pytest.raises(lo.LayoutError, match=r"segment=\(offset, size\) gives the segment id's bytes"):
        cobol.read_segments(DATA, TYPES, segment=(0, 9))
    with pytest.raises(lo.LayoutError, match="short must be 'error' or 'pad'"):
        cobol.read_segments(DATA, TYPES, segment=(0, 1), short="cut")
    with pytest.raises(lo.ConversionError, match=r"record type tag 195 .* is no type"):
        cobol.read_segments(DATA + rdw(b"\xc3\0\0\0\0"), TYPES, segment=(0, 1))


def test_segment_named_by_its_field():
    text = {
        "H": "       01 H.\n          05 SEG PIC X.\n          05 NAME PIC X(4).\n",
        "D": "       01 D.\n          05 SEG PIC X.\n          05 AMT PIC S9(3) COMP-3.\n",
    }
    types = {k: lo.Layout.from_copybook(v) for k, v in text.items()}
    data = rdw("HACME".encode("cp037")) + rdw("D".encode("cp037") + b"\x12\x3d")
    t = cobol.read_segments(data, types, segment="SEG")
    assert t["H"].column("NAME").to_pylist() == ["ACME"] and str(t["D"].column("AMT")[0]) == "-123"
    assert cobol.write_segments(t, types, segment="SEG") == data
    with pytest.raises(lo.LayoutError, match=r"segment='NOPE': the Layout of segment 'H' has no leaf of that name"):
        cobol.read_segments(data, types, segment="NOPE")
    moved = {
        "H": types["H"],
        "D": lo.Layout.from_copybook("       01 D.\n          05 X PIC X.\n          05 SEG PIC X.\n"),
    }
    with pytest.raises(lo.LayoutError, match=r"segment='SEG' is at different places in the segments' Layouts"):
        cobol.read_segments(data, moved, segment="SEG")


def test_signs_kept_and_put_back():
    """signs=True: a _sign. column per packed field (F among C, a negative zero); write_segments
    puts them back byte for byte; without them the way back writes the field's own sign."""
    text = {
        "H": "       01 H.\n          05 SEG PIC X.\n          05 NAME PIC X(4).\n",
        "D": "       01 D.\n          05 SEG PIC X.\n          05 AMT PIC S9(3) COMP-3 OCCURS 2.\n",
    }
    types = {k: lo.Layout.from_copybook(v) for k, v in text.items()}
    d = "D".encode("cp037")
    data = rdw("HACME".encode("cp037")) + rdw(d + b"\x12\x3f\x00\x0d") + rdw(d + b"\x12\x3c\x45\x6d")
    t = cobol.read_segments(data, types, segment="SEG", signs=True)
    assert t["D"].column("_sign.AMT").to_pylist() == [[15, 13], [None, None]]
    assert "_sign.NAME" not in t["H"].column_names
    assert cobol.write_segments(t, types, segment="SEG") == data
    plain = cobol.read_segments(data, types, segment="SEG")
    assert "_sign.AMT" not in plain["D"].column_names
    back = cobol.write_segments(plain, types, segment="SEG")
    assert back == data.replace(b"\x12\x3f\x00\x0d", b"\x12\x3c\x00\x0c")
    bad = {**t, "D": t["D"].set_column(t["D"].column_names.index("_sign.AMT"), "_sign.AMT", plain["D"].column("AMT"))}
    with pytest.raises((lo.LayoutError, lo.ConversionError), match=r"table 'D': "):
        cobol.write_segments(bad, types, segment="SEG")


def test_read_segments_messages_speak_of_its_own_arguments():
    """read_segments's framing and unknown-id errors name its arguments (framing=, types),
    not the stream description's keys (counts_itself, unknown = "skip")."""
    header = {"H": lo.Layout.from_copybook("       01 HDR.\n          05 SEG PIC X.\n          05 C PIC X(6).\n")}
    h = rdw("HACME  ".encode("cp037"))
    with pytest.raises(lo.ConversionError) as err:
        cobol.read_segments(h + struct.pack(">HH", 0, 0) + h, header, segment=(0, 1))
    assert "read_segments's framing: 'rdw', 'rdw-little' or 'bdw'" in str(err.value)
    assert "counts_itself" not in str(err.value) and "section[" not in str(err.value)
    with pytest.raises(
        lo.ConversionError, match=r"is no type \(the ids of types: H=200\); the file is damaged, or give"
    ):
        cobol.read_segments(h + rdw("ZACME  ".encode("cp037")), header, segment=(0, 1))


def test_a_null_prefix_says_what_to_give_not_a_fill_argument():
    """A null in _prefix advised fill=, which write_segments does not take (a TypeError)."""
    t = cobol.read_segments(DATA, TYPES, segment=(0, 1))
    a = t["A"]
    j = a.schema.get_field_index("_prefix")
    nulled = {**t, "A": a.set_column(j, a.schema.field(j), pa.array([None, b"\0" * 4], a.schema.field(j).type))}
    with pytest.raises(
        lo.ConversionError, match=r"table 'A': column '_prefix' has 1 nulls \(first at row 0\): .* give"
    ):
        cobol.write_segments(nulled, TYPES, segment=(0, 1))
    fixed = {**t, "A": a.set_column(j, a.schema.field(j), pa.array([b"\0" * 4] * 2, a.schema.field(j).type))}
    assert cobol.write_segments(fixed, TYPES, segment=(0, 1)) == DATA  # (the advice works: lengths anew)


def test_write_variable_and_write_segments_destinations(tmp_path):
    """attack6: write_variable replaced an existing file silently and raised a raw
    TypeError for /dev/null and file objects; write_segments advised overwrite=True,
    which it did not take. Both now write as convert's destinations are written."""
    import io

    book = "       01 R.\n           05 N PIC S9(3) COMP-3.\n           05 X PIC S9(3) COMP-3 OCCURS 0 TO 2 TIMES DEPENDING ON N.\n"
    data = bytes.fromhex("001c005c000c002c001c002c")
    table = cobol.read_variable(data, book)
    old = tmp_path / "old.dat"
    for write in (
        lambda dst, **kw: cobol.write_variable(table, book, dst, **kw),
        lambda dst, **kw: cobol.write_segments(
            cobol.read_segments(DATA, TYPES, segment=(0, 1)), TYPES, dst, segment=(0, 1), **kw
        ),
    ):
        old.write_bytes(b"precious")
        with pytest.raises(lo.LayoutError, match="old.dat exists; pass overwrite=True"):
            write(str(old))
        assert old.read_bytes() == b"precious"
        assert write(str(old), overwrite=True) is None
        expected = old.read_bytes()
        assert expected in (data, DATA)
        out = io.BytesIO()
        write(out)
        assert out.getvalue() == expected
        write("/dev/null")


def test_a_huge_occurs_mapping_count_is_a_layout_error():
    """attack6: occurs_mappings={"X": {"A": 2**70}} raised a raw OverflowError."""
    book = "       01 R.\n           05 N PIC X.\n           05 X PIC X OCCURS 0 TO 2 TIMES DEPENDING ON N.\n"
    for n in (2**70, 2**31, -1):
        with pytest.raises(
            lo.LayoutError, match=r"occurs_mappings\['X'\]: 'A': -?\d+: give text values and counts >= 0"
        ):
            cobol.read_variable("A".encode("cp037") + b"\xc1", book, occurs_mappings={"X": {"A": n}})


def test_an_integer_segment_id_is_refused_not_read_as_zero_bytes():
    """attack6: an int id (0xC8) became bytes(200), 200 zero bytes ("segment id 200 is 200 bytes")."""
    with pytest.raises(lo.LayoutError, match=r"segment id 200: give the id as text \('H', through the code page\)"):
        cobol.read_segments(DATA, {0xC8: A}, segment=(0, 1))
    tables = cobol.read_segments(DATA, {b"\xc1": A, b"\xc2": B}, segment=(0, 1))
    assert sorted(t.num_rows for t in tables.values()) == [1, 2]


def test_a_segment_id_past_every_record_is_named():
    """attack6: segment=(2**62, 1) said "needs offset >= 0" (its sum overflowed)."""
    for segment in ((2**62, 1), (9, 1)):
        with pytest.raises(lo.LayoutError, match=r"segment=\(\d+, 1\): the segment id's bytes end at \d+, past every"):
            cobol.read_segments(DATA, TYPES, segment=segment)
