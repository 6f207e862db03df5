"""Mainframe records to Arrow and back, against the memory's speed and the Python peers.

    python -m benchmarks.mainframe                       # 1 GB of records (about 4 min on 2 cores)
    python -m benchmarks.mainframe --small               # 20,000 records, no vector probe: the smoke size

The records are the 55-byte ``REC`` of :data:`COPYBOOK`: EBCDIC text (cp037), packed
decimals (COMP-3), a zoned decimal with an overpunched sign and a big-endian binary
integer, filled with valid random values. In one process, in interleaved rounds:

* ``np.copyto`` of the record bytes into a reused buffer (the ceiling), and ``np.copy``
  into a new one (what fresh memory costs: its page faults);
* layouts records -> Arrow (``AoS.to_soa``, into a reused arena with ``out=`` as
  ``np.copyto`` writes a reused buffer, and into a new one, the previous result dropped
  first) and Arrow -> records
  (``SoA.to_aos(out=)``), all cores, each as GB/s of record bytes and as a ratio to
  ``np.copyto`` (goal >= 0.3x);
* the same with ``threads=1`` on records of COMP-3 fields only (reused output), in MiB/s
  per core (wall clock, and per CPU-second of the thread: ``time.process_time``), against
  copybook-rs's published COMP-3 figure (18-25 MiB/s, its README; goal >= 10x), and on
  the whole record both ways (per CPU-second and ns per record: the kernels' cost, which
  the load of other jobs stretches much less than the wall clock of all cores);
* a ceiling probe (:mod:`benchmarks.mainframe_ceiling`): the record decoded by a loop
  written for it alone, on the same threads; what scalar code reaches on the machine;
  and its vector probe, both ways (column loops over blocks of records that LLVM turns
  into vector code: what vector code reaches; its per-CPU-second figures on one thread
  too, and the counts of vector instructions in its compiled code);
* the Python peers from PyPI that decode such records, on a slice (``--peer-records``),
  scaled by records per second (goal >= 50x the fastest): ``cobolio.loads`` (a dict per
  record) and the way back, ``cobolio`` having none, is compared with the peer's
  forward figure only.
"""

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import numpy as np

import layouts as lo

from .convert_cpu import machine
from .mainframe_ceiling import Ceiling, VectorCeiling
from .transpose import interleaved

COPYBOOK = """\
       01  REC.
           05  NAME      PIC X(20).
           05  AMT       PIC S9(9)V99 COMP-3.
           05  QTY       PIC S9(7) COMP-3.
           05  ZN        PIC S9(7)V99.
           05  CNT       PIC S9(9) COMP.
           05  CITY      PIC X(12).
"""
E = lo.Encoding
DTYPE = np.dtype([("NAME", "V20"), ("AMT", "V6"), ("QTY", "V4"), ("ZN", "V9"), ("CNT", "V4"), ("CITY", "V12")])
ENCODINGS = {
    "NAME": E("text"),
    "AMT": E("packed", 11, 2, signed=True),
    "QTY": E("packed", 7, signed=True),
    "ZN": E("zoned", 9, 2, signed=True),
    "CNT": E("binary", 9, signed=True),
    "CITY": E("text"),
}
PACKED_DTYPE = np.dtype([(f"P{i}", "V6") for i in range(8)])  # COMP-3 only: 8 x S9(9)V99
PACKED_ENCODINGS = {f"P{i}": E("packed", 11, 2, signed=True) for i in range(8)}
COPYBOOK_RS_COMP3_MIB_S = (18, 25)  # copybook-rs README: COMP-3 decoding, MiB/s


def _packed(digits, negative, width):
    """Packed decimal bytes (n, width) of digit arrays (n, 2 * width - 1); zero is positive
    (a negative zero is valid data, but comes back as a positive one: docs/mainframe.md)."""
    n = digits.shape[0]
    negative = negative & digits.any(axis=1)
    nibbles = np.concatenate([digits, np.where(negative, 0xD, 0xC)[:, None]], axis=1).astype(np.uint8)
    return (nibbles[:, 0::2] << 4 | nibbles[:, 1::2]).reshape(n, width)


def records(n, seed=27):
    """``n`` records of DTYPE with random valid values."""
    rng = np.random.default_rng(seed)
    raw = np.empty((n, DTYPE.itemsize), np.uint8)
    letters = np.frombuffer("ABCDEFGHIJKLMNOPQRSTUVWXYZ ".encode("cp037"), np.uint8)
    offsets = {name: DTYPE.fields[name][1] for name in DTYPE.names}
    raw[:, 0:20] = letters[rng.integers(0, len(letters), (n, 20))]
    raw[:, 43:55] = letters[rng.integers(0, len(letters), (n, 12))]
    raw[:, offsets["AMT"] : offsets["AMT"] + 6] = _packed(rng.integers(0, 10, (n, 11)), rng.random(n) < 0.3, 6)
    raw[:, offsets["QTY"] : offsets["QTY"] + 4] = _packed(rng.integers(0, 10, (n, 7)), rng.random(n) < 0.3, 4)
    zoned = 0xF0 | rng.integers(0, 10, (n, 9)).astype(np.uint8)
    negative = (rng.random(n) < 0.3) & (zoned != 0xF0).any(axis=1)
    zoned[:, -1] = np.where(negative, 0xD0, 0xC0) | (zoned[:, -1] & 0xF)
    raw[:, offsets["ZN"] : offsets["ZN"] + 9] = zoned
    cnt = rng.integers(-999_999_999, 1_000_000_000, n).astype(">i4")
    raw[:, offsets["CNT"] : offsets["CNT"] + 4] = cnt.view(np.uint8).reshape(n, 4)
    return raw.reshape(-1).view(DTYPE)


def packed_records(n, seed=28):
    rng = np.random.default_rng(seed)
    parts = [_packed(rng.integers(0, 10, (n, 11)), rng.random(n) < 0.3, 6) for _ in range(8)]
    return np.ascontiguousarray(np.concatenate(parts, axis=1)).reshape(-1).view(PACKED_DTYPE)


def peer_cobolio(recs, count):
    """Records per second of ``cobolio.loads`` over the first ``count`` records, or None."""
    try:
        import contextlib
        import io

        import cobolio
    except ImportError:
        return None
    with contextlib.redirect_stdout(io.StringIO()):  # its parser prints every field it reads
        _, layout = cobolio.copybook_to_layout(COPYBOOK)
    raw = recs[:count].tobytes()
    size = DTYPE.itemsize
    t0 = time.perf_counter()
    out = [cobolio.loads(raw[i * size : (i + 1) * size], layout) for i in range(count)]
    seconds = time.perf_counter() - t0
    assert len(out) == count
    return count / seconds


def check_values(recs, table):
    """The decoded values agree with a direct NumPy decode of two fields (a sanity check)."""
    cnt = recs.view(np.uint8).reshape(len(recs), -1)[:, 39:43].copy().view(">i4").ravel()
    got = np.array([int(v) for v in table.column("CNT").to_pylist()[:1000]])
    assert (got == cnt[:1000]).all()


def run(n, rounds, peer_records, threads, vectors=True):
    layout = lo.Layout.from_dtype(DTYPE, encodings=ENCODINGS)
    recs = records(n)
    soa = lo.AoS(recs, layout).to_soa(threads=threads)
    check_values(recs, soa.to_arrow())
    back = soa.to_aos(threads=threads).array
    if back.tobytes() != recs.tobytes():
        bad = np.flatnonzero((back.view(np.uint8).reshape(n, -1) != recs.view(np.uint8).reshape(n, -1)).any(axis=1))
        raise AssertionError(
            f"the way back changed {len(bad)} records, the first {bad[0]}: "
            f"{recs[bad[0]].tobytes().hex()} -> {back[bad[0]].tobytes().hex()}"
        )
    copy_dst = np.empty_like(recs.view(np.uint8))
    src = recs.view(np.uint8)
    out_aos = np.empty_like(recs)
    state = {"soa": soa}

    state["reused"] = lo.AoS(recs, layout).to_soa(threads=threads)  # never exported: its arena is reused

    def forward():  # (the previous result is dropped before, untimed: one arena is made, not two live)
        state["soa"] = lo.AoS(recs, layout).to_soa(threads=threads)

    def before(name):
        if name == "layouts records -> Arrow (new arena)":
            state["soa"] = None

    def forward_reused():
        state["reused"] = lo.AoS(recs, layout).to_soa(out=state["reused"], threads=threads)

    # the ceiling probe (benchmarks.mainframe_ceiling): a loop written for this record alone,
    # on as many threads as the library's run uses, each its share of the records
    probe = Ceiling(recs)
    probe.run()
    probe.check(soa.to_arrow())
    parts = threads or os.cpu_count() or 1
    bounds = np.linspace(0, n, parts + 1).astype(np.int64)
    pool = ThreadPoolExecutor(parts)

    def on_threads(run):
        def parts():
            for f in [pool.submit(run, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]:
                f.result()

        return parts

    ceiling = on_threads(probe.run)
    # the vector probe (same module): the record one field at a time over blocks, both ways,
    # checked against the library's values and records before it is timed
    cases = {
        "np.copyto (record bytes)": lambda: np.copyto(copy_dst, src),
        "ceiling probe: a loop for this record only": ceiling,
        "np.copy (record bytes, new buffer)": lambda: src.copy(),
        "layouts records -> Arrow (out= reused)": forward_reused,
        "layouts records -> Arrow (new arena)": forward,
        "layouts Arrow -> records (out= reused)": lambda: state["soa"].to_aos(out=out_aos, threads=threads),
    }
    if vectors:
        vector = VectorCeiling(recs, soa.to_arrow(), probe.src)
        vector.check(soa.to_arrow())
        cases["vector probe: records -> Arrow"] = on_threads(vector.run)
        cases["vector probe: Arrow -> records"] = on_threads(vector.run_back)
    seconds = interleaved(cases, rounds, before)
    nbytes = recs.nbytes
    rows = [{"case": name, "seconds": s, "GB/s": nbytes / s / 1e9} for name, s in seconds.items()]
    copy = seconds["np.copyto (record bytes)"]
    ratios = {
        "records -> Arrow (out=) / np.copyto": copy / seconds["layouts records -> Arrow (out= reused)"],
        "records -> Arrow (new arena) / np.copyto": copy / seconds["layouts records -> Arrow (new arena)"],
        "Arrow -> records (out=) / np.copyto": copy / seconds["layouts Arrow -> records (out= reused)"],
        # what scalar code written for this one record reaches here (benchmarks.mainframe_ceiling)
        "ceiling probe / np.copyto": copy / seconds["ceiling probe: a loop for this record only"],
        # what fresh memory costs: a new buffer against a reused one, for a copy and for the conversion
        "np.copy (new buffer) / np.copyto (seconds)": seconds["np.copy (record bytes, new buffer)"] / copy,
        "records -> Arrow, new arena / out= (seconds)": seconds["layouts records -> Arrow (new arena)"]
        / seconds["layouts records -> Arrow (out= reused)"],
    }
    if vectors:  # what vector code written for this record reaches here, both ways
        ratios["vector probe records -> Arrow / np.copyto"] = copy / seconds["vector probe: records -> Arrow"]
        ratios["vector probe Arrow -> records / np.copyto"] = copy / seconds["vector probe: Arrow -> records"]

    # COMP-3 only, one thread: per core, against copybook-rs's published figure
    pn = max(n * DTYPE.itemsize // PACKED_DTYPE.itemsize // 4, 1000)
    precs = packed_records(pn)
    playout = lo.Layout.from_dtype(PACKED_DTYPE, encodings=PACKED_ENCODINGS)
    psoa = lo.AoS(precs, playout).to_soa(threads=1)
    pstate = {"reused": lo.AoS(precs, playout).to_soa(threads=1)}
    pout = np.empty_like(precs)

    def comp3_forward():
        pstate["reused"] = lo.AoS(precs, playout).to_soa(out=pstate["reused"], threads=1)

    # one thread: its CPU seconds too (process_time), which other jobs on the machine do not
    # stretch as they stretch the wall-clock time (the thread waits for a core)
    cpu = {}

    def on_cpu(name, fn):
        def timed():
            t0 = time.process_time()
            fn()
            cpu.setdefault(name, []).append(time.process_time() - t0)

        return timed

    def whole_forward():
        state["reused"] = lo.AoS(recs, layout).to_soa(out=state["reused"], threads=1)

    # the whole record on one thread too: its CPU seconds are the kernels' cost, which the
    # load of other jobs on the machine stretches much less than the wall clock of two threads
    pcases = {
        "COMP-3 records -> Arrow, 1 thread": (comp3_forward, precs.nbytes),
        "COMP-3 Arrow -> records, 1 thread": (lambda: psoa.to_aos(out=pout, threads=1), precs.nbytes),
        "records -> Arrow (out=), 1 thread": (whole_forward, nbytes),
        "Arrow -> records (out=), 1 thread": (lambda: state["soa"].to_aos(out=out_aos, threads=1), nbytes),
    }
    if vectors:
        pcases["vector probe records -> Arrow, 1 thread"] = (vector.run, nbytes)
        pcases["vector probe Arrow -> records, 1 thread"] = (vector.run_back, nbytes)
    pseconds = interleaved({name: on_cpu(name, fn) for name, (fn, _) in pcases.items()}, rounds)
    comp3 = {name: pcases[name][1] / s / 2**20 for name, s in pseconds.items()}
    for name, s in pseconds.items():
        cpu_s = float(np.median(cpu[name][1:]))  # (the first: the untimed warm-up round)
        size = pcases[name][1]
        rows.append(
            {
                "case": name,
                "seconds": s,
                "GB/s": size / s / 1e9,
                "MiB/s": comp3[name],
                "cpu_seconds": cpu_s,
                "MiB per CPU-second": size / cpu_s / 2**20,
                "ns per record (CPU)": cpu_s / (n if size == nbytes else pn) * 1e9,
            }
        )
    per_cpu = {row["case"]: row["MiB per CPU-second"] for row in rows if "cpu_seconds" in row}
    best = COPYBOOK_RS_COMP3_MIB_S[1]
    ratios["COMP-3 per core / copybook-rs (25 MiB/s, its best)"] = comp3["COMP-3 records -> Arrow, 1 thread"] / best
    ratios["COMP-3 way back per core / copybook-rs (25 MiB/s)"] = comp3["COMP-3 Arrow -> records, 1 thread"] / best
    ratios["COMP-3 per CPU-second / copybook-rs (25 MiB/s)"] = per_cpu["COMP-3 records -> Arrow, 1 thread"] / best
    ratios["COMP-3 way back per CPU-second / copybook-rs"] = per_cpu["COMP-3 Arrow -> records, 1 thread"] / best
    # the whole record per CPU-second of one thread against np.copyto's bytes per second
    for name in (
        "records -> Arrow (out=), 1 thread",
        "Arrow -> records (out=), 1 thread",
        "vector probe records -> Arrow, 1 thread",
        "vector probe Arrow -> records, 1 thread",
    ):
        if name not in per_cpu:
            continue
        ratios[f"{name}, per CPU-second / np.copyto"] = per_cpu[name] * 2**20 / (nbytes / copy)

    peers = {}
    rate = peer_cobolio(recs, min(peer_records, n))
    if rate is not None:
        peers["cobolio.loads"] = rate
        ratios["records -> Arrow (out=) / cobolio (records/s)"] = (
            n / seconds["layouts records -> Arrow (out= reused)"] / rate
        )
        ratios["records -> Arrow (new arena) / cobolio (records/s)"] = (
            n / seconds["layouts records -> Arrow (new arena)"] / rate
        )
        ratios["Arrow -> records / cobolio forward (records/s)"] = (
            n / seconds["layouts Arrow -> records (out= reused)"] / rate
        )
    return rows, ratios, peers, VectorCeiling.vector_instructions() if vectors else {}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gb", type=float, default=1.0, help="size of the record file in memory (default 1 GB)")
    p.add_argument(
        "--small",
        action="store_true",
        help="20,000 records, one round, no vector probe (tests/test_mainframe_simd_probe.py checks it): the smoke size",
    )
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--peer-records", type=int, default=20_000)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", help="also write the results to this JSON file")
    args = p.parse_args(argv)
    n = 20_000 if args.small else int(args.gb * 1e9) // DTYPE.itemsize
    rounds = 1 if args.small else args.repeat
    load_before = os.getloadavg()
    rows, ratios, peers, vector_ops = run(
        n, rounds, min(args.peer_records, 2000) if args.small else args.peer_records, args.threads, not args.small
    )
    load = {"before": load_before, "after": os.getloadavg()}  # other jobs on the machine: 1, 5, 15 min
    info = machine()
    print(
        f"{n:,} records x {DTYPE.itemsize} bytes ({n * DTYPE.itemsize / 1e9:.2f} GB), {rounds} rounds, "
        f"{info['cores']} cores ({info['cpu']})"
    )
    print(f"  load average (1, 5, 15 min): before {load['before']}, after {load['after']}")
    for row in rows:
        extra = f"  {row['MiB/s']:8.1f} MiB/s" if "MiB/s" in row else ""
        if "cpu_seconds" in row:
            extra += f"  {row['MiB per CPU-second']:8.1f} MiB per CPU-second"
            extra += f"  {row['ns per record (CPU)']:6.1f} ns per record"
        print(f"  {row['case']:<40} {row['GB/s']:7.3f} GB/s{extra}")
    for name, rate in peers.items():
        print(f"  {name:<40} {rate:,.0f} records/s ({rate * DTYPE.itemsize / 1e6:.2f} MB/s)")
    for name, value in ratios.items():
        print(f"  {name:<55} {value:8.2f}x")
    cpu_name = os.environ.get("NUMBA_CPU_NAME", "host")
    if vector_ops:
        print(f"  vector instructions in the vector probe (compiled for the {cpu_name} CPU): {vector_ops}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "machine": info,
                    "records": n,
                    "record_bytes": DTYPE.itemsize,
                    "small": args.small,
                    "rounds": rounds,
                    "loadavg": load,
                    "rows": rows,
                    "ratios": ratios,
                    "peers_records_per_s": peers,
                    "vector_probe_instructions": vector_ops,
                    "numba_cpu_name": os.environ.get("NUMBA_CPU_NAME", "host"),
                    "numba_cpu_features": os.environ.get("NUMBA_CPU_FEATURES"),  # (None: the host's)
                    "copybook_rs_comp3_mib_s": COPYBOOK_RS_COMP3_MIB_S,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
