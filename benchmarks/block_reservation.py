"""What reserving an output's disk blocks ahead (``layouts._files.BlockReservation``) gains.

    python -m benchmarks.block_reservation                 # 2.16 GB, 7 interleaved pairs
    python -m benchmarks.block_reservation --records 2000000 --repeat 3 --dir /tmp

Writes the foundation's tick records to a file (kept in the page cache), then times, with
and without the reservation, in interleaved pairs (the order flips every pair, so a
slow spell of a shared disk hits both sides): writing those bytes to a new file in 64
MiB writes, and ``convert`` of the file to uncompressed Arrow IPC. Each run writes a new
file after a ``sync``. "Without" is the same code with ``fallocate`` unavailable, as on a
system or filesystem without it. Medians, as GB/s and as the ratio with / without.
"""

import os
import tempfile
import time
from unittest import mock

import numpy as np

import layouts as lo
from layouts import _files

from .convert_cpu import DTYPE, arguments, machine, save_json
from .convert_files import read_once, write_file

CHUNK = 64 << 20


def write_new(src, dst):
    """Copy ``src`` into a new file ``dst`` in CHUNK writes, reserving blocks ahead."""
    buf = np.empty(CHUNK, dtype=np.uint8)
    view = memoryview(buf)
    with open(src, "rb", buffering=0) as f, open(dst, "wb", buffering=0) as out:
        blocks = _files.BlockReservation(dst)
        try:
            while n := f.readinto(view):
                blocks.ahead(n)
                out.write(view[:n])
        finally:
            blocks.close()


def run(n, repeat, directory):
    path = os.path.join(directory, "layouts-reserve.bin")
    dst = os.path.join(directory, "layouts-reserve.out")
    write_file(path, n)
    nbytes = os.path.getsize(path)
    work = {
        "write the bytes to a new file": lambda: write_new(path, dst),
        "convert -> arrow (overlapped)": lambda: lo.convert(path, DTYPE, dst, format="arrow", compression="none"),
    }
    times = {(name, reserved): [] for name in work for reserved in (True, False)}
    try:
        read_once(path, CHUNK)  # page cache warm
        for fn in work.values():  # warm-up (kernels), not timed
            fn()
            os.unlink(dst)
        for i in range(repeat):
            for reserved in (True, False) if i % 2 == 0 else (False, True):
                for name, fn in work.items():
                    os.sync()
                    with mock.patch.object(_files, "_FALLOCATE", _files._FALLOCATE if reserved else None):
                        t0 = time.perf_counter()
                        fn()
                        times[name, reserved].append(time.perf_counter() - t0)
                    os.unlink(dst)
    finally:
        os.unlink(path)
        if os.path.exists(dst):
            os.unlink(dst)
    rows = []
    for name in work:
        with_, without = (float(np.median(times[name, r])) for r in (True, False))
        rows.append(
            {
                "name": name,
                "GB/s reserved": nbytes / with_ / 1e9,
                "GB/s not reserved": nbytes / without / 1e9,
                "x": without / with_,
            }
        )
    return nbytes, rows


def main(argv=None):
    p = arguments(__doc__, records=45_000_000, repeat=7)
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where the files go")
    args = p.parse_args(argv)
    supported = _files._FALLOCATE is not None
    nbytes, rows = run(args.records, args.repeat, args.dir)
    info = machine()
    print(
        f"{nbytes / 1e9:.2f} GB, median of {args.repeat} interleaved pairs; {info['cpu']}, {info['cores']} cores"
        + ("" if supported else "; fallocate is not available here, so both sides are the same")
    )
    for r in rows:
        print(
            f"| {r['name']:<32} | reserved {r['GB/s reserved']:5.2f} GB/s | not reserved "
            f"{r['GB/s not reserved']:5.2f} GB/s | {r['x']:4.2f}x |"
        )
    save_json(args.json, info, records=args.records, bytes=nbytes, repeat=args.repeat, fallocate=supported, rows=rows)


if __name__ == "__main__":
    main()
