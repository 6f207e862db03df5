"""convert: streaming file conversion both ways, bounded memory, atomic output, the command."""

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REAL_GPU, TICK, ticks

import layouts as lo
from layouts._cli import main

FORMATS = ["parquet", "feather", "arrow"]
TICK_SCHEMA = lo.Layout.from_dtype(TICK).schema


@pytest.fixture
def tick_file(tmp_path):
    a = ticks(20_000)
    path = tmp_path / "ticks.bin"
    a.tofile(path)
    return path, a


def read(path, fmt):
    return pq.read_table(path) if fmt == "parquet" else pa.ipc.open_file(path).read_all()


@pytest.mark.parametrize("fmt", FORMATS)
def test_records_to_arrow_files_and_back_in_chunks(tick_file, tmp_path, fmt):
    path, a = tick_file
    dst = tmp_path / f"out.{fmt}"
    result = lo.convert(path, TICK, dst, chunk_bytes=100_000, nulls={"qty": -1})
    assert (result.records, result.bytes_in) == (20_000, a.nbytes)
    table = read(dst, fmt)
    assert table.equals(lo.AoS(a).to_soa(nulls={"qty": -1}).to_arrow())
    assert len(table.to_batches()) == -(-a.nbytes // (100_000 // TICK.itemsize * TICK.itemsize))
    back = tmp_path / "back.bin"
    lo.convert(dst, TICK, back, chunk_bytes=77_777, fill={"qty": -1})
    assert back.read_bytes() == lo.AoS(a).to_soa().to_aos().array.tobytes()


def test_outputs_are_read_by_polars_and_duckdb(tick_file, tmp_path):
    import duckdb
    import polars as pl

    path, a = tick_file
    lo.convert(path, TICK, tmp_path / "t.parquet", chunk_bytes=1 << 16)
    lo.convert(path, TICK, tmp_path / "t.arrow", chunk_bytes=1 << 16)
    assert pl.read_parquet(tmp_path / "t.parquet")["qty"].sum() == a["qty"].sum()
    assert pl.read_ipc(tmp_path / "t.arrow")["px"].sum() == pytest.approx(a["px"].sum())
    rows = duckdb.sql(f"select count(*), sum(qty) from '{tmp_path / 't.parquet'}'").fetchall()
    assert rows == [(20_000, int(a["qty"].sum()))]


def test_overlapped_and_serial_runs_write_the_same_file(tick_file, tmp_path):
    path, _ = tick_file
    lo.convert(path, TICK, tmp_path / "a.arrow", chunk_bytes=50_000, overlap=True)
    lo.convert(path, TICK, tmp_path / "b.arrow", chunk_bytes=50_000, overlap=False)
    assert read(tmp_path / "a.arrow", "arrow").equals(read(tmp_path / "b.arrow", "arrow"))
    # and back: batches read ahead by a thread, records written by another, two buffers
    for name, overlap in (("a.bin", True), ("b.bin", False)):
        lo.convert(tmp_path / "a.arrow", TICK, tmp_path / name, chunk_bytes=30_000, overlap=overlap)
    assert (tmp_path / "a.bin").read_bytes() == (tmp_path / "b.bin").read_bytes() == path.read_bytes()
    with pa.ipc.new_stream(tmp_path / "s.arrows", TICK_SCHEMA) as w:  # the IPC stream format too
        w.write_table(read(tmp_path / "a.arrow", "arrow"))
    lo.convert(tmp_path / "s.arrows", TICK, tmp_path / "s.bin", format="records", chunk_bytes=30_000)
    assert (tmp_path / "s.bin").read_bytes() == path.read_bytes()


def _peaks(tmp_path, src, dst):
    """Peak NumPy (tracemalloc) and Arrow pool bytes of one convert in a fresh process."""
    code = f"""
import tracemalloc, json, numpy as np, pyarrow as pa, layouts as lo
dtype = np.dtype({TICK.descr!r}, align=True)
np.zeros(100, dtype).tofile({str(tmp_path / "warm.bin")!r})  # load the kernels before measuring
lo.convert({str(tmp_path / "warm.bin")!r}, dtype, {str(tmp_path / "warm.arrow")!r}, overwrite=True)
tracemalloc.start()
lo.convert({str(tmp_path / src)!r}, dtype, {str(tmp_path / dst)!r}, chunk_bytes=1 << 20)
print(json.dumps({{"numpy_peak": tracemalloc.get_traced_memory()[1],
                  "arrow_peak": pa.default_memory_pool().max_memory()}}))
"""
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    return json.loads(run.stdout)


@pytest.mark.slow
def test_peak_memory_is_bounded_by_the_chunks_not_the_file(tmp_path):
    path = tmp_path / "big.bin"
    ticks(1_000_000).tofile(path)  # 48 MB, 48 chunks of 1 MB
    peaks = _peaks(tmp_path, "big.bin", "big.arrow")
    assert peaks["numpy_peak"] < 8 << 20, peaks  # a few 1 MB chunks, not 48 MB
    assert peaks["arrow_peak"] < 8 << 20, peaks
    pq.write_table(read(tmp_path / "big.arrow", "arrow"), tmp_path / "big.parquet", row_group_size=20_000)
    for src in ("big.arrow", "big.parquet"):  # and back: batches read ahead, two record buffers
        peaks = _peaks(tmp_path, src, f"back-{src}.bin")
        assert peaks["numpy_peak"] < 8 << 20 and peaks["arrow_peak"] < 8 << 20, (src, peaks)
        assert (tmp_path / f"back-{src}.bin").read_bytes() == path.read_bytes()


def test_existing_output_is_refused_and_a_failure_leaves_it_untouched(tick_file, tmp_path):
    path, a = tick_file
    dst = tmp_path / "out.parquet"
    dst.write_bytes(b"old")
    with pytest.raises(lo.LayoutError, match=r"out.parquet exists; pass overwrite=True"):
        lo.convert(path, TICK, dst)
    bad = a.copy()
    bad["sym"][15_000] = b"\xff\xfe"  # not UTF-8, in a late chunk
    bad.tofile(tmp_path / "bad.bin")
    layout = lo.Layout.from_dtype(TICK, bytes_as={"sym": "string"})
    with pytest.raises(
        lo.ConversionError,
        match=r"bad.bin: field 'sym' \(\|S8 at offset 21\), record 15000 \(byte "
        r"720000 of the file\): .*b'\\xff\\xfe'\) is not valid UTF-8; map the field to bytes",
    ):
        lo.convert(tmp_path / "bad.bin", layout, dst, chunk_bytes=100_000, overwrite=True)
    assert dst.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.bin", "out.parquet", "ticks.bin"]

    def interrupt(records, nbytes, total):
        if records > 5000:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lo.convert(path, TICK, tmp_path / "new.arrow", chunk_bytes=50_000, progress=interrupt)
    assert not (tmp_path / "new.arrow").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.bin", "out.parquet", "ticks.bin"]


@pytest.mark.slow
def test_a_killed_process_leaves_no_partial_output(tmp_path):
    path = tmp_path / "big.bin"
    ticks(400_000).tofile(path)
    marker = tmp_path / "started"
    code = f"""
import time, numpy as np, layouts as lo, pathlib
def slow(records, nbytes, total):
    pathlib.Path({str(marker)!r}).touch()
    time.sleep(0.5)
lo.convert({str(path)!r}, np.dtype({TICK.descr!r}, align=True), {str(tmp_path / "out.parquet")!r},
           chunk_bytes=1 << 20, progress=slow)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": os.getcwd()})
    for _ in range(600):
        if marker.exists():
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert marker.exists() and not (tmp_path / "out.parquet").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE and SIGXFSZ as on Linux")
@pytest.mark.slow
def test_a_failed_write_names_the_destination_and_leaves_it_as_it_was(tmp_path):
    path = tmp_path / "big.bin"
    ticks(100_000).tofile(path)  # 4.8 MB
    lo.convert(path, TICK, tmp_path / "big.arrow")
    (tmp_path / "old.arrow").write_bytes(b"old")
    code = f"""
import resource, signal, sys, numpy as np, layouts as lo
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # as a disk that fills after 1 MiB
dtype = np.dtype({TICK.descr!r}, align=True)
for src, dst, overlap in [("big.bin", "old.arrow", True), ("big.bin", "new.parquet", False),
                          ("big.arrow", "back.bin", True), ("big.arrow", "back.bin", False)]:
    try:
        lo.convert(src, dtype, dst, chunk_bytes=400_000, overlap=overlap, overwrite=True, compression="none")
    except OSError as err:
        print(err)
    else:
        sys.exit("no error for " + dst)
"""
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 4
    for line, dst in zip(lines, ["old.arrow", "new.parquet", "back.bin", "back.bin"]):
        assert re.fullmatch(
            rf"\[Errno {errno.EFBIG}\] writing {dst} failed after [\d,]+ bytes of output: File too "
            r"large \(the destination was left as it was\)",
            line,
        ), line
    assert (tmp_path / "old.arrow").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.arrow", "big.bin", "old.arrow"]


def test_a_full_disk_says_what_to_do(tmp_path, monkeypatch):
    from layouts import _convert

    path = tmp_path / "ticks.bin"
    ticks(1000).tofile(path)

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_convert.BlockReservation, "ahead", full)  # as the first write of a batch would fail
    with pytest.raises(
        OSError,
        match=r"writing .*out.arrow failed after [\d,]+ bytes of output: No space left on "
        r"device; free space there or write elsewhere \(the destination was left as it was\)",
    ):
        lo.convert(path, TICK, tmp_path / "out.arrow")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ticks.bin"]


def test_partial_records_and_header_offsets(tmp_path):
    dtype = np.dtype([("a", "<i4"), ("b", "<f4")])
    data = np.arange(10, dtype="<i8").view(dtype).tobytes()
    (tmp_path / "p.bin").write_bytes(b"HEAD" + data + b"xyz")
    with pytest.raises(
        lo.LayoutError, match=r"p.bin has 83 bytes of records: 10 records of 8 bytes and 3 bytes left over"
    ):
        lo.convert(tmp_path / "p.bin", dtype, tmp_path / "p.arrow", offset=4)
    with pytest.warns(UserWarning, match="skipped those 3 bytes"):
        result = lo.convert(tmp_path / "p.bin", dtype, tmp_path / "p.arrow", offset=4, trailing="ignore")
    assert result.records == 10 and read(tmp_path / "p.arrow", "arrow").column("a").to_pylist() == list(range(10))


def test_reverse_errors_name_the_records(tmp_path):
    pq.write_table(
        pa.table({"a": pa.array([1, None], pa.int32()), "b": pa.array([1.0, 2.0], pa.float32())}),
        tmp_path / "n.parquet",
    )
    with pytest.raises(
        lo.ConversionError, match=r"n.parquet, row group 0, rows 0 to 2: column 'a' has 1 nulls \(first at row 1\)"
    ):
        lo.convert(tmp_path / "n.parquet", np.dtype([("a", "<i4"), ("b", "<f4")]), tmp_path / "n.bin")
    assert not (tmp_path / "n.bin").exists()
    # an error in the first of several batches, while the reader thread is ahead: no hang
    t = pa.table({"a": pa.array([None] + list(range(299)), pa.int32())})
    with pa.ipc.new_file(tmp_path / "h.arrow", t.schema) as w:
        for b in t.to_batches(max_chunksize=100):
            w.write_batch(b)
    with pytest.raises(lo.ConversionError, match=r"h.arrow, batch 0, rows 0 to 100: column 'a' has 1 nulls"):
        lo.convert(tmp_path / "h.arrow", np.dtype([("a", "<i4")]), tmp_path / "h.bin")
    assert not (tmp_path / "h.bin").exists()
    (tmp_path / "junk.bin").write_bytes(b"not arrow at all")
    with pytest.raises(lo.LayoutError, match=r"junk.bin is neither Parquet nor Arrow IPC"):
        lo.convert(tmp_path / "junk.bin", np.dtype([("a", "<i4")]), tmp_path / "j.bin")


# ---------------------------------------------------------------------- command


@pytest.mark.slow
def test_convert_command_with_a_c_header_and_stdin(tmp_path, capsys):
    header = tmp_path / "rec.h"
    header.write_text("#include <stdint.h>\nstruct rec { int32_t id; float x; uint16_t f:3, g:13; };\n")
    layout = lo.Layout.from_c(header, "struct rec")
    table = pa.table(
        {
            "id": pa.array(range(1000), pa.int32()),
            "x": pa.array(np.ones(1000, np.float32)),
            "f": pa.array(np.arange(1000) % 8, pa.uint16()),
            "g": pa.array(np.arange(1000) % 8192, pa.uint16()),
        }
    )
    raw = lo.SoA.from_arrow(table, layout).to_aos().array.tobytes()
    (tmp_path / "rec.bin").write_bytes(raw)
    assert (
        main(
            [
                "convert",
                str(tmp_path / "rec.bin"),
                "--struct",
                f"{header}:struct rec",
                "--to",
                str(tmp_path / "rec.parquet"),
                "--chunk",
                "4k",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("converted 1,000 records, 12.0 kB in")
    assert out.rstrip().endswith("(on cuda)" if REAL_GPU else "(on cpu)")  # --device auto
    assert pq.read_table(tmp_path / "rec.parquet").equals(table)
    assert (
        main(["convert", str(tmp_path / "rec.parquet"), "--struct", str(header), "--to", str(tmp_path / "back.bin")])
        == 0
    )
    assert (tmp_path / "back.bin").read_bytes() == raw
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "layouts",
            "convert",
            "-",
            "--dtype",
            "[('id','<i4'),('x','<f4'),('w','<u4')]",
            "--to",
            str(tmp_path / "stdin.arrow"),
            "--quiet",
        ],
        input=raw,
        capture_output=True,
    )
    assert run.returncode == 0, run.stderr
    assert read(tmp_path / "stdin.arrow", "arrow").column("id").to_pylist() == list(range(1000))
    # --device cuda: the GPU, or the simulator without one (this process set it up)
    assert (
        main(
            [
                "convert",
                str(tmp_path / "rec.bin"),
                "--struct",
                f"{header}:struct rec",
                "--to",
                str(tmp_path / "gpu.arrow"),
                "--device",
                "cuda",
                "--chunk",
                "4k",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.rstrip().endswith("(on cuda)")
    assert read(tmp_path / "gpu.arrow", "arrow").equals(table)


@pytest.mark.slow  # (the fast loop keeps a lighter one of its kind)
def test_convert_command_errors_are_one_line(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"1234567")
    (tmp_path / "a.arrow").write_bytes(b"old")
    cases = [
        (["--dtype", "[('a','<i4')]", "--to", str(tmp_path / "a.arrow")], "a.arrow exists; pass --overwrite"),
        (
            ["--dtype", "[('a','<i4')]", "--to", str(tmp_path / "b.arrow")],
            "7 bytes of records: 1 records of 4 bytes and 3 bytes left over",
        ),
        (
            ["--dtype", "nonsense", "--to", str(tmp_path / "b.arrow")],
            "--dtype 'nonsense' is not a NumPy structured dtype",
        ),
    ]
    if not REAL_GPU:
        cases.append(
            (
                [
                    "--dtype",
                    "[('a','<i4')]",
                    "--to",
                    str(tmp_path / "b.arrow"),
                    "--device",
                    "cuda",
                    "--trailing",
                    "ignore",
                ],
                "no usable CUDA GPU and driver were found",
            )
        )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    for extra, message in cases:
        run = subprocess.run(
            [sys.executable, "-m", "layouts", "convert", str(tmp_path / "a.bin"), *extra],
            capture_output=True,
            text=True,
            env=env,
        )
        usage = message.startswith("--dtype")  # a wrong command line: status 2
        assert run.returncode == (2 if usage else 1) and message in run.stderr and "Traceback" not in run.stderr, (
            run.stderr
        )
        lines = run.stderr.strip().splitlines()  # one error line, after one line per warning
        assert lines[-1].startswith("layouts convert: error: ")
        assert all(line.startswith("layouts convert: warning: ") for line in lines[:-1]), lines
    assert (tmp_path / "a.arrow").read_bytes() == b"old" and not (tmp_path / "b.arrow").exists()


def test_bad_arguments_are_named(tmp_path):
    dtype = np.dtype([("a", "<i4")])
    (tmp_path / "a.bin").write_bytes(bytes(8))
    src = tmp_path / "a.bin"
    cases = [
        (
            dict(dst=tmp_path / "x.arrow", format="csv"),
            r"format must be one of \('parquet', 'feather', 'arrow', 'arrows', 'records'\), got 'csv'",
        ),
        (dict(dst=tmp_path / "x.arrow", chunk_bytes=0), r"chunk_bytes must be positive, got 0"),
        (dict(dst=tmp_path, overwrite=True), r"is a directory; give a file path for the output"),
        (dict(dst=tmp_path / "no" / "x.arrow"), r"the directory of .*x.arrow does not exist"),
        (dict(dst=tmp_path / "x.arrow", trailing="drop"), r"trailing must be 'error' or 'ignore', got 'drop'"),
        (dict(dst=tmp_path / "x.arrow", offset=9), r"a.bin is 8 bytes, shorter than the 9-byte header offset"),
    ]
    for kwargs, message in cases:
        dst = kwargs.pop("dst")
        with pytest.raises(lo.LayoutError, match=message):
            lo.convert(src, dtype, dst, **kwargs)
    with pytest.raises(lo.LayoutError, match=r"cannot read records from '.*nope.bin': No such file"):
        lo.convert(tmp_path / "nope.bin", dtype, tmp_path / "x.arrow")
    with pytest.raises(lo.LayoutError, match=r"convert takes a path or a binary file object, got int"):
        lo.convert(3, dtype, tmp_path / "x.arrow")
    import io

    with pytest.raises(lo.LayoutError, match=r"the input ended after 8 bytes, inside the 16-byte header"):
        lo.convert(io.BytesIO(bytes(8)), dtype, tmp_path / "x.arrow", offset=16)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]


def test_command_argument_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["convert", "x.bin", "--dtype", "[('a','<i4')]", "--to", "x.arrow", "--chunk", "lots"])
    assert exit_.value.code == 2 and "expected a size like 64M, 1G or 65536, got 'lots'" in capsys.readouterr().err
    empty = tmp_path / "empty.h"
    empty.write_text("typedef int counter;\n")
    assert main(["inspect", str(empty)]) == 1
    assert f"layouts inspect: error: {empty} defines no struct or union" in capsys.readouterr().err


# --------------------------------------------- on the GPU (the CUDA simulator without one)

GPU_SIZES = dict(records=330, chunk=48 * 75) if not REAL_GPU else dict(records=2_000_000, chunk=8 << 20)


@pytest.mark.slow
@pytest.mark.parametrize("overlap", [True, False])
def test_records_to_arrow_on_the_gpu_in_overlapped_chunks(tmp_path, overlap):
    """Five chunks through three slots (streams, pinned buffers): the CPU's table, batch
    for batch, with nulls, C strings and the short last chunk."""
    a = ticks(GPU_SIZES["records"], seed=4)
    a.tofile(tmp_path / "t.bin")
    layout = lo.Layout.from_dtype(TICK, bytes_as={"sym": "string"})
    for fmt in ("arrow", "parquet") if overlap else ("arrow",):
        dst = tmp_path / f"gpu.{fmt}"
        result = lo.convert(
            tmp_path / "t.bin",
            layout,
            dst,
            device="cuda",
            chunk_bytes=GPU_SIZES["chunk"],
            nulls={"qty": -1},
            overlap=overlap,
        )
        assert result.records == len(a)
        table = read(dst, fmt)
        assert table.equals(lo.AoS(a, layout).to_soa(nulls={"qty": -1}).to_arrow())
        rows = GPU_SIZES["chunk"] // TICK.itemsize
        assert [b.num_rows for b in table.to_batches()][:-1] == [rows] * (len(a) // rows)


@pytest.mark.slow  # the simulator: 30 s
def test_gpu_convert_of_c_records_enums_and_streams(tmp_path):
    header = (
        "enum side { BUY = 1, SELL = 2 };\n"
        "struct r { unsigned a : 3; int s : 5; enum side side; char name[6]; double px; };"
    )
    layout = lo.Layout.from_c(header, "struct r", byteorder="big")
    rng = np.random.default_rng(7)
    arr = rng.integers(0, 256, 700 * layout.itemsize, dtype=np.uint8).view(layout.dtype)
    arr["side"] = rng.choice([1, 2, 9], len(arr)).astype(arr.dtype["side"])  # 9: no enumerator
    arr["name"] = b"ab"
    (tmp_path / "r.bin").write_bytes(arr.tobytes())
    expect = lo.AoS(arr, layout).to_soa().to_arrow()
    lo.convert(tmp_path / "r.bin", layout, tmp_path / "r.arrow", device="cuda", chunk_bytes=200 * layout.itemsize)
    got = read(tmp_path / "r.arrow", "arrow")
    assert got.column("side").to_pylist() == expect.column("side").to_pylist()
    assert "9" in got.column("side").to_pylist()
    assert got.drop_columns(["side"]).equals(expect.drop_columns(["side"]))
    import io

    stream = io.BytesIO(b"HEAD" + arr.tobytes())
    lo.convert(stream, layout, tmp_path / "s.arrow", device="cuda", chunk_bytes=300 * layout.itemsize, offset=4)
    assert read(tmp_path / "s.arrow", "arrow").column("px").equals(expect.column("px"))
    (tmp_path / "empty.bin").write_bytes(b"")
    lo.convert(tmp_path / "empty.bin", layout, tmp_path / "e.arrow", device="cuda")
    assert read(tmp_path / "e.arrow", "arrow").num_rows == 0


@pytest.mark.slow
def test_a_gpu_fault_names_the_file_position_and_keeps_the_destination(tmp_path):
    a = ticks(700)
    a["sym"][430] = b"\xff"
    a.tofile(tmp_path / "bad.bin")
    dst = tmp_path / "out.arrow"
    dst.write_bytes(b"old")
    layout = lo.Layout.from_dtype(TICK, bytes_as={"sym": "string"})
    with pytest.raises(
        lo.ConversionError,
        match=r"bad.bin: field 'sym' \(\|S8 at offset 21\), record 430 \(byte "
        r"20640 of the file\): .*b'\\xff'\) is not valid UTF-8",
    ):
        lo.convert(tmp_path / "bad.bin", layout, dst, device="cuda", chunk_bytes=300 * 48, overwrite=True)
    assert dst.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.bin", "out.arrow"]


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.slow
def test_arrow_to_records_on_the_gpu_in_overlapped_chunks(tmp_path, overlap):
    """Parts of one large batch (each moves only its own bytes), through three slots:
    the CPU's records, byte for byte, with fills and truncation."""
    dtype = np.dtype([("q", "<i4"), ("s", "S3"), ("px", ">f8"), ("t", "<M8[us]")])
    n = GPU_SIZES["records"]
    rng = np.random.default_rng(5)
    table = pa.table(
        {
            "q": pa.array(rng.integers(0, 9, n), pa.int32(), mask=rng.random(n) < 0.1),
            "s": [b"abcd"[: i % 5] for i in range(n)],
            "px": rng.normal(size=n),
            "t": pa.array(rng.integers(0, 10**12, n), pa.timestamp("us"), mask=rng.random(n) < 0.1),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=n)
    kw = dict(fill={"q": -1}, truncate=True, chunk_bytes=GPU_SIZES["chunk"] // 2, overlap=overlap)
    lo.convert(tmp_path / "in.parquet", dtype, tmp_path / "cpu.bin", **kw)
    lo.convert(tmp_path / "in.parquet", dtype, tmp_path / "gpu.bin", device="cuda", **kw)
    assert (tmp_path / "gpu.bin").read_bytes() == (tmp_path / "cpu.bin").read_bytes()
    assert len((tmp_path / "gpu.bin").read_bytes()) == n * dtype.itemsize


def test_gpu_arrow_to_records_errors_name_the_rows(tmp_path):
    table = pa.table({"a": pa.array(list(range(600)), pa.int32()), "s": ["ok"] * 450 + ["too long"] + ["x"] * 149})
    with pa.ipc.new_file(tmp_path / "in.arrow", table.schema) as w:
        w.write_table(table)
    dst = tmp_path / "out.bin"
    with pytest.raises(
        lo.ConversionError,
        match=r"in.arrow, (batch 0, )?rows 400 to 600: column 's', row 450: "
        r"'too long' (\(8 bytes\) )?is "
        r"longer than field 's'",
    ):
        lo.convert(
            tmp_path / "in.arrow", np.dtype([("a", "<i4"), ("s", "S3")]), dst, device="cuda", chunk_bytes=200 * 7
        )
    assert not dst.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.arrow"]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.slow
def test_enum_values_first_seen_in_later_chunks_extend_the_ipc_dictionary(tmp_path, device):
    """An IPC file allows one dictionary per column: values with no enumerator that show
    up in later chunks extend it (a dictionary delta), top level and in sub-arrays."""
    layout = lo.Layout.from_c(
        "enum side { BUY = 1, SELL = 2 };\nstruct r { enum side side; int q; enum side v[2]; };", "struct r"
    )
    a = np.zeros(400, layout.dtype)
    a["side"], a["v"], a["q"] = 1, 2, np.arange(400)
    a["side"][10], a["side"][300], a["v"][250, 1], a["v"][390, 0] = 7, 9, 11, 7
    a.tofile(tmp_path / "e.bin")
    expect = lo.AoS(a, layout).to_soa().to_arrow().to_pylist()
    for fmt in ("arrow", "feather", "parquet"):
        dst = tmp_path / f"e.{fmt}"
        lo.convert(tmp_path / "e.bin", layout, dst, chunk_bytes=100 * layout.itemsize, device=device)
        table = read(dst, fmt)
        assert table.to_pylist() == expect
        assert table.column("side")[300].as_py() == "9" and table.column("v")[250].as_py() == ["SELL", "11"]
        if fmt != "parquet":
            lo.convert(dst, layout, tmp_path / "back.bin", overwrite=True)
            assert (tmp_path / "back.bin").read_bytes() == a.tobytes()


def test_an_unknown_output_suffix_is_named_not_taken_for_records(tmp_path):
    (tmp_path / "a.bin").write_bytes(bytes(8))
    for name, said in (("out.csv", "suffix '.csv'"), ("out.parqet", "suffix '.parqet'"), ("out", "no suffix")):
        with pytest.raises(lo.LayoutError, match=rf"{name} has {said}, which names no output format; give format="):
            lo.convert(tmp_path / "a.bin", [("a", "<i4")], tmp_path / name)
        assert not (tmp_path / name).exists()
    assert lo.convert(tmp_path / "a.bin", [("a", "<i4")], tmp_path / "out", format="parquet").records == 2


def test_an_empty_input_gives_an_empty_file_of_every_format(tmp_path):
    import pyarrow.parquet as pq

    (tmp_path / "empty.bin").write_bytes(b"")
    for suffix in (".parquet", ".feather", ".arrow", ".arrows"):
        dst = tmp_path / f"out{suffix}"
        assert lo.convert(tmp_path / "empty.bin", [("a", "<i4"), ("b", "<f8")], dst).records == 0
        table = (
            pq.read_table(dst)
            if suffix == ".parquet"
            else pa.ipc.open_stream(dst.read_bytes()).read_all()
            if suffix == ".arrows"
            else pa.ipc.open_file(dst).read_all()
        )
        assert table.num_rows == 0 and table.column_names == ["a", "b"]
    assert lo.convert(tmp_path / "out.parquet", [("a", "<i4"), ("b", "<f8")], tmp_path / "back.bin").records == 0
    assert (tmp_path / "back.bin").read_bytes() == b""
