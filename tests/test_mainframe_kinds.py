"""Mainframe field kinds (issue 27): Encoding, Layout.from_dtype(encodings=), the EBCDIC
tables, and the kernels both ways against the plain-Python reference
(tests/mainframe_reference.py), with hypothesis: random encodings, random valid and
invalid bytes, every code page."""

import codecs
from decimal import Context, Decimal

import mainframe_reference as mref  # noqa: E402 - tests/ is on the path
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import layouts as lo
from layouts import _ebcdic

E = lo.Encoding
FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _layout(enc, width, count=1):
    shape = (count,) if count > 1 else ()
    dt = np.dtype([("pre", "u1"), ("x", f"V{width}", shape) if shape else ("x", f"V{width}"), ("post", "u1")])
    return lo.Layout.from_dtype(dt, encodings={"x": enc})


def _records(layout, cells):
    """Records whose field x holds ``cells`` (bytes, one per element, rows of them)."""
    recs = np.zeros(len(cells), dtype=layout.dtype)
    recs["pre"], recs["post"] = 0xAA, 0x55
    raw = recs.view(np.uint8).reshape(len(cells), layout.itemsize)
    f = layout["x"]
    for r, row in enumerate(cells):
        for off, cell in zip(f.element_offsets().tolist(), row):
            raw[r, off : off + f.width] = np.frombuffer(cell, np.uint8)
    return recs


def _expected(enc, cell):
    try:
        return mref.decode(enc, cell)
    except (mref.Invalid, mref.Range):
        return None


# ------------------------------------------------------------------ Encoding and Layout


def test_encoding_fields_and_schema():
    dt = np.dtype([("name", "S10"), ("amt", "V5"), ("qty", "V4"), ("rate", "V8"), ("grp", [("b", "V2")])])
    layout = lo.Layout.from_dtype(
        dt,
        encodings={
            "name": E("text", codepage="cp1047"),
            "amt": E("packed", 9, 2, signed=True),
            "qty": E("zoned", 4, as_integer=True),
            "rate": E("hfloat"),
            "grp.b": E("binary", 4, signed=True),
        },
    )
    kinds = {f.name: f.kind for f in layout.fields}
    assert kinds == {"name": "text", "amt": "packed", "qty": "zoned", "rate": "hfloat", "grp.b": "binary"}
    schema = layout.schema
    assert schema.field("name").type == pa.string()
    assert schema.field("amt").type == pa.decimal128(9, 2)
    assert schema.field("qty").type == pa.int64()
    assert schema.field("rate").type == pa.float64()
    assert schema.field("grp").type.field("b").type == pa.decimal128(4, 0)
    meta = schema.field("amt").metadata[b"layouts.encoding"]
    assert E.from_json(meta.decode()) == layout["amt"].encoding
    text = str(layout)
    assert "packed S9(7)V9(2)" in text and "text cp1047" in text and "hfloat" in text
    assert layout.describe()["fields"][1]["encoding"] == "packed S9(7)V9(2)"
    assert hash(layout) == hash(lo.Layout.from_dtype(dt, encodings=dict(layout.encodings)))


@pytest.mark.parametrize(
    "enc, arrow",
    [
        (E("zoned", 1, scale=-2), pa.decimal128(3, 0)),  # PIC 9PP
        (E("zoned", 2, scale=4), pa.decimal128(4, 4)),  # PIC VPP99
        (E("packed", 38, scale=10, signed=True), pa.decimal128(38, 10)),
        (E("binary", 0, signed=True), pa.decimal128(10, 0)),  # 4 bytes, the width's whole range
        (E("binary", 4, trunc="bin"), pa.decimal128(10, 0)),
        (E("hfloat"), pa.float32()),
    ],
)
def test_arrow_types(enc, arrow):
    width = {"zoned": enc.digits, "packed": enc.digits // 2 + 1, "binary": 4, "hfloat": 4}[enc.kind]
    assert _layout(enc, width)["x"].arrow_type == arrow


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kind": "comp3"}, "kind must be one of"),
        ({"kind": "packed", "digits": 0}, "packed decimal has 1 to 38 digits"),
        ({"kind": "packed", "digits": 39}, "1 to 38 digits"),
        ({"kind": "zoned", "digits": 30, "scale": -10}, "needs 40 digits of precision"),
        ({"kind": "packed", "digits": 5, "scale": 2, "as_integer": True}, "as_integer applies"),
        ({"kind": "text", "codepage": "cp1252"}, "code page 'cp1252' is not one"),
        ({"kind": "zoned", "digits": 3, "sign": "leading separate"}, "needs signed=True"),
        ({"kind": "text", "invalid": "skip"}, "invalid must be"),
        ({"kind": "text", "trim": "left"}, "trim must be"),
    ],
)
def test_encoding_errors(kwargs, match):
    with pytest.raises(lo.LayoutError, match=match):
        E(**kwargs)


def test_layout_errors():
    dt = np.dtype([("a", "V4"), ("g", [("b", "V3")]), ("i", "<i4")])
    with pytest.raises(
        lo.LayoutError,
        match=r"field 'a' at offset 0 is 4 bytes wide, and a packed field of 7 "
        r"digits needs 4 bytes|needs 3 bytes",
    ):
        lo.Layout.from_dtype(dt, encodings={"a": E("packed", 4)}, void_as="bytes")
    with pytest.raises(lo.LayoutError, match="is a nested record, not a leaf of raw bytes"):
        lo.Layout.from_dtype(dt, encodings={"g": E("packed", 5)}, void_as="bytes")
    with pytest.raises(lo.LayoutError, match=r"is dtype <i4, not a leaf of raw bytes"):
        lo.Layout.from_dtype(dt, encodings={"i": E("binary", 9)}, void_as="bytes")
    with pytest.raises(lo.LayoutError, match=r"encodings names \['nope'\], which are not leaf fields"):
        lo.Layout.from_dtype(dt, encodings={"nope": E("text")}, void_as="bytes")
    with pytest.raises(lo.LayoutError, match="needs 4 \\(COMP-1\\) or 8 \\(COMP-2\\) bytes"):
        lo.Layout.from_dtype(dt, encodings={"g.b": E("hfloat")}, void_as="bytes")
    with pytest.raises(lo.LayoutError, match="10 digits do not fit a 3-byte binary field; COBOL uses 8 bytes"):
        lo.Layout.from_dtype(dt, encodings={"g.b": E("binary", 10)}, void_as="bytes")
    with pytest.raises(lo.LayoutError, match="must be a layouts.Encoding"):
        lo.Layout.from_dtype(dt, encodings={"a": "packed"}, void_as="bytes")


# ------------------------------------------------------------------ EBCDIC tables


@pytest.mark.parametrize("codepage", _ebcdic.CODEPAGES)
def test_codepage_tables_come_from_the_codecs(codepage):
    chars = _ebcdic.characters(codepage)
    assert _ebcdic.check_bijection(codepage)
    assert chars == "".join(mref.charmap(codepage))
    codec = codecs.lookup(codepage)
    same = [b for b in range(256) if codec.decode(bytes([b]))[0] == chars[b]]
    assert len(same) >= 255  # the codec's own characters, but for the documented 0x15 fix
    table = _ebcdic.decode_table(codepage)
    for b in range(256):
        utf8 = chars[b].encode()
        assert int(table[b]) == int.from_bytes(utf8, "little") | len(utf8) << 24


# ------------------------------------------------------------------ kernels vs the reference

_SIGNS = ("trailing", "leading", "trailing separate", "leading separate")


@st.composite
def encodings(draw):
    kind = draw(st.sampled_from(["packed", "zoned", "binary", "hfloat", "text"]))
    invalid = draw(st.sampled_from(["error", "null"]))
    codepage = draw(st.sampled_from(_ebcdic.CODEPAGES))
    if kind == "text":
        return E(
            "text", codepage=codepage, trim=draw(st.sampled_from(["none", "right", "both"])), invalid=invalid
        ), draw(st.integers(1, 12))
    if kind == "hfloat":
        return E("hfloat", invalid=invalid), draw(st.sampled_from([4, 8]))
    signed = draw(st.booleans())
    if kind == "binary":
        width = draw(st.integers(1, 8))
        trunc = draw(st.sampled_from(["std", "bin"]))
        most = len(str(2 ** (8 * width) - 1))
        digits = draw(st.integers(0, min(most, 18)))
        scale = draw(st.integers(-2, 4))
        as_integer = scale <= 0 and draw(st.booleans())
        return E("binary", digits, scale, signed, trunc=trunc, as_integer=as_integer, invalid=invalid), width
    digits = draw(st.integers(1, 38))
    scale = draw(st.integers(-min(3, 38 - digits), min(digits + 2, 38)))
    as_integer = scale <= 0 and digits - scale <= 18 and draw(st.booleans())
    sign = draw(st.sampled_from(_SIGNS)) if kind == "zoned" and signed else "trailing"
    if kind == "zoned" and not signed:
        sign = draw(st.sampled_from(["trailing", "leading"]))
    positive = draw(st.sampled_from(["", "", "C", "F"]))
    enc = E(
        kind,
        digits,
        scale,
        signed,
        sign=sign,
        codepage=codepage,
        as_integer=as_integer,
        invalid=invalid,
        positive=positive,
    )
    return enc, enc.width()


@st.composite
def valid_cell(draw, enc, width):
    """Bytes of a valid value (made by the reference encoder) or, at times, any bytes."""
    if draw(st.integers(0, 3)) == 0:
        return draw(st.binary(min_size=width, max_size=width))
    if enc.kind == "text":
        chars = _ebcdic.characters(enc.codepage)
        return bytes(draw(st.lists(st.integers(0, 255), min_size=width, max_size=width))) if chars else b""
    if enc.kind == "hfloat":
        return draw(st.binary(min_size=width, max_size=width))
    if enc.kind == "binary":
        if enc.trunc == "std" and enc.digits:
            top = 10**enc.digits - 1
            if enc.signed:
                top = min(top, 2 ** (8 * width - 1) - 1)
            else:
                top = min(top, 2 ** (8 * width) - 1)
        else:
            top = 2 ** (8 * width - (1 if enc.signed else 0)) - 1
        low = -top if enc.signed else 0
        value = draw(st.integers(low, top))
        return value.to_bytes(width, "big", signed=enc.signed)
    unscaled = draw(st.integers(-(10**enc.digits - 1) if enc.signed else 0, 10**enc.digits - 1))
    value = Decimal(unscaled).scaleb(-enc.scale, Context(prec=80))
    if enc.kind == "packed":
        cell = mref.encode_packed(enc, value, width)
        if unscaled >= 0 and draw(st.booleans()):  # the other positive sign: F in a signed field, C in an unsigned
            cell = cell[:-1] + bytes([(cell[-1] & 0xF0) | (0xF if enc.signed else 0xC)])
        return cell
    return mref.encode_zoned(enc, value, width)


def _convert(layout, recs):
    return lo.AoS(recs, layout).to_soa().to_arrow()


def _check_forward(enc, width, cells, count=1):
    layout = _layout(enc, width, count)
    rows = [cells[i : i + count] for i in range(0, len(cells) - len(cells) % count, count)]
    recs = _records(layout, rows)
    expected = [_expected(enc, c) for row in rows for c in row]
    bad = [i for i, v in enumerate(expected) if v is None]
    if bad and enc.invalid == "error":
        with pytest.raises(lo.ConversionError, match=r"field 'x'.*record \d+.*byte \d+.*bytes [0-9A-F ]+"):
            _convert(layout, recs)
        return None
    table = _convert(layout, recs)
    col = table.column("x").combine_chunks()
    got = col.flatten().to_pylist() if count > 1 else col.to_pylist()
    for i, (g, w) in enumerate(zip(got, expected)):
        if enc.kind == "hfloat" and w is not None and g is not None:
            assert np.float64(g).tobytes() == np.float64(w).tobytes() or (g == w), (i, cells[i].hex(), g, w)
        else:
            assert g == w, (i, cells[i].hex(), g, w, enc)
    return layout, recs, table, expected


@seed(27)
@FAST
@given(data=st.data())
@pytest.mark.slow
def test_forward_matches_reference(data):
    enc, width = data.draw(encodings())
    cells = data.draw(st.lists(valid_cell(enc, width), min_size=0, max_size=20))
    count = data.draw(st.sampled_from([1, 1, 2]))
    _check_forward(enc, width, cells, count)


@seed(2727)
@FAST
@given(data=st.data())
@pytest.mark.slow
def test_round_trip_matches_reference(data):
    """Valid values written back give the bytes the reference encoder writes, and the
    bytes the data had where they use the preferred sign (see docs/mainframe.md)."""
    enc, width = data.draw(encodings())
    enc = E(**{**{k: getattr(enc, k) for k in enc.__dataclass_fields__}, "invalid": "error"})
    cells = data.draw(st.lists(valid_cell(enc, width), min_size=1, max_size=12))
    cells = [c for c in cells if _expected(enc, c) is not None]
    if not cells:
        return
    out = _check_forward(enc, width, cells)
    layout, recs, table, expected = out
    if enc.kind == "hfloat":
        want = [mref.encode_hfloat(enc, v, width) for v in expected]
    elif enc.kind == "text":
        try:
            want = [mref.encode_text(enc, v, width) for v in expected]
        except mref.Range:
            return
    else:
        want = [mref.encode(enc, v, width) for v in expected]
    back = lo.SoA.from_arrow(table, layout).to_aos().array
    got = [
        bytes(back["x"][i].tobytes())
        if False
        else back.view(np.uint8).reshape(len(back), -1)[i, 1 : 1 + width].tobytes()
        for i in range(len(back))
    ]
    assert got == want
    if enc.kind in ("binary", "text") and enc.trim == "none":
        assert got == cells  # every valid value: the very bytes


def test_round_trip_is_byte_exact_for_preferred_signs():
    enc = E("packed", 7, 2, signed=True)
    cells = [bytes.fromhex(h) for h in ("1234567C", "0000001D", "9999999D", "0000000C")]
    layout, recs, table, _ = _check_forward(enc, 4, cells)
    back = lo.SoA.from_arrow(table, layout).to_aos().array
    assert back.tobytes() == recs.tobytes()


def test_positive_sign_chosen_for_files_that_use_f():
    """A signed field whose positive values carry F (not C) comes back byte for byte with
    positive="F"; without it, they come back with C (the same values)."""
    cells = [bytes.fromhex(h) for h in ("1234567F", "0000001D", "0000000F")]
    layout, recs, table, _ = _check_forward(E("packed", 7, 2, signed=True, positive="F"), 4, cells)
    assert lo.SoA.from_arrow(table, layout).to_aos().array.tobytes() == recs.tobytes()
    plain = _layout(E("packed", 7, 2, signed=True), 4)
    back = lo.SoA.from_arrow(table, plain).to_aos().array.view(np.uint8).reshape(3, -1)[:, 1:5]
    assert [bytes(r).hex() for r in back] == ["1234567c", "0000001d", "0000000c"]
    zoned = [b"\xf1\xf2\xf3", b"\xf0\xf0\xd5"]
    layout, recs, table, _ = _check_forward(E("zoned", 3, signed=True, positive="F"), 3, zoned)
    assert lo.SoA.from_arrow(table, layout).to_aos().array.tobytes() == recs.tobytes()
    with pytest.raises(lo.LayoutError, match="positive must be"):
        E("binary", 4, positive="F")


def test_invalid_is_an_error_naming_field_record_offset_and_bytes():
    enc = E("packed", 5, signed=True)
    layout = _layout(enc, 3)
    recs = _records(layout, [[bytes.fromhex("12345C")], [bytes.fromhex("1A345C")]])
    with pytest.raises(
        lo.ConversionError,
        match=r"field 'x' .*record 1.*byte 6 of the records \(offset 1 in the "
        r"record\), bytes 1A 34 5C are not a valid packed S9\(5\) value: "
        r"byte 0 of the "
        r"field: digit nibble A is not 0-9; fix the data, or read the "
        r"field with invalid='null'",
    ):
        _convert(layout, recs)
    low = _records(layout, [[b"\0\0\0"]])
    with pytest.raises(lo.ConversionError, match=r"low-values \(0x00\)"):
        _convert(layout, low)
    spaces = _records(_layout(E("zoned", 3), 3), [[b"\x40\x40\x40"]])
    with pytest.raises(lo.ConversionError, match=r"EBCDIC spaces \(0x40\)"):
        _convert(_layout(E("zoned", 3), 3), spaces)


def test_invalid_null_counts_per_field():
    enc = E("zoned", 3, signed=True, invalid="null")
    layout = _layout(enc, 3)
    recs = _records(layout, [[b"\xf1\xf2\xc3"], [b"\x40\x40\x40"], [b"\xf1\xf2\xd3"], [b"\0\0\0"]])
    col = _convert(layout, recs).column("x")
    assert col.null_count == 2
    assert col.to_pylist() == [Decimal(123), None, Decimal(-123), None]


@pytest.mark.parametrize(
    "enc",
    [
        E("packed", 11, 2, signed=True),  # 6 bytes: one word, read past the field
        E("packed", 24, signed=True),  # 13 bytes: two words
        E("zoned", 9, 2, signed=True),
        E("zoned", 5, sign="leading separate", signed=True),
        E("binary", 9, signed=True),  # 4 bytes
        E("binary", 2, as_integer=True),  # 1 byte
    ],
    ids=lambda e: f"{e.kind}{e.digits}-{e.sign}",
)
def test_word_at_a_time_across_blocks_and_bad_values_mid_block(enc):
    """Thousands of records (several blocks and chunks, each block's last row read from a
    copy), records of fewer than 8 bytes, a bad value in the middle of a block: the values
    are the reference decoder's, the error names the first bad record, nulls are where the
    bad values are, and the way back gives the bytes (or names the first value that does
    not fit)."""
    rng = np.random.default_rng(27)
    width = enc.width() or (4 if enc.digits == 9 else 1)
    n = 3000
    digits = rng.integers(0, 10, (n, enc.digits))
    if enc.kind == "binary":  # within the bytes too (9 digits in 4 bytes, 2 in 1 unsigned byte)
        digits[:, 0] = np.minimum(digits[:, 0], 1)
    signs = np.where(rng.random(n) < 0.4, -1, 1) if enc.signed else np.ones(n, np.int64)
    values = [int(s) * int("".join(map(str, d))) for s, d in zip(signs, digits)]
    cells = [mref.encode(enc, Decimal(int(v)).scaleb(-enc.scale), width) for v in values]
    for layout in (_layout(enc, width), lo.Layout.from_dtype(np.dtype([("x", f"V{width}")]), encodings={"x": enc})):
        recs = np.zeros(n, layout.dtype)
        off = layout["x"].offset
        raw = recs.view(np.uint8).reshape(n, layout.itemsize)
        raw[:, off : off + width] = np.frombuffer(b"".join(cells), np.uint8).reshape(n, width)
        table = lo.AoS(recs, layout).to_soa(threads=2).to_arrow()
        assert table.column("x").to_pylist() == [mref.decode(enc, c) for c in cells]
        assert lo.SoA.from_arrow(table, layout).to_aos(threads=2).array.tobytes() == recs.tobytes()
        if enc.kind == "binary":
            continue  # (every bit pattern is a value)
        bad = sorted(rng.choice(np.arange(1, n - 1), 5, replace=False).tolist()) + [n - 1]
        spoilt = raw.copy()
        spoilt[bad, off] = 0x40 if enc.kind == "zoned" else 0xAA  # EBCDIC space / digit nibble A
        spoilt = spoilt.reshape(-1).view(layout.dtype)
        with pytest.raises(lo.ConversionError, match=rf"field 'x' .*record {bad[0]}:"):
            lo.AoS(spoilt, layout).to_soa(threads=2)
        as_null = E(**{**{k: getattr(enc, k) for k in enc.__dataclass_fields__}, "invalid": "null"})
        null_layout = lo.Layout.from_dtype(layout.dtype, encodings={"x": as_null})
        got = lo.AoS(spoilt, null_layout).to_soa(threads=2).to_arrow().column("x")
        assert [i for i, v in enumerate(got.to_pylist()) if v is None] == bad
    # the way back: a null in the middle of a block is the error, naming its row
    layout = _layout(enc, width)
    column = [Decimal(int(v)).scaleb(-enc.scale) for v in values[:1000]]
    column[700] = None
    table = pa.table(
        {
            "pre": pa.array(np.zeros(1000, np.uint8)),
            "x": pa.array(column, layout.schema.field("x").type),
            "post": pa.array(np.zeros(1000, np.uint8)),
        }
    )
    with pytest.raises(lo.ConversionError, match=r"first at row 700"):
        lo.SoA.from_arrow(table, layout).to_aos()


@pytest.mark.parametrize(
    "enc, good, bad",
    [
        (E("binary", 4, signed=True), [b"\x27\x0f", b"\xd8\xf1"], b"\x27\x10"),  # 9999, -9999 | 10000 > 4 digits
        (E("binary", 4, signed=True, trunc="bin"), [b"\x27\x10", b"\x80\x00"], None),  # its whole range
        (
            E("binary", 18, trunc="bin", as_integer=True),
            [b"\x7f" + b"\xff" * 7, b"\0" * 7 + b"\1"],
            b"\x80" + b"\0" * 7,
        ),
        (E("packed", 4, signed=True), [b"\x01\x23\x4d", b"\x00\x00\x0c"], b"\x11\x23\x4c"),  # padding nibble
        (E("packed", 3), [b"\x12\x3f", b"\x99\x9c"], b"\x12\x3d"),  # unsigned: D is no sign
        (E("zoned", 12, signed=True), [b"\xf1" * 11 + b"\xd2", b"\xf0" * 11 + b"\xa0"], b"\xf1" * 11 + b"\x72"),  # A: +
        (E("zoned", 12, signed=True), [b"\xf9" * 12], b"\xf1\xf2\xf3\xfa" + b"\xf1" * 8),  # digit A, first word
    ],
    ids=[
        "binary-digits",
        "binary-trunc-bin",
        "binary-u64-int64",
        "packed-even",
        "packed-unsigned",
        "zoned-sign",
        "zoned-hi-word",
    ],
)
def test_word_loops_check_what_the_exact_loop_checks(enc, good, bad):
    """The word loops of the usual shapes (packed of up to 8 bytes, zoned with a trailing
    overpunch, binary) take the values the reference decoder takes and leave the others
    to the exact loop, which names them (here the 300th record of 600)."""
    width = len(good[0])
    cells = [good[i % len(good)] for i in range(600)]
    layout = _layout(enc, width)
    got = lo.AoS(_records(layout, [[c] for c in cells]), layout).to_soa().to_arrow().column("x").to_pylist()
    assert got == [mref.decode(enc, c) for c in cells]
    if bad is not None:
        cells[300] = bad
        with pytest.raises(lo.ConversionError, match=r"field 'x' .*record 300:"):
            lo.AoS(_records(layout, [[c] for c in cells]), layout).to_soa()


def test_way_back_errors():
    layout = _layout(E("text", codepage="cp037"), 4)
    table = pa.table({"pre": pa.array([1], pa.uint8()), "x": ["a€"], "post": pa.array([2], pa.uint8())})
    with pytest.raises(lo.ConversionError, match=r"'a€' holds '€' \(U\+20AC\), which code page cp037 has no byte"):
        lo.SoA.from_arrow(table, layout).to_aos()
    layout = _layout(E("packed", 3, 1, signed=False), 2)
    table = pa.table(
        {
            "pre": pa.array([1], pa.uint8()),
            "x": pa.array([Decimal("-1.5")], pa.decimal128(3, 1)),
            "post": pa.array([2], pa.uint8()),
        }
    )
    with pytest.raises(lo.ConversionError, match=r"does not fit field 'x' \(packed 9\(2\)V9\(1\).*unsigned"):
        lo.SoA.from_arrow(table, layout).to_aos()
    layout = _layout(E("hfloat"), 8)
    table = pa.table(
        {"pre": pa.array([1], pa.uint8()), "x": pa.array([float("nan")]), "post": pa.array([2], pa.uint8())}
    )
    with pytest.raises(lo.ConversionError, match="no IBM hexadecimal float: NaN"):
        lo.SoA.from_arrow(table, layout).to_aos()


def test_parquet_round_trip_keeps_the_encoding(tmp_path):
    enc = E("packed", 9, 2, signed=True)
    cells = [bytes.fromhex("123456789C"), bytes.fromhex("000000001D")]
    layout, recs, table, _ = _check_forward(enc, 5, cells)
    pq.write_table(table, tmp_path / "x.parquet")
    back = pq.read_table(tmp_path / "x.parquet")
    meta = back.schema.field("x").metadata[b"layouts.encoding"].decode()
    assert E.from_json(meta) == enc
    out = lo.SoA.from_arrow(back, layout).to_aos().array
    assert out.tobytes() == recs.tobytes()


def test_nulls_on_the_way_back_need_a_fill():
    layout = _layout(E("packed", 3, 1, signed=True), 2)
    table = pa.table(
        {
            "pre": pa.array([1, 1], pa.uint8()),
            "x": pa.array([Decimal("1.5"), None], pa.decimal128(3, 1)),
            "post": pa.array([2, 2], pa.uint8()),
        }
    )
    with pytest.raises(lo.ConversionError, match=r"column 'x' has 1 nulls .*pass fill="):
        lo.SoA.from_arrow(table, layout).to_aos()
    back = lo.SoA.from_arrow(table, layout, fill={"x": Decimal("-0.5")}).to_aos().array
    assert back.view(np.uint8).reshape(2, -1)[:, 1:3].tobytes() == bytes.fromhex("015C005D")


def test_groups_flattened_and_nested_and_sentinels_refused():
    dt = np.dtype([("grp", [("amt", "V3"), ("name", "V3")]), ("n", "V2")])
    enc = {"grp.amt": E("packed", 5, signed=True), "grp.name": E("text"), "n": E("binary", 4)}
    raw = bytes.fromhex("12345D") + "ABC".encode("cp037") + (12).to_bytes(2, "big")
    recs = np.frombuffer(raw, dtype=dt)
    for flatten in (False, True):
        layout = lo.Layout.from_dtype(dt, encodings=enc, flatten=flatten)
        table = lo.AoS(recs, layout).to_soa().to_arrow()
        assert lo.SoA.from_arrow(table, layout).to_aos().array.tobytes() == raw
    assert table.column("grp.amt").to_pylist() == [Decimal(-12345)]
    with pytest.raises(lo.ConversionError, match="converted as 'packed'"):
        lo.AoS(recs, layout).to_soa(nulls={"grp.amt": 0})


FUZZ = r"""
import sys
import numpy as np
import layouts as lo
E = lo.Encoding
rng = np.random.default_rng(int(sys.argv[1]))
kinds = [(E("packed", 9, 2, signed=True), 5), (E("packed", 31, signed=True, invalid="null"), 16),
         (E("zoned", 7, sign="leading separate", signed=True), 8), (E("zoned", 20, invalid="null"), 20),
         (E("binary", 4, signed=True), 2), (E("hfloat", invalid="null"), 4), (E("hfloat"), 8),
         (E("text", codepage="cp1141", trim="both"), 9)]
for round in range(60):
    picks = [kinds[i] for i in rng.integers(0, len(kinds), rng.integers(1, 5))]
    dt = np.dtype([(f"f{i}x", f"V{w}") for i, (_, w) in enumerate(picks)])
    layout = lo.Layout.from_dtype(dt, encodings={f"f{i}x": e for i, (e, _) in enumerate(picks)})
    n = int(rng.integers(0, 300))
    recs = np.frombuffer(rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).tobytes(), dtype=dt)
    try:
        table = lo.AoS(recs, layout).to_soa().to_arrow()
    except lo.ConversionError:
        continue
    table.validate(full=True)
    try:
        lo.SoA.from_arrow(table, layout).to_aos()
    except lo.ConversionError:
        pass
print("ok")
"""


@pytest.mark.slow
@pytest.mark.parametrize("seed_", [1, 2, 3])
def test_random_bytes_fuzz_in_a_child(seed_, tmp_path):
    """Random bytes through every kind, both ways, in a child process: a crash fails this
    test, not the run; every outcome is a table that validates or a ConversionError."""
    import os
    import subprocess
    import sys

    script = tmp_path / "fuzz.py"
    script.write_text(FUZZ)
    run = subprocess.run(
        [sys.executable, str(script), str(seed_)],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


@pytest.mark.slow
def test_benchmark_runs_small(tmp_path):
    """benchmarks.mainframe at its smoke size writes well-formed JSON (no figure asserted)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "mainframe.json"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.mainframe", "--small", "--json", str(out)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), *sys.path])),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["small"] and result["records"] == 20_000 and all(row["GB/s"] > 0 for row in result["rows"])
    assert "records -> Arrow (out=) / np.copyto" in result["ratios"]
