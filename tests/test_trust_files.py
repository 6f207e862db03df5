"""Issue 24, files: file objects start where they stand, count= cuts the records off a
trailer, maps never die of SIGBUS, Parquet/IPC files arrive as file objects and on
standard input, offset/count arguments are checked alike, and the command runs with its
standard streams closed."""

import errno
import io
import mmap
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import layouts as lo
from layouts._cli import main

DT = np.dtype([("left", "<i2"), ("right", "<i2")])  # a 16-bit stereo WAV frame
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(
        [
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            os.path.dirname(__file__),
            os.environ.get("PYTHONPATH", ""),
        ]
    ),
}
LINUX = sys.platform.startswith("linux")


def frames(n, seed=0):
    rng = np.random.default_rng(seed)
    a = np.zeros(n, DT)
    a["left"], a["right"] = rng.integers(-30000, 30000, n), rng.integers(-30000, 30000, n)
    return a


def wav_like(path, n, trailer=b"LIST\x06\x00\x00\x00abcdef"):
    """A 44-byte header, n frames, then a chunk after the audio (as real WAV files have)."""
    a = frames(n)
    with open(path, "wb") as f:
        f.write(b"RIFF" + bytes(36) + b"data")
        a.tofile(f)
        f.write(trailer)
    return a


# ----------------------------------------------------------------- 1. the file's position


def test_read_records_of_a_file_object_starts_at_its_position(tmp_path):
    path = tmp_path / "a.wav"
    a = wav_like(path, 1000)
    with open(path, "rb") as f:
        assert f.read(44)[:4] == b"RIFF"  # the usual pattern: the header read from f first
        got = lo.read_records(f, DT, count=1000)
        assert np.array_equal(got.to_numpy(), a)
        assert f.tell() == 44 + a.nbytes  # left just after the records, at the trailer
        assert f.read(4) == b"LIST"
    with open(path, "rb") as f:  # offset= counts from the position
        f.read(40)
        assert np.array_equal(lo.read_records(f, DT, offset=4, count=1000).to_numpy(), a)
    stream = io.BytesIO(path.read_bytes())
    stream.read(44)
    assert np.array_equal(lo.read_records(stream, DT, count=1000).to_numpy(), a)
    with open(path, "rb") as f:  # the sizes in an error count from the position too
        f.read(44)
        with pytest.raises(
            lo.LayoutError,
            match=r"a.wav \(from its position 44\) is 4014 bytes: after the "
            r"0-byte header that is 1003 records of 4 bytes and 2 bytes left",
        ):
            lo.read_records(f, DT)


def test_a_real_wav_file_read_with_the_wave_module(tmp_path):
    """The pattern of the report: the stdlib's wave reads the header from f, then the
    frames come from f; a LIST chunk after the audio is left out by count."""
    import wave

    a = frames(1000)
    path = tmp_path / "real.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(a.tobytes())
    with open(path, "ab") as f:
        f.write(b"LIST\x0a\x00\x00\x00INFOabcdef")  # 18 bytes: 4 junk frames and 2 bytes without count
    with open(path, "rb") as f:
        n = wave.open(f).getnframes()
        got = lo.read_records(f, DT, count=n)
        assert len(got) == 1000 and np.array_equal(got.to_numpy(), a)
    with open(path, "rb") as f:
        n = wave.open(f).getnframes()
        out = io.BytesIO()
        assert lo.convert(f, DT, out, format="arrows", count=n).records == 1000
    assert pa.ipc.open_stream(out.getvalue()).read_all().column("left").to_pylist() == a["left"].tolist()


def test_convert_of_a_file_object_starts_at_its_position(tmp_path):
    path = tmp_path / "a.wav"
    a = wav_like(path, 500)
    with open(path, "rb") as f:
        f.read(44)
        out = io.BytesIO()
        lo.convert(f, DT, out, format="arrows", count=500)
    assert pa.ipc.open_stream(out.getvalue()).read_all().column("left").to_pylist() == a["left"].tolist()


# ----------------------------------------------------------------- 2. count and the trailer


def test_convert_count_leaves_the_trailer_out(tmp_path, capsys):
    path = tmp_path / "a.wav"
    a = wav_like(path, 1000, trailer=b"LIST" + bytes(8))  # a whole number of frames: junk rows without count
    for src in (path, io.BytesIO(path.read_bytes()[44:])):
        out = io.BytesIO()
        result = lo.convert(src, DT, out, format="arrows", offset=44 if src is path else 0, count=1000)
        assert result.records == 1000
        assert pa.ipc.open_stream(out.getvalue()).read_all().column("right").to_pylist() == a["right"].tolist()
    assert (
        main(
            [
                "convert",
                str(path),
                "--dtype",
                "[('left','<i2'),('right','<i2')]",
                "--offset",
                "44",
                "--count",
                "1000",
                "--to",
                str(tmp_path / "a.parquet"),
                "--device",
                "cpu",
                "--quiet",
            ]
        )
        == 0
    )
    assert pq.read_table(tmp_path / "a.parquet").num_rows == 1000


def test_a_count_past_the_records_names_the_file_count_and_records(tmp_path, capsys):
    path = tmp_path / "a.wav"
    wav_like(path, 100)
    message = r"a.wav holds 103 whole records of 4 bytes after offset 44; count=104 asks for more: give count=103"
    with pytest.raises(lo.ConversionError, match=message):
        lo.convert(path, DT, io.BytesIO(), format="arrows", offset=44, count=104)
    with pytest.raises(lo.ConversionError, match=message):
        lo.read_records(path, DT, offset=44, count=104)
    with pytest.raises(
        lo.ConversionError,
        match=r"the input holds 103 whole records of 4 bytes after offset 44; "
        r"count=104 asks for more",
    ):
        lo.convert(io.BytesIO(path.read_bytes()), DT, io.BytesIO(), format="arrows", offset=44, count=104)
    rc = main(
        [
            "convert",
            str(path),
            "--dtype",
            "[('left','<i2'),('right','<i2')]",
            "--offset",
            "44",
            "--count",
            "104",
            "--to",
            str(tmp_path / "a.arrow"),
            "--device",
            "cpu",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert (
        rc == 1
        and "a.wav holds 103 whole records of 4 bytes after offset 44; --count 104 asks for more: "
        "give --count 103 or fewer"
        in err
    ), err
    assert not (tmp_path / "a.arrow").exists()


def test_the_trailing_warning_says_where_and_suggests_count(tmp_path, capsys):
    path = tmp_path / "a.wav"
    wav_like(path, 100)  # 14 bytes of trailer: 3 junk frames and 2 bytes
    where = r"skipped those 2 bytes at byte 456 of the input: .* pass count= with the number of records"
    with pytest.warns(UserWarning, match=where):
        lo.convert(path, DT, io.BytesIO(), format="arrows", offset=44, trailing="ignore")
    with pytest.warns(UserWarning, match=where):
        lo.read_records(path, DT, offset=44, trailing="ignore")
    with pytest.raises(lo.LayoutError, match=r"if the input has more after its records \(a trailer\), pass count="):
        lo.read_records(path, DT, offset=44)
    assert (
        main(
            [
                "convert",
                str(path),
                "--dtype",
                "[('left','<i2'),('right','<i2')]",
                "--offset",
                "44",
                "--trailing",
                "ignore",
                "--to",
                str(tmp_path / "a.arrow"),
                "--device",
                "cpu",
                "--quiet",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "skipped those 2 bytes at byte 456 of the input" in err and "pass --count with the number" in err, err


def test_a_huge_count_on_a_pipe_reads_what_is_there(tmp_path):
    r, w = os.pipe()
    os.write(w, frames(10).tobytes())
    os.close(w)
    with (
        open(r, "rb") as pipe,
        pytest.raises(
            lo.ConversionError,
            match=rf"file descriptor {r} holds 10 whole records "
            r"of 4 bytes after offset 0; count=10{15} "
            r"asks for more",
        ),
    ):
        lo.read_records(pipe, DT, count=10**15)  # read in bounded parts, not one buffer of 4 PB


def test_dask_count_and_offset_per_file(tmp_path):
    ld = pytest.importorskip("layouts.dask")
    pytest.importorskip("dask.dataframe")
    a, b = frames(30, 1), frames(7, 2)
    with open(tmp_path / "f0.bin", "wb") as f:
        f.write(b"H" * 44)
        a.tofile(f)
        f.write(b"TRAILER!")  # two junk frames without count
    with open(tmp_path / "f1.bin", "wb") as f:
        f.write(b"H" * 8)
        b.tofile(f)
    want = np.concatenate([a, b])["left"].tolist()
    pattern = str(tmp_path / "f*.bin")
    df = ld.read_records(pattern, DT, offset=[44, 8], count=[30, None], blocksize=40)
    assert df.compute(scheduler="sync")["left"].tolist() == want
    df = ld.read_records(
        pattern,
        DT,
        offset=lambda p: 44 if p.endswith("f0.bin") else 8,
        count=lambda p: 30 if p.endswith("f0.bin") else 7,
    )
    assert df.compute(scheduler="sync")["left"].tolist() == want
    with pytest.raises(
        lo.ConversionError,
        match=r"f1.bin holds 7 whole records of 4 bytes after offset 8; count=8 "
        r"asks for more",
    ):
        ld.read_records(pattern, DT, offset=[44, 8], count=[30, 8])
    with pytest.raises(lo.LayoutError, match=r"offset has 1 values but 2 files match .*f0.bin.*; give one per file"):
        ld.read_records(pattern, DT, offset=[44])
    with pytest.raises(lo.LayoutError, match=r"offset\[1\] \(.*f1.bin\)=-8 is negative"):
        ld.read_records(pattern, DT, offset=[44, -8])


# ----------------------------------------------------------------- 3. no SIGBUS


def _child(code, timeout=120):
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=ENV, timeout=timeout
    )
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    return run.stdout


@pytest.mark.skipif(not LINUX, reason="SIGBUS on a truncated mapping, Linux")
@pytest.mark.slow
def test_read_records_then_truncated_is_an_error_not_sigbus(tmp_path):
    """The file shrinks after read_records mapped it: before to_soa (the size says so),
    and while the kernel reads it (the guard: SIGBUS there used to kill the process)."""
    out = _child(f"""
        import os, numpy as np, layouts as lo, layouts._faults as faults
        from conftest import TICK, ticks
        path = {str(tmp_path / "in.bin")!r}
        ticks(20_000).tofile(path)
        cut = 1_000 * TICK.itemsize + 20
        aos = lo.read_records(path, TICK)
        os.truncate(path, cut)
        for attempt in (aos, lo.AoS(aos.to_numpy()[500:])):  # a view of the map too
            try:
                attempt.to_soa()
            except lo.ConversionError as err:
                print("size:", err)

        class Cut(faults.MappedGuard):  # the file is cut after the size check, as the kernel reads
            def __init__(self, address, nbytes):
                os.truncate(path, cut)
                super().__init__(address, nbytes)

        ticks(20_000).tofile(path)
        aos = lo.read_records(path, TICK)
        faults.MappedGuard = Cut
        try:
            aos.to_soa()
        except lo.ConversionError as err:
            print("fault:", err)
        faults.MappedGuard = Cut.__mro__[1]
        ticks(20_000).tofile(path)  # whole again, but the map lost pages: still refused
        try:
            aos.to_soa()
        except lo.ConversionError as err:
            print("again:", err)
    """)
    lines = out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["size", "size", "fault", "again"], out
    for line in lines[:3]:
        assert (
            "in.bin shrank while it was being read: it is now 48,020 bytes, so record 1,000 (byte 48,000 of the "
            "file) and the ones after it are gone; another program truncated or rewrote the file: read it again "
            "(layouts.read_records) once it is complete" in line
        ), line
    # the first page that faulted stays a page of zeros in the map: the records from there on are gone from it
    page = -(-48_020 // mmap.PAGESIZE) * mmap.PAGESIZE
    assert (
        f"in.bin shrank while it was being read: it is now 960,000 bytes, so record {page // 48:,} (byte "
        f"{page:,} of the file) and the ones after it are gone" in lines[3]
    ), lines[3]


def test_a_map_cut_before_it_is_converted_on_either_device(tmp_path, device):
    """The size is checked before the kernel (or the copy to the GPU) reads a page:
    safe to run in this process."""
    path = tmp_path / "in.bin"
    frames(5_000).tofile(path)
    aos = lo.read_records(path, DT, offset=4)
    os.truncate(path, 4 + 100 * DT.itemsize + 1)
    with pytest.raises(
        lo.ConversionError,
        match=r"in.bin shrank while it was being read: it is now 405 bytes, so "
        r"record 100 \(byte 404 of the file\) and the ones after it are gone",
    ):
        aos.to_soa(device=device)


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="SIGBUS on a truncated mapping, Linux")
def test_read_records_truncated_at_random_moments_never_crashes(tmp_path):
    """A thread truncates the mapped file at a random moment (fixed seeds) while to_soa
    reads it: each run completes (the cut came after the read) or is the ConversionError."""
    out = _child(f"""
        import os, random, threading
        import layouts as lo
        from conftest import TICK, ticks
        path = {str(tmp_path / "in.bin")!r}
        a = ticks(400_000)
        outcomes = {{}}
        for seed in range(12):
            rng = random.Random(seed)
            a.tofile(path)
            aos = lo.read_records(path, TICK)
            timer = threading.Timer(rng.uniform(0.0, 0.02), os.truncate, (path, rng.randrange(0, a.nbytes)))
            timer.start()
            try:
                soa = aos.to_soa(threads=1)
                outcome = "complete"
            except lo.ConversionError as err:
                assert "in.bin shrank while it was being read" in str(err), err
                outcome = "error"
            timer.join()
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            del aos
        print(outcomes)
    """)
    assert "'error'" in out, out


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="SIGBUS on a truncated mapping, Linux")
def test_a_dask_partition_of_a_truncated_file_is_an_error_not_sigbus(tmp_path):
    pytest.importorskip("dask.dataframe")
    out = _child(f"""
        import os, numpy as np, layouts as lo, layouts.dask as ld, layouts._faults as faults
        from conftest import TICK, ticks
        path = {str(tmp_path / "in.bin")!r}
        with open(path, "wb") as f:
            f.write(bytes(16))
            ticks(4_000).tofile(f)
        df = ld.read_records(path, TICK, offset=16, blocksize=1_000 * TICK.itemsize)
        os.truncate(path, 16 + 2_500 * TICK.itemsize)
        try:
            df.compute(scheduler="sync")
        except lo.ConversionError as err:
            print("size:", err)
        with open(path, "wb") as f:
            f.write(bytes(16))
            ticks(4_000).tofile(f)

        class Cut(faults.MappedGuard):
            def __init__(self, address, nbytes):
                os.truncate(path, 16 + 2_500 * TICK.itemsize)
                super().__init__(address, nbytes)

        import layouts.dask
        layouts._faults.MappedGuard = Cut
        try:
            df.partitions[2].compute(scheduler="sync")
        except lo.ConversionError as err:
            print("fault:", err)
    """)
    lines = out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["size", "fault"], out
    for line in lines:
        assert (
            "in.bin shrank while it was being read by Dask: it is now 120,016 bytes, so record 2,500 (byte "
            "120,016 of the file) and the ones after it are gone" in line
        ), line


# ----------------------------------------------------------------- 4. Parquet/IPC as file objects and on stdin


@pytest.fixture
def arrow_files(tmp_path):
    table = pa.table({"left": pa.array(frames(50)["left"]), "right": pa.array(frames(50)["right"])})
    pq.write_table(table, tmp_path / "r.parquet", row_group_size=20)
    with pa.OSFile(str(tmp_path / "r.arrow"), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table, max_chunksize=20)
    with pa.OSFile(str(tmp_path / "r.arrows"), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
        w.write_table(table, max_chunksize=20)
    return tmp_path, frames(50).tobytes()


@pytest.mark.parametrize("suffix", ["parquet", "arrow", "arrows"])
def test_parquet_and_ipc_file_objects_are_converted(arrow_files, suffix):
    folder, want = arrow_files
    raw = (folder / f"r.{suffix}").read_bytes()
    positioned = io.BytesIO(b"12345678" + raw)
    positioned.read(8)  # from its position
    with open(folder / f"r.{suffix}", "rb") as f:
        for src in (f, io.BytesIO(raw), positioned):
            out = io.BytesIO()
            assert lo.convert(src, DT, out, format="records").records == 50
            assert out.getvalue() == want


@pytest.mark.slow
@pytest.mark.parametrize("suffix", ["parquet", "arrow"])
def test_parquet_and_ipc_files_on_standard_input_are_converted(arrow_files, suffix):
    folder, want = arrow_files
    spool = folder / "spool"
    spool.mkdir()
    env = {**ENV, "TMPDIR": str(spool)}
    raw = (folder / f"r.{suffix}").read_bytes()
    command = [
        sys.executable,
        "-m",
        "layouts",
        "convert",
        "-",
        "--dtype",
        "[('left','<i2'),('right','<i2')]",
        "--device",
        "cpu",
        "--quiet",
    ]
    run = subprocess.run(
        [*command, "--to", str(folder / "out.bin")], input=raw, capture_output=True, env=env, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert (folder / "out.bin").read_bytes() == want
    run = subprocess.run(
        [*command, "--to", str(folder / "cut.bin")], input=raw[:-10], capture_output=True, env=env, timeout=120
    )
    assert run.returncode == 1 and b"standard input is a truncated" in run.stderr, run.stderr
    assert not (folder / "cut.bin").exists()
    assert list(spool.iterdir()) == []  # the spool is unnamed: nothing left, after success or failure


def test_a_spool_that_cannot_be_written_names_the_format_and_the_fix(arrow_files, monkeypatch):
    folder, _ = arrow_files
    r, w = os.pipe()
    os.write(w, (folder / "r.parquet").read_bytes()[:1000])
    os.close(w)

    class Full(io.BytesIO):
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", lambda **kwargs: Full())
    with (
        open(r, "rb") as pipe,
        pytest.raises(
            lo.LayoutError,
            match=r"is a Parquet file, which is read from its "
            r"end, .* failed: No space left on device; set "
            r"TMPDIR .* or pass the file's path",
        ),
    ):
        lo.convert(pipe, DT, io.BytesIO(), format="records")


# ----------------------------------------------------------------- 5. offset/count checked alike


@pytest.mark.parametrize(
    "argument, value, message",
    [
        ("offset", -8, r"offset=-8 is negative: offset is the number of header bytes .* give an int >= 0"),
        ("offset", 1.5, r"offset=1.5 is not a whole number"),
        ("offset", True, r"offset=True is not a whole number"),
        ("count", -1, r"count=-1 is negative: count is the number of records to take"),
        ("count", 2.0, r"count=2.0 is not a whole number"),
        ("count", False, r"count=False is not a whole number"),
    ],
)
def test_offset_and_count_are_checked_alike(tmp_path, argument, value, message):
    path = tmp_path / "a.bin"
    frames(10).tofile(path)
    with pytest.raises(lo.LayoutError, match=message):
        lo.read_records(path, DT, **{argument: value})
    with pytest.raises(lo.LayoutError, match=message):
        lo.convert(path, DT, tmp_path / "a.arrow", **{argument: value})
    assert not (tmp_path / "a.arrow").exists()
    if pytest.importorskip("dask.dataframe"):
        import layouts.dask as ld

        with pytest.raises(lo.LayoutError, match=message):
            ld.read_records(str(path), DT, **{argument: value})
    assert len(lo.read_records(path, DT, offset=np.int64(4), count=np.uint8(3))) == 3  # NumPy integers are fine


def test_offset_and_count_flags_name_the_flag(tmp_path, capsys):
    path = tmp_path / "a.bin"
    frames(10).tofile(path)
    for flag, value, text in (
        ("--offset", "-8", "argument --offset: -8 is negative: give the bytes of header"),
        ("--count", "1.5", "argument --count: '1.5' is not a whole number: give the records"),
    ):
        with pytest.raises(SystemExit) as exit:
            main(
                [
                    "convert",
                    str(path),
                    "--dtype",
                    "[('left','<i2'),('right','<i2')]",
                    flag,
                    value,
                    "--to",
                    str(tmp_path / "a.arrow"),
                ]
            )
        err = capsys.readouterr().err
        assert exit.value.code != 0 and text in err and "Errno" not in err, err


def test_offset_and_count_with_an_arrow_input_are_refused(arrow_files, capsys):
    folder, _ = arrow_files
    with pytest.raises(lo.LayoutError, match=r"count=3 applies to an input of records"):
        lo.convert(folder / "r.parquet", DT, folder / "o.bin", count=3)
    # offset on the way back is the size of the header written before the records: without
    # header= it would be lost, so it is refused too
    with pytest.raises(lo.LayoutError, match=r"offset=8 skips a header when reading records.*pass header="):
        lo.convert(folder / "r.parquet", DT, folder / "o.bin", offset=8)
    assert not (folder / "o.bin").exists()


# ----------------------------------------------------------------- 6. closed standard streams


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="a POSIX shell's >&-")
def test_the_command_with_its_standard_streams_closed(tmp_path):
    frames(10).tofile(tmp_path / "a.bin")
    layouts = f"'{sys.executable}' -m layouts convert"
    dtype = "--dtype \"[('left','<i2'),('right','<i2')]\" --device cpu"

    def sh(line):
        return subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=120)

    run = sh(f"{layouts} a.bin {dtype} --to a.arrow >&-")  # works: the summary goes nowhere
    assert run.returncode == 0 and "Error" not in run.stderr, run.stderr
    assert pa.ipc.open_file(str(tmp_path / "a.arrow")).read_all().num_rows == 10
    run = sh(f"{layouts} a.bin {dtype} --to - >&-")  # a command line that cannot work: status 2
    assert run.returncode == 2 and run.stderr == (
        "layouts convert: error: --to -: standard output is closed (>&-), "
        "so the data has nowhere to go; redirect it to a file or a pipe, "
        "or give --to FILE\n"
    ), run.stderr
    run = sh(f"{layouts} a.bin {dtype} --to b.arrow 2>&-")
    assert run.returncode == 0 and run.stdout.startswith("converted 10 records"), run.stdout
    run = sh(f"{layouts} a.bin {dtype} --to a.arrow 2>&-")  # an error: status 1, its line not on stdout
    assert run.returncode == 1 and run.stdout == "", run.stdout
    run = sh(f"{layouts} - {dtype} --to c.arrow <&-")
    assert run.returncode == 2 and "SRC -: standard input is closed (<&-)" in run.stderr, run.stderr
    run = sh(f"{layouts} a.bin {dtype} --to d.arrow >&- 2>&-")
    assert run.returncode == 0 and (tmp_path / "d.arrow").exists()


@pytest.mark.slow
def test_the_guard_benchmark_runs_small(tmp_path):
    from layouts.benchmarks.mapped_guard import run

    rows, _ = run(2_000, 2, str(tmp_path))
    assert [r["records"] for r in rows] == [1, 1_000, 2_000]
    assert all(r["us guarded"] > 0 and r["us unguarded"] > 0 and r["x"] > 0 for r in rows)
    assert list(tmp_path.iterdir()) == []
