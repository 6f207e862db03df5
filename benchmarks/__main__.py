"""The reduction and conversion suite with its report (``layouts bench``; the same as
``python -m layouts.benchmarks``, or ``python -m benchmarks`` in a source checkout).

    layouts bench                    # quick: 1,000,000 records per shape (12 s on a 2-core VM)
    layouts bench --full             # 10,000,000 records per shape, median of 7
    layouts bench --json r.json --plot r.png

Prints Markdown tables (reductions AoS vs SoA, conversion against a copy, break-even,
CPU vs GPU when CuPy finds a GPU) and writes JSON with the machine and a PNG plot.
"""

import argparse
import importlib.metadata
import sys
from datetime import datetime, timezone

from . import report
from .convert_cpu import machine
from .reductions import ITEMSIZES, gpu_backend, suite


def parser():
    p = argparse.ArgumentParser(
        prog="layouts bench",
        description=__doc__.split("\n\n", 1)[0].replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("--full", action="store_true", help="10,000,000 records per shape, median of 7 (default: quick)")
    p.add_argument("--records", type=int, help="records per record shape (overrides --full)")
    p.add_argument("--repeat", type=int, help="timed runs per case, median reported (overrides --full)")
    p.add_argument("--itemsizes", default=",".join(map(str, ITEMSIZES)), help="record sizes in bytes, comma-separated")
    p.add_argument("--json", default="layouts-bench.json", help="where the JSON goes (default: %(default)s)")
    p.add_argument("--plot", default="layouts-bench.png", help="where the PNG goes (default: %(default)s; '' for none)")
    p.add_argument("--cpu-only", action="store_true", help="skip the GPU half even when a GPU is present")
    return p


def versions():
    out = {}
    for name in ("polars", "pandas", "matplotlib", "cupy-cuda13x", "cupy-cuda12x", "numba-cuda"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def main(argv=None):
    args = parser().parse_args(argv)
    records = args.records or (10_000_000 if args.full else 1_000_000)
    repeat = args.repeat or (7 if args.full else 3)
    try:
        itemsizes = tuple(int(s) for s in args.itemsizes.split(","))
        if any(s < 16 or s % 16 for s in itemsizes):
            raise ValueError
    except ValueError:
        print(
            f"layouts bench: --itemsizes takes record sizes that are multiples of 16, at least 16, "
            f"like 16,64,256; got {args.itemsizes!r}",
            file=sys.stderr,
        )
        return 2  # a wrong command line, as argparse exits
    gpu = None if args.cpu_only else gpu_backend()
    result = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {**machine(), **versions(), "gpu": gpu.name if gpu else None},
        **suite(records, repeat, gpu, itemsizes),
    }
    print(report.tables(result))
    if args.json:
        report.save_json(result, args.json)
        print(f"\nwrote {args.json}")
    if args.plot:
        try:
            report.plot(result, args.plot)
        except ImportError:
            print("no plot: matplotlib is missing; pip install 'layouts-arrow[bench]'", file=sys.stderr)
        else:
            print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
