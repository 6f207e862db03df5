"""The ``layouts`` command."""

import argparse
import json
import sys
import time

import numpy as np

__all__ = ["main"]

DEMO_DTYPE = np.dtype(
    [("ts", "<M8[ns]"), ("px", ">f8"), ("qty", "<i4"), ("side", "u1"), ("sym", "S8"),
     ("pos", "<f4", (3,)), ("flag", "?")],
    align=True,
)


def demo_records(n, seed=0):
    """Market-tick-like records, px stored big-endian as a feed from another machine would."""
    rng = np.random.default_rng(seed)
    a = np.zeros(n, DEMO_DTYPE)
    a["ts"] = np.datetime64("2026-11-22T09:30", "ns") + np.arange(n) * np.timedelta64(1, "ms")
    a["px"] = 100 + rng.normal(0, 1, n).cumsum() * 0.01
    a["qty"] = rng.integers(1, 1000, n)
    a["qty"][::50] = -1  # the legacy feed's "missing" marker
    a["side"] = rng.integers(0, 2, n)
    a["sym"] = rng.choice([b"AAPL", b"MSFT", b"NVDA", b"BRK.B"], n)
    a["pos"] = rng.normal(size=(n, 3))
    a["flag"] = rng.random(n) < 0.1
    return a


def demo(args):
    import layouts as lo

    records = demo_records(args.records)
    aos = lo.AoS(records)
    print(aos.layout)
    print()
    aos.to_soa(nulls={"qty": -1})  # first call compiles or loads the kernels
    t0 = time.perf_counter()
    soa = aos.to_soa(nulls={"qty": -1})
    table = soa.to_arrow()
    t1 = time.perf_counter()
    back = soa.to_aos()
    t2 = time.perf_counter()
    exact = back.array.tobytes() == _zero_holes(records, aos.layout)
    print(table.slice(0, 5).to_pandas().to_string() if _has_pandas() else table.slice(0, 5))
    print()
    gb = aos.nbytes / 1e9
    print(f"{len(records):,} records x {aos.layout.itemsize} bytes: AoS -> Arrow {gb / (t1 - t0):.2f} GB/s, "
          f"Arrow -> AoS {gb / (t2 - t1):.2f} GB/s; qty nulls: {table.column('qty').null_count}; "
          f"round trip bit-exact: {exact}")
    return 0 if exact else 1


def _zero_holes(records, layout):
    raw = records.view(np.uint8).reshape(len(records), layout.itemsize).copy()
    for off, size in layout.holes:
        raw[:, off : off + size] = 0
    return raw.tobytes()


def _has_pandas():
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def inspect(args):
    """Print the layout of one struct, or of every struct the source defines."""
    import layouts as lo
    from layouts._cdecl import record_names

    c_options = {"include_dirs": args.include, "defines": dict(_define(d) for d in args.define)}
    names = [args.struct] if args.struct else record_names(args.source, **c_options)
    if not names:
        raise lo.LayoutError(f"{args.source} defines no struct or union")
    layouts = [lo.Layout.from_c(args.source, name, byteorder=args.byteorder, pack=args.pack,
                                pointers=args.pointers, **c_options) for name in names]
    if args.json:
        out = [layout.describe() for layout in layouts]
        print(json.dumps(out[0] if args.struct else out, indent=2))
    else:
        print("\n\n".join(str(layout) for layout in layouts))
    return 0


def _define(text):
    name, eq, value = text.partition("=")
    return name, (value if eq else None)


def main(argv=None):
    from layouts import ConversionError, LayoutError

    parser = argparse.ArgumentParser(prog="layouts", description="Records between AoS and Arrow SoA.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="convert built-in example records both ways and show them")
    p.add_argument("--records", type=int, default=1_000_000, help="how many records (default 1,000,000)")
    p.set_defaults(run=demo)
    p = sub.add_parser(
        "inspect", help="show a C struct's fields, offsets, types and padding (like pahole)",
        description="Lay out a C struct as the C compiler does and print, per field: offset, size, "
                    "C type, NumPy type and Arrow type, with every padding hole and the share of "
                    "bytes it wastes.")
    p.add_argument("source", help="a C header or source file")
    p.add_argument("struct", nargs="?", help="'struct name', a tag or a typedef (default: every struct)")
    p.add_argument("--json", action="store_true", help="print the same as JSON")
    p.add_argument("--byteorder", choices=("native", "little", "big"), default="native",
                   help="byte order the records were written in")
    p.add_argument("--pack", type=int, help="maximum member alignment, as #pragma pack(N)")
    p.add_argument("--pointers", choices=("error", "int"), default="error",
                   help="pointer fields: an error, or unsigned integer columns")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="add a directory to the C preprocessor's include path")
    p.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="define a macro for the C preprocessor")
    p.set_defaults(run=inspect)
    args = parser.parse_args(argv)
    if getattr(args, "records", 1) < 0:
        parser.error(f"--records must be >= 0, got {args.records}")
    try:
        return args.run(args)
    except (LayoutError, ConversionError) as err:
        print(f"layouts {args.command}: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
