"""The library's cost on :mod:`benchmarks.mainframe`'s record part by part, as
:mod:`benchmarks.mainframe_ceiling` prints its vector probe's.

    python -m benchmarks.mainframe_parts                 # 65,536 records (3.6 MB)

Each part is a layout of some of the record's fields at their offsets (the record still
55 bytes), converted ``records -> Arrow`` (``AoS.to_soa(out=, threads=1)``) and back
(``SoA.to_aos(out=, threads=1)``); ns of CPU (``time.process_time``) a record, median of
the rounds, less the cost of a call that converts nothing (a layout of one 1-byte field
over one record), which the record counts here would not hide.
"""

import argparse
import os
import time

import numpy as np

import layouts as lo

from .mainframe import DTYPE, ENCODINGS, records

PARTS = {
    "text (NAME 20, CITY 12)": ("NAME", "CITY"),
    "NAME text 20": ("NAME",),
    "AMT packed 6": ("AMT",),
    "QTY packed 4": ("QTY",),
    "ZN zoned 9": ("ZN",),
    "CNT binary 4": ("CNT",),
    "all": DTYPE.names,
}


def layout_of(names):
    """The layout of fields ``names`` of DTYPE, at their offsets in the 55-byte record."""
    dtype = np.dtype(
        {
            "names": list(names),
            "formats": [DTYPE.fields[n][0] for n in names],
            "offsets": [DTYPE.fields[n][1] for n in names],
            "itemsize": DTYPE.itemsize,
        }
    )
    return lo.Layout.from_dtype(dtype, encodings={n: ENCODINGS[n] for n in names})


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=65536)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    n = args.records
    repeat = max(1, 1_600_000 // n)
    recs = records(n)
    cases = {}
    for name, names in PARTS.items():
        layout = layout_of(names)
        view = recs.view(layout.dtype)
        state = {"soa": lo.AoS(view, layout).to_soa(threads=1)}
        out = np.empty_like(view)

        def forward(layout=layout, state=state, view=view):
            state["soa"] = lo.AoS(view, layout).to_soa(out=state["soa"], threads=1)

        def back(state=state, out=out):
            state["soa"].to_aos(out=out, threads=1)

        cases[f"records -> Arrow: {name}"] = forward
        cases[f"Arrow -> records: {name}"] = back
    tiny = np.zeros(1, np.dtype([("B", "V1")]))
    tiny_layout = lo.Layout.from_dtype(tiny.dtype, encodings={"B": lo.Encoding("binary", 2)})
    tiny_state = {"soa": lo.AoS(tiny, tiny_layout).to_soa(threads=1)}

    def call():
        tiny_state["soa"] = lo.AoS(tiny, tiny_layout).to_soa(out=tiny_state["soa"], threads=1)

    cases["call (one 1-byte field, one record)"] = call
    load = os.getloadavg()
    cpu = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, fn in cases.items():
            fn()
            t0 = time.process_time()
            for _ in range(repeat):
                fn()
            cpu[name].append((time.process_time() - t0) / repeat / n * 1e9)
    print(f"{n} records ({n * 55 / 1e6:.2f} MB), {args.rounds} rounds of {repeat} runs, one thread, ns of CPU a record")
    print(f"  load average (1, 5, 15 min): before {load}, after {os.getloadavg()}")
    call_ns = float(np.median(cpu.pop("call (one 1-byte field, one record)"))) * n
    print(f"  a call that converts nothing: {call_ns / 1e3:.1f} us, taken off every figure below")
    for name, t in cpu.items():
        t = np.array(t) - call_ns / n
        print(f"  {name:<45} {np.median(t):6.2f}  ({min(t):.2f}-{max(t):.2f})")


if __name__ == "__main__":
    main()
