"""read_stream(tails="view"): ``_tail`` as Arrow binary_view into the source, equal to the
copied binary column, through every consumer; a path read privately (a file truncated
after the read cannot fault); the >2 GiB fallback by a small limit."""

import io
import pickle
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import layouts as lo
from layouts._stream import read as R

S = lo.Stream


def _pcap(order, nano, sizes, snaplen=65535, seed=0):
    """A classic pcap of packets of ``sizes`` bytes (``order`` "<" or ">"); a packet
    longer than ``snaplen`` is cut to it (orig_len keeps its size)."""
    rng = np.random.default_rng(seed)
    out = [struct.pack(order + "IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1)]
    for i, n in enumerate(sizes):
        data = rng.integers(0, 256, min(n, snaplen), dtype=np.uint8).tobytes()
        out.append(struct.pack(order + "IIII", 1_700_000_000 + i, i, len(data), n) + data)
    return b"".join(out)


def _nul_free(raw):
    """``raw`` (a little-endian pcap of _pcap) with each payload's NUL bytes made 1."""
    out, pos = bytearray(raw), 24
    while pos < len(out):
        n = struct.unpack_from("<I", out, pos + 8)[0]
        out[pos + 16 : pos + 16 + n] = bytes(out[pos + 16 : pos + 16 + n]).replace(b"\0", b"\1")
        pos += 16 + n
    return bytes(out)


def _back_to_records(soa, sizes, want):
    """``to_aos`` of a packet table: its tails as C strings, or, where a tail holds a NUL
    byte (which a C string would cut), the error that says so (never other bytes)."""
    if want is None:  # (the table's own values)
        want = soa.to_arrow().column("_tail").to_pylist()
        sizes = soa.to_arrow().column("incl_len").to_pylist()
    if any(b"\0" in w for w in want):
        with pytest.raises(
            lo.ConversionError, match="holds a NUL byte.*write the stream back with layouts.write_stream"
        ):
            soa.to_aos()
        return
    records = soa.to_aos().to_numpy()
    assert records["incl_len"].tolist() == sizes
    assert records["_tail"].tolist() == want


def _same(raw, **kw):
    """Both readings of ``raw``: every table equal value for value, tails as binary_view
    (valid: Arrow's full validation) over the source; returns the view tables."""
    copied = lo.read_stream(raw, "pcap", **kw)
    viewed = lo.read_stream(raw, "pcap", tails="view", **kw)
    assert list(copied) == list(viewed)
    for name in copied:
        a, b = copied[name].to_arrow(), viewed[name].to_arrow()
        if "_tail" in a.column_names:
            assert b.schema.field("_tail").type == pa.binary_view()
            b.column("_tail").chunk(0).validate(full=True)
            assert a.column("_tail").to_pylist() == b.column("_tail").to_pylist()
        assert a.drop_columns(["_tail"]).equals(b.drop_columns(["_tail"])) if "_tail" in a.column_names else a.equals(b)
    return viewed


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_views_equal_the_copied_tails_and_go_back(order, nano):
    # 0-length, inline (1..12 bytes: the 8-12 and 4-7 byte paths), just past inline, long, snaplen-cut
    sizes = [0, 1, 3, 4, 7, 8, 11, 12, 13, 16, 60, 1514, 0, 200, 12]
    raw = _pcap(order, nano, sizes, snaplen=100)
    t = _same(raw)
    rows = t["packet"].to_arrow().to_pylist()
    assert any(r["orig_len"] > r["incl_len"] for r in rows)
    assert lo.write_stream(t, "pcap") == raw


def test_views_point_into_the_source_and_keep_it_alive():
    raw = bytearray(_pcap("<", False, [40, 5, 300]))
    t = lo.read_stream(raw, "pcap", tails="view")
    col = t["packet"].to_arrow().column("_tail").chunk(0)
    data = col.buffers()[2]
    assert data.address == np.frombuffer(raw, np.uint8).ctypes.data  # the source itself: no copy
    raw[24 + 16] ^= 0xFF  # a writable source changed later changes the (non-inline) values
    assert col[0].as_py()[0] == raw[24 + 16]
    del raw, t
    assert len(col[2].as_py()) == 300  # the array holds the source


def test_views_of_gaps_and_unknown_records():
    s = S(
        [
            S.Section(
                S.Framing(length=S.Length(0, 1, "big"), size=None),
                [S.RecordType("x", S.Record([("kind", "S1"), ("v", "u1")]), tag="X")],
                tag=S.Tag(1, 1),
                tail="column",
                unknown="keep",
            )
        ]
    )
    rec = b"\x04X\x07ab" + b"\x02Y\x01" + b"\x0fZ" + bytes(range(14)) + b"\x02X\x09"  # (a length after itself)
    raw = rec
    a, b = lo.read_stream(raw, s), lo.read_stream(raw, s, tails="view")
    for name in ("x", "_unknown"):
        assert b[name].to_arrow().schema.field("_tail").type == pa.binary_view()
        assert a[name].to_arrow().column("_tail").to_pylist() == b[name].to_arrow().column("_tail").to_pylist()
    assert lo.write_stream(b, s) == raw
    gapped = struct.pack(">I", 0) + raw  # a header-less section at an offset: the bytes before it are a gap
    s2 = S([S.Section(s.sections[0].framing, s.sections[0].types, tag=s.sections[0].tag, tail="column",
                      unknown="keep", offset="4")])  # fmt: skip
    g = lo.read_stream(gapped, s2, tails="view")
    assert g["_gaps"].to_arrow().schema.field("_tail").type == pa.binary_view()
    assert g["_gaps"].to_arrow().column("_tail").to_pylist() == [b"\0\0\0\0"]
    assert lo.write_stream(g, s2) == gapped


def test_view_tables_through_their_consumers(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    raw = _pcap("<", False, [0, 9, 13, 700, 64])
    v, c = lo.read_stream(raw, "pcap", tails="view")["packet"], lo.read_stream(raw, "pcap")["packet"]
    want = c.to_arrow().column("_tail").to_pylist()
    assert list(v.to_pandas()["_tail"]) == want
    pq.write_table(v.to_arrow(), tmp_path / "p.parquet")
    assert pq.read_table(tmp_path / "p.parquet").column("_tail").to_pylist() == want
    back = pickle.loads(pickle.dumps(v))  # the source does not travel: the values come back copied
    assert back.to_arrow().column("_tail").to_pylist() == want
    assert back.to_arrow().schema.field("_tail").type == pa.binary()
    assert pa.table(v).column("_tail").to_pylist() == want  # the C stream interface
    _back_to_records(v, [0, 9, 13, 700, 64], want)
    for tails in ("copy", "view"):  # tails with no NUL byte: the records hold them
        _back_to_records(lo.read_stream(_nul_free(raw), "pcap", tails=tails)["packet"], None, None)


def test_views_from_a_path_are_private_memory(tmp_path):
    path = tmp_path / "cap.pcap"
    raw = _pcap("<", False, [50, 2000, 5] * 20)
    path.write_bytes(raw)
    t = lo.read_stream(path, "pcap", tails="view")
    assert (
        t["packet"].to_arrow().column("_tail").to_pylist()
        == lo.read_stream(raw, "pcap")["packet"].to_arrow().column("_tail").to_pylist()
    )


@pytest.mark.slow
def test_a_file_truncated_after_a_view_read_does_not_fault(tmp_path):
    """Views into a mapping would SIGBUS once the file shrinks: the path is read privately."""
    path = tmp_path / "cap.pcap"
    path.write_bytes(_pcap("<", False, [3000] * 200))
    code = textwrap.dedent(
        f"""
        import os, layouts as lo
        path = {str(path)!r}
        t = lo.read_stream(path, "pcap", tails="view")
        os.truncate(path, 100)
        total = sum(len(x) for x in t["packet"].to_arrow().column("_tail").to_pylist())
        print("read", total)
        """
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["read", str(3000 * 200)]


def test_past_the_int32_limit_several_data_buffers_or_the_copy():
    """The >2 GiB logic with a small ``limit`` (a view's int32 offset): overlapping data
    buffers of ``limit`` bytes every ``limit // 2``, or the copy for a tail too long."""
    sizes = [0, 5, 20, 13, 30, 12, 40, 1, 25, 33]
    raw = _pcap("<", False, sizes)
    t = lo.read_stream(raw, "pcap")["packet"]
    want = t.to_arrow().column("_tail").to_pylist()
    dt = t.layout.dtype
    layout = R.Layout.from_dtype(np.dtype([(n, dt.fields[n][0]) for n in dt.names if n != "_tail"]))
    base = lo.SoA(layout, len(t), t.parts().columns[:-1])
    offsets, buf = t["_offset"].to_numpy(), np.frombuffer(raw, np.uint8)
    starts, lengths = np.full(len(sizes), 16, np.int64), np.array(sizes, np.int64)  # (16: a packet's record header)

    def tails(limit):
        return R._with_tail(base, layout, buf, offsets, starts, lengths, views=True, limit=limit)

    one = tails(len(raw)).to_arrow().column("_tail").chunk(0)
    assert one.type == pa.binary_view() and len(one.buffers()) == 3  # the source, the one data buffer
    for limit in (80, 100, 257, len(raw) - 1):  # tails of at most limit // 2 + 1 bytes: several buffers
        soa = tails(limit)
        col = soa.to_arrow().column("_tail").chunk(0)
        assert col.type == pa.binary_view() and len(col.buffers()) > 3, limit
        col.validate(full=True)
        assert col.to_pylist() == want
        assert pickle.loads(pickle.dumps(soa)).to_arrow().column("_tail").to_pylist() == want
        _back_to_records(soa, sizes, want)
    copied = tails(64)  # a 40-byte tail is more than 64 - 32: the copy
    assert copied.to_arrow().schema.field("_tail").type == pa.binary()
    assert copied.to_arrow().column("_tail").to_pylist() == want


def test_tails_outside_the_source_are_refused_before_the_kernel():
    buf = np.zeros(100, np.uint8)
    with pytest.raises(lo.ConversionError, match=r"byte 90: a tail of 20 bytes lies outside the 100-byte stream"):
        R._tail_views(buf, np.array([0, 80], np.int64), np.array([0, 10], np.int64), np.array([5, 20], np.int64), 2,
                      R._BINARY_MAX)  # fmt: skip


def test_tails_argument_errors():
    raw = _pcap("<", False, [5])
    with pytest.raises(lo.LayoutError, match=r'tails must be "copy" .* or "view" .*, got \'views\''):
        lo.read_stream(raw, "pcap", tails="views")
    with pytest.raises(lo.LayoutError, match=r'with device="cuda" use tails="copy"'):
        lo.read_stream(raw, "pcap", device="cuda", tails="view")
    t = lo.read_stream(io.BytesIO(raw), "pcap", tails="view")  # a file object: its bytes, read once
    assert t["packet"].to_arrow().column("_tail").to_pylist()[0] == raw[-5:]


def test_write_stream_refuses_damaged_views():
    raw = _pcap("<", False, [20])
    t = lo.read_stream(raw, "pcap", tails="view")
    table = t["packet"].to_arrow()
    col = table.column("_tail").chunk(0)
    views = bytearray(col.buffers()[1].to_pybytes())
    views[12:16] = struct.pack("<i", 1000)  # the value's offset past its data buffer
    bad = pa.Array.from_buffers(pa.binary_view(), 1, [None, pa.py_buffer(bytes(views)), col.buffers()[2]])
    table = table.set_column(table.column_names.index("_tail"), "_tail", bad)
    with pytest.raises(lo.ConversionError, match=r"table 'packet': the _tail column's views are damaged \(View at"):
        lo.write_stream({"_header": t["_header"], "packet": table}, "pcap", order="little")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=30), st.sampled_from(["<", ">"]))
def test_random_packet_sizes(sizes, order):
    raw = _pcap(order, False, sizes, seed=len(sizes))
    t = _same(raw)
    assert lo.write_stream(t, "pcap") == raw


@pytest.mark.slow
def test_many_packets_on_the_kernels_threads():
    rng = np.random.default_rng(5)
    sizes = rng.integers(0, 1515, 60_000).tolist()
    raw = _pcap("<", True, sizes)
    t = _same(raw)
    assert lo.write_stream(t, "pcap") == raw


def test_a_column_whose_kind_and_buffers_disagree_is_refused_before_a_kernel_reads_it():
    """The defect behind the _tail fix: a binary column bound as fixed-width bytes made the
    way back read past it. reverse_ops now refuses such a column, naming the field."""
    from layouts._plan import ColumnBuffers

    soa = lo.read_stream(_pcap("<", False, [3, 5]), "pcap")["packet"]
    tail = soa._columns[-1]
    wrong = ColumnBuffers(tail.type, tail.length, tail.validity, tail.offsets, tail.data, 0, "copy")
    bad = lo.SoA(soa.layout, len(soa), list(soa._columns[:-1]) + [wrong])
    with pytest.raises(lo.LayoutError, match=r"field '_tail': its column is binary read as kind 'copy'"):
        bad.to_aos()
