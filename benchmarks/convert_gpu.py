"""AoS <-> SoA on the GPU against a device-to-device copy of the same bytes and CuPy per-field copies.

``python -m benchmarks.convert_gpu [--records 10000000] [--repeat 20] [--json FILE]``

For three records (the foundation's 48-byte tick, a 16-byte and a 128-byte record),
all in device memory: the layouts kernel (AoS -> SoA and SoA -> AoS, the main kernel
alone, timed with CUDA events after a warm-up), a device-to-device copy of the record
bytes (the ceiling: every byte read once and written once), and CuPy per-field
strided copies (``cupy.ascontiguousarray(field)`` per leaf, the naive peer). GB/s
count the record bytes once. The first call (compile) is reported apart. Targets:
>= 0.8x the copy and >= 5x the CuPy per-field copies. Needs CuPy and a GPU.
"""

import time

import numpy as np

import layouts as lo

from .convert_cpu import DTYPE, arguments, machine, records, save_json

RECORDS = {
    "tick48": DTYPE,
    "rec16": np.dtype([("id", "<u4"), ("px", "<f4"), ("t", "<i8")]),
    "rec128": np.dtype([(f"f{i}", "<f8") for i in range(12)] + [("id", "<i8"), ("s", "S16")]),
}


def _fill(dtype, n):
    if dtype == DTYPE:
        return records(n)
    rng = np.random.default_rng(1)
    return rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).view(dtype)


def event_median(cp, fn, repeat):
    """Median milliseconds of fn() between two CUDA events on the current stream."""
    times = []
    for _ in range(repeat):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))


def run_one(cp, name, dtype, n, repeat):
    from layouts._arena import Arena
    from layouts._cuda import device as _device
    from layouts._cuda.arena import HEAD, device_tables
    from layouts._plan import forward_ops, reverse_ops
    from layouts.kernels import cuda as kc

    host = _fill(dtype, n)
    layout = lo.Layout.from_dtype(dtype)
    nbytes = n * dtype.itemsize
    aos = lo.AoS(host).to_device("cuda")
    t0 = time.perf_counter()
    soa = aos.to_soa()  # first call: compiles the kernels
    first = time.perf_counter() - t0
    arena = Arena(layout, n)
    ops, offs, keep = forward_ops(arena, HEAD, {})
    tables = device_tables(ops, keep)
    rec = _device.words(aos.array, nbytes)
    forward, _ = kc.launcher("forward", rec, dtype.itemsize, n, ops, offs, soa.arena, tables)
    rops, roffs, rkeep = reverse_ops(layout, soa.parts().columns, {}, False)
    out = _device.empty(nbytes)
    reverse, _ = kc.launcher(
        "reverse", out.view(np.uint32), dtype.itemsize, n, rops, roffs, soa.arena, device_tables(rops, rkeep)
    )
    src = cp.asarray(aos.array)
    dst = cp.empty_like(src)
    matrix = src.reshape(n, dtype.itemsize)

    def per_field():
        for f in layout.fields:
            for off in f.element_offsets():
                cp.ascontiguousarray(matrix[:, off : off + f.width])

    for fn in (forward, reverse, lambda: cp.copyto(dst, src), per_field):
        fn()  # warm-up
    cp.cuda.Device().synchronize()
    ms = {
        "copy": event_median(cp, lambda: cp.copyto(dst, src), repeat),
        "aos_to_soa": event_median(cp, forward, repeat),
        "soa_to_aos": event_median(cp, reverse, repeat),
        "cupy_per_field": event_median(cp, per_field, repeat),
    }
    same = bool(cp.all(out[:nbytes] == cp.asarray(aos.to_device("cpu").to_soa().to_aos().to_numpy().view(np.uint8))))
    rows = []
    for method, t in ms.items():
        rows.append(
            {
                "record": name,
                "itemsize": dtype.itemsize,
                "method": method,
                "ms": t,
                "GB/s": nbytes / t / 1e6,
                "x_copy": ms["copy"] / t,
                "x_cupy_per_field": ms["cupy_per_field"] / t,
            }
        )
    return rows, first, same


def main(argv=None):
    p = arguments(__doc__, repeat=20)
    args = p.parse_args(argv)
    try:
        import cupy as cp

        cp.cuda.runtime.getDeviceCount()
    except Exception as err:  # noqa: BLE001 - any failure means: no usable GPU here
        raise SystemExit(f"the GPU benchmark needs CuPy and a CUDA GPU: {err}") from None
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    gpu = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    info = dict(machine(), gpu=gpu, cupy=cp.__version__, pool=lo.memory_stats()["allocator"])
    all_rows, compile_s, checks = [], {}, {}
    for name, dtype in RECORDS.items():
        rows, compile_s[name], checks[name] = run_one(cp, name, dtype, args.records, args.repeat)
        all_rows += rows
    print(f"{gpu}: {args.records:,} records, kernel time from CUDA events, median of {args.repeat}")
    print(f"first call (compile): {compile_s}; round trip equals the CPU's bytes: {checks}")
    print(f"| {'record':<7} | {'method':<15} | {'ms':>8} | {'GB/s':>7} | {'x copy':>6} | {'x CuPy':>6} |")
    print(f"|{'-' * 9}|{'-' * 17}|{'-' * 10}|{'-' * 9}|{'-' * 8}|{'-' * 8}|")
    for r in all_rows:
        print(
            f"| {r['record']:<7} | {r['method']:<15} | {r['ms']:8.3f} | {r['GB/s']:7.1f} | {r['x_copy']:6.2f} | "
            f"{r['x_cupy_per_field']:6.2f} |"
        )
    save_json(
        args.json,
        info,
        records=args.records,
        repeat=args.repeat,
        compile_s=compile_s,
        roundtrip_matches_cpu=checks,
        rows=all_rows,
    )


if __name__ == "__main__":
    main()
