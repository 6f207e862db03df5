"""Inputs that are not regular record files: FIFOs read as streams, endless devices
refused (or read up to ``count``), ``count`` bounding what is read from a stream, and
Parquet/Arrow files given where records are expected."""

import io
import os
import subprocess
import sys
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import TICK, ticks

import layouts as lo

DT = np.dtype([("a", "<i4"), ("b", "<f8")], align=True)  # 16 bytes
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/dev/zero as on Linux")


def names(d):
    return sorted(p.name for p in d.iterdir())


def feed(fifo, data):
    """A thread writing ``data`` into the FIFO (its reader may stop early)."""

    def run():
        try:
            with open(fifo, "wb") as f:
                f.write(data)
        except BrokenPipeError:
            pass

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_fifo_is_read_as_a_stream(tmp_path):
    a = ticks(5000)
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    writer = feed(fifo, b"HEAD" + a.tobytes())
    result = lo.convert(fifo, TICK, tmp_path / "out.arrow", offset=4, chunk_bytes=50_000)
    writer.join()
    assert result.records == len(a)
    assert pa.ipc.open_file(tmp_path / "out.arrow").read_all().equals(lo.AoS(a).to_soa().to_arrow())
    writer = feed(fifo, a.tobytes())
    got = lo.read_records(fifo, TICK)
    writer.join()
    assert np.array_equal(got.to_numpy(), a)
    writer = feed(fifo, a.tobytes())
    got = lo.read_records(fifo, TICK, count=7)  # only those are read; the writer then sees a closed pipe
    writer.join()
    assert np.array_equal(got.to_numpy(), a[:7])


@linux
def test_endless_devices_never_succeed_with_no_records(tmp_path):
    fix = r"which may never end: records must come from a file or a pipe; to take N bytes of a device, pipe them"
    with pytest.raises(
        lo.LayoutError, match=rf"/dev/zero is a character device \(like a terminal or /dev/zero\), {fix}"
    ):
        lo.convert("/dev/zero", DT, tmp_path / "z.arrow")
    with open("/dev/zero", "rb") as f, pytest.raises(lo.LayoutError, match=r"/dev/zero is a character device"):
        lo.convert(f, DT, tmp_path / "z.arrow")
    with pytest.raises(
        lo.LayoutError,
        match=r"/dev/zero is a character device \(like a terminal or /dev/zero\), "
        r"which may never end and has no size; pass count= to read that many",
    ):
        lo.read_records("/dev/zero", DT)
    with open("/dev/urandom", "rb") as f, pytest.raises(lo.LayoutError, match=r"pass count="):
        lo.read_records(f, DT)
    zeros = lo.read_records("/dev/zero", DT, count=10)
    assert len(zeros) == 10 and not zeros.to_numpy()["a"].any()
    with open("/dev/urandom", "rb") as f:
        assert len(lo.read_records(f, DT, offset=3, count=4)) == 4
    assert names(tmp_path) == []


class Endless(io.RawIOBase):
    """A stream that never ends, counting the bytes taken from it."""

    def __init__(self):
        self.taken = 0

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), 1 << 16)
        b[:n] = b"\x01" * n
        self.taken += n
        return n


def test_count_reads_only_those_records_of_a_stream():
    stream = Endless()
    aos = lo.read_records(stream, DT, offset=5, count=10)
    assert len(aos) == 10 and stream.taken == 5 + 10 * DT.itemsize
    assert lo.read_records(stream, DT, count=0).to_numpy().size == 0 and stream.taken == 5 + 10 * DT.itemsize
    short = io.BytesIO(bytes(3 * DT.itemsize + 1))
    with pytest.raises(
        lo.ConversionError, match=r"holds 3 whole records of 16 bytes after offset 0; count=4 asks for more"
    ):
        lo.read_records(short, DT, count=4)


def arrow_files(tmp_path):
    """The same records as Parquet, an Arrow IPC file and an Arrow IPC stream."""
    a = np.zeros(100, DT)
    a["a"] = np.arange(100)
    table = lo.AoS(a).to_soa().to_arrow()
    pq.write_table(table, tmp_path / "t.parquet")
    with pa.ipc.new_file(tmp_path / "t.feather", table.schema) as w:
        w.write_table(table)
    with pa.ipc.new_stream(tmp_path / "t.stream", table.schema) as w:
        w.write_table(table)
    return {
        "a Parquet file": tmp_path / "t.parquet",
        "an Arrow IPC file": tmp_path / "t.feather",
        "an Arrow IPC stream": tmp_path / "t.stream",
    }


def test_parquet_and_arrow_files_are_not_taken_for_records(tmp_path):
    for kind, path in arrow_files(tmp_path).items():
        msg = rf"{path.name} is {kind}, not raw records \(it begins and ends as {kind} does\); "
        with pytest.raises(lo.LayoutError, match=msg + r"to turn it into records, give a records destination"):
            lo.convert(path, DT, tmp_path / "out.arrow", trailing="ignore")
        with open(path, "rb") as f, pytest.raises(lo.LayoutError, match=msg):  # a stream: seen at its end
            lo.convert(f, DT, tmp_path / "out.parquet", trailing="ignore", chunk_bytes=64)
        with pytest.raises(lo.LayoutError, match=msg + r"read it with pyarrow"):
            lo.read_records(path, DT, trailing="ignore")
        with pytest.raises(lo.LayoutError, match=rf"is {kind}, not raw records"):
            lo.read_records(io.BytesIO(path.read_bytes()), DT, trailing="ignore")
        back = lo.convert(path, DT, tmp_path / f"{path.stem}.bin", format="records", overwrite=True)
        assert back.records == 100  # the way that does take them
    assert not (tmp_path / "out.arrow").exists() and not (tmp_path / "out.parquet").exists()
    assert not [n for n in names(tmp_path) if n.startswith(".")]


def test_records_that_merely_begin_like_parquet_or_arrow_are_records(tmp_path):
    raw = np.zeros(64, np.uint8)
    for head, tail in [
        (b"PAR1", b"XXXX"),
        (b"ARROW1\0\0", b"ARROW2"),
        (b"PAR1", b"\xff\xff\xff\x7fPAR1"),
        (b"\xff\xff\xff\xff\x08\0\0\0", b"\xff\xff\xff\xff\0\0\0\0"),
    ]:
        data = raw.copy()
        data[: len(head)] = np.frombuffer(head, np.uint8)
        data[-len(tail) :] = np.frombuffer(tail, np.uint8)
        (tmp_path / "r.bin").write_bytes(data.tobytes())
        assert lo.convert(tmp_path / "r.bin", DT, tmp_path / "r.arrow", overwrite=True).records == 4
        assert lo.convert(io.BytesIO(data.tobytes()), DT, tmp_path / "r.arrow", overwrite=True).records == 4
        assert len(lo.read_records(tmp_path / "r.bin", DT)) == 4


@pytest.fixture
def block_device(tmp_path):
    """A loop device over a file of 8192 records (root and losetup only; else skipped)."""
    a = np.zeros(8192, DT)
    a["a"] = np.arange(len(a))
    a.tofile(tmp_path / "disk.img")
    try:
        run = subprocess.run(
            ["losetup", "-f", "--show", str(tmp_path / "disk.img")], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("no losetup here")
    if run.returncode != 0:
        pytest.skip(f"cannot attach a loop device: {run.stderr.strip()}")
    dev = run.stdout.strip()
    try:
        yield dev, a
    finally:
        subprocess.run(["losetup", "-d", dev], timeout=30)


@linux
def test_a_block_device_is_read_whole_and_never_written_over(block_device, tmp_path):
    dev, a = block_device
    assert np.array_equal(lo.read_records(dev, DT).to_numpy(), a)  # mapped, its size found by seeking
    result = lo.convert(dev, DT, tmp_path / "disk.arrow", chunk_bytes=10_000)  # read as a stream
    assert result.records == len(a)
    assert pa.ipc.open_file(tmp_path / "disk.arrow").read_all().column("a").to_pylist() == a["a"].tolist()
    with pytest.raises(
        lo.LayoutError,
        match=rf"{dev} is a block device; layouts writes files, pipes and character "
        rf"devices, never over a block device",
    ):
        lo.convert(tmp_path / "disk.arrow", DT, dev, format="records", overwrite=True)
    assert (tmp_path / "disk.img").read_bytes() == a.tobytes()
