"""Attacks on the record streams (issue 26): edited tables, hostile descriptions, and the
findings of an attack on read_stream / write_stream / convert --stream, each a test
that failed before its fix."""

import io
import struct

import pyarrow as pa
import pytest

import layouts as lo

S = lo.Stream


def _msg(kind, qty, extra=b""):
    body = kind + struct.pack(">I", qty) + extra
    return struct.pack(">H", len(body)) + body


def _buysell(tail="error"):
    rec = S.Record([("side", "S1"), ("qty", ">u4")])
    return S(
        [
            S.Section(
                S.Framing(length=S.Length(offset=0, size=2, order="big")),
                [S.RecordType("buy", rec, tag="B"), S.RecordType("sell", rec, tag="S")],
                tag=S.Tag(offset=0, size=1),
                tail=tail,
            )
        ]
    )


DATA = _msg(b"B", 7) + _msg(b"S", 5) + _msg(b"B", 9)


def _set(table, name, values):
    table = table.to_arrow() if hasattr(table, "to_arrow") else table
    i = table.schema.get_field_index(name)
    return table.set_column(i, name, pa.array(values, table.schema.field(name).type))


# ------------------------------------------------ a field under the tag or the length field


def test_write_refuses_a_tag_field_edited_to_another_type():
    """The tag is a field of every type; a value in that column other than the type's
    tag used to be overwritten silently by the tag (the file said 'B' where the table
    said 'S')."""
    t = lo.read_stream(DATA, _buysell())
    edited = {"buy": _set(t["buy"], "side", [b"S", b"B"]), "sell": t["sell"]}
    with pytest.raises(
        lo.ConversionError,
        match=r"table 'buy', row 0: field 'side' holds b'S' \(83\), but it is the section's tag, and "
        r"type 'buy''s tag is 'B' \(66\); move the record to the table of its type, or set side to 'B'",
    ):
        lo.write_stream(edited, _buysell())
    assert lo.write_stream(t, _buysell()) == DATA  # the tables as read still go back exactly


def test_write_refuses_an_itch_message_type_edited():
    day = struct.pack(">H", 12) + b"S" + struct.pack(">HH", 1, 2) + (5).to_bytes(6, "big") + b"O"
    t = lo.read_stream(day, "itch50")
    assert lo.write_stream(t, "itch50") == day
    edited = dict(t)
    edited["system_event"] = _set(t["system_event"], "message_type", ["A"])
    with pytest.raises(
        lo.ConversionError, match=r"field 'message_type' holds b'A' \(65\), but it is the section's tag"
    ):
        lo.write_stream(edited, "itch50")


def _pcap():
    dpkt = pytest.importorskip("dpkt")
    buf = io.BytesIO()
    w = dpkt.pcap.Writer(buf)
    for i in range(3):
        w.writepkt(b"x" * (10 + i), ts=1.5 + i)
    return buf.getvalue()


def test_write_refuses_a_length_field_that_disagrees_with_the_record():
    """pcap's incl_len is a column and the length field: a value that does not say the
    record's size used to be replaced silently by the size."""
    raw = _pcap()
    t = lo.read_stream(raw, "pcap")
    bad = {"_header": t["_header"], "packet": _set(t["packet"], "incl_len", [99, 11, 12])}
    with pytest.raises(
        lo.ConversionError,
        match=r"table 'packet', row 0: field 'incl_len' holds 99, but it is the record's length field, "
        r"which must say 10 for this record of 26 bytes \(its fields and a _tail of 10 bytes\); set "
        r"incl_len to 10, or change the _tail",
    ):
        lo.write_stream(bad, "pcap", order=t.order)
    short = _set(t["packet"], "_tail", [b"ab", b"x" * 11, b"x" * 12])
    with pytest.raises(lo.ConversionError, match=r"row 0: field 'incl_len' holds 10, .* must say 2 "):
        lo.write_stream({"_header": t["_header"], "packet": short}, "pcap", order=t.order)
    both = _set(short, "incl_len", [2, 11, 12])  # the tail and its length changed together: written
    back = lo.read_stream(lo.write_stream({"_header": t["_header"], "packet": both}, "pcap", order=t.order), "pcap")
    assert back["packet"].to_arrow().column("incl_len").to_pylist() == [2, 11, 12]
    assert back["packet"].to_arrow().column("_tail").to_pylist()[0] == b"ab"


# ------------------------------------------------ _offset columns of the wrong type


@pytest.mark.parametrize(
    "values, kind",
    [
        (pa.array([0.5, 14.0]), "double"),
        (pa.array(["0", "14"]), "string"),
        (pa.array([2**63, 14], pa.uint64()), "uint64"),
    ],
)
def test_write_refuses_offsets_that_are_not_int64(values, kind):
    t = lo.read_stream(DATA, _buysell())
    buy = t["buy"].to_arrow()
    edited = {"buy": buy.set_column(0, "_offset", values), "sell": t["sell"]}
    with pytest.raises(lo.ConversionError, match=rf"table 'buy': _offset is {kind}.*expected integers"):
        lo.write_stream(edited, _buysell())


# ------------------------------------------------ numbers in a description that overflow


def _length_spec(**framing):
    return (
        "[[section]]\nframing = { length = { offset = %(offset)s, size = %(size)s, adjust = %(adjust)s }%(prefix)s }\n"
        '[section.types.t]\nfields=[["v","u1"]]\n'
    ) % framing


@pytest.mark.parametrize(
    "text, match",
    [
        (
            _length_spec(offset=0, size=8, adjust=2**63 - 1, prefix=""),
            r"section\[0\]\.framing\.length\.adjust: 9223372036854775807; expected an integer of at most 2\*\*40",
        ),
        (
            _length_spec(offset=0, size=1, adjust=-(2**63), prefix=""),
            r"section\[0\]\.framing\.length\.adjust: -9223372036854775808; expected an integer of at most 2\*\*40",
        ),
        (
            _length_spec(offset=2**63 - 8, size=8, adjust=0, prefix=""),
            r"section\[0\]\.framing\.length\.offset: 9223372036854775800; expected an integer >= 0 \(at most 2\*\*40\)",
        ),
        (
            _length_spec(offset=0, size=1, adjust=0, prefix=", prefix = 9223372036854775807"),
            r"section\[0\]\.framing\.prefix: 9223372036854775807; expected an integer >= 0 \(at most 2\*\*40\)",
        ),
        (
            "[[section]]\nframing = { length = { offset = 0, size = 8, unit = 9223372036854775807 } }\n"
            '[section.types.t]\nfields=[["v","u1"]]\n',
            r"section\[0\]\.framing\.length\.unit: 9223372036854775807; expected \"bytes\", \"words\" or an "
            r"integer 1\.\.2\*\*40",
        ),
        (
            '[[section]]\nframing = { size = 4 }\n[section.types.t]\nfields=[["v",">u4[4611686018427387904]"]]\n',
            r"section\[0\]\.types\.t\.fields\.v: '>u4\[4611686018427387904\]': a list of more than 2147483647 bytes",
        ),
        (
            '[[section]]\nframing = { size = 4 }\n[section.types.t]\nfields=[["v","S9223372036854775807"]]\n',
            r"section\[0\]\.types\.t\.fields\.v: 'S9223372036854775807': a field of more than 2147483647 bytes",
        ),
    ],
)
def test_description_numbers_beyond_any_file_are_layout_errors(tmp_path, text, match):
    p = tmp_path / "s.toml"
    p.write_text(text)
    with pytest.raises(lo.LayoutError, match=match):
        lo.read_stream(b"\x00" * 64, str(p))


def test_a_type_cannot_take_the_reserved_blocks_name(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('[[section]]\nframing = { size = 4 }\n[section.types._blocks]\nfields=[["v",">u4"]]\n')
    with pytest.raises(lo.LayoutError, match=r"section\[0\]\.types\._blocks: the name '_blocks' is taken"):
        lo.read_stream(b"\x00" * 8, str(p))


# ------------------------------------------------ records of no type, kept or not


def _keep_section(name, **kw):
    rec = S.Record([("side", "S1"), ("qty", ">u4")])
    framing = S.Framing(length=S.Length(offset=0, size=2, order="big"))
    return S.Section(framing, [S.RecordType(name, rec, tag="B")], tag=S.Tag(offset=0, size=1), unknown="keep", **kw)


def test_unknown_keep_in_two_sections_is_refused():
    """The one _unknown table cannot say which section a record came from: with two
    sections keeping them, read_stream used to keep only the last section's (the first
    one's records were lost) and write_stream wrote a different file."""
    with pytest.raises(
        lo.LayoutError,
        match=r"section\[1\]\.unknown: \"keep\" in section\[0\] and section\[1\]; the one _unknown table "
        r"cannot say which section a record came from: keep unknown records in one section",
    ):
        S([_keep_section("a", count="n"), _keep_section("b")], header=S.Record([("n", "u1")]))


def test_write_refuses_an_unknown_table_no_section_keeps():
    rec = S.Record([("side", "S1"), ("qty", ">u4")])
    framing = S.Framing(length=S.Length(offset=0, size=2, order="big"))
    spec = S([S.Section(framing, [S.RecordType("a", rec, tag="B")], tag=S.Tag(offset=0, size=1), unknown="skip")])
    t = dict(lo.read_stream(_msg(b"B", 1), spec))
    t["_unknown"] = pa.table({"_offset": pa.array([100], pa.int64()), "_tail": pa.array([_msg(b"z", 1)])})
    with pytest.raises(
        lo.ConversionError,
        match=r"table '_unknown' has 1 records, but no section of <stream> keeps unknown records "
        r"\(unknown = \"keep\"\); drop the table, or set unknown = \"keep\" in the section they belong to",
    ):
        lo.write_stream(t, spec)
    t["_unknown"] = t["_unknown"].slice(0, 0)  # an empty one is no loss
    assert lo.write_stream(t, spec) == _msg(b"B", 1)


# ------------------------------------------------ empty streams go back too


def test_an_empty_vb_file_goes_back(tmp_path):
    """An empty VB file read to empty tables used to fail on the way back with a bare
    ValueError (no blocks to frame), in write_stream and in convert DIR/ --to FILE."""
    import numpy as np

    from layouts._stream.files import convert_to_dir, scan_dir, write_back

    spec = S.bdw(np.dtype([("id", ">u4"), ("name", "S6")]))
    t = lo.read_stream(b"", spec)
    assert lo.write_stream(t, spec) == b""
    (tmp_path / "in.vb").write_bytes(b"")
    convert_to_dir(str(tmp_path / "in.vb"), spec, str(tmp_path / "out"), "parquet")
    write_back(scan_dir(str(tmp_path / "out"), spec), spec, str(tmp_path / "back.vb"), order=None)
    assert (tmp_path / "back.vb").read_bytes() == b""


# ------------------------------------------------ expressions: what the messages say


def _count_spec(tmp_path, count):
    p = tmp_path / "c.toml"
    p.write_text(
        '[header]\nfields = [["a", ">u4"], ["n", ">u4"]]\n[[section]]\ncount = "%s"\nframing = { size = 4 }\n'
        '[section.types.t]\nfields=[["v",">u4"]]\n' % count
    )
    return str(p)


def test_a_negative_count_says_negative(tmp_path):
    """A count below 0 was reported as 'more records than the bytes can hold'."""
    data = struct.pack(">II", 1, 5) + bytes(40)
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: c\.toml section\[0\]: count = '-n' is -5, a negative count; the header is damaged",
    ):
        lo.read_stream(data, _count_spec(tmp_path, "-n"))
    from layouts._stream.files import read_windows
    from layouts._stream.spec import load

    with pytest.raises(lo.ConversionError, match=r"count = '-n' is -5, a negative count"):
        list(read_windows(data, load(_count_spec(tmp_path, "-n"))))


@pytest.mark.parametrize("expr, fn", [("max()", "max"), ("min(n)", "min")])
def test_max_and_min_with_too_few_arguments_say_so(tmp_path, expr, fn):
    """'max()' was refused as 'uses Call max(); the only functions are max(...)'."""
    with pytest.raises(
        lo.LayoutError,
        match=rf"section\[0\]\.count: '{fn}\(n?\)' calls {fn}\(\) with fewer than 2 arguments; "
        rf"write {fn}\(a, b, \.\.\.\)",
    ):
        lo.read_stream(b"", _count_spec(tmp_path, expr))


# ------------------------------------------------ 8-byte tags with the top bit set


@pytest.mark.parametrize("torder", ["big", "little"])
def test_an_eight_byte_tag_past_int64(torder):
    """A tag value of 2**63 or more (an 8-byte tag) used to be an OverflowError on read."""
    ft = (">" if torder == "big" else "<") + "u8"
    big = 2**64 - 3
    rec = S.Record([("tg", ft), ("v", "u1")])
    spec = S(
        [
            S.Section(
                S.Framing(length=S.Length(offset=0, size=1)),
                [S.RecordType("hi", rec, tag=big), S.RecordType("lo", rec, tag=3)],
                tag=S.Tag(offset=0, size=8, order=torder),
            )
        ]
    )

    def r(tag, v):
        body = tag.to_bytes(8, torder) + bytes([v])
        return bytes([len(body)]) + body

    data = r(big, 1) + r(3, 2) + r(big, 4)
    t = lo.read_stream(data, spec)
    assert t["hi"].to_arrow().column("v").to_pylist() == [1, 4]
    assert t["hi"].to_arrow().column("tg").to_pylist() == [big, big]
    assert t["lo"].to_arrow().column("_offset").to_pylist() == [10]
    assert lo.write_stream(t, spec) == data
    with pytest.raises(lo.ConversionError, match=rf"record type tag {big - 1} .* is no type of"):
        lo.read_stream(r(big - 1, 1), spec)
    with pytest.raises(lo.ConversionError, match=r"type 'hi' record of 9 bytes, shorter than the type's 10"):
        lo.read_stream(b"\x08" + big.to_bytes(8, torder), spec)


# ------------------------------------------------ framing errors name the record type


@pytest.mark.parametrize(
    "data, match",
    [
        (
            _msg(b"S", 5) + _msg(b"B", 7)[:-1],
            r"byte 7: the record's length field .* past the end .*; the record is type 'buy'",
        ),
        (b"\x00\x00B", r"says 0, a record of 2 bytes, less than the 3 .*; the record is type 'buy' \(tag 66, b'B'\)"),
        (b"\x00\x05z", r"past the end .*; its tag 122 \(b'z'\) is no type of <stream> section\[0\]"),
        (
            _msg(b"S", 5) + b"\x00",
            r"byte 7: the last record is truncated: 1 bytes left.*; its tag is past the end of the data",
        ),
    ],
)
def test_framing_errors_name_the_record_type(data, match):
    """The issue asks every failure to name the record type: the length errors named
    only the byte."""
    with pytest.raises(lo.ConversionError, match=match):
        lo.read_stream(data, _buysell())


def test_framing_errors_of_a_single_type_section_name_it():
    raw = _pcap()
    with pytest.raises(
        lo.ConversionError, match=r"past the end of the data .*; the record is type 'packet' of pcap section\[0\]$"
    ):
        lo.read_stream(raw[:-1], "pcap")


def test_a_length_field_across_the_prefix_end_is_refused():
    """Half in the framing prefix, half in the fields: the field's half was overwritten
    silently by the computed length on the way back."""
    with pytest.raises(
        lo.LayoutError,
        match=r"section\[0\]\.framing\.length: bytes 1\.\.3 straddle the end of the framing prefix \(2 bytes\); "
        r"set prefix = 1 or 3",
    ):
        S(
            [
                S.Section(
                    S.Framing(length=S.Length(offset=1, size=2, order="big"), prefix=2),
                    [S.RecordType("r", S.Record([("a", "u1"), ("b", "u1")]))],
                )
            ]
        )


def test_a_length_field_past_a_types_fields_is_refused():
    """A length field in the bytes after a type's fields lay in the _tail: a tail edited
    there wrote a length that disagreed with the record, and a tail shorter than the field
    had the length stored past the end of the output buffer."""
    with pytest.raises(
        lo.LayoutError,
        match=r"section\[0\]\.framing\.length: the length field \(bytes 4\.\.5\) lies beyond type 'r''s "
        r"fields \(bytes 0\.\.1\); make it a field of every type, or part of the prefix",
    ):
        S(
            [
                S.Section(
                    S.Framing(length=S.Length(offset=4, size=1, counts_itself=True), prefix=0),
                    [S.RecordType("r", S.Record([("a", "u1")]))],
                    tail="column",
                )
            ]
        )


# ------------------------------------------------ an edited _blocks table


@pytest.mark.parametrize(
    "column, found",
    [
        (pa.array([b"abc"], pa.binary(3)), r"fixed_size_binary\[3\]"),
        (pa.array([b"ab"]), r"binary with a value of 2 bytes \(row 0\)"),
        (pa.array([5]), r"int64"),
        (pa.array([None], pa.binary(4)), r"fixed_size_binary\[4\] with 1 nulls"),
    ],
)
def test_write_refuses_block_words_that_are_not_4_bytes(column, found):
    """_blocks._prefix of another width or type was a bare pyarrow error, and a null was
    written as zeros."""
    import numpy as np

    spec = S.bdw(np.dtype([("id", ">u4"), ("name", "S6")]))
    records = [struct.pack(">HH", 14, 0) + struct.pack(">I", i) + b"NAME%02d" % i for i in range(3)]
    vb = struct.pack(">HH", 4 + sum(map(len, records)), 0) + b"".join(records)
    t = dict(lo.read_stream(vb, spec))
    t["_blocks"] = t["_blocks"].to_arrow().set_column(1, "_prefix", column)
    with pytest.raises(
        lo.ConversionError,
        match=rf"table '_blocks': _prefix is {found}; expected each block's 4 BDW bytes \(fixed_size_binary\[4\]\)",
    ):
        lo.write_stream(t, spec)


# ------------------------------------------------ random descriptions: the gather against an oracle

_POOL = ["u1", ">u2", "<u2", ">i4", "<i8", "<f8", ">f4", "S3", "S1", ">u3", "<u3", "<u5", ">u6", "<u7", "?", ">f4[3]"]


def _width(t):
    import numpy as np

    if t.endswith("]"):
        base, n = t[:-1].split("[")
        return np.dtype(base).itemsize * int(n)
    if t[0] == "S":
        return int(t[1:])
    return 1 if t == "?" else int(t.lstrip("<>")[1:])


def _decode(t, b):
    """A field's value from its bytes, by int.from_bytes / NumPy: no part of layouts."""
    import numpy as np

    if t.endswith("]"):
        base = t[:-1].split("[")[0]
        w = np.dtype(base).itemsize
        return [_decode(base, b[i : i + w]) for i in range(0, len(b), w)]
    if t[0] == "S":
        return b
    if t == "?":
        return b[0] != 0
    kind, order = t.lstrip("<>")[0], "big" if t[0] == ">" else "little"
    if kind in "ui":
        return int.from_bytes(b, order, signed=kind == "i")
    return float(np.frombuffer(b, np.dtype(t))[0])


@pytest.mark.parametrize("seed", range(6))
def test_random_descriptions_read_as_an_oracle_decodes_them(seed):
    """Many types, odd widths, both byte orders, tails: read_stream's columns (the fused
    gather through the offsets) equal a field-by-field decode, and the write is exact."""
    import random

    import numpy as np

    rng = random.Random(seed)
    lsize, lorder = rng.choice([1, 2, 4]), rng.choice(["big", "little"])
    tsize, torder = rng.choice([1, 2]), rng.choice(["big", "little"])
    tagf = "u1" if tsize == 1 else (">" if torder == "big" else "<") + "u2"
    tags = rng.sample(range(1, 250 if tsize == 1 else 3000), rng.randint(1, 12))
    types = [
        (f"t{k}", [("tagf", tagf)] + [(f"f{j}", rng.choice(_POOL)) for j in range(rng.randint(0, 7))], tg)
        for k, tg in enumerate(tags)
    ]
    tail = rng.choice(["column", "error"])
    spec = S(
        [
            S.Section(
                S.Framing(length=S.Length(offset=0, size=lsize, order=lorder)),
                [S.RecordType(n, S.Record(f), tag=tg) for n, f, tg in types],
                tag=S.Tag(offset=0, size=tsize, order=torder),
                tail=tail,
            )
        ]
    )
    want = {n: [] for n, _, _ in types}
    data = b""
    for _ in range(rng.randint(0, 3000)):
        name, fields, tg = rng.choice(types)
        body, row = tg.to_bytes(tsize, torder), {"_offset": len(data), "tagf": tg}
        for fn, ft in fields[1:]:
            if ft.lstrip("<>")[0] == "f":
                b = np.array(
                    [rng.uniform(-1e6, 1e6) for _ in range(_width(ft) // 4 if "4" in ft else 1)], ft.split("[")[0]
                ).tobytes()
            else:
                b = bytes(rng.randrange(2 if ft == "?" else 256) for _ in range(_width(ft)))
            body += b
            row[fn] = _decode(ft, b)
        if tail == "column":
            row["_tail"] = bytes(rng.randrange(256) for _ in range(rng.choice([0, 0, 1, 7])))
            body += row["_tail"]
        if len(body) < 1 << (8 * lsize):
            data += len(body).to_bytes(lsize, lorder) + body
            want[name].append(row)
    got = lo.read_stream(data, spec)
    for name, rows in want.items():
        assert got[name].to_arrow().to_pylist() == rows, name
    assert lo.write_stream(got, spec) == data


# ------------------------------------------------ mutated streams of random descriptions, in children

_FUZZ_CHILD = r"""
import random, struct, sys
import layouts as lo

S = lo.Stream
seed = int(sys.argv[1])
rng = random.Random(seed)
lsize, lorder = rng.choice([1, 2, 4]), rng.choice(["big", "little"])
cself, unit, adjust = rng.choice([True, False]), rng.choice([1, 1, 2, 4]), rng.choice([0, 0, 1, -1, 3])
tail, unknown = rng.choice(["column", "error"]), rng.choice(["error", "skip", "keep"])
tsize = rng.choice([1, 2])
types = []
for k in range(rng.randint(1, 5)):
    fields = [("tg", "u1" if tsize == 1 else ">u2")]
    fields += [(f"f{j}", rng.choice(["u1", ">u2", "<u3", ">u6", "S2", "<f8", ">i4"])) for j in range(rng.randint(0, 4))]
    types.append(S.RecordType(f"t{k}", S.Record(fields), tag=k + 1))
hdr = rng.choice([None, S.Record([("n", ">u4"), ("m", "u1")])])
kw = {"count": "n"} if hdr is not None and rng.random() < 0.5 else {}
length = S.Length(offset=0, size=lsize, order=lorder, unit=unit, counts_itself=cself, adjust=adjust)
spec = S([S.Section(S.Framing(length=length), types, tag=S.Tag(offset=0, size=tsize), tail=tail, unknown=unknown, **kw)], header=hdr)


def record(t):
    body = (types.index(t) + 1).to_bytes(tsize, "big") + bytes(rng.randrange(256) for _ in range(t.record.size("big") - tsize))
    body += bytes(rng.randrange(256) for _ in range(rng.choice([0, 0, unit * 2])))
    raw = len(body) + (lsize if cself else 0) - adjust
    if raw < 0 or raw % unit or raw // unit >= 1 << (8 * lsize):
        return b""
    return (raw // unit).to_bytes(lsize, lorder) + body


recs = [r for r in (record(rng.choice(types)) for _ in range(rng.randint(0, 40))) if r]
data = (struct.pack(">IB", len(recs), 0) if hdr is not None else b"") + b"".join(recs)
for m in range(int(sys.argv[2])):
    d = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if op == 0 and d:
            d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
        elif op == 1 and d:
            d[rng.randrange(len(d))] = rng.choice([0, 255, rng.randrange(256)])
        elif op == 2 and d:
            del d[rng.randrange(len(d)):]
        elif op == 3:
            i = rng.randrange(len(d) + 1)
            d[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 9)))
        elif op == 4 and d:
            i = rng.randrange(len(d))
            del d[i : i + rng.randint(1, 9)]
        elif op == 5 and len(d) > 8:
            i = rng.randrange(len(d) - 8)
            d[i : i + 4] = b"\xff\xff\xff\xff"
    d = bytes(d)
    try:
        t = lo.read_stream(d, spec)
    except lo.ConversionError as err:
        assert str(err).startswith("<buffer>"), (m, str(err))
        continue
    if unknown != "skip":  # skipped records are not written back (documented)
        assert lo.write_stream(t, spec) == d, m
print("done", seed)
"""


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_mutated_streams_of_random_descriptions_in_a_child(seed, tmp_path):
    """Length units, adjustments, counts_itself, tails, unknown tags, a header count:
    every mutation is a ConversionError naming <buffer>, or tables written back exactly;
    the child must not crash (a crash fails the test, not the run)."""
    import os
    import subprocess
    import sys

    child = tmp_path / "child.py"
    child.write_text(_FUZZ_CHILD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run(
        [sys.executable, str(child), str(seed), "150"], capture_output=True, text=True, timeout=300, env=env
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"done {seed}" in run.stdout


# ------------------------------------------------ nulls written back: what the error names and advises


def _odd_width():
    rec = S.Record([("side", "S1"), ("qty", ">u4"), ("x", ">u3")])
    return S(
        [
            S.Section(
                S.Framing(length=S.Length(offset=0, size=2, order="big")),
                [S.RecordType("buy", rec, tag="B")],
                tag=S.Tag(offset=0, size=1),
            )
        ]
    )


def test_a_null_written_back_names_the_type_the_field_as_declared_and_a_fill_that_exists():
    spec = _odd_width()
    raw = _msg(b"B", 7, b"\x00\x00\x01") + _msg(b"B", 9, b"\x00\x00\x02")
    t = dict(lo.read_stream(raw, spec))
    t["buy"] = _set(t["buy"], "x", [None, 2])
    with pytest.raises(lo.ConversionError) as err:
        lo.write_stream(t, spec)
    assert str(err.value) == (
        "table 'buy', row 0: column 'x' has 1 nulls, but field 'x' (>u3 at offset 5 in the record, 7 from its "
        "2-byte framing's start) of record type 'buy' cannot hold a null; pass fill={'buy': {'x': value}} to "
        "write a value in their place, or fill them in the table first (pyarrow.compute.fill_null) or drop "
        "those rows"
    )
    assert lo.write_stream(t, spec, fill={"buy": {"x": 1}}) == raw  # the advice works
    with pytest.raises(lo.LayoutError, match=r"fill: 'sell' is no record type of <stream> \(types: \['buy'\]\)"):
        lo.write_stream(t, spec, fill={"sell": {"x": 1}})
    with pytest.raises(lo.LayoutError, match=r"fill: 'buy' has no field 'y' \(its fields: side, qty, x\)"):
        lo.write_stream(t, spec, fill={"buy": {"y": 1}})
    with pytest.raises(lo.LayoutError, match=r"fill: expected \{record type: \{field: value\}\}"):
        lo.write_stream(t, spec, fill={"x": 1})
    with pytest.raises(lo.ConversionError, match=r"table 'buy': fill\['buy'\]\['x'\]='a' does not fit field 'x'"):
        lo.write_stream(t, spec, fill={"buy": {"x": "a"}})


def test_null_values_in_a_list_and_missing_lists_are_named():
    spec = S([S.Section(S.Framing(size=4), [S.RecordType("r", S.Record([("v", ">u1[2]"), ("x", ">u2")]))])])
    t = dict(lo.read_stream(b"\x01\x02\x00\x03" * 3, spec))
    t["r"] = _set(t["r"], "v", [[1, 2], [3, None], [3, 4]])
    with pytest.raises(
        lo.ConversionError,
        match=r"table 'r', row 1: column 'v' has 1 null values in its lists, but field 'v' \(>u1\[2\] at offset 0 "
        r"in the record\) of record type 'r' cannot hold a null; pass fill=\{'r': \{'v': value\}\}",
    ):
        lo.write_stream(t, spec)
    assert lo.write_stream(t, spec, fill={"r": {"v": 7}}) == b"\x01\x02\x00\x03\x03\x07\x00\x03\x03\x04\x00\x03"
    t["r"] = _set(t["r"], "v", [[1, 2], None, [3, 4]])
    with pytest.raises(
        lo.ConversionError,
        match=r"table 'r', row 1: column 'v' has 1 missing lists, .* a record has no place for a missing list: "
        r"fill them in the table first \(pyarrow.compute.fill_null\) or drop those rows",
    ):
        lo.write_stream(t, spec, fill={"r": {"v": 7}})


_COMPANY = (
    "       01  COMPANY.\n           05  SEG    PIC X.\n           05  NAME   PIC X(5).\n"
    "           05  AMT    PIC S9(3).\n"
)
_COMPANY_STREAM = """name = "companies"
[[section]]
framing = { length = { offset = 2, size = 2, order = "little" }, prefix = 4 }
tag = { offset = 0, size = 1 }
[section.types.C]
tag = "C"
copybook = "c.cob"
record = "COMPANY"
codepage = "ascii"
invalid = "null"
"""


def test_a_copybook_null_goes_back_with_fill_and_the_commands_fill(tmp_path, monkeypatch, capsys):
    """invalid = "null" makes bad bytes nulls; writing them back needs a value: the
    error says how (fill= in Python, --fill TYPE.FIELD=VALUE in the command), and both work."""
    (tmp_path / "c.cob").write_text(_COMPANY)
    (tmp_path / "s.toml").write_text(_COMPANY_STREAM)

    def r(b):
        return struct.pack("<HH", 0, len(b)) + b

    (tmp_path / "d.bin").write_bytes(r(b"CACME 12J") + r(b"CBAD  1 3"))
    spec = str(tmp_path / "s.toml")
    t = lo.read_stream(str(tmp_path / "d.bin"), spec)
    with pytest.raises(lo.ConversionError) as err:
        lo.write_stream(t, spec)
    assert str(err.value) == (
        "table 'C', row 1: column 'AMT' has 1 nulls, but field 'AMT' (zoned S9(3) invalid=null at offset 6 in the "
        "record, 10 from its 4-byte framing's start) of record type 'C' cannot hold a null; pass "
        "fill={'C': {'AMT': value}} to write a value in their place, or fill them in the table first "
        "(pyarrow.compute.fill_null) or drop those rows"
    )
    assert lo.write_stream(t, spec, fill={"C": {"AMT": 0}}) == r(b"CACME 12J") + r(b"CBAD  00{")

    from layouts._cli import main

    monkeypatch.chdir(tmp_path)

    def cmd(*argv):
        try:
            rc = main(["convert", *argv])
        except SystemExit as stop:  # argparse's usage errors
            rc = stop.code
        return rc, capsys.readouterr().err

    assert cmd("d.bin", "--stream", "s.toml", "--to", "out/", "--quiet")[0] == 0
    rc, err = cmd("out/", "--stream", "s.toml", "--to", "d2.bin")
    assert rc == 1 and "pass --fill C.AMT=VALUE to write a value in their place" in err, err
    assert "out/C.parquet" in err and "fill=" not in err
    for flag in ("C.AMT=0", "AMT=0"):  # the type named, or the one type with that field
        rc, err = cmd("out/", "--stream", "s.toml", "--to", "d2.bin", "--overwrite", "--quiet", "--fill", flag)
        assert rc == 0, err
        assert (tmp_path / "d2.bin").read_bytes() == r(b"CACME 12J") + r(b"CBAD  00{")
    for flag, want in (
        ("C.AMX=0", "--fill C.AMX=0: record type 'C' has no field 'AMX' (its fields: SEG, NAME, AMT)"),
        (
            "C.AMT=abc",
            "--fill C.AMT=abc: not a value of field 'AMT' (zoned S9(3) invalid=null, Arrow decimal128(3, 0))",
        ),
        ("Q=1", "--fill Q=1: no type has a field 'Q'; with --stream, --fill TYPE.FIELD=VALUE (types: C)"),
    ):
        rc, err = cmd("out/", "--stream", "s.toml", "--to", "d3.bin", "--fill", flag)
        assert rc == 2 and want in err, err
    rc, err = cmd("d.bin", "--stream", "s.toml", "--to", "out2/", "--fill", "C.AMT=0")
    assert rc == 2 and "--fill applies going back (a directory of tables -> the stream)" in err, err
