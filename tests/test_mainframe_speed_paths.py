"""The shortcuts of the mainframe word loops (docs/mainframe.md, "Speed"): a field whose
word loads stay inside its record is read with no copy of a block's last row; the loops of
each output width, sign position and validity bitmap; the 4-digit tables of the way back;
the string compaction after a threaded run (its 32-byte moves over overlapping ranges,
both offset widths). Semantics only: the values are the reference decoder's
(tests/mainframe_reference.py), the way back gives the same bytes, errors name the row."""

from decimal import Decimal

import mainframe_reference as mref  # noqa: E402 - tests/ is on the path
import numpy as np
import pyarrow as pa
import pytest
from test_roundtrip import streaming  # (forces the streaming stores on or off)

import layouts as lo
from layouts.kernels.cpu.forward import _compact_strings
from layouts.kernels.cpu.memory import _move_down
from layouts.kernels.plan import COUNT, DATA, NCOLS, OFFSETS, P1, P2

E = lo.Encoding

ENCODINGS = [
    E("packed", 11, 2, signed=True),  # 6 bytes, decimal128
    E("packed", 7),  # 4 bytes, unsigned
    E("packed", 15, signed=True, as_integer=True),  # 8 bytes, int64
    E("packed", 24, signed=True),  # 13 bytes: two words
    E("zoned", 9, 2, signed=True),  # two words, the top one of one digit
    E("zoned", 16, signed=True, as_integer=True),  # two full words, int64
    E("zoned", 6),  # one word, unsigned
    E("zoned", 7, sign="leading", signed=True),  # the overpunch on the first byte
    E("zoned", 5, sign="trailing separate", signed=True),
    E("binary", 9, signed=True),  # 4 bytes
    E("binary", 18, as_integer=True),  # 8 bytes unsigned into int64
    E("binary", 4),  # 2 bytes unsigned
]


def _values(enc, n, rng):
    digits = rng.integers(0, 10, (n, enc.digits))
    if enc.kind == "binary":  # within the bytes (2**63 for 8 bytes into int64, 2**16 for 2)
        digits[:, 0] = np.minimum(digits[:, 0], 5 if enc.digits == 4 else 1)
    signs = np.where(rng.random(n) < 0.4, -1, 1) if enc.signed else np.ones(n, np.int64)
    return [int(s) * int("".join(map(str, d))) for s, d in zip(signs, digits)]


@pytest.mark.parametrize("enc", ENCODINGS, ids=lambda e: f"{e.kind}{e.digits}-{e.sign}-{e.signed}")
def test_fields_inside_the_record_both_ways(enc):
    """A field followed by 8 bytes or more (its word loads never leave the record) and the
    same field at the record's end (the block's last row read from a copy) give the
    reference decoder's values, back the same bytes, and name the same bad record."""
    rng = np.random.default_rng(5)
    width = enc.width() or {4: 2, 9: 4, 18: 8}[enc.digits]  # (binary: the field's bytes)
    n = 2500  # several blocks, two chunks
    values = _values(enc, n, rng)
    cells = [mref.encode(enc, Decimal(v).scaleb(-enc.scale), width) for v in values]
    want = [mref.decode(enc, c) for c in cells]
    for after in (16, 0):
        dt = np.dtype([("pre", "u1"), ("x", f"V{width}")] + ([("post", f"V{after}")] if after else []))
        layout = lo.Layout.from_dtype(dt, encodings={"x": enc}, void_as="bytes")
        recs = np.zeros(n, dt)
        raw = recs.view(np.uint8).reshape(n, dt.itemsize)
        raw[:, 1 : 1 + width] = np.frombuffer(b"".join(cells), np.uint8).reshape(n, width)
        raw[:, 1 + width :] = 0x5A  # (bytes after the field, read by the word loads: ignored)
        for threads in (1, 2):
            table = lo.AoS(recs, layout).to_soa(threads=threads).to_arrow()
            assert table.column("x").to_pylist() == want
            back = lo.SoA.from_arrow(table, layout).to_aos(threads=threads).array
            assert back.tobytes() == recs.tobytes()
        if enc.kind == "binary" and enc.digits != 4:
            continue  # (every bit pattern is a value)
        spoilt = raw.copy()
        bad = [777, 2499]
        if enc.kind == "binary":  # 2 bytes, 4 digits: 65535 is over them
            spoilt[bad, 1:3] = 0xFF
        else:  # EBCDIC space in a zoned digit / nibble A in a packed one
            spoilt[bad, 1 + (1 if enc.sign == "leading" else 0)] = 0x40 if enc.kind == "zoned" else 0xAA
        spoilt = spoilt.reshape(-1).view(dt)
        with pytest.raises(lo.ConversionError, match=r"field 'x' .*record 777:"):
            lo.AoS(spoilt, layout).to_soa(threads=2)


@pytest.mark.parametrize(
    "enc", [E("packed", 11, 2, signed=True), E("zoned", 9, 2, signed=True)], ids=["packed", "zoned"]
)
def test_way_back_nulls_and_out_of_range_in_every_loop(enc):
    """The way back's loops of each output width and validity bitmap: a null (no fill) and
    a value over the digits are errors naming their row; decimal -0 is written as +0."""
    layout = lo.Layout.from_dtype(
        np.dtype([("x", f"V{enc.width()}"), ("y", "V16")]), encodings={"x": enc}, void_as="bytes"
    )
    typ = layout.schema.field("x").type
    column = [Decimal(v).scaleb(-enc.scale) for v in range(-500, 500)]
    for fault, match in ((None, r"first at row 600"), (Decimal(10**enc.digits).scaleb(-enc.scale), r"row 600")):
        bad = list(column)
        bad[600] = fault
        wide = pa.array(bad, pa.decimal128(38, enc.scale) if fault is not None else typ)
        table = pa.table({"x": wide, "y": pa.array([b"\0" * 16] * 1000, pa.binary(16))})
        with pytest.raises(lo.ConversionError, match=match):
            lo.SoA.from_arrow(table, layout).to_aos()
    table = pa.table({"x": pa.array(column, typ), "y": pa.array([b"\0" * 16] * 1000, pa.binary(16))})
    recs = lo.SoA.from_arrow(table, layout).to_aos(threads=2).array
    cells = recs.view(np.uint8).reshape(1000, -1)[:, : enc.width()]
    assert [mref.decode(enc, bytes(c)) for c in cells] == column
    assert bytes(cells[500]) == mref.encode(enc, Decimal(0), enc.width())


@pytest.mark.parametrize("shift", [0, 1, 5, 31, 32, 33, 64, 200])
@pytest.mark.parametrize("size", [0, 7, 31, 32, 95, 1000])
def test_move_down_over_overlapping_ranges(shift, size):
    """The 32-byte moves of the compaction: the bytes arrive as memmove puts them, the
    ranges overlapping by any amount."""
    buf = np.random.default_rng(size + shift).integers(0, 256, size + shift + 64).astype(np.uint8)
    want = buf.copy()
    want[0:size] = buf[shift : shift + size]
    _move_down(buf.ctypes.data, buf.ctypes.data + shift, size)
    assert buf.tobytes() == want.tobytes()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("ow", [4, 8])
def test_compaction_of_chunks_both_offset_widths(ow, full, stream):
    """Three chunks' strings, each written at its slot with chunk-local offsets, moved next
    to each other with the offsets made global: by streaming stores where a chunk's new
    place ends before its old one starts (``stream``: an output past the caches), else by
    moves over the overlap (``full``: the later chunks' strings as long as their slots allow)."""
    per, starts = 6, np.array([0, 5, 9, 14], np.int64)
    strings = [bytes([65 + i % 26]) * (per if full and i >= 5 else min(i % 7, per)) for i in range(14)]
    data = np.full(14 * per, 0xEE, np.uint8)
    offsets = np.zeros(15, np.int32 if ow == 4 else np.int64)
    for c in range(3):
        pos = 0
        for i in range(starts[c], starts[c + 1]):
            s = strings[i]
            data[starts[c] * per + pos : starts[c] * per + pos + len(s)] = np.frombuffer(s, np.uint8)
            pos += len(s)
            offsets[i + 1] = pos
    op = np.zeros(NCOLS, np.int64)
    op[COUNT], op[P1], op[P2], op[DATA], op[OFFSETS] = 1, per, ow, data.ctypes.data, offsets.ctypes.data
    total = _compact_strings(op, starts, stream)
    joined = b"".join(strings)
    assert total == len(joined) and data[:total].tobytes() == joined
    assert offsets.tolist() == np.cumsum([0] + [len(s) for s in strings]).tolist()


@pytest.mark.parametrize("trim", ["none", "right"])
@pytest.mark.parametrize("width", [9, 12, 20])
@pytest.mark.slow
def test_text_tails_of_every_length_both_ways(width, trim):
    """Text of every length up to the field's, with a character of two UTF-8 bytes (or
    none) at every position: the last 1-7 bytes are translated again as 4 or 8 (the
    word loops' tails), or one by one after a character that is not ASCII."""
    enc = E("text", codepage="cp037", trim=trim)
    layout = lo.Layout.from_dtype(np.dtype([("x", f"V{width}"), ("y", "u1")]), encodings={"x": enc})
    texts = []
    for length in range(width + 1):
        base = "".join(chr(65 + (length + i) % 26) for i in range(length))
        texts.append(base)
        texts += [base[:j] + "é" + base[j + 1 :] for j in range(length)]
    cells = [mref.encode_text(enc, t, width) for t in texts]
    recs = np.zeros(len(cells), layout.dtype)
    raw = recs.view(np.uint8).reshape(len(cells), -1)
    raw[:, :width] = np.frombuffer(b"".join(cells), np.uint8).reshape(len(cells), width)
    table = lo.AoS(recs, layout).to_soa(threads=2).to_arrow()
    assert table.column("x").to_pylist() == [mref.decode_text(enc, c) for c in cells]
    assert lo.SoA.from_arrow(table, layout).to_aos(threads=2).array.tobytes() == recs.tobytes()


@pytest.mark.parametrize("count", [1, 3])
@pytest.mark.parametrize("width", [8, 9, 16, 20])
@pytest.mark.slow
def test_text_of_whole_blocks_both_ways(width, count):
    """Text as long as its field, in blocks of ASCII only (each value a word at a time,
    the offsets a multiple of the width; with streaming stores, through the block's
    stage) and in blocks with one character of two UTF-8 bytes, one shorter value or one
    null (the block written again, value by value): the reference decoder's strings, the
    same bytes back, both offset widths."""
    enc = E("text", codepage="cp037")
    shape = (count,) if count > 1 else ()
    dt = np.dtype([("x", f"V{width}", shape), ("y", "u1")])
    layout = lo.Layout.from_dtype(dt, encodings={"x": enc})
    n = 5000  # several blocks, two chunks
    rng = np.random.default_rng(9)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789abcdefghijklmnopqrstuvwxyz.,-"
    texts = ["".join(rng.choice(list(letters), width)) for _ in range(n * count)]
    for at in (1700, 4100):  # a character of two UTF-8 bytes in two blocks
        texts[at] = texts[at][:3] + "é" + texts[at][4:]
    # (the reference coder checked on a sample, Python's codec for the rest: the reference took 95 s here)
    cells = [t.encode("cp037") for t in texts]
    assert all(mref.encode_text(enc, texts[i], width) == cells[i] for i in (0, 1700, 4100))
    recs = np.zeros(n, layout.dtype)
    raw = recs.view(np.uint8).reshape(n, -1)
    raw[:, : width * count] = np.frombuffer(b"".join(cells), np.uint8).reshape(n, width * count)
    table = lo.AoS(recs, layout).to_soa(threads=2).to_arrow()
    with streaming(True):
        assert lo.AoS(recs, layout).to_soa(threads=2).to_arrow().equals(table)
    got = table.column("x").to_pylist()
    want = [c.decode("cp037") for c in cells]
    assert all(mref.decode_text(enc, cells[i]) == want[i] for i in (0, 1700, 4100))
    assert (got if count == 1 else [s for row in got for s in row]) == want
    for large in (False, True):
        t = table
        if large and count == 1:
            t = table.set_column(0, "x", table.column("x").cast(pa.large_string()))
        assert lo.SoA.from_arrow(t, layout).to_aos(threads=2).array.tobytes() == recs.tobytes()
    if count == 1:  # a shorter value in a block: padded with spaces; a null: an error that names its row
        values = list(want)
        values[2600] = values[2600][:-3]
        back = lo.SoA.from_arrow(table.set_column(0, "x", pa.array(values)), layout).to_aos(threads=2).array
        cell = back.view(np.uint8).reshape(n, -1)[2600, :width].tobytes()
        assert cell == mref.encode_text(enc, values[2600], width)
        values[3900] = None
        with pytest.raises(lo.ConversionError, match="3900"):
            lo.SoA.from_arrow(table.set_column(0, "x", pa.array(values)), layout).to_aos(threads=2)


@pytest.mark.parametrize(
    "enc", [E("packed", 7, signed=True), E("zoned", 9, 2, signed=True), E("zoned", 16)], ids=["packed", "zoned", "z16"]
)
def test_way_back_words_keep_the_bytes_after_the_field(enc):
    """The way back's 8-byte stores of a field keep the record's bytes after it: those of
    a field written before it (a layout whose fields are not in offset order), of the next
    element of an OCCURS and of the padding; the records come back byte for byte."""
    w = enc.width()
    dt = np.dtype(
        {"names": ["y", "x"], "formats": ["V16", (f"V{w}", (3,))], "offsets": [3 * w, 0], "itemsize": 3 * w + 20}
    )
    layout = lo.Layout.from_dtype(dt, encodings={"x": enc}, void_as="bytes")
    n = 3000
    rng = np.random.default_rng(3)
    values = _values(enc, 3 * n, rng)
    cells = [mref.encode(enc, Decimal(v).scaleb(-enc.scale), w) for v in values]
    recs = np.zeros(n, dt)
    raw = recs.view(np.uint8).reshape(n, -1)
    raw[:, : 3 * w] = np.frombuffer(b"".join(cells), np.uint8).reshape(n, 3 * w)
    raw[:, 3 * w : 3 * w + 16] = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    table = lo.AoS(recs, layout).to_soa(threads=2).to_arrow()
    assert [v for row in table.column("x").to_pylist() for v in row] == [mref.decode(enc, c) for c in cells]
    assert lo.SoA.from_arrow(table, layout).to_aos(threads=2).array.tobytes() == recs.tobytes()
