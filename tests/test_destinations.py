"""convert's destinations: symlinks, FIFOs, character devices, file objects, the input
itself; streaming (Arrow IPC stream and the other formats) without seeking; a closed
pipe; the output file closed and its space freed right after a write error."""

import errno
import io
import os
import re
import socket
import stat
import subprocess
import sys
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import TICK, ticks

import layouts as lo
from layouts import _files

ENV = {**os.environ, "PYTHONPATH": os.getcwd()}
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, O_TMPFILE and /dev as on Linux")


@pytest.fixture
def tick_file(tmp_path):
    a = ticks(3000)
    path = tmp_path / "ticks.bin"
    a.tofile(path)
    return path, a


def table_of(a):
    return lo.AoS(a).to_soa().to_arrow()


def read_any(data, fmt):
    buf = pa.py_buffer(data)
    if fmt == "parquet":
        return pq.read_table(pa.BufferReader(buf))
    if fmt == "arrows":
        return pa.ipc.open_stream(buf).read_all()
    return pa.ipc.open_file(buf).read_all()


def names(d):
    return sorted(p.name for p in d.iterdir())


def test_a_symlink_is_written_through_and_stays_a_link(tick_file, tmp_path, temp_kind):
    path, a = tick_file
    (tmp_path / "data").mkdir()
    target = tmp_path / "data" / "t.arrow"
    target.write_bytes(b"old")
    link = tmp_path / "link.arrow"
    link.symlink_to(target)
    with pytest.raises(lo.LayoutError, match=r"link.arrow exists; pass overwrite=True \(--overwrite\)"):
        lo.convert(path, TICK, link)
    assert target.read_bytes() == b"old"
    result = lo.convert(path, TICK, link, overwrite=True, chunk_bytes=40_000)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert pa.ipc.open_file(target).read_all().equals(table_of(a))
    assert result.dst == str(link) and result.bytes_out == target.stat().st_size
    assert names(tmp_path) == ["data", "link.arrow", "ticks.bin"] and names(tmp_path / "data") == ["t.arrow"]
    dangling = tmp_path / "dangling.parquet"  # a link to nowhere: the target is created
    dangling.symlink_to(tmp_path / "data" / "new.parquet")
    lo.convert(path, TICK, dangling)
    assert dangling.is_symlink() and pq.read_table(tmp_path / "data" / "new.parquet").num_rows == len(a)
    lost = tmp_path / "lost.arrow"
    lost.symlink_to(tmp_path / "nodir" / "x.arrow")
    with pytest.raises(
        lo.LayoutError,
        match=r"the directory of .*nodir/x.arrow \(.*lost.arrow links there\) does "
        r"not exist",
    ):
        lo.convert(path, TICK, lost)
    loop = tmp_path / "loop.arrow"
    loop.symlink_to(loop)
    with pytest.raises(lo.LayoutError, match=r"cannot write .*loop.arrow: Too many levels of symbolic links"):
        lo.convert(path, TICK, loop, overwrite=True)


@pytest.mark.parametrize("fmt", ["arrows", "arrow", "parquet", "records"])
def test_a_fifo_is_streamed_into_not_replaced(tick_file, tmp_path, fmt):
    path, a = tick_file
    src = path
    if fmt == "records":
        src = tmp_path / "t.arrow"
        lo.convert(path, TICK, src)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    try:
        result = lo.convert(src, TICK, fifo, format=fmt, chunk_bytes=40_000)  # no overwrite needed: nothing replaced
    finally:
        reader.join(timeout=30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert result.bytes_out == len(got[0]) and result.records == len(a)
    if fmt == "records":
        assert got[0] == a.tobytes()
    else:
        assert read_any(got[0], fmt).equals(table_of(a))
    assert not [n for n in names(tmp_path) if n.startswith(".")]


@pytest.mark.slow
@linux
def test_character_devices_and_dev_stdout_are_streamed_into(tick_file, tmp_path):
    path, a = tick_file
    result = lo.convert(path, TICK, "/dev/null", format="parquet")
    assert result.records == len(a) and result.bytes_out > 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    code = (
        f"import layouts as lo, numpy as np; lo.convert({str(path)!r}, np.dtype({TICK.descr!r}, align=True), "
        f"'/dev/stdout', format='arrows', chunk_bytes=40_000)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, env=ENV, timeout=120)  # a pipe
    assert run.returncode == 0, run.stderr
    assert pa.ipc.open_stream(run.stdout).read_all().equals(table_of(a))
    out = tmp_path / "redirected.arrow"  # stdout is a file the shell opened: written into, not renamed over
    with open(out, "wb") as f:
        run = subprocess.run(
            [sys.executable, "-c", code.replace("'arrows'", "'arrow'")],
            stdout=f,
            stderr=subprocess.PIPE,
            env=ENV,
            timeout=120,
        )
    assert run.returncode == 0, run.stderr
    assert pa.ipc.open_file(out).read_all().equals(table_of(a))


def test_the_input_itself_is_refused_by_any_name(tick_file, tmp_path):
    path, a = tick_file
    os.link(path, tmp_path / "hard.bin")
    (tmp_path / "soft.bin").symlink_to(path)
    (tmp_path / "sub").mkdir()
    for dst in [path, tmp_path / "hard.bin", tmp_path / "soft.bin", tmp_path / "sub" / ".." / "ticks.bin"]:
        with pytest.raises(
            lo.LayoutError,
            match=r"is the input .*ticks.bin itself \(the same file\); write the "
            r"output to another path",
        ):
            lo.convert(path, TICK, dst, format="arrow", overwrite=True)
    with open(path, "r+b") as f:  # as a file object too
        with pytest.raises(lo.LayoutError, match=r"is the input .*ticks.bin itself"):
            lo.convert(path, TICK, f, format="arrow")
    lo.convert(path, TICK, tmp_path / "t.arrow")
    with pytest.raises(lo.LayoutError, match=r"t.arrow is the input .*t.arrow itself"):
        lo.convert(tmp_path / "t.arrow", TICK, tmp_path / "t.arrow", format="records", overwrite=True)
    assert path.read_bytes() == a.tobytes()
    assert names(tmp_path) == ["hard.bin", "soft.bin", "sub", "t.arrow", "ticks.bin"]


def test_sockets_directories_and_text_files_are_refused(tick_file, tmp_path):
    path, _ = tick_file
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s.sock"))
        with pytest.raises(
            lo.LayoutError,
            match=r"s.sock is a socket; layouts writes files, pipes and character "
            r"devices, never over a socket",
        ):
            lo.convert(path, TICK, tmp_path / "s.sock", format="arrow", overwrite=True)
    finally:
        sock.close()
    assert stat.S_ISSOCK(os.lstat(tmp_path / "s.sock").st_mode)
    with pytest.raises(lo.LayoutError, match=r"is a directory; give a file path for the output"):
        lo.convert(path, TICK, tmp_path, format="arrow")
    with pytest.raises(lo.LayoutError, match=r"is open in text mode; write to its binary buffer \(sys.stdout.buffer\)"):
        lo.convert(path, TICK, io.StringIO(), format="arrow")
    with pytest.raises(lo.LayoutError, match=r"writing to a file object \(BytesIO\) needs format=, one of \("):
        lo.convert(path, TICK, io.BytesIO())
    with pytest.raises(lo.LayoutError, match=r"dst must be a path or a writable binary file object, got int"):
        lo.convert(path, TICK, 3, format="arrow")


@pytest.mark.parametrize("fmt", ["arrows", "arrow", "feather", "parquet"])
def test_file_objects_take_every_format_without_seeking(tick_file, tmp_path, fmt):
    path, a = tick_file

    class Pipe(io.RawIOBase):  # writable, not seekable, not tellable: as a pipe is
        def __init__(self):
            self.data = bytearray()

        def writable(self):
            return True

        def write(self, b):
            self.data += b[:1000]  # short writes, as a raw pipe may do
            return min(len(b), 1000)

    out = Pipe()
    result = lo.convert(path, TICK, out, format=fmt, chunk_bytes=40_000)
    assert not out.closed and result.bytes_out == len(out.data) and result.dst == "Pipe"
    assert read_any(bytes(out.data), fmt).equals(table_of(a))
    arrow = tmp_path / "t.arrow"
    lo.convert(path, TICK, arrow)
    back = io.BytesIO()
    assert lo.convert(arrow, TICK, back, format="records").records == len(a)
    assert back.getvalue() == a.tobytes()
    with open(tmp_path / "named.arrows", "wb") as f:  # a file object's name tells the format
        lo.convert(path, TICK, f)
    assert pa.ipc.open_stream(tmp_path / "named.arrows").read_all().equals(table_of(a))
    lo.convert(path, TICK, tmp_path / "suffix.arrows")  # and so does a path's: .arrows is the IPC stream format
    assert pa.ipc.open_stream(tmp_path / "suffix.arrows").read_all().equals(table_of(a))


@pytest.mark.slow
def test_a_closed_pipe_is_a_broken_pipe_error_naming_the_output(tick_file, tmp_path):
    path, _ = tick_file
    big = tmp_path / "big.bin"
    ticks(200_000).tofile(big)  # more than a pipe holds
    for fmt in ["arrows", "parquet", "records"]:
        src = big
        if fmt == "records":
            src = tmp_path / "big.arrow"
            if not src.exists():
                lo.convert(big, TICK, src)
        r, w = os.pipe()
        os.close(r)
        with open(w, "wb") as f:
            with pytest.raises(BrokenPipeError, match=r"writing .*: its reader closed it after [\d,]+ bytes of output"):
                lo.convert(src, TICK, f, format=fmt, chunk_bytes=1 << 20, compression="none")
            try:
                f.close()
            except BrokenPipeError:
                pass
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader = threading.Thread(target=lambda: open(fifo, "rb").close())  # opens, then goes away
    reader.start()
    with pytest.raises(BrokenPipeError, match=r"writing .*out.fifo: its reader closed it"):
        lo.convert(big, TICK, fifo, format="arrows", chunk_bytes=1 << 20)
    reader.join()
    # the command: `layouts convert ... --to - | head -c 100` ends quietly
    code = (
        f"import sys, layouts as lo, numpy as np\n"
        f"try:\n    lo.convert({str(big)!r}, np.dtype({TICK.descr!r}, align=True), sys.stdout.buffer, "
        f"format='arrows')\n"
        f"except BrokenPipeError as err:\n    print(type(err).__name__, err, file=sys.stderr)\n"
        f"    import os; os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    head = child.stdout.read(100)
    child.stdout.close()
    with child.stderr:
        err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 0 and len(head) == 100
    assert re.fullmatch(
        r"BrokenPipeError \[Errno 32\] writing <stdout>: its reader closed it after [\d,]+ bytes of "
        r"output\n",
        err,
    ), err


@linux
@pytest.mark.parametrize("unnamed", [True, False], ids=["unnamed", "named"])
@pytest.mark.slow
def test_after_a_write_error_the_output_is_closed_and_freed_at_once(tmp_path, unnamed):
    """With the garbage collector off, no descriptor of the output (or of its temporary
    file) is left open once convert has raised, and nothing is left in the directory."""
    if unnamed and not _files.UNNAMED:
        pytest.skip("no O_TMPFILE here")
    ticks(100_000).tofile(tmp_path / "big.bin")  # 4.8 MB
    lo.convert(tmp_path / "big.bin", TICK, tmp_path / "big.arrow")
    code = f"""
import gc, os, resource, signal, numpy as np, layouts as lo
from layouts import _files
_files.UNNAMED = {unnamed}
gc.disable()  # what is not closed explicitly stays open
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # as a disk that fills after 1 MiB
dtype = np.dtype({TICK.descr!r}, align=True)

def open_outputs():
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{{fd}}")
        except OSError:
            continue
        if target.startswith({str(tmp_path)!r}) and "big." not in target:
            found.append(target)
    return found

for src, dst, overlap in [("big.bin", "out.arrow", True), ("big.bin", "out.parquet", False),
                          ("big.arrow", "out.bin", True), ("big.arrow", "out.bin", False)]:
    try:
        lo.convert(src, dtype, dst, chunk_bytes=400_000, overlap=overlap, compression="none")
    except OSError as err:
        print(err.errno, open_outputs(), sorted(os.listdir(".")))
    else:
        print("no error for", dst)
"""
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=ENV, timeout=120
    )
    assert run.returncode == 0, run.stderr
    expect = f"{errno.EFBIG} [] ['big.arrow', 'big.bin']"
    assert run.stdout.splitlines() == [expect] * 4, run.stdout
