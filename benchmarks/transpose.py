"""The transpose both ways against the memory's speed, at any width, and in files.

    python -m benchmarks.transpose                    # 10,000,000 records, 7 rounds (~3 min on 2 cores)
    python -m benchmarks.transpose --records 200000 --repeat 1 --file-records 100000   # smoke size

In one process, on the 48-byte trade records of ``benchmarks.convert_cpu``:

* ceilings: ``np.copy`` of the record bytes (fresh output), ``np.copyto`` into a reused
  buffer, and the same copy split over every core (threads of ``np.copyto``);
* layouts AoS -> SoA and SoA -> AoS, into fresh output (with the Arrow wrap forward) and
  into reused output (``out=``), NumPy's per-field copies both ways (the fastest
  complete peer) and ``polars.from_numpy`` forward.

The cases run in interleaved rounds (every case once per round), so a noisy neighbour
slows all of them alike; figures are medians over the rounds, as GB/s of record bytes
and as ratios: reused output against ``np.copyto``, fresh output against ``np.copy``,
layouts against NumPy's per-field copies.

Then the costs that must grow linearly: a table of 2,500 and of 10,000 int32 columns
back to records (``from_arrow`` + ``to_aos``), and 32 records of 1 MB against one
record of 32 MB (a sub-array; the same bytes) there and back, Layout included. Last, files: ``convert`` of a file of the same records to
Arrow IPC and back, against copying the file and against the pipeline a user would
write without layouts (``np.memmap``, per-field copies, pyarrow's IPC writer; and back:
pyarrow's reader, per-field assignment into records, a file write).
"""

import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

import layouts as lo

from .convert_cpu import DTYPE, arguments, machine, records, run_times, save_json
from .convert_files import write_file, write_once


def interleaved(cases, rounds, before=None):
    """Median seconds of each case, the cases run in turn in every round (after one
    untimed warm-up round); ``before(name)``, untimed, ahead of each run."""
    times = {name: [] for name in cases}
    for r in range(rounds + 1):
        for name, fn in cases.items():
            if before is not None:
                before(name)
            t0 = time.perf_counter()
            fn()
            if r:
                times[name].append(time.perf_counter() - t0)
    return {name: float(np.median(t)) for name, t in times.items()}


def parallel_copy(dst, src, threads):
    """``np.copyto`` split into one contiguous piece per thread (NumPy releases the GIL)."""
    step = -(-len(src) // threads)
    pieces = [(dst[i : i + step], src[i : i + step]) for i in range(0, len(src), step)]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda p: np.copyto(*p), pieces))


def numpy_to_columns(a):
    return {name: np.ascontiguousarray(a[name]) for name in a.dtype.names}


def numpy_to_records(columns, out):
    for name, column in columns.items():
        out[name] = column
    return out


def in_memory(n, rounds, threads):
    a = records(n)
    raw = a.view(np.uint8)
    reused, fresh_records = np.empty_like(raw), np.empty(n, DTYPE)
    cores = threads or len(os.sched_getaffinity(0))
    aos = lo.AoS(a)
    arena = aos.to_soa(threads=threads)
    soa = aos.to_soa(threads=threads)
    columns = numpy_to_columns(a)
    import polars as pl

    # Each fresh-output case right after an np.copy: what a page fault costs drifts during
    # a run (transparent huge pages come and go), so the ceiling is taken next to it.
    cases = {
        "np.copy": lambda: np.copy(raw),
        "layouts to_soa + to_arrow": lambda: aos.to_soa(threads=threads).to_arrow(),
        "np.copyto": lambda: np.copyto(reused, raw),
        "layouts to_soa(out=)": lambda: aos.to_soa(out=arena, threads=threads),
        f"np.copyto on {cores} threads": lambda: parallel_copy(reused, raw, cores),
        "numpy per-field copies": lambda: numpy_to_columns(a),
        "np.copy (before to_aos)": lambda: np.copy(raw),
        "layouts to_aos": lambda: soa.to_aos(threads=threads),
        "layouts to_aos(out=)": lambda: soa.to_aos(out=fresh_records, threads=threads),
        "numpy per-field assignment": lambda: numpy_to_records(columns, np.empty(n, DTYPE)),
        "numpy per-field assignment (out=)": lambda: numpy_to_records(columns, fresh_records),
    }
    assert (soa.to_aos().array == a).all() and (numpy_to_records(columns, np.empty(n, DTYPE)) == a).all()
    t = interleaved(cases, rounds)
    # polars apart, after the rounds: its allocator keeps and splits memory, after which
    # the fresh outputs of the others (and their np.copy) fault in small pages, slowly
    t.update(interleaved({"polars.from_numpy": lambda: pl.from_numpy(a)}, rounds))
    copyto = t["np.copyto"]
    ratios = {
        "AoS -> SoA reused: to_soa(out=) / np.copyto": copyto / t["layouts to_soa(out=)"],
        "SoA -> AoS reused: to_aos(out=) / np.copyto": copyto / t["layouts to_aos(out=)"],
        "AoS -> SoA fresh + Arrow wrap / np.copy": t["np.copy"] / t["layouts to_soa + to_arrow"],
        "SoA -> AoS fresh: to_aos / np.copy": t["np.copy (before to_aos)"] / t["layouts to_aos"],
        "AoS -> SoA vs NumPy per-field copies": t["numpy per-field copies"] / t["layouts to_soa + to_arrow"],
        "SoA -> AoS vs NumPy per-field assignment": t["numpy per-field assignment"] / t["layouts to_aos"],
        "SoA -> AoS reused vs NumPy per-field assignment (out=)": t["numpy per-field assignment (out=)"]
        / t["layouts to_aos(out=)"],
        "AoS -> SoA vs polars.from_numpy": t["polars.from_numpy"] / t["layouts to_soa + to_arrow"],
    }
    rows = [{"name": name, "seconds": s, "GB/s": raw.nbytes / s / 1e9} for name, s in t.items()]
    return rows, ratios


def best_of(fn, repeat=3):
    return min(run_times(fn, repeat))


def wide_table(columns, rows=1000):
    """Seconds to bind a table of ``columns`` int32 columns to its layout and write it
    back as records (``from_arrow`` + ``to_aos``); the Layout is made outside the timing."""
    dtype = np.dtype([(f"c{i}", "<i4") for i in range(columns)])
    table = pa.table({f"c{i}": pa.array(np.full(rows, i, np.int32)) for i in range(columns)})
    layout = lo.Layout.from_dtype(dtype)
    back = lo.SoA.from_arrow(table, layout).to_aos().array
    assert back[f"c{columns - 1}"][0] == columns - 1
    return best_of(lambda: lo.SoA.from_arrow(table, layout).to_aos())


def big_records(nbytes, count):
    """Seconds of Layout + AoS -> SoA -> AoS of ``count`` records, each holding a float32
    sub-array of ``nbytes`` bytes and two scalars around it."""
    dtype = np.dtype([("id", "<i8"), ("samples", "<f4", (nbytes // 4,)), ("flag", "?")])
    a = np.zeros(count, dtype)
    a["samples"] = np.arange(nbytes // 4, dtype=np.float32)

    def round_trip():
        return (
            lo.AoS(a, lo.Layout.from_dtype(dtype)).to_soa(threads=1).to_aos(threads=1).array
        )  # (one record: one thread)

    assert (round_trip() == a).all()
    return best_of(round_trip)


def growth():
    """Seconds at the two sizes of each cost that must be linear, and the time ratio:
    10,000 vs 2,500 columns (linear: ~4x), and one 32 MB record vs 32 records of 1 MB,
    the same bytes (linear in the record's size: ~1x)."""
    small, large = wide_table(2_500), wide_table(10_000)
    mb_small, mb_large = big_records(1 << 20, 32), big_records(32 << 20, 1)
    return [
        {
            "name": "columns back to records",
            "small": 2_500,
            "large": 10_000,
            "small_s": small,
            "large_s": large,
            "ratio": large / small,
            "linear_ratio": 4.0,
        },
        {
            "name": "record bytes, round trip (same total)",
            "small": 1 << 20,
            "large": 32 << 20,
            "small_s": mb_small,
            "large_s": mb_large,
            "ratio": mb_large / mb_small,
            "linear_ratio": 1.0,
        },
    ]


# ------------------------------------------------------------------- files


def naive_to_arrow(path, dst, chunk_rows):
    """What a user writes without layouts: memmap the file, copy each field out, wrap the
    columns with pyarrow and write Arrow IPC batch by batch."""
    m = np.memmap(path, dtype=DTYPE, mode="r")
    schema = None
    with pa.OSFile(dst, "wb") as sink:
        writer = None
        for start in range(0, len(m), chunk_rows):
            part = m[start : start + chunk_rows]
            arrays = {}
            for name in DTYPE.names:
                col = np.ascontiguousarray(part[name])
                if col.dtype.kind == "S":
                    arrays[name] = pa.FixedSizeBinaryArray.from_buffers(
                        pa.binary(col.dtype.itemsize), len(col), [None, pa.py_buffer(col)]
                    )
                elif col.ndim > 1:
                    arrays[name] = pa.FixedSizeListArray.from_arrays(pa.array(col.reshape(-1)), col.shape[1])
                else:
                    arrays[name] = pa.array(col)
            batch = pa.record_batch(arrays)
            if writer is None:
                schema = batch.schema
                writer = pa.ipc.new_file(sink, schema)
            writer.write_batch(batch)
        writer.close()


def naive_to_records(src, dst):
    """And back: read the batches, assign each column into records, write them out."""
    with pa.memory_map(src) as source, open(dst, "wb") as out:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            rec = np.zeros(batch.num_rows, DTYPE)  # (not empty: padding would be stray memory)
            for name in DTYPE.names:
                col = batch.column(name)
                if pa.types.is_fixed_size_binary(col.type):
                    rec[name] = np.frombuffer(col.buffers()[1], DTYPE[name], len(col), col.offset * col.type.byte_width)
                elif pa.types.is_fixed_size_list(col.type):
                    rec[name] = col.flatten().to_numpy().reshape(len(col), -1)
                else:
                    rec[name] = col.to_numpy(zero_copy_only=False)
            rec.tofile(out)


def files(n, rounds, directory, chunk):
    path = os.path.join(directory, "layouts-bench-transpose.bin")
    outs = {
        k: os.path.join(directory, f"layouts-bench-transpose-{k}")
        for k in ("copy.bin", "lo.arrow", "naive.arrow", "lo-back.bin", "naive-back.bin")
    }
    write_file(path, n)
    nbytes = os.path.getsize(path)
    chunk_rows = chunk // DTYPE.itemsize

    cases = {
        "copy the file": lambda: write_once(path, outs["copy.bin"], chunk),
        "layouts convert -> Arrow IPC": lambda: lo.convert(
            path, DTYPE, outs["lo.arrow"], format="arrow", chunk_bytes=chunk
        ),
        "memmap + per-field copies + pyarrow IPC writer": lambda: naive_to_arrow(path, outs["naive.arrow"], chunk_rows),
        "layouts convert Arrow IPC -> records": lambda: lo.convert(
            outs["lo.arrow"], DTYPE, outs["lo-back.bin"], chunk_bytes=chunk
        ),
        "pyarrow reader + per-field assignment + write": lambda: naive_to_records(
            outs["naive.arrow"], outs["naive-back.bin"]
        ),
    }
    writes = dict(zip(cases, ("copy.bin", "lo.arrow", "naive.arrow", "lo-back.bin", "naive-back.bin")))

    def before(name):
        """Each run writes a new file (replacing one would add its unlink), with no dirty
        pages of the last run still being written back."""
        if os.path.exists(outs[writes[name]]):
            os.unlink(outs[writes[name]])
        os.sync()

    try:
        t = interleaved(cases, rounds, before)  # (the warm-up round writes the inputs of the way back)
        with open(path, "rb") as f:
            original = f.read()
        for back in ("lo-back.bin", "naive-back.bin"):
            with open(outs[back], "rb") as f:
                assert f.read() == original, f"{back}: the records did not come back the same"
    finally:
        for p in [path, *outs.values()]:
            if os.path.exists(p):
                os.unlink(p)
    copy = t["copy the file"]
    ratios = {
        "to Arrow IPC: layouts / file copy": copy / t["layouts convert -> Arrow IPC"],
        "to Arrow IPC: layouts vs the pipeline without layouts": t["memmap + per-field copies + pyarrow IPC writer"]
        / t["layouts convert -> Arrow IPC"],
        "to records: layouts / file copy": copy / t["layouts convert Arrow IPC -> records"],
        "to records: layouts vs the pipeline without layouts": t["pyarrow reader + per-field assignment + write"]
        / t["layouts convert Arrow IPC -> records"],
    }
    rows = [{"name": name, "seconds": s, "GB/s": nbytes / s / 1e9} for name, s in t.items()]
    return nbytes, rows, ratios


def print_table(rows, ratios, seconds):
    """Rows as ``| name | time | GB/s |`` (``seconds`` formats the time), then the ratios."""
    for r in rows:
        print(f"| {r['name']:<48} | {seconds(r['seconds'])} | {r['GB/s']:6.2f} GB/s |")
    for name, x in ratios.items():
        print(f"| {name:<56} | {x:5.2f}x |")


def main(argv=None):
    p = arguments(__doc__, records=10_000_000, repeat=7)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--file-records", type=int, default=25_000_000, help="records in the file (default 1.2 GB)")
    p.add_argument("--chunk", type=int, default=64 << 20, help="bytes per chunk of the file conversions")
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where the file and outputs go")
    args = p.parse_args(argv)
    info = machine()
    rows, ratios = in_memory(args.records, args.repeat, args.threads)
    print(
        f"{args.records:,} records x {DTYPE.itemsize} bytes ({args.records * DTYPE.itemsize / 1e9:.2f} GB), "
        f"median of {args.repeat} interleaved rounds; {info['cpu']}, {info['cores']} cores"
    )
    print_table(rows, ratios, lambda s: f"{s * 1e3:8.1f} ms")
    grow = growth()
    for g in grow:
        print(
            f"| {g['name']:<38} | {g['small']:>10,} -> {g['large']:>10,} | {g['small_s']:.3f} s -> "
            f"{g['large_s']:.3f} s | x{g['ratio']:.1f} time (linear: x{g['linear_ratio']:.0f}) |"
        )
    nbytes, file_rows, file_ratios = files(args.file_records, max(1, args.repeat // 2), args.dir, args.chunk)
    print(
        f"file of {nbytes / 1e9:.2f} GB, page cache warm, sync before each run, chunks of {args.chunk >> 20} MiB, "
        f"median of {max(1, args.repeat // 2)} interleaved rounds"
    )
    print_table(file_rows, file_ratios, lambda s: f"{s:7.2f} s")
    save_json(
        args.json,
        info,
        records=args.records,
        repeat=args.repeat,
        threads=args.threads,
        rows=rows,
        ratios=ratios,
        growth=grow,
        file_bytes=nbytes,
        file_rows=file_rows,
        file_ratios=file_ratios,
    )


if __name__ == "__main__":
    main()
