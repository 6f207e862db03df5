"""Header-driven fixed-record sections (the built-in ``las``) through the paths made for
speed: the strided transpose with the index as ``_offset``, tables of types with no
records made once per layout, the ``_tail`` offsets of records without tails as fresh
zero pages, the header converted in place, the threaded arithmetic index. Each checked
against the bytes themselves (a NumPy view of the records), never against a time."""

import struct

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo
from layouts._stream import read as R
from layouts.kernels import stream as K

POINT = np.dtype(
    [
        ("X", "<i4"),
        ("Y", "<i4"),
        ("Z", "<i4"),
        ("intensity", "<u2"),
        ("bit_fields", "u1"),
        ("raw_classification", "u1"),
        ("scan_angle_rank", "i1"),
        ("user_data", "u1"),
        ("point_source_id", "<u2"),
        ("gps_time", "<f8"),
    ]
)  # LAS point format 1, 28 bytes
HEADER = 227  # LAS 1.2


def las12(n, record_length=28, count=None, vlr=b"", after=b"", signature=b"LASF", seed=0):
    """A LAS 1.2 file of ``n`` format-1 points of ``record_length`` bytes (extra bytes
    past 28: random), the header saying ``count`` points (default n): (bytes, points as
    a structured array, the extra bytes of each point)."""
    rng = np.random.default_rng(seed)
    points = np.zeros(n, POINT)
    for name in POINT.names:
        info = np.iinfo(POINT[name]) if POINT[name].kind in "iu" else None
        points[name] = rng.integers(info.min, info.max, n) if info else rng.random(n) * 1e6
    extra = rng.integers(0, 256, (n, record_length - 28), dtype=np.uint8)
    body = np.concatenate([points.view(np.uint8).reshape(n, 28), extra], axis=1).tobytes()
    start = HEADER + len(vlr)
    header = struct.pack(
        "<4sHHIHH8sBB32s32sHHHIIBHI5I12d",
        signature,
        0,
        0,
        0,
        0,
        0,
        b"\0" * 8,
        1,
        2,
        b"layouts".ljust(32, b"\0"),
        b"test".ljust(32, b"\0"),
        1,
        2026,
        HEADER,
        start,
        1 if vlr else 0,
        1,
        record_length,
        n if count is None else count,
        *([0] * 5),
        *([1.0] * 3 + [0.0] * 9),
    )
    assert len(header) == HEADER
    return header + vlr + body + after, points, [bytes(e) for e in extra]


def check_points(table, raw, points, extras, record_length, start=HEADER):
    n = len(points)
    got = table.to_arrow()
    got.validate(full=True)
    assert got.num_rows == n
    assert got.column("_offset").to_pylist() == [start + i * record_length for i in range(n)]
    for name in POINT.names:
        assert got.column(name).to_numpy().tolist() == points[name].tolist(), name
    assert got.schema.field("_tail").type == pa.binary()
    assert got.column("_tail").to_pylist() == extras


@pytest.mark.parametrize("n", [0, 1, 2, 65, 1000])
@pytest.mark.parametrize("record_length", [28, 31])
def test_points_are_the_records_and_go_back(n, record_length):
    raw, points, extras = las12(n, record_length, vlr=b"a VLR")
    t = lo.read_stream(raw, "las")
    check_points(t["format1"], raw, points, extras, record_length, HEADER + 5)
    assert t["_gaps"].to_arrow().to_pylist() == [{"_offset": HEADER, "_tail": b"a VLR"}]
    assert lo.write_stream(t, "las") == raw
    # the other point formats: no records, the columns of their types and a _tail
    for name in ("format0", "format6", "format10"):
        empty = t[name].to_arrow()
        empty.validate(full=True)
        assert empty.num_rows == 0 and empty.column_names[0] == "_offset" and empty.column_names[-1] == "_tail"


def test_tables_of_types_without_records_are_new_tables_each_read():
    """They are made once per layout and handed out as new SoAs over read-only columns:
    one read's table is not another's, and nothing written through one shows in the next."""
    raw, _, _ = las12(3)
    first, second = lo.read_stream(raw, "las"), lo.read_stream(raw, "las")
    assert first["format0"] is not second["format0"]
    assert first["format0"].to_arrow().equals(second["format0"].to_arrow())
    assert first["format0"].arena is None  # not an out= for to_soa: no arena to reuse
    with pytest.raises(lo.LayoutError, match="out= must be an SoA made by AoS.to_soa"):
        lo.AoS(np.zeros(0, first["format0"].layout.dtype)).to_soa(out=first["format0"])
    # an empty file of points: the point format's own table is empty too, and goes back
    raw, points, extras = las12(0)
    t = lo.read_stream(raw, "las")
    check_points(t["format1"], raw, points, extras, 28)
    assert t["format1"].to_arrow().schema.equals(lo.read_stream(las12(1)[0], "las")["format1"].to_arrow().schema)
    assert lo.write_stream(t, "las") == raw


def test_tail_offsets_as_fresh_zero_pages(monkeypatch):
    """Records without tails: the _tail offsets are mapped zero pages past _LAZY_ZEROS
    bytes (0 here, so that a small file takes that path): all zero, valid, and the
    table goes back byte for byte."""
    monkeypatch.setattr(R, "_LAZY_ZEROS", 0)
    raw, points, extras = las12(1000)
    t = lo.read_stream(raw, "las")
    check_points(t["format1"], raw, points, extras, 28)
    offsets = t["format1"].to_arrow().column("_tail").chunk(0).buffers()[1]
    assert offsets.size == 4 * 1001 and not np.frombuffer(offsets, np.int32).any()
    assert lo.write_stream(t, "las") == raw
    assert R._zeros(3, np.int32).tolist() == [0, 0, 0] and R._zeros(0, np.int64).shape == (0,)


def test_extra_bytes_copied_at_their_place_in_each_record(monkeypatch):
    """Tails of one size at one place in records one after another (LAS extra bytes) are
    one strided copy with offsets by arithmetic: the same column as the general gather,
    and large_binary where the tails pass _BINARY_MAX (made 10 bytes here)."""
    raw, points, extras = las12(300, 36)
    t = lo.read_stream(raw, "las")
    check_points(t["format1"], raw, points, extras, 36)
    stream = R.resolve("las")
    rec = stream.sections[0].types[1].record
    buf = np.frombuffer(raw, np.uint8)
    offsets = HEADER + 36 * np.arange(300, dtype=np.int64)
    general, _ = R._convert(buf, rec, "<", offsets, np.full(300, 36, np.int64), 0, False, "copy", "<buffer>", "p")
    assert general.to_arrow().equals(t["format1"].to_arrow())
    monkeypatch.setattr(R, "_BINARY_MAX", 10)
    t = lo.read_stream(raw, "las")
    tail = t["format1"].to_arrow().column("_tail")
    assert tail.type == pa.large_binary() and tail.to_pylist() == extras
    assert lo.write_stream(t, "las") == raw
    with pytest.raises(lo.ConversionError, match="pass the end of the stream"):
        R._fixed_tails(buf, HEADER, 300, 37, 28, 8, False)


def test_count_zero_leaves_the_points_to_the_gaps():
    raw, _, _ = las12(4, count=0)
    t = lo.read_stream(raw, "las")
    assert t["format1"].to_arrow().num_rows == 0
    assert t["_gaps"].to_arrow().to_pylist() == [{"_offset": HEADER, "_tail": raw[HEADER:]}]
    assert lo.write_stream(t, "las") == raw


def test_a_file_truncated_inside_the_points_names_the_file_the_byte_and_the_fix(tmp_path):
    raw, _, _ = las12(10)
    path = tmp_path / "cut.las"
    path.write_bytes(raw[:-5])  # the last point 5 bytes short
    with pytest.raises(
        lo.ConversionError,
        match=rf"cut.las: las section\[0\]: count = .* is 10, more records than the 275 bytes from byte {HEADER} "
        r"can hold; the header is damaged",
    ):
        lo.read_stream(path, "las")
    raw, _, _ = las12(10, count=11)  # the header says one more point than the file holds
    with pytest.raises(lo.ConversionError, match=r"is 11, more records than the 280 bytes"):
        lo.read_stream(raw, "las")
    bad = bytearray(las12(2)[0])
    bad[96:100] = struct.pack("<I", len(bad) + 1)  # offset_to_point_data past the end
    with pytest.raises(lo.ConversionError, match=rf"offset_to_point_data.* is {len(bad) + 1}, outside the file"):
        lo.read_stream(bytes(bad), "las")
    raw, _, _ = las12(3, after=b"xyz")  # bytes after the points: the gaps keep them
    assert lo.read_stream(raw, "las")["_gaps"].to_arrow().to_pylist() == [{"_offset": len(raw) - 3, "_tail": b"xyz"}]


@pytest.mark.parametrize(
    "signature, match",
    [
        (b"LA\0F", r"byte 0: text field 'file_signature' of a header record \(at byte 0\) holds a NUL byte"),
        (b"LA\xffF", r"byte 0: field 'file_signature' .* of a header record at byte 0: .*not valid UTF-8"),
    ],
)
def test_the_header_in_place_says_what_the_gathered_header_said(signature, match):
    """The header is one record converted where it lies (the strided transpose): a bad
    text field is the same error, word for word, as through the gathered transpose."""
    raw, _, _ = las12(1, signature=signature)
    with pytest.raises(lo.ConversionError, match=match) as strided:
        lo.read_stream(raw, "las")
    stream = R.resolve("las")
    buf = np.frombuffer(raw, np.uint8)
    hrec, h = R._header_record(stream, buf, "<", "<buffer>")
    with pytest.raises(lo.ConversionError) as gathered:
        R._convert(
            buf, hrec, "<", np.zeros(1, np.int64), np.full(1, h, np.int64), 0, False, False, "<buffer>", "header"
        )
    assert str(strided.value) == str(gathered.value)


def test_the_index_in_threads_is_the_arithmetic_sequence():
    n = 300_001  # 2.4 MB of offsets: more than one chunk with threads
    for threads in (1, 2, 3):
        out = np.full(n, -1, np.int64)
        K.arith_threaded(out, 227, 28, threads=threads)
        assert np.array_equal(out, 227 + 28 * np.arange(n, dtype=np.int64)), threads
    out = np.full(5, -1, np.int64)
    K.arith_threaded(out[:0], 9, 9)  # none: nothing written
    K.arith_threaded(out[:1], 9, 9)
    assert out.tolist() == [9, -1, -1, -1, -1]


def test_the_benchmark_of_fixed_records_runs(capsys):
    """``python -m benchmarks.streams --only fixed`` with two LAS sizes (a row each, the
    growth line) and SEG-Y: the rows, the _offset column alone and np.copyto in them."""
    pytest.importorskip("laspy")
    pytest.importorskip("segyio")
    from layouts.benchmarks import streams

    result = streams.main(["--only", "fixed", "--points", "2000", "4000", "--traces", "20", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "| LAS 1.2 format 1 |" in out and "| SEG-Y rev 1" in out and "LAS from 2,000 to 4,000 points" in out
    assert [r["records"] for r in result["las_by_size"]] == [2000, 4000] and result["las"]["records"] == 2000
    for row in result["las_by_size"] + [result["segy"]]:
        assert row["read_stream_s"] > 0 and row["read_records_s"] > 0 and row["copyto_s"] > 0
        assert row["offset_column_s"] > 0 and len(row["load_average"]) == 3
