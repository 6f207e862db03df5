"""AoS <-> SoA on the CPU against a plain copy of the same bytes and against peers.

    python -m benchmarks.convert_cpu                  # 10,000,000 records, 7 repeats
    python -m benchmarks.convert_cpu --records 100000 --repeat 3   # smoke size

Every figure is the median of the repeats, as GB/s of record bytes and as a ratio to a
copy of the same bytes measured in the same run: ``np.copy`` (allocation included) for
conversions that allocate, ``np.copyto`` into a reused buffer for ``out=`` conversions.
Setup is outside the timed region; the first call (kernel compile or cache load) is
timed apart.
"""

import argparse
import json
import os
import platform
import time
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa

import layouts as lo

DTYPE = np.dtype(
    [("ts", "<i8"), ("px", "<f8"), ("qty", "<i4"), ("side", "u1"), ("sym", "S8"), ("pos", "<f4", (3,)), ("flag", "?")],
    align=True,
)


def records(n):
    rng = np.random.default_rng(0)
    a = np.zeros(n, DTYPE)
    a["ts"] = np.arange(n)
    a["px"] = rng.random(n)
    a["qty"] = rng.integers(0, 1000, n)
    a["side"] = rng.integers(0, 2, n)
    a["sym"] = b"SYM"
    a["pos"] = rng.random((n, 3))
    a["flag"] = rng.random(n) < 0.5
    return a


def run_times(fn, repeat):
    """Seconds of each of ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def median_seconds(fn, repeat):
    return float(np.median(run_times(fn, repeat)))


def peers_to_soa(a):
    """Peer conversions (name -> callable); a peer that fails on some field is reported."""
    import pandas as pd
    import polars as pl

    return {
        "numpy per-field ascontiguousarray": lambda: {n: np.ascontiguousarray(a[n]) for n in a.dtype.names},
        "pandas.DataFrame.from_records": lambda: pd.DataFrame.from_records(a),
        "polars.from_numpy": lambda: pl.from_numpy(a),
        "pa.Table.from_pandas(from_records)": lambda: pa.Table.from_pandas(pd.DataFrame.from_records(a)),
    }


def peers_to_aos(a):
    import pandas as pd

    cols = {n: np.ascontiguousarray(a[n]) for n in a.dtype.names}

    def numpy_fields():
        out = np.empty(len(a), a.dtype)
        for n, c in cols.items():
            out[n] = c
        return out

    frame = None
    try:
        frame = pd.DataFrame.from_records(a)
    except Exception:  # noqa: BLE001 - reported as a failing peer below
        pass
    return {
        "numpy per-field assignment": numpy_fields,
        "pandas.DataFrame.to_records": (lambda: frame.to_records(index=False)) if frame is not None else None,
    }


def run(n, repeat, threads):
    a = records(n)
    nbytes = a.nbytes
    raw = a.view(np.uint8)
    reuse = np.empty_like(raw)
    aos = lo.AoS(a)
    rows = []

    def add(group, name, seconds, ceiling, note=""):
        rows.append(
            {
                "group": group,
                "name": name,
                "seconds": seconds,
                "GB/s": nbytes / seconds / 1e9 if seconds else None,
                "x_copy": ceiling / seconds if seconds else None,
                "note": note,
            }
        )

    t0 = time.perf_counter()
    aos.to_soa(threads=threads).to_aos(threads=threads)
    first_call = time.perf_counter() - t0

    copy = median_seconds(lambda: np.copy(raw), repeat)
    copyto = median_seconds(lambda: np.copyto(reuse, raw), repeat)
    add("ceiling", "np.copy of the record bytes", copy, copy)
    add("ceiling", "np.copyto into a reused buffer", copyto, copyto)

    add(
        "AoS -> SoA",
        "layouts to_soa + to_arrow",
        median_seconds(lambda: aos.to_soa(threads=threads).to_arrow(), repeat),
        copy,
    )
    out = aos.to_soa(threads=threads)
    add(
        "AoS -> SoA",
        "layouts to_soa(out=) [vs copyto]",
        median_seconds(lambda: aos.to_soa(out=out, threads=threads), repeat),
        copyto,
    )
    for name, fn in peers_to_soa(a).items():
        try:
            fn()
        except Exception as err:  # noqa: BLE001 - a peer that cannot take every field
            add("AoS -> SoA", name, None, copy, f"fails: {type(err).__name__}: {str(err)[:60]}")
            continue
        add("AoS -> SoA", name, median_seconds(fn, repeat), copy)

    soa = aos.to_soa(threads=threads)
    add("SoA -> AoS", "layouts to_aos", median_seconds(lambda: soa.to_aos(threads=threads), repeat), copy)
    back = np.empty(n, DTYPE)
    add(
        "SoA -> AoS",
        "layouts to_aos(out=) [vs copyto]",
        median_seconds(lambda: soa.to_aos(out=back, threads=threads), repeat),
        copyto,
    )
    for name, fn in peers_to_aos(a).items():
        if fn is None:
            add("SoA -> AoS", name, None, copy, "fails: no DataFrame to start from")
            continue
        add("SoA -> AoS", name, median_seconds(fn, repeat), copy)
    return rows, first_call


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor()
    import numba

    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pyarrow": pa.__version__,
        "numba": numba.__version__,
        "layouts": lo.__version__ if hasattr(lo, "__version__") else "dev",
    }


def arguments(doc, records=10_000_000, repeat=7):
    """The options every benchmark takes: --records, --repeat, --json."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--records", type=int, default=records)
    p.add_argument("--repeat", type=int, default=repeat)
    p.add_argument("--json", help="also write the results to this JSON file")
    return p


def save_json(path, info, **fields):
    """Write the results with the date and the machine, if a path was given."""
    if path:
        with open(path, "w") as f:
            json.dump(
                {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": info, **fields},
                f,
                indent=1,
            )


def main(argv=None):
    p = arguments(__doc__)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    rows, first_call = run(args.records, args.repeat, args.threads)
    info = machine()
    print(
        f"{args.records:,} records x {DTYPE.itemsize} bytes ({args.records * DTYPE.itemsize / 1e9:.2f} GB), "
        f"median of {args.repeat}; {info['cpu']}, {info['cores']} cores"
    )
    print(f"first call (compile or load kernels): {first_call:.2f} s")
    print(f"| {'direction':<10} | {'method':<36} | {'GB/s':>6} | {'x copy':>6} |")
    print(f"|{'-' * 12}|{'-' * 38}|{'-' * 8}|{'-' * 8}|")
    for r in rows:
        gbs = f"{r['GB/s']:.2f}" if r["GB/s"] else "-"
        ratio = f"{r['x_copy']:.2f}" if r["x_copy"] else "-"
        print(f"| {r['group']:<10} | {r['name']:<36} | {gbs:>6} | {ratio:>6} | {r['note']}".rstrip())
    save_json(args.json, info, records=args.records, repeat=args.repeat, first_call_s=first_call, rows=rows)


if __name__ == "__main__":
    main()
