"""What an attacker found in the file inputs: an Arrow IPC input truncated while it is
converted (SIGBUS), concatenated IPC streams and trailing bytes, closed, write-only and
text-mode file objects, directories and procfs files, and how a pipe is named. Crashes
run in a child process with a timeout: a bus error there is a failed test."""

import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                    os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
DT = np.dtype([("a", "<i8"), ("b", "<f8")])


def _child(code, timeout=120):
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=ENV,
                         timeout=timeout)
    assert run.returncode == 0, (run.returncode, run.stdout[-2000:], run.stderr[-3000:])
    return run.stdout


def _table(n, start=0):
    return pa.table({"a": pa.array(np.arange(start, start + n)), "b": pa.array(np.ones(n))})


def _records(n, start=0):
    a = np.zeros(n, DT)
    a["a"], a["b"] = np.arange(start, start + n), 1.0
    return a.tobytes()


# ----------------------------------------------------------------- 1. an IPC input truncated meanwhile


@pytest.mark.parametrize("kind", ["file", "stream"])
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
