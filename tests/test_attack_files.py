"""What an attacker found in the file inputs: an Arrow IPC input truncated while it is
converted (SIGBUS), concatenated IPC streams and trailing bytes, closed, write-only and
text-mode file objects, directories and procfs files, and how a pipe is named. Crashes
run in a child process with a timeout: a bus error there is a failed test."""

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo

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
DT = np.dtype([("a", "<i8"), ("b", "<f8")])


def _child(code, timeout=120):
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=ENV, timeout=timeout
    )
    assert run.returncode == 0, (run.returncode, run.stdout[-2000:], run.stderr[-3000:])
    return run.stdout


def _table(n, start=0):
    return pa.table({"a": pa.array(np.arange(start, start + n)), "b": pa.array(np.ones(n))})


def _records(n, start=0):
    a = np.zeros(n, DT)
    a["a"], a["b"] = np.arange(start, start + n), 1.0
    return a.tobytes()


# ----------------------------------------------------------------- 1. an IPC input truncated meanwhile


@pytest.mark.parametrize("kind", ["file", pytest.param("stream", marks=pytest.mark.slow)])
def test_an_ipc_input_truncated_while_converted_is_an_error_not_sigbus(tmp_path, kind):
    """IPC inputs used to be memory-mapped and pyarrow's reads of the map were not
    guarded: a truncation killed the process with SIGBUS. They are read now."""
    out = _child(f"""
        import os, numpy as np, pyarrow as pa, layouts as lo
        d, kind = {str(tmp_path)!r}, {kind!r}
        src, dst = os.path.join(d, "in.arrow"), os.path.join(d, "out.bin")
        t = pa.table({{"a": pa.array(np.arange(400_000)), "b": pa.array(np.ones(400_000))}})
        with pa.OSFile(src, "wb") as f, (pa.ipc.new_file if kind == "file" else pa.ipc.new_stream)(f, t.schema) as w:
            w.write_table(t, max_chunksize=10_000)  # 40 batches of 160,000 bytes
        size = os.path.getsize(src)

        def cut(records, nbytes, total):
            if os.path.getsize(src) == size:
                os.truncate(src, size // 3)

        try:
            lo.convert(src, [("a", "<i8"), ("b", "<f8")], dst, chunk_bytes=160_000, overwrite=True, progress=cut)
            print("converted")
        except lo.ConversionError as err:
            print(err)
        assert not os.path.exists(dst)
    """)
    assert "converted" not in out
    assert "in.arrow, batch " in out and ": cannot be read (" in out, out
    assert "the file is damaged, or was truncated or written wrongly" in out, out


# ----------------------------------------------------------------- 2. concatenated IPC streams, trailing bytes


def _stream(table):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table, max_chunksize=3)
    return sink.getvalue().to_pybytes()


def _pipe(data):
    """A pipe's reading end (a file object that cannot seek) holding ``data``."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    child.stdin.write(data)
    child.stdin.close()
    return child


@pytest.mark.parametrize("given", ["path", "file object", "positioned", "pipe"])
def test_every_concatenated_ipc_stream_is_read(tmp_path, given):
    """``layouts convert a.bin --to - >> all.arrows`` appends a stream a run: all are read."""
    data = _stream(_table(10)) + _stream(_table(7, 10)) + _stream(_table(0)) + _stream(_table(5, 17))
    path = tmp_path / "all.arrows"
    path.write_bytes(data)
    out, child = io.BytesIO(), None
    if given == "path":
        src = path
    elif given == "file object":
        src = open(path, "rb")
    elif given == "positioned":
        src = io.BytesIO(b"header" + data)
        src.read(6)
    else:
        child = _pipe(data)
        src = child.stdout
    try:
        assert lo.convert(src, DT, out, format="records").records == 22
    finally:
        if given != "path":
            src.close()
        if child is not None:
            child.wait()
    assert out.getvalue() == _records(22)


@pytest.mark.parametrize("given", ["path", "pipe"])
def test_bytes_after_the_streams_are_an_error_naming_where_they_start(tmp_path, given):
    data = _stream(_table(10)) + _stream(_table(4, 10))
    path = tmp_path / "all.arrows"
    path.write_bytes(data + b"garbage")
    child = _pipe(data + b"garbage") if given == "pipe" else None
    name = r".*all\.arrows" if given == "path" else r"file descriptor \d+"
    with pytest.raises(
        lo.ConversionError,
        match=(
            rf"{name}: the bytes from byte {len(data):,} on \(after the end "
            rf"of an Arrow IPC stream\) are not an Arrow IPC stream \(they start with b'garbage'; ArrowInvalid: .*\); "
            rf"cut them off \(head -c {len(data)} keeps the streams\) or write the input again"
        ),
    ):
        lo.convert(str(path) if child is None else child.stdout, DT, io.BytesIO(), format="records")
    if child is not None:
        child.stdout.close()
        child.wait()


def test_a_concatenated_stream_of_another_schema_is_an_error_naming_its_byte(tmp_path):
    first = _stream(_table(10))
    other = _stream(pa.table({"a": pa.array(np.arange(3)), "c": pa.array(["x", "y", "z"])}))
    path = tmp_path / "mixed.arrows"
    path.write_bytes(first + other)
    with pytest.raises(
        lo.ConversionError,
        match=(
            rf"mixed.arrows: the Arrow IPC stream from byte {len(first):,} has another schema than the first "
            r"\(a: int64, c: string; the first: a: int64, b: double\); streams concatenated in one input must "
            r"have one schema: convert them apart"
        ),
    ):
        lo.convert(path, DT, io.BytesIO(), format="records")


def test_a_cut_concatenated_stream_names_its_byte_and_batch(tmp_path):
    first, second = _stream(_table(10)), _stream(_table(9, 10))
    path = tmp_path / "cut.arrows"
    path.write_bytes(first + second[: len(second) - 30])
    with pytest.raises(
        lo.ConversionError,
        match=(
            rf"cut.arrows, the stream from byte {len(first):,}, batch 2: cannot be read \(.*\); the file is "
            r"damaged, or was truncated or written wrongly"
        ),
    ):
        lo.convert(path, DT, io.BytesIO(), format="records")


@pytest.mark.slow  # (subprocesses, 2.5 s: the fast loop keeps the lighter ones)
def test_streams_appended_by_the_command_convert_back_whole(tmp_path):
    from layouts._cli import main

    for day, start in (("day1", 0), ("day2", 10)):
        (tmp_path / f"{day}.bin").write_bytes(_records(10, start))
    with open(tmp_path / "all.arrows", "ab") as out:
        for day in ("day1", "day2"):
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "layouts",
                    "convert",
                    str(tmp_path / f"{day}.bin"),
                    "--dtype",
                    "[('a', '<i8'), ('b', '<f8')]",
                    "--to",
                    "-",
                ],
                stdout=out,
                env=ENV,
                stderr=subprocess.PIPE,
                timeout=60,
            )
            assert run.returncode == 0, run.stderr
    assert (
        main(
            [
                "convert",
                str(tmp_path / "all.arrows"),
                "--dtype",
                "[('a', '<i8'), ('b', '<f8')]",
                "--to",
                str(tmp_path / "back.bin"),
            ]
        )
        == 0
    )
    assert (tmp_path / "back.bin").read_bytes() == _records(20)


# ----------------------------------------------------------------- 3, 4. file objects that cannot give bytes


def _closed(path):
    f = open(path, "rb")
    f.close()
    return f


@pytest.mark.parametrize(
    "opened, said",
    [
        (_closed, r"is closed; pass the file open for reading \(open\(path, 'rb'\)\) or its path"),
        (
            lambda path: open(path, "wb"),
            r"is open for writing only \(mode 'wb'\); open it for reading "
            r"\(open\(path, 'rb'\)\) or pass its path",
        ),
        (lambda path: open(path, "r"), r"is open in text mode; open it with 'rb'"),
    ],
)
def test_a_file_object_that_cannot_give_bytes_is_refused_by_every_reader(tmp_path, opened, said):
    path = tmp_path / "in.bin"
    path.write_bytes(_records(2))
    f = opened(path)
    try:
        with pytest.raises(lo.LayoutError, match=rf"^source {path} {said}$"):
            lo.read_records(f, DT)
        for fmt in ("arrow", "records"):  # records in, and Arrow in
            with pytest.raises(lo.LayoutError, match=rf"^src {path} {said}$"):
                lo.convert(f, DT, io.BytesIO(), format=fmt)
    finally:
        f.close()
    assert path.read_bytes() == (b"" if "writing" in said else _records(2))


def test_dask_refuses_a_directory_while_planning(tmp_path):
    pytest.importorskip("dask.dataframe")
    import layouts.dask as ld

    folder = tmp_path / "d"
    folder.mkdir()
    for given in (folder, str(folder) + "/"):
        with pytest.raises(
            lo.LayoutError,
            match=(
                rf"^{folder} is a directory, not a record file; give its files with a glob pattern, e.g. "
                rf"'{folder}/\*\.bin', or a list of paths$"
            ),
        ):
            ld.read_records(given, DT)
    with pytest.raises(lo.LayoutError, match=rf"^{folder} is a directory, not a record file; give its files"):
        ld.read_stream(folder, "pcap")
    (folder / "x.bin").write_bytes(_records(3))
    assert ld.read_records(str(folder / "*.bin"), DT).compute()["a"].tolist() == [0, 1, 2]


@pytest.mark.skipif(not os.path.exists("/proc/version"), reason="procfs")
def test_a_proc_file_whose_size_says_0_is_read_as_a_stream(tmp_path):
    """procfs says 0 bytes (st_size) for files that have some: they used to be 0 records."""
    want = Path("/proc/version").read_bytes()
    assert os.stat("/proc/version").st_size == 0 and want
    char = np.dtype([("c", "u1")])
    with open("/proc/version", "rb") as f:
        for src in ("/proc/version", f):
            assert lo.read_records(src, char).to_numpy().tobytes() == want
    out = io.BytesIO()
    assert lo.convert("/proc/version", char, out, format="arrows").records == len(want)
    assert bytes(pa.ipc.open_stream(out.getvalue()).read_all().column("c").to_pylist()) == want


@pytest.mark.skipif(not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"), reason="sysfs")
def test_a_sys_file_that_does_not_map_is_read_as_a_stream():
    """sysfs says 4,096 bytes and refuses a map (ENODEV, raw OSError before)."""
    path = "/sys/kernel/mm/transparent_hugepage/enabled"
    want = Path(path).read_bytes()
    char = np.dtype([("c", "u1")])
    assert lo.read_records(path, char).to_numpy().tobytes() == want
    assert lo.convert(path, char, io.BytesIO(), format="arrows").records == len(want)


def test_an_empty_file_with_a_header_offset_names_the_file(tmp_path):
    (tmp_path / "empty.bin").write_bytes(b"")
    with pytest.raises(lo.LayoutError, match=r"empty\.bin ended after 0 bytes, inside the 16-byte header"):
        lo.convert(tmp_path / "empty.bin", DT, io.BytesIO(), format="arrow", offset=16)
    assert lo.convert(tmp_path / "empty.bin", DT, io.BytesIO(), format="arrow").records == 0
    assert len(lo.read_records(tmp_path / "empty.bin", DT)) == 0


# ----------------------------------------------------------------- 5. a pipe is "file descriptor N" everywhere


def test_a_pipe_is_named_by_its_descriptor_in_every_message(tmp_path):
    import pyarrow.parquet as pq

    child = _pipe(_records(3))
    try:
        with pytest.raises(
            lo.ConversionError,
            match=(
                rf"^file descriptor {child.stdout.fileno()} holds 3 whole records of 16 bytes after offset 0; "
                r"count=5 asks for more"
            ),
        ):
            lo.convert(child.stdout, DT, io.BytesIO(), format="arrow", count=5)
    finally:
        child.stdout.close()
        child.wait()
    pq.write_table(_table(10), tmp_path / "r.parquet")
    raw = (tmp_path / "r.parquet").read_bytes()
    child = _pipe(raw[:-10])
    try:
        with pytest.raises(
            lo.ConversionError,
            match=(
                rf"^file descriptor {child.stdout.fileno()} is a truncated Parquet file: it starts with the Parquet "
                r"marker but does not end with it"
            ),
        ):
            lo.convert(child.stdout, DT, io.BytesIO(), format="records")
    finally:
        child.stdout.close()
        child.wait()
    child = _pipe(_records(3) + b"x")
    try:
        with pytest.raises(
            lo.LayoutError,
            match=(
                rf"^file descriptor {child.stdout.fileno()} is 49 bytes: after "
                r"the 0-byte header that is 3 records of 16 bytes and 1 bytes left"
            ),
        ):
            lo.read_records(child.stdout, DT)
    finally:
        child.stdout.close()
        child.wait()


def test_the_ipc_read_benchmark_runs_small(tmp_path):
    from layouts.benchmarks.ipc_read import run

    row = run(2_000, 2, str(tmp_path))
    assert row["records"] == 2_000 and row["s read"] > 0 and row["s mapped"] > 0 and row["x"] > 0
    assert pa.OSFile is not pa.memory_map  # the mapped side's stand-in is undone
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors through /proc")
@pytest.mark.parametrize("suffix", ["arrow", "arrows", "garbage.arrows"])
def test_an_ipc_input_read_from_its_path_is_closed_however_it_ends(tmp_path, suffix):
    path = tmp_path / f"in.{suffix}"
    if suffix == "arrow":
        with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, _table(5).schema) as w:
            w.write_table(_table(5))
    else:
        path.write_bytes(_stream(_table(5)) + (b"garbage" if suffix.startswith("garbage") else b""))
    before = len(os.listdir("/proc/self/fd"))
    try:
        lo.convert(path, DT, io.BytesIO(), format="records")
    except lo.ConversionError as err:
        assert suffix.startswith("garbage") and "are not an Arrow IPC stream" in str(err)
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.skipif(not os.path.exists("/proc/version"), reason="procfs")
def test_dask_refuses_a_file_whose_size_is_not_its_bytes(tmp_path):
    pytest.importorskip("dask.dataframe")
    import layouts.dask as ld

    with pytest.raises(
        lo.LayoutError,
        match=(
            r"^/proc/version says it is 0 bytes but cannot be mapped or has other bytes \(a /proc or /sys file\): "
            r"Dask's partitions are byte ranges planned from file sizes; read it with "
            r"layouts.read_records\('/proc/version', layout\), which reads such a file whole$"
        ),
    ):
        ld.read_records("/proc/version", [("c", "u1")])
    (tmp_path / "empty.bin").write_bytes(b"")
    assert len(ld.read_records(str(tmp_path / "empty.bin"), DT).compute()) == 0
