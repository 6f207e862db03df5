"""``convert --stream`` in bounded memory: a stream read window by window
(``layouts._stream.files.read_windows``), each window's tables appended to the per-type
files (``convert_to_dir``). The windows together are read_stream's tables, whatever the
window (down to one byte: a record per window); the directory equals the whole-file
conversion's; a damaged stream gives read_stream's error and leaves nothing; and the peak
resident memory of a conversion grows with the window, not the file (measured in child
processes: ru_maxrss)."""

import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo
from layouts._stream import files as F
from layouts.benchmarks import itch_day
from layouts.benchmarks.streams import pcap_bytes

S = lo.Stream

POINTS = """
name = "points"
order = "little"
[header]
fields = [["signature", "S4"], ["offset_to_points", "<u4"], ["point_count", "<u4"], ["point_record_length", "<u2"]]
[[section]]
offset = "offset_to_points"
count = "point_count"
framing = { size = "point_record_length" }
tail = "column"
[section.types.point]
fields = [["x", "<i4"], ["y", "<i4"]]
"""

TWO = """
name = "two"
order = "little"
[header]
fields = [["n", "<u4"]]
[[section]]
count = "n"
framing = { size = 5 }
tag = { offset = 0, size = 1 }
unknown = "keep"
[section.types.a]
tag = "A"
fields = [["kind", "S1"], ["v", "<u4"]]
[section.types.b]
tag = "B"
fields = [["kind", "S1"], ["w", "<i4"]]
[[section]]
framing = { length = { offset = 0, size = 2, order = "little", unit = "words" } }
tail = "column"
[section.types.note]
fields = [["flags", "<u2"]]
"""

REC = np.dtype([("id", ">u4"), ("name", "S6")])


def _points(n=300, length=13):
    rng = np.random.default_rng(1)
    vlr = b"variable length records"
    body = b"".join(struct.pack("<ii", *map(int, rng.integers(-9, 9, 2))) + bytes(range(length - 8)) for _ in range(n))
    return struct.pack("<4sIIH", b"LASF", 14 + len(vlr), n, length) + vlr + body + b"trailer"


def _two(n=200):
    rng = np.random.default_rng(2)
    fixed = b"".join(
        (b"A" if k == 0 else b"B" if k == 1 else b"Z") + struct.pack("<I", i)
        for i, k in enumerate(rng.integers(0, 3, n))
    )
    notes = b"".join(struct.pack("<HH", 1 + i % 5, i) + b"xy" * (i % 5) for i in range(n))
    return struct.pack("<I", n) + fixed + notes


def _rdw(body):
    return struct.pack(">HH", len(body) + 4, 0) + body


def _vb(blocks=40):
    out = []
    for b in range(blocks):
        recs = b"".join(_rdw(struct.pack(">I", b * 10 + i) + b"NAME%02d" % i + b"t" * i) for i in range(1 + b % 7))
        out.append(struct.pack(">HH", 4 + len(recs), 0) + recs)
    return b"".join(out)


def _itch(messages=None):
    raw = itch_day.day_bytes(150_000, seed=1, slice_messages=2_000).tobytes()
    if messages is None:
        return raw
    at = 0
    for _ in range(messages):
        at += 2 + int.from_bytes(raw[at : at + 2], "big")
    return raw[:at]


def cases(tmp_path, small=False):
    """Streams of every kind of section; ``small``: a few dozen records each (for windows
    of a record or two, each window costs a table per type)."""
    (tmp_path / "points.toml").write_text(POINTS)
    (tmp_path / "two.toml").write_text(TWO)
    n = 30 if small else None
    return {
        "itch50": (_itch(n), "itch50"),
        "pcap": (pcap_bytes(n or 60), "pcap"),
        "points": (_points(n or 300), str(tmp_path / "points.toml")),
        "two": (_two(n or 200), str(tmp_path / "two.toml")),
        "vb": (_vb(n // 3 if n else 40), S.bdw(REC, tail="column")),
        "rdw": (
            b"".join(_rdw(struct.pack(">I", i) + b"ABCDEF" + b"x" * (i % 9)) for i in range(n or 100)),
            S.rdw(REC, tail="column"),
        ),
        "empty pcap": (pcap_bytes(1)[:24], "pcap"),
    }


def joined(windows, names):
    out = {}
    for name in names:
        parts = [w[name].to_arrow() for w in windows if name in w]
        if parts:
            out[name] = pa.concat_tables(parts)
    return out


@pytest.mark.parametrize("window", [1, 37, 8192, 1 << 20])
def test_windows_together_are_read_streams_tables(tmp_path, window):
    for what, (raw, spec) in cases(tmp_path, small=window < 100).items():
        path = tmp_path / "src.bin"
        path.write_bytes(raw)
        whole = lo.read_stream(raw, spec)
        for src in (raw, path):
            windows = list(F.read_windows(src, lo._stream.read.resolve(spec), window))
            got = joined(windows, list(whole))
            assert sorted(got) == sorted(whole), what
            for name, table in whole.items():
                assert got[name].equals(table.to_arrow()), (what, name, window)
            assert {w.order for w in windows} == {whole.order}
        if window == 1 and what != "vb":  # one record a window (or a few, once a window grew to hold one)
            records = [sum(len(t) for n, t in w.items() if n not in ("_header", "_gaps")) for w in windows]
            assert min(records) >= (0 if what in ("points", "two", "empty pcap") else 1) and max(records) <= 8, what
            assert len(windows) > sum(records) / 8


@pytest.mark.parametrize("fmt", ["parquet", "feather", "arrow", "arrows"])
@pytest.mark.slow
def test_the_directory_equals_the_whole_file_conversion(tmp_path, fmt):
    for what, (raw, spec) in cases(tmp_path).items():
        src = tmp_path / "src.bin"
        src.write_bytes(raw)
        stream = lo._stream.read.resolve(spec)
        whole = lo.read_stream(src, stream)
        a, b = tmp_path / f"{what}-whole", tmp_path / f"{what}-windows"
        F.write_dir(whole, stream, whole.order, str(a), fmt)
        written, order, counts = F.convert_to_dir(str(src), stream, str(b), fmt, window=8192)
        assert order == whole.order and sorted(written) == sorted(os.listdir(a))
        assert counts == F.table_bytes(stream, whole, whole.order)
        ta, oa, _ = F.read_dir(str(a), stream)
        tb, ob, _ = F.read_dir(str(b), stream)
        assert oa == ob and sorted(ta) == sorted(tb)
        for name in ta:
            assert ta[name].equals(tb[name]), (what, name)
        assert lo.write_stream(tb, stream, order=ob) == raw, what


def test_a_record_larger_than_the_window_gets_a_window_of_its_own():
    raw = pcap_bytes(5)
    windows = list(F.read_windows(raw, S.builtin("pcap"), 8))
    assert [len(w["packet"]) for w in windows] == [1] * 5
    assert windows[0]["_header"].to_arrow().num_rows == 1 and all("_header" not in w for w in windows[1:])


@pytest.mark.slow
def test_a_damaged_stream_gives_read_streams_error_and_no_directory(tmp_path):
    raw = bytearray(itch_day.day_bytes(150_000, seed=1, slice_messages=2_000).tobytes())
    offsets = lo.read_stream(bytes(raw), "itch50")["order_delete"]["_offset"].to_numpy()
    at = int(offsets[len(offsets) * 3 // 4])
    raw[at + 2] = ord("z")  # an unknown message type three quarters in
    src = tmp_path / "bad.itch"
    src.write_bytes(bytes(raw))
    with pytest.raises(lo.ConversionError) as whole:
        lo.read_stream(src, "itch50")
    with pytest.raises(lo.ConversionError) as windowed:
        F.convert_to_dir(str(src), S.builtin("itch50"), str(tmp_path / "d"), "parquet", window=4096)
    assert str(windowed.value) == str(whole.value)
    assert f"byte {at}: record type tag 122 (b'z')" in str(whole.value)
    assert sorted(os.listdir(tmp_path)) == ["bad.itch"]  # no directory, no temporary one
    # cut short: the last record is truncated, found in the last window
    src.write_bytes(bytes(raw[: at + 5]))
    with pytest.raises(
        lo.ConversionError,
        match=rf"byte {at}: the record's length field \(byte {at}\) says 19, a "
        r"record of 21 bytes, past the end of the data \(5 bytes left\)",
    ):
        F.convert_to_dir(str(src), S.builtin("itch50"), str(tmp_path / "d"), "parquet", window=4096)
    assert sorted(os.listdir(tmp_path)) == ["bad.itch"]


def test_window_argument_errors():
    with pytest.raises(lo.ConversionError, match=r"window = 0: the bytes read at a time must be at least 1"):
        list(F.read_windows(b"", S.builtin("itch50"), 0))


def test_the_command_converts_window_by_window(tmp_path, monkeypatch, capsys):
    from layouts._cli import main

    raw = itch_day.day_bytes(150_000, seed=2, slice_messages=2_000).tobytes()
    src = tmp_path / "day.itch"
    src.write_bytes(raw)
    seen = []
    real = F.read_windows

    def small(src, stream, window=F.WINDOW):
        for w in real(src, stream, 10_000):
            seen.append(w)
            yield w

    monkeypatch.setattr(F, "read_windows", small)
    assert main(["convert", str(src), "--stream", "itch50", "--to", str(tmp_path / "d")]) == 0
    assert len(seen) > 10
    n = sum(len(t) for k, t in lo.read_stream(raw, "itch50").items() if not k.startswith("_"))
    assert f"converted {src}: {n:,} records (" in capsys.readouterr().out
    assert main(["convert", str(tmp_path / "d"), "--stream", "itch50", "--to", str(tmp_path / "back.itch")]) == 0
    assert (tmp_path / "back.itch").read_bytes() == raw


CHILD = textwrap.dedent("""
    import json, resource, sys
    import layouts as lo
    from layouts._stream import files as F

    def status(key):  # kB
        with open("/proc/self/status") as f:
            return int(next(line for line in f if line.startswith(key)).split()[1])

    src, dst, how, window = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    stream = lo.Stream.builtin("itch50")
    F.convert_to_dir(sys.argv[5], stream, dst + "-warm", "parquet", window=window)  # compile, import: the baseline
    d = F.scan_dir(dst + "-warm", stream)
    F.write_back(d, stream, dst + "-warm.itch", order=d.order, window=window)
    try:  # reset the peak (VmHWM) to now, so a compile's peak before is not the baseline
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base, reset = status("VmRSS:"), True
    except OSError:
        base, reset = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, False
    if how == "windows":
        F.convert_to_dir(src, stream, dst, "parquet", window=window)
    elif how == "back":  # src: the directory
        d = F.scan_dir(src, stream)
        F.write_back(d, stream, dst, order=d.order, window=window)
    else:
        t = lo.read_stream(src, stream)
        F.write_dir(t, stream, t.order, dst, "parquet")
    peak = status("VmHWM:") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"base": base * 1024, "peak": peak * 1024}))
    print(how, (peak - base) / 1e3, "MB more", file=sys.stderr)
""")


@pytest.mark.slow
def test_peak_memory_is_bounded_by_the_window_not_the_file(tmp_path):
    """The peak resident memory a conversion adds (over a baseline: imports, compiled
    kernels, a small conversion; the peak is reset there through /proc/self/clear_refs,
    else it is ru_maxrss) is about the same for a file 4 times larger, and a fraction
    of what the whole-file conversion adds; the way back likewise."""
    window = 2 << 20
    quarter, big, small = tmp_path / "quarter.itch", tmp_path / "big.itch", tmp_path / "small.itch"
    for path, size in ((big, 48 << 20), (quarter, 12 << 20)):
        with open(path, "wb") as f:
            for chunk in itch_day.generate(size, seed=3):
                f.write(chunk.data)
    small.write_bytes(itch_day.day_bytes(200_000, seed=4).tobytes())

    def peak(how, src, dst):
        run = subprocess.run(
            [sys.executable, "-c", CHILD, str(src), str(tmp_path / dst), how, str(window), str(small)],
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        )
        assert run.returncode == 0, run.stderr
        got = json.loads(run.stdout)
        return got["peak"] - got["base"]

    four = peak("windows", big, "big")
    one = peak("windows", quarter, "quarter")
    whole = peak("whole", big, "whole")
    assert four < 2 * one, (four, one)  # bounded: 4x the file, not 4x the memory
    assert whole > os.path.getsize(big) / 2, whole  # the tables of the whole file
    assert four * 3 < whole, (four, whole)
    back_four = peak("back", tmp_path / "big", "big.back")
    back_one = peak("back", tmp_path / "quarter", "quarter.back")
    assert (tmp_path / "big.back").read_bytes() == big.read_bytes()
    assert back_four < 2 * back_one, (back_four, back_one)
    # the whole read took 216 MB before its index was sized up front, 189 now; the way back 95-103
    assert back_four * 3 < whole * 2, (back_four, whole)


# ------------------------------------------------------------------ the way back
@pytest.mark.slow
def test_the_way_back_goes_window_by_window(tmp_path, monkeypatch):
    import layouts._stream.write as W

    calls = []
    real = W.write_stream

    def counted(tables, spec, dst=None, **kw):
        calls.append(sum(len(t) for t in tables.values()))
        return real(tables, spec, dst, **kw)

    monkeypatch.setattr(W, "write_stream", counted)
    for what, (raw, spec) in cases(tmp_path).items():
        src = tmp_path / f"{what}.bin"
        src.write_bytes(raw)
        stream = lo._stream.read.resolve(spec)
        for fmt in ("parquet", "arrows"):
            d = tmp_path / f"{what}-{fmt}"
            F.convert_to_dir(str(src), stream, str(d), fmt, window=1 << 20)
            calls.clear()
            back = tmp_path / f"{what}-{fmt}.back"
            ds = F.scan_dir(str(d), stream)
            n = F.write_back(ds, stream, str(back), order=ds.order, window=3000 if what == "itch50" else 1000)
            assert back.read_bytes() == raw, (what, fmt)
            assert n == sum(len(t) for k, t in lo.read_stream(raw, stream).items() if not k.startswith("_"))
            windowed = what in ("itch50", "pcap", "rdw", "empty pcap")  # one section from the header to the end
            assert (len(calls) > 2) == (windowed and len(raw) > 3000), (what, calls)


def test_the_way_back_keeps_the_order_of_out_of_order_files_and_the_errors(tmp_path):
    import pyarrow.parquet as pq

    raw = _itch()
    src = tmp_path / "day.itch"
    src.write_bytes(raw)
    stream = S.builtin("itch50")
    d = tmp_path / "d"
    F.convert_to_dir(str(src), stream, str(d), "parquet")
    # a file no longer in _offset order (the rows reversed): read whole, write_stream orders them
    t = pq.read_table(d / "add_order.parquet")
    pq.write_table(t.take(list(range(t.num_rows - 1, -1, -1))), d / "add_order.parquet")
    back = tmp_path / "back.itch"
    ds = F.scan_dir(str(d), stream)
    F.write_back(ds, stream, str(back), order=ds.order, window=2000)
    assert back.read_bytes() == raw
    # a value that does not fit, late in the file: the error names its row in the file, as the whole way does
    t = pq.read_table(d / "order_delete.parquet")
    row = t.num_rows - 3
    ts = t.column("timestamp").to_pylist()
    ts[row] = 2**48  # more than the 6 bytes of an ITCH timestamp
    t = t.set_column(t.schema.get_field_index("timestamp"), "timestamp", pa.array(ts, pa.uint64()))
    pq.write_table(t, d / "order_delete.parquet")
    with pytest.raises(lo.ConversionError) as whole:
        lo.write_stream(F.read_dir(str(d), stream)[0], stream)
    ds = F.scan_dir(str(d), stream)
    with pytest.raises(lo.ConversionError) as windowed:
        F.write_back(ds, stream, str(tmp_path / "bad.itch"), order=ds.order, window=2000)
    assert str(windowed.value) == str(whole.value) and f"row {row}" in str(whole.value)
    assert not (tmp_path / "bad.itch").exists()


@pytest.mark.parametrize("window", [50, 700])
@pytest.mark.slow
def test_windows_of_the_builtin_formats(tmp_path, window):
    """LAS (a header that sizes itself, select, gaps before and after), SEG-Y (lists as
    long as a header field, an extended textual header) and DBN (a metadata section,
    then records framed in 4-byte words, unknown kept): windows are read_stream."""
    pytest.importorskip("laspy")
    pytest.importorskip("segyio")
    pytest.importorskip("databento_dbn")
    import test_streams_formats as TF

    las = TF._las("1.4", 6, n=40, vlr=True, evlr=True)[0]
    segy = TF._segy(str(tmp_path / "f.sgy"), 5, ext_headers=1)
    dbn = TF._dbn_file(TF._dbn_records(ts_out=True), ts_out=True)
    for raw, name in ((las, "las"), (segy, "segy"), (dbn, "dbn")):
        whole = lo.read_stream(raw, name)
        windows = list(F.read_windows(raw, S.builtin(name), window))
        got = joined(windows, list(whole))
        assert sorted(got) == sorted(whole), name
        for key, table in whole.items():
            assert got[key].equals(table.to_arrow()), (name, key)
        assert len(windows) > 2, name


def test_inspect_counts_window_by_window(tmp_path, capsys):
    from layouts._cli import main

    for what, (raw, spec) in cases(tmp_path).items():
        stream = lo._stream.read.resolve(spec)
        whole = lo.read_stream(raw, stream)
        order, header, counts = F.count_stream(raw, stream, 5000)
        assert order == whole.order and counts == F.table_bytes(stream, whole, whole.order), what
        assert (header is None) == ("_header" not in whole)
    src = tmp_path / "day.itch"
    src.write_bytes(cases(tmp_path)["itch50"][0])
    capsys.readouterr()
    assert main(["inspect", str(src), "--stream", "itch50"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{src}: a itch50 stream, {len(src.read_bytes()):,} bytes, byte order big\n")
