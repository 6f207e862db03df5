"""A record file that shrinks while ``convert`` has it memory-mapped.

Reading a mapped page past a file's new end raises SIGBUS, which used to kill the
process. Now the size is checked per chunk and the reads are guarded, so a truncation
at any moment gives a ConversionError naming the file and the first record that is
gone; the destination is left as it was and no temporary file remains. Each scenario
runs in a child process: a bus error there is a failed test, not the end of the run.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGBUS on a truncated mapping, Linux")

ENV = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _child(code, timeout=90):
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=ENV, timeout=timeout
    )
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    return run.stdout


@pytest.mark.slow
def test_a_file_truncated_between_chunks_is_a_clear_error(tmp_path):
    out = _child(f"""
        import os, re, numpy as np, layouts as lo
        from conftest import TICK, ticks
        d = {str(tmp_path)!r}
        src, dst = os.path.join(d, "in.bin"), os.path.join(d, "out.arrow")
        ticks(50_000).tofile(src)  # 2.4 MB, chunks of 480,000 bytes (10,000 records)
        open(dst, "wb").write(b"old")

        def shrink(records, nbytes, total):
            if records == 10_000:  # after the first chunk: 1,000 records and a part of one are left
                os.truncate(src, 11_000 * TICK.itemsize + 20)

        try:
            lo.convert(src, TICK, dst, chunk_bytes=480_000, overwrite=True, progress=shrink)
        except lo.ConversionError as err:
            print(err)
        assert open(dst, "rb").read() == b"old"
        assert sorted(os.listdir(d)) == ["in.bin", "out.arrow"], os.listdir(d)
    """)
    assert (
        "in.bin shrank while it was being converted: it is now 528,020 bytes, so record 11,000 (byte 528,000 "
        "of the file) and the ones after it are gone"
    ) in out, out


@pytest.mark.slow
def test_pages_lost_while_a_chunk_converts_read_as_zeros_and_are_reported(tmp_path):
    """The race the size check cannot close: the file shrinks after a chunk was checked,
    while the kernel (and the reader thread) read it. No SIGBUS; the chunk is reported."""
    out = _child(f"""
        import os, numpy as np, layouts as lo
        from layouts._convert import _mapped_chunks
        from conftest import TICK, ticks
        path = {str(tmp_path / "in.bin")!r}
        ticks(100_000).tofile(path)
        for overlap in (False, True):
            with open(path, "rb") as f:
                chunks = _mapped_chunks(f, 0, 100_000, 40_000, lo.Layout.from_dtype(TICK), overlap, path)
                first = next(chunks)  # records 0..40,000, checked: the file is whole
                os.truncate(path, 30_000 * TICK.itemsize + 100)
                soa = first.to_soa()  # faults past the new end: pages of zeros, not SIGBUS
                assert soa.to_arrow().column("ts").to_pylist()[:30_000] == ticks(30_000)["ts"].tolist()
                try:
                    next(chunks)
                except lo.ConversionError as err:
                    print(err)
                else:
                    raise AssertionError("no error")
                chunks.close()
            ticks(100_000).tofile(path)
    """)
    lines = out.strip().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert (
            "in.bin shrank while it was being converted: it is now 1,440,100 bytes, so record 30,002 (byte "
            "1,440,096 of the file) and the ones after it are gone" in line
        )


@pytest.mark.slow
def test_truncation_at_random_moments_never_crashes(tmp_path):
    """A thread truncates the input at a random moment (fixed seeds) while convert runs,
    overlapped and serial, to IPC and Parquet: each run either completes (the truncation
    came after the last read) or fails with the ConversionError; the destination is
    the old file or the complete output, and no temporary file is left."""
    out = _child(f"""
        import os, random, threading, time
        import numpy as np, layouts as lo
        from conftest import TICK, ticks
        d = {str(tmp_path)!r}
        a = ticks(400_000)  # 19.2 MB
        src, dst = os.path.join(d, "in.bin"), os.path.join(d, "out")
        results = {{}}
        for seed in range(16):
            rng = random.Random(seed)
            fmt, overlap = ("arrow", "parquet")[seed % 2], seed % 4 < 2
            a.tofile(src)
            with open(dst, "wb") as f:
                f.write(b"old")
            cut = rng.randrange(0, a.nbytes)
            timer = threading.Timer(rng.uniform(0.0, 0.15), os.truncate, (src, cut))
            timer.start()
            try:
                lo.convert(src, TICK, dst, format=fmt, chunk_bytes=1 << 20, overlap=overlap, overwrite=True)
                outcome = "complete"
                assert open(dst, "rb").read() != b"old"
            except lo.ConversionError as err:
                assert "in.bin shrank while it was being converted" in str(err), err
                assert open(dst, "rb").read() == b"old"
                outcome = "error"
            except lo.LayoutError as err:  # cut before convert looked at its size: a shorter file
                assert "bytes left over" in str(err), err
                assert open(dst, "rb").read() == b"old"
                outcome = "cut before the start"
            timer.join()
            assert sorted(os.listdir(d)) == ["in.bin", "out"], os.listdir(d)
            results[outcome] = results.get(outcome, 0) + 1
        print(results)
    """)
    assert "'error'" in out, out


@pytest.mark.slow
def test_the_guard_works_when_its_handler_was_imported_first(tmp_path):
    """The handler finds the table through a linker symbol (kernels/_sigbus.py): bound
    before the handler is loaded, even where its module is imported first."""
    out = _child(f"""
        import mmap, os, numpy as np
        import layouts.kernels._sigbus
        from layouts.kernels._memory import MappedGuard
        path = {str(tmp_path / "in.bin")!r}
        open(path, "wb").write(b"x" * 3 * mmap.PAGESIZE)
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        a = np.frombuffer(m, np.uint8)
        with MappedGuard(a.ctypes.data, a.nbytes) as guard:
            os.truncate(path, mmap.PAGESIZE)
            print(int(a[2 * mmap.PAGESIZE + 5]), guard.fault())
    """)
    assert out.split() == ["0", str(2 * os.sysconf("SC_PAGESIZE") + 5)]  # zeros read; the first byte gone
