"""``convert`` of a multi-GB legacy file to Arrow IPC and Parquet, against reading it once.

    python -m benchmarks.convert_files                     # 2.16 GB (45M records), 3 repeats
    python -m benchmarks.convert_files --records 2000000 --repeat 1 --dir /tmp
    python -m benchmarks.convert_files --device cuda       # the conversion on the GPU
    python -m benchmarks.convert_files --cold              # from the disk (root, Linux)

The file holds records of the foundation's 48-byte tick dtype. In the same run it times:
reading the file once into a reused buffer (the disk / page-cache ceiling), copying it
to a new file (a plain copy of the same bytes, one thread, nothing converted: every
conversion writes about as many bytes to a new file), and
``convert`` to Arrow IPC (uncompressed) and to Parquet (uncompressed), each overlapped
(a reader thread fills chunk k+1 while chunk k converts and a writer thread writes
chunk k-1) and serial (same chunks, one after another), and each of those outputs back
to records, overlapped and serial. Medians, as GB/s of record bytes and as ratios to
the read and to the copy.

By default the input stays in the page cache, so reading it is a memory copy. With
``--cold`` the page cache is dropped before every timed run (``/proc/sys/vm/drop_caches``,
which needs root): the read ceiling is then the disk's, and every conversion reads its
input from the disk, as a conversion of a file larger than memory does.

With ``--device cuda`` the conversions run on the GPU (``convert(..., device="cuda")``):
overlapped, each chunk is copied to pinned memory and its transfers and kernels are
queued on its own CUDA stream while the chunk before converts and the one before that
is written; serial, each chunk waits for the last.
"""

import os
import tempfile
import time

import numpy as np

import layouts as lo
from layouts import _backends as lo_backends

from .convert_cpu import DTYPE, arguments, machine, median_seconds, records, save_json


def write_file(path, n, block=5_000_000):
    with open(path, "wb") as f:
        for start in range(0, n, block):
            part = records(min(block, n - start))
            part["ts"] += start
            part.tofile(f)


def read_once(path, chunk):
    buf = np.empty(chunk, dtype=np.uint8)
    view, total = memoryview(buf), 0
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(view)
            if not n:
                return total
            total += n


def drop_page_cache():
    """Write back dirty pages and drop the clean ones, so the next read comes from disk."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    except OSError as err:
        raise SystemExit(
            f"--cold drops the page cache through /proc/sys/vm/drop_caches, which needs root on "
            f"Linux: {err.strerror}; run without --cold to time from the page cache"
        ) from None


def _timed(convert, dst, repeat, cold=False):
    """Median seconds of ``convert()``, each run writing a new ``dst`` (replacing a GB
    file would add its unlink) after a ``sync`` (and with ``cold`` after dropping the
    page cache), after one warm-up run (kernels)."""
    times = []
    for i in range(repeat + 1):
        if dst is not None and os.path.exists(dst):
            os.unlink(dst)
        os.sync()  # start each run with no dirty pages of the last one still being written back
        if cold:
            drop_page_cache()
        t0 = time.perf_counter()
        convert()
        if i:
            times.append(time.perf_counter() - t0)
    return float(np.median(times))


def write_once(path, dst, chunk):
    """Copy the file to a new file, chunk by chunk, in one thread: reading it and writing
    an output of the same size (new page-cache pages), with nothing converted."""
    buf = np.empty(chunk, dtype=np.uint8)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f, open(dst, "wb", buffering=0) as out:
        while True:
            n = f.readinto(view)
            if not n:
                return
            out.write(view[:n])


def run(n, repeat, directory, chunk, device=None, cold=False):
    path = os.path.join(directory, "layouts-bench.bin")
    write_file(path, n)
    nbytes = os.path.getsize(path)
    rows = []
    try:
        if cold:
            ceiling = _timed(lambda: read_once(path, chunk), None, repeat, cold)
        else:
            read_once(path, chunk)  # page cache warm, as for every conversion after it
            ceiling = median_seconds(lambda: read_once(path, chunk), repeat)
        rows.append({"name": "read the file once (ceiling)", "seconds": ceiling})
        copy = os.path.join(directory, "layouts-bench-copy.bin")
        writing = _timed(lambda: write_once(path, copy, chunk), copy, repeat, cold)
        os.unlink(copy)
        rows.append({"name": "copy the file to a new file (plain copy)", "seconds": writing})
        on = "" if lo_backends.get(device).host else " on the GPU"
        for fmt, compression in (("arrow", "none"), ("parquet", "none")):
            dst = os.path.join(directory, f"layouts-bench.{fmt}")
            back = os.path.join(directory, "layouts-bench-back.bin")
            for overlap in (True, False):
                mode = "overlapped" if overlap else "serial"
                seconds = _timed(
                    lambda: lo.convert(
                        path,
                        DTYPE,
                        dst,
                        format=fmt,
                        compression=compression,
                        chunk_bytes=chunk,
                        overlap=overlap,
                        device=device,
                    ),
                    dst,
                    repeat,
                    cold,
                )
                rows.append({"name": f"convert{on} -> {fmt} ({mode})", "seconds": seconds})
            for overlap in (True, False):
                mode = "overlapped" if overlap else "serial"
                seconds = _timed(
                    lambda: lo.convert(dst, DTYPE, back, chunk_bytes=chunk, overlap=overlap, device=device),
                    back,
                    repeat,
                    cold,
                )
                rows.append({"name": f"convert{on} {fmt} -> records ({mode})", "seconds": seconds})
            os.unlink(dst)
            os.unlink(back)
    finally:
        os.unlink(path)
    for r in rows:
        r["GB/s"] = nbytes / r["seconds"] / 1e9
        r["x_read"] = ceiling / r["seconds"]
        r["x_copy"] = writing / r["seconds"]
    return nbytes, rows


def main(argv=None):
    p = arguments(__doc__, records=45_000_000, repeat=3)
    p.add_argument("--chunk", type=int, default=64 << 20, help="bytes per chunk")
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where the file and outputs go")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the conversions run")
    p.add_argument(
        "--cold",
        action="store_true",
        help="drop the page cache before every timed run: read from the disk (needs root)",
    )
    args = p.parse_args(argv)
    if args.cold:
        drop_page_cache()  # fails at once, before the file is written, without root
    nbytes, rows = run(args.records, args.repeat, args.dir, args.chunk, args.device, args.cold)
    info = machine()
    print(
        f"{args.records:,} records x {DTYPE.itemsize} bytes = {nbytes / 1e9:.2f} GB, chunks of "
        f"{args.chunk >> 20} MiB, median of {args.repeat}, {'from the disk' if args.cold else 'page cache warm'}; "
        f"{info['cpu']}, {info['cores']} cores"
    )
    for r in rows:
        print(f"| {r['name']:<42} | {r['GB/s']:6.2f} GB/s | {r['x_read']:5.2f} x read | {r['x_copy']:5.2f} x copy |")
    if not lo_backends.get(args.device).host:
        info["gpu"] = gpu_name()
        print(f"GPU: {info['gpu']}")
    save_json(
        args.json,
        info,
        records=args.records,
        bytes=nbytes,
        chunk=args.chunk,
        repeat=args.repeat,
        device=args.device,
        cold=args.cold,
        rows=rows,
    )


def gpu_name():
    from layouts._cuda import device as _device

    if _device.simulated():
        return "Numba CUDA simulator"
    name = _device.cuda().get_current_device().name
    return name.decode() if isinstance(name, bytes) else name


if __name__ == "__main__":
    main()
