"""Every user-facing error of read_stream / write_stream not covered elsewhere, matched."""

import struct

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo

S = lo.Stream
ONE = S.Record([("v", ">u2")])


def _fixed(**kw):
    return S([S.Section(S.Framing(size=2), [S.RecordType("r", ONE)], **kw)], header=S.Record([("n", "u1")]))


def test_section_bytes_from_the_header():
    s = _fixed(bytes="n")
    t = lo.read_stream(b"\x04\x00\x01\x00\x02xyz", s)
    assert t["r"]["v"].to_numpy().tolist() == [1, 2]
    assert t["_gaps"].to_arrow().to_pylist() == [{"_offset": 5, "_tail": b"xyz"}]
    with pytest.raises(lo.ConversionError, match=r"bytes = 'n' is 9, from byte 1 past the end of the file \(5 bytes\)"):
        lo.read_stream(b"\x09\x00\x01\x00\x02", s)
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: byte 1: the last record is truncated: 1 bytes left, a "
        r"record is 2 bytes",
    ):
        lo.read_stream(b"\x01\x00\x01", s)
    t2 = dict(t)
    t2["r"] = t["r"].to_arrow().slice(1)
    with pytest.raises(
        lo.ConversionError,
        match=r"the header's bytes = 'n' is 4, but the records take 2 bytes; set "
        r"the header field to 2",
    ):
        lo.write_stream(t2, s)


def test_section_that_does_not_end_where_its_bytes_say():
    s = S(
        [S.Section(S.Framing(length=S.Length(0, 1)), [S.RecordType("r", S.Record([("v", "u1")]))], bytes="n", count=1)],
        header=S.Record([("n", "u1")]),
    )
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: byte 3: <stream> section\[0\] should end at byte 4 "
        r"\(bytes = 'n'\)",
    ):
        lo.read_stream(b"\x03\x01\x07\x01\x08", s)


def test_write_header_and_table_errors():
    s = _fixed()
    t = lo.read_stream(b"\x01\x00\x07", s)
    with pytest.raises(lo.ConversionError, match=r"<stream> has a header: tables need '_header'"):
        lo.write_stream({"r": t["r"]}, s)
    two = pa.table({"n": pa.array([1, 1], pa.uint8())})
    with pytest.raises(lo.ConversionError, match=r"'_header' has 2 rows; a stream has one header"):
        lo.write_stream({"_header": two, "r": t["r"]}, s)
    nulls = pa.table({"_offset": pa.array([None], pa.int64()), "v": pa.array([1], pa.uint16())})
    with pytest.raises(lo.ConversionError, match=r"table 'r': _offset has 1 nulls; every record needs its place"):
        lo.write_stream({"_header": t["_header"], "r": nulls}, s)
    with pytest.raises(lo.ConversionError, match=r"table 'r' has no column 'v'; its columns must include"):
        lo.write_stream({"_header": t["_header"], "r": pa.table({"_offset": [0]})}, s)
    # a hole: the header says the records start later than the header ends
    h = S([S.Section(S.Framing(size=2), [S.RecordType("r", ONE)], offset="n")], header=S.Record([("n", "u1")]))
    t = lo.read_stream(b"\x03\xff\xfe\x00\x07", h)
    assert t["_gaps"].to_arrow().to_pylist() == [{"_offset": 1, "_tail": b"\xff\xfe"}]
    assert lo.write_stream(t, h) == b"\x03\xff\xfe\x00\x07"
    no_gap = {k: v for k, v in t.items() if k != "_gaps"}
    with pytest.raises(
        lo.ConversionError,
        match=r"the parts of the stream leave a hole at byte 1 \(one ends at 1, "
        r"the next starts at 3\)",
    ):
        lo.write_stream(no_gap, h)
    big_gap = dict(t, _gaps=pa.table({"_offset": [1], "_tail": [b"\xff\xff\xff"]}))
    with pytest.raises(lo.ConversionError, match=r"the parts of the stream overlap at byte 3"):
        lo.write_stream(big_gap, h)


def test_write_tail_errors():
    s = S([S.Section(S.Framing(length=S.Length(0, 1)), [S.RecordType("r", S.Record([("v", "u1")]))])])
    base = {"_offset": [0], "v": pa.array([1], pa.uint8())}
    with pytest.raises(
        lo.ConversionError,
        match=r"table 'r' has a _tail with bytes, but <stream> section\[0\] keeps "
        r"no tails \(tail = \"error\"\); drop the column",
    ):
        lo.write_stream({"r": pa.table(dict(base, _tail=[b"x"]))}, s)
    with pytest.raises(lo.ConversionError, match=r"table 'r': _tail is int64; expected binary"):
        lo.write_stream({"r": pa.table(dict(base, _tail=[5]))}, s)
    with pytest.raises(lo.ConversionError, match=r"table 'r': _tail has 1 nulls; use empty bytes"):
        lo.write_stream({"r": pa.table(dict(base, _tail=pa.array([None], pa.binary())))}, s)
    # offsets that pyarrow's quick validation lets through: decreasing in the middle
    damaged = pa.Array.from_buffers(
        pa.binary(), 2, [None, pa.py_buffer(np.array([0, 3, 1], np.int32)), pa.py_buffer(b"abc")]
    )
    st = S([S.Section(S.Framing(length=S.Length(0, 1)), [S.RecordType("r", S.Record([("v", "u1")]))], tail="column")])
    with pytest.raises(lo.ConversionError, match=r"table 'r': the _tail column's offsets are damaged"):
        lo.write_stream({"r": pa.table({"_offset": [0, 1], "v": pa.array([1, 2], pa.uint8()), "_tail": damaged})}, st)
    fixed = S([S.Section(S.Framing(size=3), [S.RecordType("r", S.Record([("v", "u1")]))], tail="column")])
    t = lo.read_stream(b"\x01ab\x02cd", fixed)
    assert t["r"].to_arrow().column("_tail").to_pylist() == [b"ab", b"cd"]
    with pytest.raises(
        lo.ConversionError,
        match=r"fixed-size records are 3 bytes, a record here \(table 'r', row 0\) would be 2: its _tail is 1 "
        r"bytes too short; pad it$",
    ):
        lo.write_stream({"r": pa.table(dict(base, _tail=[b"a"]))}, fixed)


def test_vb_errors():
    rec = [("id", ">u2")]
    with pytest.raises(lo.ConversionError, match=r"byte 0: 2 bytes left, too few for a block descriptor word"):
        lo.read_stream(b"\x00\x08", S.bdw(rec))
    with pytest.raises(
        lo.ConversionError,
        match=r"block descriptor word says the block is 5 bytes, smaller than a BDW "
        r"and one RDW",
    ):
        lo.read_stream(b"\x00\x05\x00\x00\x00", S.bdw(rec))
    raw = struct.pack(">HH", 10, 0) + struct.pack(">HHH", 6, 0, 7)
    t = lo.read_stream(raw, S.bdw(rec))
    early = dict(t, _blocks=pa.table({"_offset": [5], "_prefix": pa.array([b"\0\0\0\0"], pa.binary(4))}))
    with pytest.raises(lo.ConversionError, match=r"the first record comes before the first block descriptor word"):
        lo.write_stream(early, S.bdw(rec))
    many = dict(
        t,
        record=pa.table(
            {
                "_offset": np.arange(1, 20000),
                "_prefix": pa.array([b"\0\0\0\0"] * 19999, pa.binary(4)),
                "id": pa.array(np.arange(1, 20000), pa.uint16()),
            }
        ),
    )
    with pytest.raises(
        lo.ConversionError,
        match=r"block 0 \(byte 0\) would be 119998 bytes; a VB block holds "
        r"8..65535",
    ):
        lo.write_stream(many, S.bdw(rec))


def test_magic_too_short_and_record_from_errors():
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: 2 bytes, too short for the magic number at byte 0 \(4 "
        r"bytes\) of a pcap stream",
    ):
        lo.read_stream(b"\xd4\xc3", "pcap")
    with pytest.raises(lo.LayoutError, match=r"record: int32 has no named fields; give a structured dtype"):
        S.rdw(np.dtype("<i4"))
    with pytest.raises(lo.LayoutError, match=r"record: 3 bytes of padding at the end; a stream record is packed"):
        S.rdw(np.dtype({"names": ["a"], "formats": ["u1"], "itemsize": 4}))
    with pytest.raises(
        lo.LayoutError,
        match=r"record: expected a NumPy structured dtype or \[\(name, type\), "
        r"\.\.\.\], got 'nonsense'",
    ):
        S.rdw("nonsense")


_SHRINK_CHILD = r"""
import os, struct, sys
import layouts as lo
import layouts._stream.read as R
import layouts._stream.files as F
S = lo.Stream
def msg(i):
    body = b"A" + struct.pack(">IQ", i, i) + b"x" * 23
    return struct.pack(">H", len(body)) + body
spec = S([S.Section(S.Framing(length=S.Length(offset=0, size=2)),
    [S.RecordType("a", S.Record([("t", "S1"), ("i", ">u4"), ("q", ">u8"), ("x", "S23")]), tag="A")],
    tag=S.Tag(offset=0, size=1))])
path = sys.argv[1]
real = R.detect_order
for at in (5000, 3800, 0):
    for how in ("read", "windows"):
        open(path, "wb").write(b"".join(msg(i) for i in range(3000)))  # 114,000 bytes
        def shrinking(*a):  # the file is truncated once it is mapped, before the scan
            os.truncate(path, at)
            return real(*a)
        R.detect_order = F.detect_order = shrinking
        try:
            if how == "read":
                lo.read_stream(path, spec)
            else:
                F.count_stream(path, spec, 4096)
            print(at, how, "OK")
        except lo.ConversionError as e:
            print(at, how, e)
"""


@pytest.mark.slow
def test_a_file_shrinking_while_it_is_read_says_so(tmp_path):
    """The bytes past the file's new end in its last page read as zeros (no SIGBUS): a
    scan meeting them is the file shrinking, not a damaged stream (in a child: a
    SIGBUS there fails the test, not the run)."""
    import subprocess
    import sys

    p = tmp_path / "s.bin"
    run = subprocess.run([sys.executable, "-c", _SHRINK_CHILD, str(p)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 6, lines
    for line, at in zip(lines, (5000, 5000, 3800, 3800, 0, 0)):
        assert f"{p}: the file shrank while it was read: it was 114000 bytes, it is {at} bytes now" in line, line


def test_a_strided_array_is_read_as_its_bytes_in_order():
    """A non-contiguous NumPy array (or memoryview) is read as ``bytes(src)`` would
    give it: its elements' bytes in C order (a copy), not a raw TypeError/BufferError."""
    spec = S([S.Section(S.Framing(size=2), [S.RecordType("r", S.Record([("a", ">u2")]))])])
    base = np.frombuffer(b"\x00\x01\xff\xff\x00\x02\xff\xff", np.uint8)
    for src in (base.reshape(2, 4)[:, :2], memoryview(base.reshape(2, 4)[:, :2])):
        assert lo.read_stream(src, spec)["r"]["a"].to_numpy().tolist() == [1, 2]
    assert lo.read_stream(base[::2], spec)["r"]["a"].to_numpy().tolist() == [0xFF, 0xFF]
    wide = np.array([[0x0001, 0], [0x0203, 0]], ">u2")[:, 0]  # 2-byte elements, every other one
    assert lo.read_stream(wide, spec)["r"]["a"].to_numpy().tolist() == [1, 0x0203]
    assert lo.read_stream(np.asfortranarray(base.reshape(2, 4)), spec)["r"]["a"].to_numpy().tolist() == [
        1,
        0xFFFF,
        2,
        0xFFFF,
    ]


def test_bad_utf8_in_a_text_field_names_the_field_in_the_record_and_the_file():
    """The field's offset in the record and the file's byte, not its offset in the
    gathered row (which starts with _offset); its bytes as bytes; a stream's fix."""
    rec = [("a", ">u4"), ("b", "<i2"), ("c", "S3")]
    recs = [i.to_bytes(4, "big") + i.to_bytes(2, "little") + b"xyz" for i in range(3)]
    recs[2] = recs[2][:-1] + b"\xff"
    want = (
        "<buffer>: byte 24: field 'c' (S3 at offset 6 in the record) of a <stream> section[0] type 'r' record "
        "at byte 18: b'xy\\xff' is not valid UTF-8; the stream is damaged, or read the field as bytes: drop it "
        "from the type's text list in the stream description"
    )
    fixed = S([S.Section(S.Framing(size=9), [S.RecordType("r", S.Record(rec, text=("c",)))])])  # strided
    with pytest.raises(lo.ConversionError) as err:
        lo.read_stream(b"".join(recs), fixed)
    assert str(err.value) == want
    prefixed = S(
        [S.Section(S.Framing(length=S.Length(0, 1), prefix=1), [S.RecordType("r", S.Record(rec, text=("c",)))])]
    )
    with pytest.raises(lo.ConversionError) as err:  # gathered, a length byte in front: both offsets
        lo.read_stream(b"".join(bytes([9]) + r for r in recs), prefixed)
    assert "byte 27: field 'c' (S3 at offset 6 in the record, 7 from its 1-byte framing's start)" in str(err.value)
    assert "np.bytes_" not in str(err.value) and "bytes_as" not in str(err.value)


def test_a_copybook_field_with_bad_bytes_names_its_offset_in_the_record(tmp_path):
    (tmp_path / "c.cob").write_text(
        "       01  COMPANY.\n           05  SEG    PIC X.\n           05  NAME   PIC X(5).\n"
        "           05  AMT    PIC S9(3).\n"
    )
    (tmp_path / "s.toml").write_text(
        'name = "companies"\n[[section]]\n'
        'framing = { length = { offset = 2, size = 2, order = "little" }, prefix = 4 }\n'
        'tag = { offset = 0, size = 1 }\n[section.types.C]\ntag = "C"\ncopybook = "c.cob"\n'
        'record = "COMPANY"\ncodepage = "ascii"\n'
    )

    def r(b):
        return struct.pack("<HH", 0, len(b)) + b

    with pytest.raises(lo.ConversionError) as err:
        lo.read_stream(r(b"CACME 12J") + r(b"CBAD  1 3"), str(tmp_path / "s.toml"))
    assert str(err.value) == (
        "<buffer>: field 'AMT' (zoned S9(3)) of a companies section[0] type 'C' record at byte 13: byte 23 of "
        "the file (offset 6 in the record, 10 from its 4-byte framing's start), bytes 31 20 33 are not a valid "
        "zoned S9(3) value: byte 1 of the field: 20 is not an ASCII zoned digit (30-39); fix the data, or give "
        'the type invalid = "null" in the stream description to make such values nulls'
    )


def test_a_fifo_or_a_device_is_an_error_not_an_empty_stream(tmp_path):
    """A path that is not a regular file (it has no size: it read as an empty stream, its
    records lost) is an error at once, without waiting for a FIFO's writer."""
    import os

    from layouts import cobol

    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        with pytest.raises(lo.ConversionError, match=r"is not a regular file .* save it to a file first"):
            lo.read_stream(path, "itch50")
    book = "       01  R.\n           05  N PIC 9.\n           05  T OCCURS 0 TO 4 TIMES DEPENDING ON N.\n              10 X PIC X.\n"
    with pytest.raises((lo.ConversionError, lo.LayoutError), match=r"is not a regular file"):
        cobol.read_variable(str(fifo), book)
    with open("/dev/zero", "rb") as endless:  # attack5: read until memory ran out
        with pytest.raises(lo.ConversionError, match=r"/dev/zero is a device, which has no end to read to"):
            lo.read_stream(endless, "itch50")


def test_a_proc_file_is_read_for_its_bytes_not_as_empty(tmp_path):
    """A /proc file says it has 0 bytes and has some: it read as an empty stream (0 records,
    nothing said); now its bytes are read."""
    import os

    from layouts import cobol

    path = "/proc/self/cmdline"
    if not os.path.exists(path) or os.stat(path).st_size != 0:
        pytest.skip("no /proc file of size 0 here")
    spec = tmp_path / "bytes.toml"
    spec.write_text('name = "bytes"\n[[section]]\nframing = "fixed"\n[section.types.b]\nfields = [["b", "u1"]]\n')
    table = lo.read_stream(path, spec)["b"].to_arrow()
    assert table.num_rows > 0  # (each process's own command line)
    book = "       01  R.\n           05  N PIC 9.\n           05  T OCCURS 0 TO 4 TIMES DEPENDING ON N.\n              10 X PIC X.\n"
    with pytest.raises(lo.ConversionError, match=r"/proc/self/cmdline: record 0 \(byte 0\)"):
        cobol.read_variable(path, book, codepage="ascii")  # ("/..." is no count: read, and said)


def test_write_streams_advice_is_its_own():
    """attack5: write_stream advised truncate= (a TypeError) and bytes_as= (no such option),
    named offsets of its staging record, and took a _prefix of the wrong width for text."""
    import struct

    import pyarrow as pa

    rec = np.dtype([("id", ">u4"), ("name", "S6")])
    data = b"".join(struct.pack(">HH", 14, 0) + struct.pack(">I", i) + b"NAME%02d" % i for i in range(2))
    spec = lo.Stream.rdw(rec)
    t = lo.read_stream(data, spec)["record"].to_arrow()
    long = t.set_column(t.schema.get_field_index("name"), "name", pa.array([b"NAME00X", b"NAME01"], pa.binary()))
    with pytest.raises(lo.ConversionError) as err:
        lo.write_stream({"record": long}, spec)
    assert "shorten such values to 6 bytes" in str(err.value)
    assert "truncate" not in str(err.value) and "at offset" not in str(err.value)
    j = t.schema.get_field_index("_prefix")
    bad = t.set_column(j, "_prefix", pa.array([b"\0\0\0"] * 2, pa.binary(3)))
    with pytest.raises(
        lo.ConversionError, match=r"column '_prefix', row 0: b'\\x00\\x00\\x00' is not the record's 4 framing"
    ):
        lo.write_stream({"record": bad}, spec)


def test_an_output_that_takes_no_bytes_is_an_error_not_an_endless_loop():
    """attack5: a file object whose write() returns 0 made write_stream and convert loop."""
    import io

    class Full(io.RawIOBase):
        def writable(self):
            return True

        def write(self, b):
            return 0

    spec = lo.Stream.rdw(np.dtype([("id", ">u4")]))
    tables = lo.read_stream(b"\x00\x08\x00\x00\x00\x00\x00\x07", spec)
    with pytest.raises(lo.ConversionError, match=r"write\(\) took no bytes of 8 \(it returned 0\)"):
        lo.write_stream(tables, spec, Full())


def test_a_boolean_byte_other_than_0_and_1_in_a_stream_is_an_error(tmp_path):
    """attack5: read_stream turned bytes 02 and FF of a '?' field into true (back as 01)."""
    spec = tmp_path / "flags.toml"
    spec.write_text(
        'name = "flags"\n[[section]]\nframing = { size = 2 }\n[section.types.r]\nfields = [["id", "u1"], ["flag", "?"]]\n'
    )
    assert lo.read_stream(b"\x00\x00\x01\x01", spec)["r"].to_arrow().column("flag").to_pylist() == [False, True]
    with pytest.raises(
        lo.ConversionError, match=r"field 'flag' .* record at byte 4: byte 02: a boolean is byte 00 or 01"
    ):
        lo.read_stream(b"\x00\x00\x01\x01\x02\x02", spec)


def test_unknown_records_are_written_only_as_whole_records_of_no_type():
    """attack8: an _unknown record whose length field no longer says its size, with no room
    for its framing, or with a known type's tag was written, and the stream did not read
    back (or read back with one more record of that type)."""
    S = lo.Stream
    spec = S(
        [
            S.Section(
                S.Framing(length=S.Length(offset=0, size=2, order="big")),
                [S.RecordType("buy", S.Record([("side", "S1"), ("qty", ">u4")]), tag="B")],
                tag=S.Tag(offset=0, size=1),
                unknown="keep",
            )
        ]
    )

    def msg(body):
        return struct.pack(">H", len(body)) + body

    data = msg(b"B" + struct.pack(">I", 7)) + msg(b"Zzz") + msg(b"B" + struct.pack(">I", 9))
    t = lo.read_stream(data, spec)
    u = t["_unknown"].to_arrow()
    for rec, said in (
        (
            b"\x00\x09Zzz",
            r"row 0 \(_tail b'\\x00\\tZzz', 5 bytes\): its length field \(bytes 0..1\) says a record of 11",
        ),
        (b"\x00", r"needs at least 3 bytes \(its framing and tag\)"),
        (b"\x00\x05B\x00\x00\x00\x01", r"its tag 66 is the tag of record type 'buy', so it would read back as one"),
    ):
        with pytest.raises(lo.ConversionError, match=said):
            lo.write_stream(dict(t, _unknown=u.set_column(1, "_tail", pa.array([rec]))), spec)
    edited = msg(b"Zq!")  # a whole record of no type, its bytes changed: written, and read back
    out = lo.write_stream(dict(t, _unknown=u.set_column(1, "_tail", pa.array([edited]))), spec)
    assert out == data.replace(msg(b"Zzz"), edited)
    assert lo.read_stream(out, spec)["_unknown"].to_arrow().column("_tail").to_pylist() == [edited]


def test_write_streams_arguments_are_checked():
    """attack8: a list of tables was a raw TypeError, order='middle' went unnamed."""
    from layouts.benchmarks.streams import pcap_bytes

    t = lo.read_stream(pcap_bytes(3), "pcap")
    with pytest.raises(lo.LayoutError, match=r"tables must be a dict of record type name -> table .* got list"):
        lo.write_stream(list(t.values()), "pcap", order="little")
    with pytest.raises(lo.LayoutError, match=r"order='middle'; expected \"big\" or \"little\""):
        lo.write_stream(t, "pcap", order="middle")
    with pytest.raises(lo.LayoutError, match=r"order='little', but itch50 is big-endian"):
        lo.write_stream({}, "itch50", order="little")


def test_a_column_the_record_type_does_not_have_is_refused_not_dropped():
    """attack8: write_stream wrote a table with a column its type does not have (a misspelt
    field: the old value written) without a word; the command refused the same table."""
    from layouts.benchmarks.streams import pcap_bytes

    raw = pcap_bytes(5)
    t = lo.read_stream(raw, "pcap")
    p = t["packet"].to_arrow()
    with pytest.raises(
        lo.ConversionError,
        match=r"table 'packet' has a column 'note' that record type 'packet' does not have \(its columns: "
        r"_offset, ts_sec, ts_frac, incl_len, orig_len, _tail\): it would not be written; drop it",
    ):
        lo.write_stream(dict(t, packet=p.append_column("note", pa.array(["x"] * len(p)))), "pcap", order=t.order)
    assert lo.write_stream(t, "pcap", order=t.order) == raw


def test_write_stream_names_the_problems_of_every_table():
    """attack9: a value too large in one table and a NUL in the header's text field: only
    the first table was named."""
    from layouts.benchmarks.streams import pcap_bytes

    t = lo.read_stream(pcap_bytes(4), "pcap")
    p, h = t["packet"].to_arrow(), t["_header"].to_arrow()
    p = p.set_column(p.schema.get_field_index("ts_sec"), "ts_sec", pa.array([2**40] + [1] * (len(p) - 1)))
    h = h.set_column(h.schema.get_field_index("snaplen"), "snaplen", pa.array([2**40]))
    with pytest.raises(lo.ConversionError) as got:
        lo.write_stream(dict(t, packet=p, _header=h), "pcap", order=t.order)
    text = str(got.value)
    assert text.startswith("2 problems in the tables: (1) ") and "'snaplen'" in text and "'ts_sec'" in text, text
