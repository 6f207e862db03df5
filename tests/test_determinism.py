"""Every byte of an output is defined: the same input converted twice gives the same
bytes, and memory freed before a conversion never shows up in its output.

Arrow writers may write a buffer's bytes up to the next 64-byte boundary (pyarrow's IPC
writer does, for string data); those bytes used to be whatever the heap held before
(a freed "PASSWORD=..." string was found in an IPC file). A marker is planted in freed
memory of the sizes the arenas take, so that the arenas really do start with it
(checked), and the outputs must not contain it.
"""

import os
import subprocess
import sys
import textwrap

import pytest

ENV = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")}

MARKER = b"PASSWORD=hunter2-planted!"

_CHILD = """
import io, os, sys
import numpy as np, pyarrow as pa, layouts as lo
from layouts._arena import Arena

MARKER = {marker!r}
d, tag, rows = {d!r}, sys.argv[1], 1000
dt = np.dtype([("id", "<i8"), ("name", "S13"), ("word", "U5"), ("qty", "<i4"), ("flag", "?"),
               ("ts", "M8[us]"), ("pos", "<f4", (3,))])
layout = lo.Layout.from_dtype(dt, bytes_as={{"name": "string"}})
nulls = {{"qty": -1}}
rng = np.random.default_rng(5)
a = np.zeros(5_500, dt)  # five whole chunks of 1,000 records and one of 500
a["id"] = np.arange(len(a))
a["name"] = rng.choice([b"", b"ab", b"abcdefg", b"abcdefghijklm"], len(a))
a["word"] = rng.choice(["", "x", "\\u00e9t\\u00e9", "hello"], len(a))
a["qty"] = rng.integers(-1, 5, len(a))
a["flag"] = rng.random(len(a)) < 0.5
a["ts"] = np.where(rng.random(len(a)) < 0.1, np.datetime64("NaT"), np.datetime64("2024-01-01", "us"))
src = os.path.join(d, "in.bin")
if not os.path.exists(src):
    a.tofile(src)

sizes = sorted({{Arena(layout, n, frozenset(nulls)).nbytes + 64 for n in (rows, len(a) % rows, len(a), 300)}})

def plant():
    # fill freed blocks of the arenas' sizes with the marker
    junk = [np.frombuffer(MARKER * (size // len(MARKER) + 1), np.uint8)[:size].copy() for size in sizes for _ in range(3)]
    del junk

lo.AoS(a[:300], layout).to_soa(nulls=nulls)  # kernels compiled or loaded, first allocations made
plant()
soa = lo.AoS(a[:300], layout).to_soa(nulls=nulls)
planted = MARKER in soa.arena.tobytes()  # the arena did get the marker (where no export looks)
sink = io.BytesIO()
with pa.ipc.new_file(sink, soa.schema) as w:
    w.write_table(soa.to_arrow())
assert MARKER not in sink.getvalue(), "the marker leaked into an IPC file written from to_arrow()"
del soa
for fmt in ("arrow", "feather", "parquet"):
    for run in (1, 2):
        plant()
        dst = os.path.join(d, f"{{tag}}-{{run}}.{{fmt}}")
        lo.convert(src, layout, dst, chunk_bytes=rows * dt.itemsize, nulls=nulls, compression="none"
                   if fmt != "feather" else None)
        data = open(dst, "rb").read()
        assert MARKER[:12] not in data, f"{{dst}}: the marker leaked into the output"
    assert open(os.path.join(d, f"{{tag}}-1.{{fmt}}"), "rb").read() == data, f"{{fmt}}: two runs differ"
print("planted" if planted else "not planted")
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="heap reuse as glibc does it")
def test_same_input_twice_gives_identical_files_and_no_freed_memory(tmp_path):
    code = textwrap.dedent(_CHILD.format(marker=MARKER, d=str(tmp_path)))
    seen = []
    for tag in ("p1", "p2"):  # two processes: two different heaps
        run = subprocess.run([sys.executable, "-c", code, tag], capture_output=True, text=True, env=ENV, timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
        seen.append(run.stdout.strip())
    assert "planted" in seen, seen  # the marker did reach an arena, so the check means something
    for fmt in ("arrow", "feather", "parquet"):
        assert (tmp_path / f"p1-1.{fmt}").read_bytes() == (tmp_path / f"p2-1.{fmt}").read_bytes(), fmt
