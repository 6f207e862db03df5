"""``layouts.dask.read_records`` on a LocalCluster: speed-up of 2 worker processes over 1.

    python -m benchmarks.dask_scale                          # 2.4 GB in 4 files, 3 repeats
    python -m benchmarks.dask_scale --records 400000 --repeat 1   # smoke size

Files of the foundation's 48-byte tick records. For 1 and then 2 worker processes (one
thread each, on loopback) it times, after a warm-up run: column reductions through Dask
(sum, max and a filtered count over 128 MiB partitions), and ``to_parquet`` of the whole
dataset (uncompressed). The same reductions in this process with ``lo.read_records`` and
NumPy, no Dask, are the baseline. Medians, as seconds and GB/s of record bytes.
"""

import os
import shutil
import tempfile
import time

import numpy as np

import layouts as lo

from .convert_cpu import DTYPE, arguments, machine, median_seconds, save_json
from .convert_files import write_file

FILES = 4


def reductions(df):
    import dask

    return dask.compute(df.px.sum(), df.qty.max(), (df.qty > 500).sum())


def baseline(paths):
    """The same reductions in one process, no Dask: read_records, to_soa, NumPy."""
    px = qty_max = over = 0
    for path in paths:
        soa = lo.read_records(path, DTYPE).to_soa()
        qty = np.asarray(soa["qty"])
        px += float(np.asarray(soa["px"]).sum())
        qty_max = max(qty_max, int(qty.max()))
        over += int((qty > 500).sum())
    return px, qty_max, over


def on_cluster(paths, workers, repeat, blocksize, directory):
    from distributed import Client, LocalCluster

    import layouts.dask as ld

    out = os.path.join(directory, "layouts-dask-bench.parquet")
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=":0",  # (a free port: another cluster may run at the same time)
            worker_dashboard_address=None,
        ) as cluster,
        Client(cluster),
    ):
        df = ld.read_records(paths, DTYPE, blocksize=blocksize)
        answer = reductions(df)  # warm: workers load the kernels
        reduce_s = median_seconds(lambda: reductions(df), repeat)

        def parquet():
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            df.to_parquet(out, write_index=False, compression=None)
            return time.perf_counter() - t0

        parquet()
        parquet_s = float(np.median([parquet() for _ in range(repeat)]))
        shutil.rmtree(out, ignore_errors=True)
    return answer, reduce_s, parquet_s


def run(n, repeat, directory, blocksize):
    paths = [os.path.join(directory, f"layouts-dask-bench-{i}.bin") for i in range(FILES)]
    try:
        for i, path in enumerate(paths):
            write_file(path, n // FILES + (i < n % FILES))
        nbytes = sum(os.path.getsize(p) for p in paths)
        expected = baseline(paths)
        rows = [
            {
                "name": "one process, no Dask: reductions",
                "workers": 0,
                "seconds": median_seconds(lambda: baseline(paths), repeat),
            }
        ]
        for workers in (1, 2):
            answer, reduce_s, parquet_s = on_cluster(paths, workers, repeat, blocksize, directory)
            assert np.isclose(answer[0], expected[0]) and tuple(map(int, answer[1:])) == expected[1:], answer
            rows.append({"name": f"{workers} worker(s): reductions", "workers": workers, "seconds": reduce_s})
            rows.append({"name": f"{workers} worker(s): to_parquet", "workers": workers, "seconds": parquet_s})
    finally:
        for path in paths:
            if os.path.exists(path):
                os.unlink(path)
    for r in rows:
        r["GB/s"] = nbytes / r["seconds"] / 1e9
    for one, two in zip(rows[1:3], rows[3:5]):  # the same work on 1 and on 2 workers
        two["speedup"] = one["seconds"] / two["seconds"]
    return nbytes, rows


def main(argv=None):
    p = arguments(__doc__, records=50_000_000, repeat=3)
    p.add_argument("--blocksize", default="128MiB", help="bytes per partition")
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where the files go")
    args = p.parse_args(argv)
    nbytes, rows = run(args.records, args.repeat, args.dir, args.blocksize)
    info = machine()
    print(
        f"{args.records:,} records x {DTYPE.itemsize} bytes = {nbytes / 1e9:.2f} GB in {FILES} files, "
        f"partitions of {args.blocksize}, median of {args.repeat}; {info['cpu']}, {info['cores']} cores"
    )
    for r in rows:
        speedup = f"{r['speedup']:.2f}x vs 1 worker" if "speedup" in r else ""
        print(f"| {r['name']:<36} | {r['seconds']:7.2f} s | {r['GB/s']:6.2f} GB/s | {speedup:<17} |")
    save_json(
        args.json, info, records=args.records, bytes=nbytes, blocksize=args.blocksize, repeat=args.repeat, rows=rows
    )


if __name__ == "__main__":
    main()
