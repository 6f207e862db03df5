"""Ctrl-C and kill -9 at random moments: never a crash, never a partial output.

Every loop runs in a child process (a crash there is a failed test, not the end of the
run), with fixed seeds and a bounded number of rounds. A SIGINT lands wherever the main
thread happens to be: in a kernel call while the worker threads write the arena, in the
reader or writer hand-offs of ``convert``, in pyarrow's writer. Afterwards the
destination must be absent, the old file, or the complete new one, no temporary file
may be left, and the next conversion in the same process must give the right answer.
"""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo
from conftest import TICK, ticks

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals as on Linux")

ENV = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _child(code, timeout=60):
    """Run ``code`` in a fresh interpreter; returns (returncode, stdout, stderr)."""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                         timeout=timeout)
    return run.returncode, run.stdout, run.stderr


# A thread of the child sends SIGINT to its own process at random moments (fixed seed).
_SIGNALLER = """
import os, random, signal, threading, time
def signaller(seed, low, high, until):
    rng = random.Random(seed)
    def run():
        while time.monotonic() < until[0]:
            time.sleep(rng.uniform(low, high))
            if time.monotonic() < until[0]:
                os.kill(os.getpid(), signal.SIGINT)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread

def stop(thread, until):
    # no signal after this returns: wait for the signaller to end, taking what it sends
    until[0] = 0
    while True:
        try:
            thread.join()
            time.sleep(0.02)  # a signal just sent is handled here
            return
        except KeyboardInterrupt:
            pass
"""


def test_sigint_loop_during_to_soa_and_to_aos():
    """SIGINTs every few milliseconds while to_soa/to_aos run on two threads: before the
    fix the main thread left while kernel workers still wrote into a freed arena
    (segfault within a second or two)."""
    code = _SIGNALLER + textwrap.dedent("""
    import numpy as np, layouts as lo
    from conftest import TICK, ticks
    layout = lo.Layout.from_dtype(np.dtype([("a", "<i8"), ("b", ">f8"), ("s", "S16"), ("f", "?")]),
                                  bytes_as={"s": "string"})
    a = np.zeros(1_500_000, layout.dtype)
    a["a"] = np.arange(len(a)); a["s"] = b"hello"; a["f"] = a["a"] % 3 == 0
    expected = lo.AoS(a[:1000], layout).to_soa().to_arrow()  # kernels compiled or loaded, outside the loop
    until = [time.monotonic() + 4.0]
    thread = signaller(7, 0.0, 0.03, until)
    interrupted = finished = 0
    while time.monotonic() < until[0]:
        try:
            back = lo.AoS(a, layout).to_soa(threads=2).to_aos(threads=2)
            assert (back.array == a).all()
            finished += 1
        except KeyboardInterrupt:
            interrupted += 1
    stop(thread, until)
    # the next conversions in this process work
    assert lo.AoS(a[:1000], layout).to_soa().to_arrow().equals(expected)
    assert (lo.AoS(a, layout).to_soa().to_aos().array == a).all()
    print(interrupted, finished)
    """)
    rc, out, err = _child(code)
    assert rc == 0, (rc, err[-2000:])
    interrupted, finished = map(int, out.split())
    assert interrupted >= 20, out


_CONVERTER = """
import glob, os, sys, time
import numpy as np, pyarrow as pa, pyarrow.parquet as pq, layouts as lo
from conftest import TICK, ticks

def files(d):
    return sorted(os.listdir(d))

def check_destination(path, expected_bytes, old):
    # absent, the old file, or the complete new one
    if not os.path.exists(path):
        return "absent"
    data = open(path, "rb").read()
    if data == old:
        return "old"
    assert data == expected_bytes, f"{path}: {len(data)} bytes, neither old nor the complete new output"
    return "new"
"""


def test_sigint_loop_during_convert_in_process(tmp_path):
    """SIGINTs at random moments of lo.convert, every direction, overlap on and off,
    in one process: KeyboardInterrupt each time (or success), the destination absent,
    old or complete, no temporary file, and the process goes on converting."""
    a = ticks(300_000)
    a.tofile(tmp_path / "in.bin")
    code = _SIGNALLER + _CONVERTER + textwrap.dedent(f"""
    d = {str(tmp_path)!r}
    src = os.path.join(d, "in.bin")
    layout = lo.Layout.from_dtype(TICK, bytes_as={{"sym": "string"}})
    cases = []
    for overlap in (True, False):
        for fmt in ("arrow", "parquet", "records"):
            dst = os.path.join(d, f"out-{{fmt}}-{{overlap}}.{{'bin' if fmt == 'records' else fmt}}")
            source = src if fmt != "records" else os.path.join(d, "in.arrow")
            cases.append((source, dst, fmt, overlap))
    lo.convert(src, layout, os.path.join(d, "in.arrow"), chunk_bytes=1 << 20, nulls={{"qty": -1}})
    expected = {{}}
    for source, dst, fmt, overlap in cases:  # the complete outputs, made uninterrupted
        lo.convert(source, layout, dst, format=fmt, chunk_bytes=1 << 20, overlap=overlap, fill={{"qty": -1}}
                   if fmt == "records" else None, nulls=None if fmt == "records" else {{"qty": -1}})
        expected[dst] = open(dst, "rb").read()
        os.replace(dst, dst + ".expected")
    before = files(d)
    outcomes = {{}}
    for round in range(4):
        for i, (source, dst, fmt, overlap) in enumerate(cases):
            old = None
            if round % 2:
                open(dst, "wb").write(b"old")
                old = b"old"
            until = [time.monotonic() + 0.3]
            thread = signaller(100 * round + i, 0.0, 0.2, until)
            try:
                lo.convert(source, layout, dst, format=fmt, chunk_bytes=1 << 20, overlap=overlap, overwrite=True,
                           fill={{"qty": -1}} if fmt == "records" else None,
                           nulls=None if fmt == "records" else {{"qty": -1}})
                state = "done"
            except KeyboardInterrupt:
                state = "interrupted"
            stop(thread, until)
            seen = check_destination(dst, expected[dst], old)
            assert state == "interrupted" or seen == "new", (state, seen)
            outcomes[state, seen] = outcomes.get((state, seen), 0) + 1
            if os.path.exists(dst):
                os.unlink(dst)
            assert files(d) == before, (files(d), before)  # no temporary file left behind
    for source, dst, fmt, overlap in cases:  # and the process still converts correctly
        lo.convert(source, layout, dst, format=fmt, chunk_bytes=1 << 20, overlap=overlap,
                   fill={{"qty": -1}} if fmt == "records" else None,
                   nulls=None if fmt == "records" else {{"qty": -1}})
        assert open(dst, "rb").read() == expected[dst]
    print(sorted(outcomes.items()))
    """)
    rc, out, err = _child(code, timeout=120)
    assert rc == 0, (rc, err[-3000:])
    assert "'interrupted'" in out and "'done'" in out, out


DT = "[('ts','<i8'),('px','<f8'),('qty','<i4'),('side','u1'),('sym','S8'),('pos','<f4',(3,)),('flag','?')]"


def _layouts_convert(src, dst, *extra):
    return subprocess.Popen([sys.executable, "-m", "layouts", "convert", str(src), "--dtype", DT, "--to", str(dst),
                             "--chunk", "1M", "--quiet", "--overwrite", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**ENV, "NUMBA_ENABLE_CUDASIM": "0"})


@pytest.fixture(scope="module")
def packed_ticks(tmp_path_factory):
    """A 24 MB record file of the packed TICK layout, and the complete outputs."""
    d = tmp_path_factory.mktemp("cli")
    a = ticks(600_000)
    packed = np.zeros(len(a), np.dtype(eval(DT)))
    for name in packed.dtype.names:
        packed[name] = a[name]
    packed.tofile(d / "in.bin")
    expected = {}
    for suffix in ("arrow", "parquet"):
        t0 = time.monotonic()
        proc = _layouts_convert(d / "in.bin", d / f"expected.{suffix}")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        expected[suffix] = ((d / f"expected.{suffix}").read_bytes(), time.monotonic() - t0)
    return d, expected


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_signal_loop_against_layouts_convert(packed_ticks, how):
    """``layouts convert`` sent SIGINT (Ctrl-C) or SIGKILL at random moments, startup
    included: it exits 130 after "interrupted" (or -SIGINT while still starting, or
    finishes), never with a crash; the destination is absent, old, or complete."""
    d, expected = packed_ticks
    rng = random.Random(15 if how == "SIGINT" else 16)
    sig = getattr(signal, how)
    before = sorted(os.listdir(d))
    codes = {}
    for i in range(10 if how == "SIGINT" else 6):
        suffix = ("arrow", "parquet")[i % 2]
        data, seconds = expected[suffix]
        dst = d / f"out.{suffix}"
        if i % 4 >= 2:
            dst.write_bytes(b"old")
        proc = _layouts_convert(d / "in.bin", dst)
        time.sleep(rng.uniform(0.5, 1.1) * seconds)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        codes[proc.returncode] = codes.get(proc.returncode, 0) + 1
        if how == "SIGINT":
            assert proc.returncode in (0, 130, -signal.SIGINT), (proc.returncode, err.decode()[-2000:])
            if proc.returncode == 130:
                assert b"interrupted" in err
        else:
            assert proc.returncode in (0, -signal.SIGKILL), (proc.returncode, err.decode()[-2000:])
        if dst.exists():
            got = dst.read_bytes()
            assert got == b"old" or got == data, f"round {i}: {len(got)} bytes, neither old nor complete"
            dst.unlink()
        leftovers = sorted(set(os.listdir(d)) - set(before))
        assert leftovers == [], (how, i, leftovers)
    assert set(codes) - {0}, codes  # some runs were cut short


def test_interrupted_kernel_call_leaves_the_next_one_correct():
    """A KeyboardInterrupt raised on the calling thread (here: from the first chunk's
    progress) waits for the worker threads; the result of the next call is exact."""
    a = ticks(200_000)
    layout = lo.Layout.from_dtype(TICK)
    expected = lo.AoS(a).to_soa().to_arrow()
    from layouts.kernels import cpu

    calls = {"n": 0}
    original = cpu._Chunks._convert

    def interrupting(self, ci):
        original(self, ci)
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt

    cpu._Chunks._convert = interrupting
    try:
        with pytest.raises(KeyboardInterrupt):
            lo.AoS(a).to_soa(threads=4)
    finally:
        cpu._Chunks._convert = original
    assert lo.AoS(a, layout).to_soa(threads=4).to_arrow().equals(expected)
    assert isinstance(expected, pa.Table)
