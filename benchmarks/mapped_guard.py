"""What guarding the reads of a mapped file (``layouts._faults.guarded_reads``) costs ``to_soa``.

    python -m benchmarks.mapped_guard                      # 1, 1,000 and 1,000,000 records, 15 pairs
    python -m benchmarks.mapped_guard --records 100000 --repeat 5 --dir /tmp

``read_records`` maps a file of the foundation's tick records; ``AoS.to_soa`` of it is
guarded (the file's size checked before and after, a SIGBUS guard set around the
kernel). "Unguarded" converts the same mapped records through a plain ``ndarray`` view
of the map, which the guard passes over: the code before the guard existed. Times in
interleaved pairs (the order flips every pair), each the best of a few calls for the
small sizes; medians, and the ratio guarded / unguarded (1.00: no cost). Also the
one-time cost of the first guard in a process (the SIGBUS handler is compiled then).
"""

import os
import tempfile
import time

import numpy as np

import layouts as lo
from layouts.kernels import _memory

from .convert_cpu import DTYPE, arguments, machine, save_json
from .convert_files import write_file


def _best(fn, calls):
    best = float("inf")
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(n, repeat, directory, threads=None):
    path = os.path.join(directory, "layouts-guard.bin")
    write_file(path, n)
    rows = []
    try:
        aos = lo.read_records(path, DTYPE)
        setup = None
        if _memory._guards is None:  # the SIGBUS handler is compiled on the first guard in a process
            t0 = time.perf_counter()
            _memory.MappedGuard(aos.array.ctypes.data, aos.array.nbytes).close()
            setup = time.perf_counter() - t0
        for size in sorted({1, min(1_000, n), n}):
            guarded = lo.AoS(aos.to_numpy()[:size])  # a view of the map: still a numpy.memmap
            plain = lo.AoS(aos.to_numpy()[:size].view(np.ndarray))
            assert isinstance(guarded.array, np.memmap) and not isinstance(plain.array, np.memmap)
            calls = 1 if size >= 100_000 else 200
            work = {True: lambda g=guarded: g.to_soa(threads=threads), False: lambda p=plain: p.to_soa(threads=threads)}
            for fn in work.values():  # warm-up (kernels, page cache), not timed
                fn()
            times = {True: [], False: []}
            for i in range(repeat):
                for side in (True, False) if i % 2 == 0 else (False, True):
                    times[side].append(_best(work[side], calls))
            with_, without = (float(np.median(times[side])) for side in (True, False))
            rows.append(
                {
                    "records": size,
                    "bytes": size * DTYPE.itemsize,
                    "us guarded": with_ * 1e6,
                    "us unguarded": without * 1e6,
                    "x": with_ / without,
                }
            )
        del aos, guarded, plain
    finally:
        os.unlink(path)
    return rows, setup


def main(argv=None):
    p = arguments(__doc__, records=1_000_000, repeat=15)
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where the file goes")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    rows, setup = run(args.records, args.repeat, args.dir, args.threads)
    info = machine()
    print(f"to_soa of mapped records, median of {args.repeat} interleaved pairs; {info['cpu']}, {info['cores']} cores")
    if setup is not None:
        print(f"once per process, the first guard compiles the SIGBUS handler: {setup:.3f} s")
    for r in rows:
        print(
            f"| {r['records']:>9,} records | guarded {r['us guarded']:10.1f} us | unguarded "
            f"{r['us unguarded']:10.1f} us | {r['x']:4.2f}x |"
        )
    save_json(args.json, info, records=args.records, repeat=args.repeat, handler_setup_s=setup, rows=rows)


if __name__ == "__main__":
    main()
