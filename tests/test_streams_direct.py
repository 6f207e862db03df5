"""The direct transpose of record streams (kernels/cpu/gather.py: ``direct_plan``,
``_direct_rows_at``): fields read in place through the index, a block at a time, with
the gathered way (packed rows, then the per-op kernels) for what it does not take.
Both ways must give the same tables; the direct one must not read a byte outside
the bytes its record's runs cover, and must fall back where a block's text is not
plain ASCII (the checks and faults are the gathered way's)."""

import ctypes
import functools
import struct
from pathlib import Path

import numpy as np
import pytest

import layouts as lo
from layouts.kernels import stream as K
from layouts.kernels.cpu import gather as G

S = lo.Stream


class _Made(list):
    gathered = None


@pytest.fixture
def plans(monkeypatch):
    """The direct plans made (None: the type went the gathered way), and a switch to
    read with the gathered way only (``plans.gathered()``)."""
    made = _Made()
    plan = G.direct_plan

    def spy(*args):
        made.append(plan(*args))
        return made[-1]

    monkeypatch.setattr(G, "direct_plan", spy)

    def gathered(src, spec):
        with monkeypatch.context() as m:
            m.setattr(K, "aos_to_soa_at", functools.partial(G.aos_to_soa_at, direct=False))
            return lo.read_stream(src, spec)

    made.gathered = gathered
    return made


def _same(a, b):
    assert list(a) == list(b)
    for name in a:
        assert a[name].to_arrow().equals(b[name].to_arrow()), name


def _itch(n, rng):
    """``n`` add_order messages (36 bytes behind a 2-byte length) with random fields."""
    out = bytearray()
    for i in range(n):
        stock = bytes(rng.integers(0x41, 0x5B, 8, dtype=np.uint8))
        body = (
            b"A"
            + struct.pack(">HH", i % 9000, i % 7)
            + int(rng.integers(0, 2**48)).to_bytes(6, "big")
            + struct.pack(">Q", int(rng.integers(0, 2**63)))
            + b"BS"[i % 2 : i % 2 + 1]
            + struct.pack(">I", int(rng.integers(0, 2**32)))
            + stock
            + struct.pack(">I", int(rng.integers(0, 2**32)))
        )
        out += len(body).to_bytes(2, "big") + body
    return out


def test_itch_blocks_with_and_without_plain_text_are_the_gathered_tables(plans):
    raw = _itch(700, np.random.default_rng(3))  # three blocks of rows (256 each)
    # block 2 holds a value that is UTF-8 but not ASCII (it goes the gathered way, which checks it)
    raw[300 * 38 + 2 + 24 : 300 * 38 + 2 + 26] = "É".encode()
    direct = lo.read_stream(bytes(raw), "itch50")
    assert plans and plans[0] is not None  # add_order went the direct way
    assert direct["add_order"]["stock"].to_arrow().to_pylist()[300].startswith("É")
    _same(direct, plans.gathered(bytes(raw), "itch50"))
    # the timestamp (6 bytes, widened) and the offsets, by hand
    ts = [int.from_bytes(raw[i * 38 + 7 : i * 38 + 13], "big") for i in range(700)]
    assert direct["add_order"]["timestamp"].to_arrow().to_pylist() == ts
    assert direct["add_order"]["_offset"].to_arrow().to_pylist() == [i * 38 for i in range(700)]


def test_a_nul_in_a_later_block_names_its_byte_as_the_gathered_way_did(plans):
    raw = _itch(600, np.random.default_rng(4))
    raw[520 * 38 + 2 + 24 + 3] = 0
    match = r"byte 19786: text field 'stock' of a itch50 section\[0\] type 'add_order' record \(at byte 19760\)"
    with pytest.raises(lo.ConversionError, match=match):
        lo.read_stream(bytes(raw), "itch50")
    with pytest.raises(lo.ConversionError, match=match):
        plans.gathered(bytes(raw), "itch50")


def _spec(fields, text=()):
    return S(
        [
            S.Section(
                S.Framing(length=S.Length(0, 1, "big")),
                [S.RecordType("r", S.Record(fields, text=text), "r")],
                tag=S.Tag(0, 1),
            )
        ]
    )


@pytest.mark.parametrize(
    ("fields", "direct"),
    [
        # a big-endian 6-byte field is read as the word ending with it, the 2 bytes before it cleared
        ([("k", "S1"), ("a", ">u2"), ("t", ">u6"), ("v", "<u4")], True),
        # a little-endian 3-byte field with bytes after it in the record: the word from it, the rest cleared
        ([("k", "S1"), ("x", "<u3"), ("v", ">u8")], True),
        # ... last in the record: the word would pass the record's end, so the gathered way
        ([("k", "S1"), ("v", ">u8"), ("x", "<u3")], False),
        # a big-endian 6-byte field right after the tag: the word would start before the record
        ([("k", "S1"), ("t", ">u6"), ("v", "<u2")], False),
        # a field of another kind (a bool) sends the whole type the gathered way
        ([("k", "S1"), ("b", "?"), ("v", "<u2")], False),
    ],
)
def test_widened_fields_read_in_place_or_gathered(plans, fields, direct):
    rng = np.random.default_rng(5)
    spec = _spec(fields, text=("k",))
    width = 1 + sum(int(t.lstrip("<>SuU?") or 1) for _, t in fields[1:])
    recs = []
    for i in range(300):
        body = bytearray(b"r" + bytes(rng.integers(0, 256, width - 1, dtype=np.uint8)))
        if any(t == "?" for _, t in fields):
            body[1] = i % 2
        recs.append(bytes(body))
    raw = b"".join(bytes([len(b)]) + b for b in recs)
    t = lo.read_stream(raw, spec)
    assert (plans[0] is not None) == direct
    _same(t, plans.gathered(raw, spec))
    pos = 1
    for name, typ in fields[1:]:
        n = int(typ.lstrip("<>SuU?") or 1)
        if typ[0] in "<>":
            want = [int.from_bytes(r[pos : pos + n], "big" if typ[0] == ">" else "little") for r in recs]
            assert t["r"][name].to_arrow().to_pylist() == want, name
        pos += n


def _tagged(types):
    """A stream description with ITCH's framing (a 2-byte big-endian length, a 1-byte tag)
    and the given ``(name, tag, fields)`` types, whose S fields are text."""
    return S(
        [
            S.Section(
                S.Framing(length=S.Length(0, 2, "big")),
                [
                    S.RecordType(name, S.Record(fields, text=tuple(n for n, t in fields if t[0] == "S")), tag)
                    for name, tag, fields in types
                ],
                tag=S.Tag(0, 1),
            )
        ]
    )


def _framed(bodies):
    return b"".join(len(b).to_bytes(2, "big") + b for b in bodies)


def _placed_after(monkeypatch, raw, spec):
    """The tables with the records placed by the scan first and converted after
    (aos_to_soa_types, which reads every field from the records): the oracle of the
    walk that converts as it places."""
    with monkeypatch.context() as m:
        m.setattr(K, "deferrable", lambda fr, unit: False)
        return lo.read_stream(raw, spec)


def test_a_types_tag_field_is_its_tag_without_reading_it(monkeypatch):
    spec = _tagged(
        [
            ("a", "A", [("k", "S1"), ("s", "S1"), ("v", ">u4")]),
            ("b", "B", [("k", "S1"), ("w", ">u2")]),
        ]
    )
    rng = np.random.default_rng(6)
    bodies = [
        b"A" + bytes([int(rng.integers(0x21, 0x7F))]) + struct.pack(">I", i) if i % 3 else b"B" + struct.pack(">H", i)
        for i in range(3000)
    ]
    raw = _framed(bodies)
    made = []
    plan = K.types_plan

    def spy(items, tags=None):
        made.append(plan(items, tags))
        return made[-1]

    monkeypatch.setattr(K, "types_plan", spy)
    t = lo.read_stream(raw, spec)
    which, p = made[0]
    assert p[8].tolist() == [ord("A"), -1, ord("B")]  # the tags' S1 fields, not the other
    assert t["a"]["k"].to_arrow().to_pylist() == ["A"] * 2000
    assert t["a"]["s"].to_arrow().to_pylist() == [b[1:2].decode() for b in bodies if b[:1] == b"A"]
    assert t["b"]["k"].to_arrow().to_pylist() == ["B"] * 1000
    _same(t, _placed_after(monkeypatch, raw, spec))
    assert lo.write_stream(t, spec) == raw


def test_a_tag_that_is_not_plain_ascii_is_read_and_checked(monkeypatch):
    # tag 0xC3 under an S1 field: not valid UTF-8 alone, so the field is read and checked
    spec = _tagged([("a", 0xC3, [("k", "S1"), ("v", ">u4")]), ("b", "B", [("k", "S1"), ("w", ">u2")])])
    raw = _framed([b"B\x00\x01", b"\xc3\x00\x00\x00\x07"])
    with pytest.raises(lo.ConversionError, match="UTF-8") as got:
        lo.read_stream(raw, spec)
    with pytest.raises(lo.ConversionError) as want:
        _placed_after(monkeypatch, raw, spec)
    assert str(got.value) == str(want.value)


def test_reads_into_reused_memory_are_the_same_tables(monkeypatch):
    """Columns come from pyarrow's memory pool, which hands a freed table's memory to the
    next read: every value is written again, and the bytes after each buffer up to its
    64-byte boundary are zeros, whatever the memory held."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent))  # (benchmarks/: not installed)
    from benchmarks.itch_day import day_bytes

    raw = day_bytes(300_000, seed=2)
    first = {name: t.to_arrow() for name, t in lo.read_stream(raw, "itch50").items()}
    for name, table in first.items():
        first[name] = pa_copy(table)
    for _ in range(3):
        t = lo.read_stream(raw, "itch50")
        for name, table in t.items():
            got = table.to_arrow()
            assert got.equals(first[name]), name
            for column, values in zip(got.column_names, got.columns):
                for buf in values.chunk(0).buffers() if column != "_offset" else ():  # (slices of one index)
                    if buf is not None and buf.size % 64:
                        pad = ctypes.string_at(buf.address + buf.size, -buf.size % 64)
                        assert pad == bytes(len(pad)), (name, column)
        del t, table, got


def test_pooled_memory_is_zero_after_its_end_to_the_next_64_bytes():
    from layouts._stream.frame import pooled

    for n in (1, 7, 8, 9, 1000, 100_003):
        a = pooled(n, np.int64)
        a[:] = -1
        del a
        b = pooled(n, np.int64)
        assert b.ctypes.data % 64 == 0 and b.shape == (n,) and b.dtype == np.int64
        assert ctypes.string_at(b.ctypes.data + 8 * n, -8 * n % 64) == bytes(-8 * n % 64)


def pa_copy(table):
    """A copy of an Arrow table in memory of its own (none shared with the read)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return pa.ipc.open_stream(sink.getvalue()).read_all()
