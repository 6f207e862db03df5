"""Records as long as their OCCURS DEPENDING ON counts (``layouts.cobol.read_variable``,
``write_variable``), against the memory's speed.

    python -m benchmarks.mainframe_variable            # about 100 MB of records
    python -m benchmarks.mainframe_variable --small    # 20,000 records: the smoke size

The records are :data:`COPYBOOK`'s ``ORDER``: a packed count, then 0 to 20 items of 16
bytes (text, packed, zoned), then a packed total and a text note: 26 to 346 bytes, counts
uniform, EBCDIC, valid random values. In one process, in interleaved rounds (medians):
``np.copyto`` of the file's bytes into a reused buffer (the ceiling); the scan alone
(each record's length from its counts); the scan and the spread into the maximum layout;
``read_variable`` whole (one walk finds every record's pieces, the fields between tables
and each table's elements, and each piece is transposed where it lies, through an index);
``read_variable`` the exact way (scan, spread, the one-pass transpose, the lists cut to
their counts: what it falls back to, and what it was before); ``write_variable`` (the lists padded, the transpose back, the records cut to
their counts). Each as GB/s of the file's bytes and as a ratio to ``np.copyto``; the load
average before and after is recorded (the machine is shared).
"""

import argparse
import json
import os
import time
from datetime import datetime, timezone

import numpy as np

import layouts as lo
from layouts import cobol

from .convert_cpu import machine
from .transpose import interleaved

COPYBOOK = """\
       01  ORDER.
           05  N-ITEMS         PIC S9(3) COMP-3.
           05  ITEM OCCURS 0 TO 20 TIMES DEPENDING ON N-ITEMS.
               10  SKU         PIC X(8).
               10  QTY         PIC S9(5) COMP-3.
               10  PRICE       PIC S9(3)V99.
           05  TOTAL           PIC S9(9)V99 COMP-3.
           05  NOTE            PIC X(18).
"""


def records(n, seed=27):
    """``n`` ORDER records back to back: the bytes and their counts."""
    from layouts._occurs import VariableRecord

    book = cobol.read_copybook(COPYBOOK)
    layout = lo.Layout.from_copybook(COPYBOOK)
    var = VariableRecord(book, layout)
    rng = np.random.default_rng(seed)
    rows = np.empty((n, layout.itemsize), np.uint8)
    rows[:] = var.template
    counts = rng.integers(0, 21, n)
    rows[:, 0] = (counts // 10) & 0xF
    rows[:, 1] = ((counts % 10) << 4) | 0xC
    letters = np.frombuffer("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".encode("cp037"), np.uint8)
    item = layout["ITEM.SKU"]
    for k, off in enumerate(item.element_offsets().tolist()):
        rows[:, off : off + 8] = letters[rng.integers(0, len(letters), (n, 8))]
        qty = layout["ITEM.QTY"].element_offsets()[k]
        digits = rng.integers(0, 10, (n, 5))
        rows[:, qty] = digits[:, 0] << 4 | digits[:, 1]
        rows[:, qty + 1] = digits[:, 2] << 4 | digits[:, 3]
        rows[:, qty + 2] = digits[:, 4] << 4 | 0xC
        price = layout["ITEM.PRICE"].element_offsets()[k]
        rows[:, price : price + 5] = 0xF0 | rng.integers(0, 10, (n, 5))
        rows[:, price + 4] &= 0xCF  # the sign overpunched: C, as COBOL writes a positive S9(3)V99
    total = layout["TOTAL"].offset
    digits = rng.integers(0, 10, (n, 12))
    for t in range(5):
        rows[:, total + t] = digits[:, 2 * t] << 4 | digits[:, 2 * t + 1]
    rows[:, total] &= 0x0F  # 11 digits: the first nibble pads
    rows[:, total + 5] = digits[:, 10] << 4 | 0xC
    data, _ = var.shrink(rows)
    return data, counts


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.mainframe_variable", description=__doc__.split("\n")[0])
    p.add_argument("--small", action="store_true", help="20,000 records (the smoke size)")
    p.add_argument("--records", type=int, default=None, help="records (default: about 100 MB of them)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    n = args.records or (20_000 if args.small else 540_000)  # 186 bytes on average: about 100 MB
    load_before = os.getloadavg()
    data, _ = records(n)
    from layouts._occurs import VariableRecord

    book = cobol.read_copybook(COPYBOOK)
    layout = lo.Layout.from_copybook(COPYBOOK)
    var = VariableRecord(book, layout)
    dst = np.empty_like(data)
    table = cobol.read_variable(data, COPYBOOK)
    assert cobol.write_variable(table, COPYBOOK) == data.tobytes()  # the way back is exact

    def scan():
        var.scan(data)

    def scan_spread():
        var.spread(data, *var.scan(data))

    def exact_way():  # read_variable as it was: spread into the maximum layout, transpose, cut
        from layouts import _occurs

        one_level, _occurs.one_level = _occurs.one_level, lambda var: False
        try:
            cobol.read_variable(data, COPYBOOK)
        finally:
            _occurs.one_level = one_level

    cases = {
        "np.copyto of the file's bytes (reused buffer)": lambda: np.copyto(dst, data),
        "scan (each record's length from its counts)": scan,
        "scan + spread into the maximum layout": scan_spread,
        "read_variable (one pass: walk, pieces transposed in place)": lambda: cobol.read_variable(data, COPYBOOK),
        "read_variable the exact way (scan, spread, transpose, cut)": exact_way,
        "write_variable (pad, transpose back, cut)": lambda: cobol.write_variable(table, COPYBOOK),
    }
    t0 = time.perf_counter()
    medians = interleaved(cases, args.rounds)
    took = time.perf_counter() - t0
    load_after = os.getloadavg()
    ceiling = medians["np.copyto of the file's bytes (reused buffer)"]
    rows = []
    for name, seconds in medians.items():
        rows.append(
            {
                "case": name,
                "seconds": seconds,
                "gb_s": data.nbytes / seconds / 1e9,
                "ratio_to_copyto": ceiling / seconds,
            }
        )
    result = {
        "benchmark": "mainframe_variable",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "records": n,
        "bytes": int(data.nbytes),
        "max_record": layout.itemsize,
        "rounds": args.rounds,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "seconds_total": took,
        "cases": rows,
    }
    print(
        f"{n:,} records, {data.nbytes / 1e6:.1f} MB (max {layout.itemsize} bytes each); load {load_before} -> {load_after}"
    )
    for r in rows:
        print(f"  {r['case']:<60} {r['gb_s']:8.3f} GB/s  {r['ratio_to_copyto']:6.3f}x copyto")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
