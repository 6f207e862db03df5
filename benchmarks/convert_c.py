"""Records described by a C header (big-endian, bit-fields, an enum) <-> Arrow, on the CPU.

    python -m benchmarks.convert_c                    # 10,000,000 records, 7 repeats
    python -m benchmarks.convert_c --records 100000 --repeat 3

The record is a big-endian market-data feed as its C header declares it. Every field is
byte-swapped, three bit-fields are extracted from one 32-bit word, and the enum becomes
an Arrow dictionary, all in the one pass. Figures are medians, as GB/s of record bytes
and as a ratio to ``np.copy`` of the same bytes in the same run. The peer is what a user
would write with NumPy: per-field ``astype`` to native order plus shift and mask for the
bit-fields (no dictionary for the enum).
"""

import numpy as np
import pyarrow as pa

import layouts as lo

from .convert_cpu import arguments, machine, median_seconds, save_json

HEADER = """
#include <stdint.h>
enum side { BID = 0, ASK = 1, TRADE = 2 };
struct feed_rec {                 /* written by a big-endian feed handler */
    uint64_t ts_ns;
    double   px;
    int32_t  qty;
    enum side side;
    uint32_t venue:6, cond:10, seq:16;
    char     sym[8];
};
"""


def make_records(layout, n):
    rng = np.random.default_rng(0)
    table = pa.table(
        {
            "ts_ns": pa.array(np.arange(n, dtype=np.uint64) * 1000),
            "px": rng.random(n) * 100,
            "qty": pa.array(rng.integers(-1000, 1000, n).astype(np.int32)),
            "side": pa.DictionaryArray.from_arrays(
                pa.array(rng.integers(0, 3, n).astype(np.int32)), pa.array(["BID", "ASK", "TRADE"])
            ),
            "venue": pa.array(rng.integers(0, 64, n).astype(np.uint32)),
            "cond": pa.array(rng.integers(0, 1024, n).astype(np.uint32)),
            "seq": pa.array((np.arange(n) % 65536).astype(np.uint32)),
            "sym": pa.array(np.full(n, b"SYM00001", dtype="S8")),
        }
    )
    return lo.SoA.from_arrow(table, layout).to_aos().array


def numpy_peer(a, word_offset=24):
    out = {name: a[name].astype(a.dtype[name].newbyteorder("=")) for name in ("ts_ns", "px", "qty", "side")}
    # the three bit-fields share the big-endian 32-bit word at byte 24 (venue in its top bits)
    word = np.ndarray(len(a), ">u4", a, word_offset, (a.itemsize,)).astype(np.uint32)
    out["venue"], out["cond"], out["seq"] = word >> 26, (word >> 16) & 0x3FF, word & 0xFFFF
    out["sym"] = np.ascontiguousarray(a["sym"])
    return out


def run(n, repeat, threads):
    layout = lo.Layout.from_c(HEADER, "struct feed_rec", byteorder="big")
    a = make_records(layout, n)
    raw = a.view(np.uint8)
    aos = lo.AoS(a, layout)
    soa = aos.to_soa(threads=threads)
    check = soa.to_arrow()
    peer = numpy_peer(a)
    assert all(np.array_equal(check.column(k).to_numpy(), peer[k]) for k in ("venue", "cond", "seq", "qty"))
    nbytes, rows = a.nbytes, []
    copy = median_seconds(lambda: np.copy(raw), repeat)

    def add(name, seconds):
        rows.append({"name": name, "seconds": seconds, "GB/s": nbytes / seconds / 1e9, "x_copy": copy / seconds})

    add("np.copy of the record bytes", copy)
    add("layouts to_soa + to_arrow", median_seconds(lambda: aos.to_soa(threads=threads).to_arrow(), repeat))
    add("layouts to_aos", median_seconds(lambda: soa.to_aos(threads=threads), repeat))
    add("numpy astype + shift/mask", median_seconds(lambda: numpy_peer(a), repeat))
    return layout, rows


def main(argv=None):
    p = arguments(__doc__)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    layout, rows = run(args.records, args.repeat, args.threads)
    info = machine()
    print(
        f"{args.records:,} records x {layout.itemsize} bytes of {layout.c.name} (big-endian), median of "
        f"{args.repeat}; {info['cpu']}, {info['cores']} cores"
    )
    for r in rows:
        print(f"| {r['name']:<30} | {r['GB/s']:6.2f} GB/s | {r['x_copy']:5.2f} x copy |")
    save_json(args.json, info, records=args.records, repeat=args.repeat, header=HEADER, rows=rows)


if __name__ == "__main__":
    main()
