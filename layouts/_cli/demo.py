"""``layouts demo``: a C header and a legacy file laid out by it, converted to Parquet and back
with ``layouts convert``, each step shown."""

import os

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


def demo_records(layout, n, seed=0):
    """Tick-like records of the demo header's layout, as the legacy program would write them."""
    import numpy as np
    import pyarrow as pa

    import layouts as lo
    from layouts import _arrays as arrays

    rng = np.random.default_rng(seed)
    qty = rng.integers(1, 1000, n).astype(np.int32)
    qty[::50] = -1  # the feed's "missing" marker
    px = 100 + rng.normal(0, 1, n).cumsum() * 0.01  # (drawn in the columns' order)
    side = rng.integers(0, 2, n).astype(np.int32)
    sym = rng.choice(["AAPL", "MSFT", "NVDA", "BRK.B"], n)
    pos = rng.normal(size=3 * n).astype(np.float32)
    flag = (rng.random(n) < 0.1).astype(np.uint8)
    venue = rng.integers(0, 128, n).astype(np.uint8)
    columns = {  # (built from buffers: pa.table of NumPy arrays imports pandas, see layouts._arrays)
        "ts_ns": arrays.from_numpy(1_763_803_800_000_000_000 + np.arange(n, dtype=np.int64) * 1_000_000),
        "px": arrays.from_numpy(px),
        "qty": arrays.from_numpy(qty),
        "side": pa.DictionaryArray.from_arrays(arrays.from_numpy(side), arrays.strings(["BUY", "SELL"])),
        "sym": arrays.strings(sym.tolist()),
        "pos": pa.FixedSizeListArray.from_arrays(arrays.from_numpy(pos), 3),
        "flag": arrays.from_numpy(flag),
        "venue": arrays.from_numpy(venue),
    }
    table = pa.Table.from_arrays(list(columns.values()), names=list(columns))
    return lo.SoA.from_arrow(table, layout).to_aos().array


def demo(args):
    """Write a C header and a legacy file laid out by it, convert the file to Parquet and
    back with ``layouts convert``, and show each step's command or code and its output."""
    import tempfile

    if args.dir is not None:
        os.makedirs(args.dir, exist_ok=True)
        return _demo_in(args, args.dir, kept=True)
    with tempfile.TemporaryDirectory(prefix="layouts-demo-") as tmp:
        return _demo_in(args, tmp, kept=False)


def _demo_in(args, where, kept):
    import pyarrow.parquet as pq

    import layouts as lo

    header, records, parquet, back = (
        os.path.join(where, name) for name in ("tick.h", "tick.bin", "tick.parquet", "back.bin")
    )
    import shlex

    q = shlex.quote
    with open(header, "w") as f:
        f.write(DEMO_HEADER)
    print(f"# 1. A C header, as a legacy program has it ({header}):\n")
    print(DEMO_HEADER)
    print(f"# 2. {args.records:,} records written the way that program writes them, in Python:\n")
    print(">>> import layouts as lo")
    print(f">>> layout = lo.Layout.from_c({header!r}, 'struct tick', bytes_as='string')")
    print(f">>> demo_records(layout, {args.records}).tofile({records!r})   # layouts._cli.demo_records\n")
    layout = lo.Layout.from_c(header, "struct tick", bytes_as="string")
    with open(records, "wb") as f:
        demo_records(layout, args.records).tofile(f)
    print("# 3. Its layout, as the C compiler places the fields (print(layout)):\n")
    print(layout)
    print("\n# 4. Records -> Parquet: sym as text, qty -1 as null:\n")
    there = _demo_command(
        args,
        [
            "convert",
            records,
            "--struct",
            f"{header}:tick",
            "--string",
            "sym",
            "--null",
            "qty=-1",
            "--to",
            parquet,
            "--overwrite",
        ],
    )
    if there:
        return there
    table = pq.read_table(parquet)
    if _has_pandas():
        import pandas as pd

        print(f"\n>>> pq.read_table({parquet!r}).slice(0, 5).to_pandas(types_mapper=pd.ArrowDtype)")
        print(table.slice(0, 5).to_pandas(types_mapper=pd.ArrowDtype).to_string())
    else:
        print(f"\n>>> pq.read_table({parquet!r}).slice(0, 5)")
        print(table.slice(0, 5))
    print(f"qty nulls: {table.column('qty').null_count:,}")
    print("\n# 5. Parquet -> records: nulls back to -1:\n")
    again = _demo_command(
        args,
        [
            "convert",
            parquet,
            "--struct",
            f"{header}:tick",
            "--string",
            "sym",
            "--fill",
            "qty=-1",
            "--to",
            back,
            "--overwrite",
        ],
    )
    if again:
        return again
    exact = _same_file(records, back)
    print(f"\n$ cmp {q(records)} {q(back)}")
    print(f"round trip bit-exact: {exact}")
    if kept:
        print(f"\nThe files are in {where}; run the commands above again, or change them.")
    else:
        print("\n(The files were in a temporary directory, now removed; `layouts demo --dir DIR` keeps them.)")
    return 0 if exact else 1


def _demo_command(demo_args, argv):
    """Show a ``layouts`` command line and run it in this process."""
    import shlex

    from . import build_parser
    from .convert import convert

    print("$ layouts " + " ".join(shlex.quote(a) for a in argv))
    args = build_parser().parse_args(argv)
    args.interrupts, args.last_step = getattr(demo_args, "interrupts", None), False
    return convert(args)


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


def add_parser(sub):
    """The ``demo`` subcommand and its options."""
    p = sub.add_parser(
        "demo",
        help="write a legacy file and its C header, convert it to Parquet and back",
        description="Write a C header and a file of records laid out by it, convert the file to "
        "Parquet and back with `layouts convert`, and show every command and its "
        "output.",
    )
    p.add_argument("--records", type=int, default=1_000_000, help="how many records (default 1,000,000)")
    p.add_argument("--dir", metavar="DIR", help="write and keep the files in DIR (default: a temporary directory)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    p.set_defaults(run=demo)
