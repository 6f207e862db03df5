"""The ``layouts`` command."""

import argparse
import ast
import json
import re
import sys

import numpy as np

__all__ = ["main"]

DEMO_HEADER = """\
/* tick.h: the record a (fictional) legacy feed handler writes, one after another */
#include <stdint.h>

#define NSYM 8

enum side { BUY = 0, SELL = 1 };

struct tick {
    int64_t   ts_ns;        /* nanoseconds since 1970 */
    double    px;
    int32_t   qty;          /* -1: missing */
    enum side side;
    char      sym[NSYM];    /* NUL-padded */
    float     pos[3];
    uint8_t   flag : 1,
              venue : 7;
};
"""


def _version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("layouts-arrow")
    except PackageNotFoundError:
        return "0+unknown (not installed)"


def demo_records(layout, n, seed=0):
    """Tick-like records of the demo header's layout, as the legacy program would write them."""
    import pyarrow as pa

    import layouts as lo

    rng = np.random.default_rng(seed)
    qty = rng.integers(1, 1000, n).astype(np.int32)
    qty[::50] = -1  # the feed's "missing" marker
    table = pa.table({
        "ts_ns": 1_763_803_800_000_000_000 + np.arange(n, dtype=np.int64) * 1_000_000,
        "px": 100 + rng.normal(0, 1, n).cumsum() * 0.01,
        "qty": qty,
        "side": pa.DictionaryArray.from_arrays(rng.integers(0, 2, n).astype(np.int32), ["BUY", "SELL"]),
        "sym": rng.choice(["AAPL", "MSFT", "NVDA", "BRK.B"], n),
        "pos": pa.FixedSizeListArray.from_arrays(rng.normal(size=3 * n).astype(np.float32), 3),
        "flag": rng.random(n) < 0.1,
        "venue": rng.integers(0, 128, n).astype(np.uint8),
    })
    return lo.SoA.from_arrow(table, layout).to_aos().array


def demo(args):
    """Write a legacy file and its C header, convert it to Parquet and back, show it."""
    import tempfile

    import pyarrow.parquet as pq

    import layouts as lo

    with tempfile.TemporaryDirectory(prefix="layouts-demo-") as tmp:
        header, records, parquet, back = (f"{tmp}/{name}" for name in ("tick.h", "tick.bin", "tick.parquet",
                                                                        "back.bin"))
        with open(header, "w") as f:
            f.write(DEMO_HEADER)
        layout = lo.Layout.from_c(header, "struct tick", bytes_as="string")
        with open(records, "wb") as f:
            demo_records(layout, args.records).tofile(f)
        print(f"wrote {args.records:,} records with a C program's layout: {records} (header {header})\n")
        print(layout)
        print()
        there = lo.convert(records, layout, parquet, nulls={"qty": -1})
        table = pq.read_table(parquet)
        print(table.slice(0, 5).to_pandas().to_string() if _has_pandas() else table.slice(0, 5))
        print()
        again = lo.convert(parquet, layout, back, fill={"qty": -1})
        exact = _same_file(records, back)
        print(f"records -> Parquet: {there}")
        print(f"Parquet -> records: {again}")
        print(f"qty nulls: {table.column('qty').null_count}; round trip bit-exact: {exact}")
    return 0 if exact else 1


def _same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def _has_pandas():
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def _c_options(args):
    return {"include_dirs": args.include, "defines": dict(_define(d) for d in args.define),
            "byteorder": args.byteorder, "pack": args.pack, "pointers": args.pointers}


def inspect(args):
    """Print the layout of one struct, or of every struct the source defines."""
    import layouts as lo
    from layouts._cdecl import record_names

    options = _c_options(args)
    names = [args.struct] if args.struct else record_names(
        args.source, include_dirs=options["include_dirs"], defines=options["defines"])
    if not names:
        raise lo.LayoutError(f"{args.source} defines no struct or union")
    layouts = [lo.Layout.from_c(args.source, name, **options) for name in names]
    if args.json:
        out = [layout.describe() for layout in layouts]
        print(json.dumps(out[0] if args.struct else out, indent=2))
    else:
        print("\n\n".join(str(layout) for layout in layouts))
    return 0


def _define(text):
    name, eq, value = text.partition("=")
    return name, (value if eq else None)


def _size(text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)i?[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a size like 64M, 1G or 65536, got {text!r}")
    return int(float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()])


def _layout_of(args):
    import layouts as lo

    if args.dtype:
        try:
            spec = ast.literal_eval(args.dtype) if args.dtype.lstrip()[:1] in "[{(" else args.dtype
            return lo.Layout.from_dtype(np.dtype(spec))
        except (ValueError, SyntaxError, TypeError) as err:
            raise lo.LayoutError(f"--dtype {args.dtype!r} is not a NumPy structured dtype: {err}") from None
    header, colon, name = args.struct.rpartition(":")
    if not colon or not header:
        header, name = args.struct, None
    return lo.Layout.from_c(header, name or None, **_c_options(args))


def convert(args):
    """``layouts convert``: one file to another, streaming, with a progress bar."""
    import layouts as lo
    from ._backends import auto_device

    layout = _layout_of(args)
    src = sys.stdin.buffer if args.src == "-" else args.src
    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(unit="B", unit_scale=True, unit_divisor=1000, desc="converting", file=sys.stderr)

    def progress(records, nbytes, total):
        if bar is not None:
            bar.total = total
            bar.set_postfix_str(f"{records:,} records", refresh=False)
            bar.update(nbytes - bar.n)

    device = auto_device() if args.device == "auto" else args.device
    try:
        result = lo.convert(src, layout, args.dst, format=args.format, chunk_bytes=args.chunk,
                            compression=args.compression, overwrite=args.overwrite, offset=args.offset,
                            trailing=args.trailing, device=device, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    print(f"converted {result} (on {device})")
    return 0


def _add_c_options(p):
    p.add_argument("--byteorder", choices=("native", "little", "big"), default="native",
                   help="byte order the records were written in")
    p.add_argument("--pack", type=int, help="maximum member alignment, as #pragma pack(N)")
    p.add_argument("--pointers", choices=("error", "int"), default="error",
                   help="pointer fields: an error, or unsigned integer columns")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="add a directory to the C preprocessor's include path")
    p.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="define a macro for the C preprocessor")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")


def bench(argv):
    """``layouts bench``: the benchmark suite of ``benchmarks/`` (``python -m benchmarks``)."""
    from .benchmarks.__main__ import main as suite

    return suite(argv)


def main(argv=None):
    from layouts import ConversionError, LayoutError
    from layouts._convert import DEFAULT_CHUNK, FORMATS

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # the suite parses its own options
        return bench(argv[1:])
    parser = argparse.ArgumentParser(prog="layouts", description="Records between AoS and Arrow SoA.")
    parser.add_argument("--version", action="version", version=f"layouts {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("bench", add_help=False,
                   help="reductions AoS vs SoA, conversion, break-even: tables, JSON, PNG (--full, --help)")
    p = sub.add_parser("demo", help="write a legacy file and its C header, convert it to Parquet and back")
    p.add_argument("--records", type=int, default=1_000_000, help="how many records (default 1,000,000)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    p.set_defaults(run=demo)

    p = sub.add_parser(
        "inspect", help="show a C struct's fields, offsets, types and padding (like pahole)",
        description="Lay out a C struct as the C compiler does and print, per field: offset, size, "
                    "C type, NumPy type and Arrow type, with every padding hole and the share of "
                    "bytes it wastes.")
    p.add_argument("source", help="a C header or source file")
    p.add_argument("struct", nargs="?", help="'struct name', a tag or a typedef (default: every struct)")
    p.add_argument("--json", action="store_true", help="print the same as JSON")
    _add_c_options(p)
    p.set_defaults(run=inspect)

    p = sub.add_parser(
        "convert", help="convert a legacy record file to Parquet/Feather/Arrow IPC, or back",
        description="Convert SRC chunk by chunk in bounded memory. Records -> Arrow when --to ends in "
                    ".parquet, .feather, .arrow or .ipc (or --format says so); Arrow/Parquet -> records "
                    "otherwise. The output appears only when complete.")
    p.add_argument("src", help="input file, or - for standard input")
    record = p.add_mutually_exclusive_group(required=True)
    record.add_argument("--struct", metavar="HEADER[:NAME]", help="the record type from a C header")
    record.add_argument("--dtype", metavar="SPEC", help="the record type as a NumPy dtype, e.g. \"[('a','<i4')]\"")
    p.add_argument("--to", dest="dst", required=True, metavar="DST", help="output file")
    p.add_argument("--format", choices=FORMATS, help="output format (default: from DST's suffix)")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto",
                   help="where to convert; auto: the GPU when numba-cuda finds one, else the CPU")
    p.add_argument("--chunk", type=_size, default=DEFAULT_CHUNK, metavar="SIZE",
                   help="bytes of records per chunk (default 64M)")
    p.add_argument("--offset", type=int, default=0, help="bytes of file header before the first record")
    p.add_argument("--trailing", choices=("error", "ignore"), default="error",
                   help="a partial record at the end: an error, or skipped with a warning")
    p.add_argument("--compression", help="Parquet or IPC codec (e.g. zstd, lz4, none)")
    p.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_c_options(p)
    p.set_defaults(run=convert)

    args = parser.parse_args(argv)
    if getattr(args, "records", 1) < 0:
        parser.error(f"--records must be >= 0, got {args.records}")
    try:
        return args.run(args)
    except (LayoutError, ConversionError, OSError) as err:
        if args.debug:
            raise
        print(f"layouts {args.command}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"layouts {args.command}: interrupted; no output was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
