"""What the layout costs a column reduction, and when converting to SoA first pays.

The cases, shared by the report (``python -m benchmarks``, ``layouts bench``) and by
the pytest-benchmark suite (``pytest tests/bench_reductions.py``):

- records of 16 to 256 bytes with an 8-byte float ``px`` at offset 0, a 4-byte int
  ``qty`` at 8 and a 1-byte ``b`` at 12 (the rest is padding, as in wide records where
  a query reads one field);
- reductions over one field: sum, mean, min, max and a filtered count (``field > x``);
- AoS methods read the field's strided view of the records (NumPy, and this library's
  Numba reduction kernel); SoA methods read the contiguous column made by ``to_soa``
  (NumPy, pyarrow.compute, polars, the same Numba kernel); on a GPU, a Numba CUDA kernel
  over the records and CuPy over the column, both in device memory.

Throughput is reported two ways: useful bytes (records x field width) and bytes touched
(AoS: records x min(record size, 64), a cache line per record at most; SoA: the column).
"""

import math

import numpy as np
import pyarrow.compute as pc

import layouts as lo
from layouts.benchmarks import reduce as kr

from .convert_cpu import median_seconds

ITEMSIZES = (16, 32, 64, 128, 256)
FIELDS = {"f8": "px", "i4": "qty", "u1": "b"}  # width label -> field name
OFFSETS = {"px": (0, "<f8"), "qty": (8, "<i4"), "b": (12, "u1")}
THRESHOLDS = {"px": 0.5, "qty": 500, "b": 100}  # the filter of count>x
OPS = ("sum", "mean", "min", "max", "count>x")
CACHE_LINE = 64


def record_dtype(itemsize):
    names = list(OFFSETS)
    return np.dtype(
        {
            "names": names,
            "formats": [OFFSETS[n][1] for n in names],
            "offsets": [OFFSETS[n][0] for n in names],
            "itemsize": itemsize,
        }
    )


def make_records(itemsize, n, seed=0):
    rng = np.random.default_rng(seed)
    a = np.zeros(n, record_dtype(itemsize))
    a["px"] = rng.random(n)
    a["qty"] = rng.integers(0, 1000, n)
    a["b"] = rng.integers(0, 256, n)
    return a


def numpy_ops(v, x):
    return {"sum": v.sum, "mean": v.mean, "min": v.min, "max": v.max, "count>x": lambda: np.count_nonzero(v > x)}


def kernel_ops(v, x):
    return {
        "sum": lambda: kr.column_sum(v),
        "mean": lambda: kr.column_mean(v),
        "min": lambda: kr.column_min(v),
        "max": lambda: kr.column_max(v),
        "count>x": lambda: kr.count_greater(v, x),
    }


def arrow_ops(arr, x):
    return {
        "sum": lambda: pc.sum(arr),
        "mean": lambda: pc.mean(arr),
        "min": lambda: pc.min(arr),
        "max": lambda: pc.max(arr),
        "count>x": lambda: pc.sum(pc.greater(arr, x)),
    }


def polars_ops(s, x):
    return {"sum": s.sum, "mean": s.mean, "min": s.min, "max": s.max, "count>x": lambda: (s > x).sum()}


def cpu_methods(records, soa, name):
    """``{(layout, method): {op: callable}}`` for one field, on the CPU."""
    x = THRESHOLDS[name]
    view = records[name]
    column = soa[name].to_numpy()
    methods = {
        ("AoS", "numpy"): numpy_ops(view, x),
        ("AoS", "kernel"): kernel_ops(view, x),
        ("SoA", "numpy"): numpy_ops(column, x),
        ("SoA", "kernel"): kernel_ops(column, x),
        ("SoA", "pyarrow"): arrow_ops(soa[name].to_arrow(), x),
    }
    try:
        import polars as pl
    except ImportError:
        pass
    else:
        methods[("SoA", "polars")] = polars_ops(pl.from_arrow(soa[name].to_arrow()), x)
    return methods


def touched_bytes(layout, itemsize, width, n):
    return n * (min(itemsize, CACHE_LINE) if layout == "AoS" else width)


def timed(fn, repeat, sync=None):
    """Median seconds of ``repeat`` calls after one warm-up call (compile, caches);
    ``sync`` waits for a device's queued work inside the timed region."""
    run = fn if sync is None else (lambda: (fn(), sync()))
    run()
    return median_seconds(run, repeat)


def reduction_rows(n, repeat, gpu=None, itemsizes=ITEMSIZES):
    """Every (device, record size, field, op, method): seconds and GB/s; and conversions."""
    rows, conversions = [], []
    for itemsize in itemsizes:
        records = make_records(itemsize, n)
        nbytes = records.nbytes
        copy_s = timed(lambda r=records: np.copy(r), repeat)
        soa_s = timed(lambda r=records: lo.AoS(r).to_soa().to_arrow(), repeat)
        fields_s = timed(lambda r=records: {f: np.ascontiguousarray(r[f]) for f in OFFSETS}, repeat)
        for method, seconds in (
            ("np.copy (ceiling)", copy_s),
            ("layouts to_soa().to_arrow()", soa_s),
            ("numpy per-field ascontiguousarray", fields_s),
        ):
            conversions.append(
                {
                    "device": "cpu",
                    "itemsize": itemsize,
                    "method": method,
                    "seconds": seconds,
                    "GB/s": nbytes / seconds / 1e9,
                    "x_copy": copy_s / seconds,
                }
            )
        soa = lo.AoS(records).to_soa()
        devices = [("cpu", cpu_methods(records, soa, name), name, None) for name in FIELDS.values()]
        if gpu is not None:
            conversions.extend(gpu.conversions(records, repeat))
            devices += [("gpu", gpu.methods(records, name), name, gpu.sync) for name in FIELDS.values()]
        for device, methods, name, sync in devices:  # sync: waits for queued device work, None on the CPU
            width = records.dtype[name].itemsize
            for (layout, method), ops in methods.items():
                for op, fn in ops.items():
                    seconds = timed(fn, repeat, sync)
                    rows.append(
                        {
                            "device": device,
                            "itemsize": itemsize,
                            "field": name,
                            "width": width,
                            "op": op,
                            "layout": layout,
                            "method": method,
                            "seconds": seconds,
                            "useful GB/s": n * width / seconds / 1e9,
                            "touched GB/s": touched_bytes(layout, itemsize, width, n) / seconds / 1e9,
                        }
                    )
        del records, soa
    return rows, conversions


def best(rows, **where):
    """The fastest matching row, or None."""
    hits = [r for r in rows if all(r[k] == v for k, v in where.items())]
    return min(hits, key=lambda r: r["seconds"]) if hits else None


def ratios(rows):
    """AoS/SoA time ratio per (device, record size, field, op), fastest method of each."""
    out = []
    keys = sorted({(r["device"], r["itemsize"], r["field"], r["op"]) for r in rows})
    for device, itemsize, field, op in keys:
        aos = best(rows, device=device, itemsize=itemsize, field=field, op=op, layout="AoS")
        soa = best(rows, device=device, itemsize=itemsize, field=field, op=op, layout="SoA")
        if aos and soa:
            out.append(
                {
                    "device": device,
                    "itemsize": itemsize,
                    "field": field,
                    "op": op,
                    "AoS method": aos["method"],
                    "SoA method": soa["method"],
                    "AoS/SoA": aos["seconds"] / soa["seconds"],
                }
            )
    return out


def break_even(rows, conversions):
    """Reductions over one column after which converting to SoA first, then reducing the
    column, beats reducing the AoS records directly (fastest method each side, averaged
    over the ops): ``ceil(extra / saved)``, or None when SoA never wins. The extra cost
    of SoA is ``to_soa`` on the CPU; on the GPU, with the records starting on the host,
    ``to_soa`` on the CPU plus copying one column over, minus copying the records over."""
    out = []
    for itemsize in sorted({c["itemsize"] for c in conversions}):
        cost = {(c["device"], c["method"]): c["seconds"] for c in conversions if c["itemsize"] == itemsize}
        convert = cost[("cpu", "layouts to_soa().to_arrow()")]
        extra = {"cpu": convert}
        if ("gpu", "host-to-device copy of the records") in cost:
            extra["gpu"] = (
                convert
                + cost[("gpu", "host-to-device copy of the column")]
                - cost[("gpu", "host-to-device copy of the records")]
            )
        for device, extra_s in extra.items():
            for field in FIELDS.values():
                gains = []
                for op in OPS:
                    aos = best(rows, device=device, itemsize=itemsize, field=field, op=op, layout="AoS")
                    soa = best(rows, device=device, itemsize=itemsize, field=field, op=op, layout="SoA")
                    if aos and soa:
                        gains.append(aos["seconds"] - soa["seconds"])
                if not gains:
                    continue
                gain = float(np.mean(gains))
                k = None if gain <= 0 else max(1, math.ceil(extra_s / gain))
                out.append(
                    {
                        "device": device,
                        "itemsize": itemsize,
                        "field": field,
                        "extra s": extra_s,
                        "saved per reduction s": gain,
                        "reductions to break even": k,
                    }
                )
    return out


def cpu_vs_gpu(rows, conversions):
    """Sum of ``px`` on the CPU vs the GPU at equal work, with the host-to-device copy of
    the bytes each GPU method needs when the data starts on the host."""
    out = []
    for itemsize in sorted({r["itemsize"] for r in rows if r["device"] == "gpu"}):
        h2d = {c["method"]: c["seconds"] for c in conversions if c["device"] == "gpu" and c["itemsize"] == itemsize}
        for layout, copy in (
            ("AoS", "host-to-device copy of the records"),
            ("SoA", "host-to-device copy of the column"),
        ):
            cpu = best(rows, device="cpu", itemsize=itemsize, field="px", op="sum", layout=layout)
            gpu = best(rows, device="gpu", itemsize=itemsize, field="px", op="sum", layout=layout)
            if cpu and gpu and copy in h2d:
                out.append(
                    {
                        "itemsize": itemsize,
                        "layout": layout,
                        "cpu s": cpu["seconds"],
                        "gpu s": gpu["seconds"],
                        "gpu + transfer s": gpu["seconds"] + h2d[copy],
                        "gpu speed-up": cpu["seconds"] / gpu["seconds"],
                        "gpu speed-up with transfer": cpu["seconds"] / (gpu["seconds"] + h2d[copy]),
                    }
                )
    return out


def suite(n, repeat, gpu=None, itemsizes=ITEMSIZES):
    """Everything the report shows, as one JSON-ready dict."""
    rows, conversions = reduction_rows(n, repeat, gpu, itemsizes)
    return {
        "records": n,
        "repeat": repeat,
        "rows": rows,
        "conversions": conversions,
        "ratios": ratios(rows),
        "break_even": break_even(rows, conversions),
        "cpu_vs_gpu": cpu_vs_gpu(rows, conversions),
    }


def gpu_backend():
    """The GPU half when CuPy and a CUDA device are present, else None."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # no CuPy, no driver, no device: the CPU half only
        return None
    from .reductions_gpu import GPU

    return GPU()
