"""What reading an Arrow IPC file instead of memory-mapping it costs ``convert`` to records.

    python -m benchmarks.ipc_read                       # 7,000,000 records (~300 MB file), 9 pairs
    python -m benchmarks.ipc_read --records 100000 --repeat 3 --dir /tmp

``convert(path.arrow, DTYPE, out.bin)`` reads the IPC file through ``pyarrow.OSFile``
(each batch read into memory), so that a file another program truncates meanwhile is a
``ConversionError``, not SIGBUS. "Mapped" runs the same conversion with
``pyarrow.memory_map`` in its place: the code before. The file is warm (in the page
cache: a warm-up conversion of each kind first); times in interleaved pairs (the order
flips every pair); medians, and the ratio read / mapped (1.00: no cost).
"""

import os
import tempfile
import time
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

import layouts as lo
from layouts import _convert

from .convert_cpu import DTYPE, arguments, machine, save_json
from .convert_files import write_file


@contextmanager
def _mapped():
    """The conversion's IPC reads through a memory map (the code before), for the timing."""
    before = _convert.pa.OSFile
    _convert.pa.OSFile = pa.memory_map
    try:
        yield
    finally:
        _convert.pa.OSFile = before


def run(n, repeat, directory):
    records = os.path.join(directory, "layouts-ipc-read.bin")
    src = os.path.join(directory, "layouts-ipc-read.arrow")
    dst = os.path.join(directory, "layouts-ipc-read-out.bin")
    write_file(records, n)
    try:
        lo.convert(records, DTYPE, src, overwrite=True)

        def read():
            lo.convert(src, DTYPE, dst, overwrite=True)

        def mapped():
            with _mapped():
                lo.convert(src, DTYPE, dst, overwrite=True)

        work = {"read": read, "mapped": mapped}
        for fn in work.values():  # warm-up (page cache), not timed
            fn()
        times = {"read": [], "mapped": []}
        for i in range(repeat):
            for side in ("read", "mapped") if i % 2 == 0 else ("mapped", "read"):
                t0 = time.perf_counter()
                work[side]()
                times[side].append(time.perf_counter() - t0)
        size = os.path.getsize(src)
    finally:
        for path in (records, src, dst):
            if os.path.exists(path):
                os.unlink(path)
    read_s, mapped_s = (float(np.median(times[side])) for side in ("read", "mapped"))
    return {
        "records": n,
        "ipc bytes": size,
        "s read": read_s,
        "s mapped": mapped_s,
        "x": read_s / mapped_s,
        "times": times,
    }


def main(argv=None):
    p = arguments(__doc__, records=7_000_000, repeat=9)
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where the files go")
    args = p.parse_args(argv)
    row = run(args.records, args.repeat, args.dir)
    info = machine()
    print(
        f"convert IPC file -> records, warm, median of {args.repeat} interleaved pairs; {info['cpu']}, "
        f"{info['cores']} cores"
    )
    print(
        f"| {row['records']:,} records, {row['ipc bytes'] / 1e6:,.0f} MB | read {row['s read']:.3f} s | "
        f"mapped {row['s mapped']:.3f} s | {row['x']:.2f}x |"
    )
    save_json(args.json, info, records=args.records, repeat=args.repeat, row=row)


if __name__ == "__main__":
    main()
