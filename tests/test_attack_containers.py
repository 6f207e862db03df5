"""What an attacker found in the containers and the kernel cache, fixed.

Each scenario that could crash (SIGBUS) or hang runs in a child process with a
timeout: a signal or a hang there is a failed test, not the end of the run.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import layouts as lo

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGBUS on a truncated mapping, Linux")

ENV = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _child(code, timeout=120, env=None):
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         env=env or ENV, timeout=timeout)
    assert run.returncode == 0, (run.returncode, run.stdout[-2000:], run.stderr[-3000:])
    return run.stdout


# ------------------------------------------------ 1. copies of a mapped file that shrank

@linux
@pytest.mark.parametrize("source", ["path", "file object"])
def test_copies_of_a_mapped_file_that_shrank_are_conversion_errors(tmp_path, source):
    """pickle.dumps (what Dask does to ship an AoS) and np.array(aos) copy the mapped
    records: guarded, they raise the ConversionError to_soa raises, never SIGBUS."""
    out = _child(f"""
        import os, pickle, numpy as np, layouts as lo
        path = {str(tmp_path / "m.bin")!r}
        dt = [("a", "<i8"), ("b", "<i8")]
        np.zeros(100_000, dt).tofile(path)
        f = open(path, "rb")
        aos = lo.read_records(path if {source == "path"} else f, dt)
        part = lo.AoS(aos.to_numpy()[10:], aos.layout)  # a view of the map
        os.truncate(path, 4096)  # another program shrinks the file
        for what, call in [("to_soa", aos.to_soa), ("pickle", lambda: pickle.dumps(aos)),
                           ("pickle part", lambda: pickle.dumps(part)),
                           ("np.array", lambda: np.array(aos)), ("astype", lambda: np.asarray(aos, dtype="V16")),
                           ("copy=True", lambda: aos.__array__(copy=True))]:
            try:
                call()
            except lo.ConversionError as err:
                print(what, "|", err)
            else:
                print(what, "| no error")
    """)
    lines = dict(line.split(" | ", 1) for line in out.strip().splitlines())
    assert set(lines) == {"to_soa", "pickle", "pickle part", "np.array", "astype", "copy=True"}, out
    gone = "it is now 4,096 bytes, so record 256 (byte 4,096 of the file) and the ones after it are gone"
    assert f"m.bin shrank while it was being read: {gone}" in lines["to_soa"], out
    for what in ("pickle", "pickle part"):
        assert f"m.bin shrank while it was being pickled: {gone}" in lines[what], out
        assert "read it again (layouts.read_records) once it is complete" in lines[what], out
    for what in ("np.array", "astype", "copy=True"):
        assert f"m.bin shrank while it was being copied: {gone}" in lines[what], out


def test_a_mapped_aos_pickles_as_its_records(tmp_path):
    path = tmp_path / "m.bin"
    records = np.array([(1, 2.5), (3, -1.0)], [("a", "<i8"), ("b", "<f8")])
    records.tofile(path)
    import pickle

    aos = lo.read_records(path, records.dtype)
    back = pickle.loads(pickle.dumps(aos))
    assert type(back.array) is np.ndarray and back.array.tolist() == records.tolist()
    copied = np.array(aos)
    assert type(copied) is np.ndarray and copied.tolist() == records.tolist()
    assert not np.shares_memory(copied, aos.to_numpy())
    plain = lo.AoS(records)
    assert not np.shares_memory(plain.__array__(copy=True), records)
    assert np.asarray(plain) is records
