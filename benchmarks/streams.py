"""Record streams: ``read_stream``/``write_stream`` of ITCH 5.0 days, pcap, LAS and SEG-Y.

    python -m benchmarks.streams                         # ITCH days of 25, 100, 250 MB; pcap; LAS; SEG-Y
    python -m benchmarks.streams --small                 # a smoke test (a few MB)
    python -m benchmarks.streams --itch-mb 50 200 --repeat 7 --json benchmarks/results/streams.json

ITCH: a synthetic NASDAQ TotalView-ITCH 5.0 day of each size (``benchmarks.itch_day``: all 23
message types, a day's message mix, consistent order references), in memory. Timed, rounds
interleaved: ``read_stream`` to one table per message type (the scan, the grouping, the fused
gather + transpose of every type), ``write_stream`` of those tables back into a reused
in-memory file (checked equal to the input), ``np.copyto`` of the same bytes into a reused
buffer (the ceiling), and, when installed, itch-book's message table (``pip install itch-book``:
its C++ parser fed the same bytes, ``Session(["messages"]).feed``, the order book replayed).
Reported per size: medians, messages/s, GB/s, read time over copy time, itch-book's time over
read's; then how each grows with the size.

``--only itch`` runs just the ITCH days.

pcap (``--only pcap`` runs just it): ``read_stream(..., "pcap")`` (packets with their payloads in
``_tail``: copied, ``tails="copy"``, and as Arrow views into the capture, ``tails="view"``) against
dpkt's reader (``list(dpkt.pcap.Reader(f))``) and ``np.copyto`` of the capture, in memory.

LAS and SEG-Y (header-driven fixed records; ``--only fixed`` runs just them, ``--points`` takes
several sizes): ``read_stream`` of a file (written by laspy, segyio) against
``read_records(path, dtype, offset=...).to_soa()`` of the same records: the ratio says what the
header, the scan and the columns read_records does not make (``_offset``, 8 bytes a record;
``_tail``) cost over a plain fixed-record read. Also timed alone: the ``_offset`` column (written
as read_stream writes it, into new memory), and ``np.copyto`` of the file's bytes (the ceiling).

    python -m benchmarks.streams --only fixed --points 500000 2000000 8000000 --repeat 9
"""

import argparse
import io
import json
import os
import platform
import struct
import sys
import tempfile
import time

import numpy as np

import layouts as lo

# message type -> (total length, share of a day file's messages)
MIX = {
    "A": (36, 0.36),
    "D": (19, 0.30),
    "U": (35, 0.10),
    "E": (31, 0.08),
    "X": (23, 0.06),
    "P": (44, 0.04),
    "F": (40, 0.02),
    "C": (36, 0.01),
    "I": (50, 0.015),
    "S": (12, 0.0005),
    "R": (39, 0.001),
    "H": (25, 0.001),
    "Y": (20, 0.001),
    "L": (26, 0.001),
    "V": (35, 0.0003),
    "W": (12, 0.0002),
    "K": (28, 0.0002),
    "J": (35, 0.0002),
    "h": (21, 0.0002),
    "Q": (40, 0.002),
    "B": (19, 0.0005),
    "N": (20, 0.0015),
    "O": (48, 0.0001),
}


def itch_bytes(megabytes, seed=0):
    """A synthetic ITCH 5.0 file of about ``megabytes`` MB (uint8 array) and its message count."""
    rng = np.random.default_rng(seed)
    tags = np.array([ord(t) for t in MIX], np.uint8)
    sizes = np.array([v[0] for v in MIX.values()], np.int64)
    p = np.array([v[1] for v in MIX.values()])
    mean = float((sizes + 2) @ (p / p.sum()))
    n = int(megabytes * 1e6 / mean)
    kind = rng.choice(len(MIX), n, p=p / p.sum())
    framed = sizes[kind] + 2
    starts = np.concatenate([[0], np.cumsum(framed)[:-1]])
    buf = rng.integers(65, 91, int(framed.sum()), dtype=np.uint8)
    buf[starts] = (sizes[kind] >> 8).astype(np.uint8)
    buf[starts + 1] = (sizes[kind] & 0xFF).astype(np.uint8)
    buf[starts + 2] = tags[kind]
    return buf, n


def pcap_bytes(packets, seed=0):
    """A little-endian microsecond pcap of ``packets`` packets of 60..1514 bytes."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(60, 1515, packets)
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    payload = rng.integers(0, 256, int(lens.max()), dtype=np.uint8).tobytes()
    for i, n in enumerate(lens):
        out.append(struct.pack("<IIII", 1_700_000_000 + i // 1000, i % 1_000_000, int(n), int(n)))
        out.append(payload[:n])
    return b"".join(out)


def interleaved(fns, repeat, cpu=None, faults=None):
    """Median seconds of each function, rounds interleaved (one call of each per round).
    With a list ``cpu``, the median CPU seconds of each (this process's, all its threads:
    less disturbed by other programs than the wall clock) are appended to it; with a list
    ``faults``, the median minor page faults of each call (first touches of new memory:
    ``ru_minflt``; with transparent huge pages one fault may stand for 2 MiB)."""
    import resource

    times = [[] for _ in fns]
    used = [[] for _ in fns]
    touched = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            times[k].append(time.perf_counter() - t0)
            used[k].append(time.process_time() - c0)
            touched[k].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    if cpu is not None:
        cpu.extend(float(np.median(u)) for u in used)
    if faults is not None:
        faults.extend(int(np.median(f)) for f in touched)
    return [float(np.median(t)) for t in times]


def _itch_book():
    """itch-book's message table as a function of the bytes, or None (not installed)."""
    try:
        from itch_book._core import Session
    except ImportError:
        return None

    def messages(buf):
        session = Session(["messages"], 0, [])
        session.feed(buf)
        return session.take_messages()

    return messages


def run_itch(sizes_mb, repeat):
    """One row per ITCH day size (see the module's docstring)."""
    from .itch_day import day_bytes

    spec = lo.Stream.builtin("itch50")
    lo.write_stream(lo.read_stream(day_bytes(200_000, seed=1), spec), spec)  # compile / load outside the timing
    book = _itch_book()
    rows = []
    for mb in sizes_mb:
        buf = day_bytes(int(mb * 1e6))
        dst = np.empty_like(buf)
        tables = lo.read_stream(buf, spec)
        n = sum(len(t) for name, t in tables.items() if not name.startswith("_"))
        out = io.BytesIO()

        def write():
            out.seek(0)
            lo.write_stream(tables, spec, out)

        fns = [lambda: lo.read_stream(buf, spec), write, lambda: np.copyto(dst, buf)]
        if book is not None:
            book(buf)
            fns.append(lambda: book(buf))
        cpu: list = []
        faults: list = []
        times = interleaved(fns, repeat, cpu, faults)
        assert out.getvalue() == buf.tobytes()
        row = {
            "bytes": buf.nbytes,
            "messages": n,
            "read_s": times[0],
            "write_s": times[1],
            "copy_s": times[2],
            "itch_book_s": times[3] if book is not None else None,
            "read_cpu_s": cpu[0],
            "write_cpu_s": cpu[1],
            "itch_book_cpu_s": cpu[3] if book is not None else None,
            "read_minflt": faults[0],
            "write_minflt": faults[1],
            "itch_book_minflt": faults[3] if book is not None else None,
            "threads": _threads(),
            "load_average": os.getloadavg(),
        }
        rows.append(row)
    _print_itch(rows, repeat, book is not None)
    return rows


def _threads():
    from layouts.kernels.threads import default_threads

    return default_threads()


def _print_itch(rows, repeat, book):
    print(
        f"ITCH 5.0 days (benchmarks.itch_day), in memory; median of {repeat} interleaved rounds; "
        f"{rows[0]['threads'] if rows else '?'} kernel threads"
    )
    print("| MB | messages | step | seconds | messages/s | GB/s | time / copy | CPU seconds | minor faults |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        gb, n, mb = r["bytes"] / 1e9, r["messages"], f"{r['bytes'] / 1e6:.0f}"
        steps = [
            ("read_stream -> 23 tables", r["read_s"], r["read_cpu_s"], r["read_minflt"]),
            ("write_stream <- 23 tables", r["write_s"], r["write_cpu_s"], r["write_minflt"]),
            ("np.copyto (reused buffer)", r["copy_s"], None, None),
        ]
        if book:
            steps.append(("itch-book message table", r["itch_book_s"], r["itch_book_cpu_s"], r["itch_book_minflt"]))
        for name, t, c, f in steps:
            used = "" if c is None else f"{c:.3f}"
            print(
                f"| {mb} | {n:,} | {name} | {t:.3f} | {n / t / 1e6:.1f} M | {gb / t:.2f} | "
                f"{t / r['copy_s']:.1f}x | {used} | {'' if f is None else f'{f:,}'} |"
            )
        print(f"(load average {', '.join(f'{x:.1f}' for x in r['load_average'])})")
    if book:
        print(
            "itch-book time / read_stream time: "
            + ", ".join(f"{r['bytes'] / 1e6:.0f} MB: {r['itch_book_s'] / r['read_s']:.1f}x" for r in rows)
            + "; in CPU seconds: "
            + ", ".join(f"{r['itch_book_cpu_s'] / r['read_cpu_s']:.1f}x" for r in rows)
        )
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print(
            f"from {a['bytes'] / 1e6:.0f} to {b['bytes'] / 1e6:.0f} MB ({b['bytes'] / a['bytes']:.1f}x the bytes): "
            f"read {b['read_s'] / a['read_s']:.1f}x the time, write {b['write_s'] / a['write_s']:.1f}x, "
            f"copy {b['copy_s'] / a['copy_s']:.1f}x"
        )


def run_pcap(packets, repeat):
    """read_stream of a pcap with its payloads, the tails copied (``tails="copy"``, a binary
    column) and as views into the capture (``tails="view"``), against dpkt and against
    ``np.copyto`` of the capture into a reused buffer (the ceiling), rounds interleaved."""
    raw = pcap_bytes(packets)
    pspec = lo.Stream.builtin("pcap")
    for mode in ("copy", "view"):
        lo.read_stream(pcap_bytes(10, seed=1), pspec, tails=mode)
    try:
        import dpkt
    except ImportError:
        print("pcap: dpkt is not installed (pip install dpkt); skipped")
        return {}
    src, dst = np.frombuffer(raw, np.uint8), np.empty(len(raw), np.uint8)
    cpu: list = []
    faults: list = []
    t_copy, t_view, t_dpkt, t_ceiling = interleaved(
        [
            lambda: lo.read_stream(raw, pspec),
            lambda: lo.read_stream(raw, pspec, tails="view"),
            lambda: list(dpkt.pcap.Reader(io.BytesIO(raw))),
            lambda: np.copyto(dst, src),
        ],
        repeat,
        cpu,
        faults,
    )
    load = os.getloadavg()
    print(
        f"\npcap: {len(raw) / 1e6:.0f} MB, {packets:,} packets (payloads kept), median of {repeat} interleaved rounds"
    )
    print("| reader | seconds | packets/s | GB/s | dpkt time / time | time / np.copyto |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    rows = (
        ('layouts read_stream, tails="copy"', t_copy),
        ('layouts read_stream, tails="view"', t_view),
        ("dpkt.pcap.Reader", t_dpkt),
        ("np.copyto of the capture (ceiling)", t_ceiling),
    )
    for name, t in rows:
        print(
            f"| {name} | {t:.3f} | {packets / t / 1e6:.2f} M | {len(raw) / t / 1e9:.2f} | {t_dpkt / t:.1f}x | "
            f"{t / t_ceiling:.2f} |"
        )
    print(
        f"(CPU seconds: copy {cpu[0]:.3f}, view {cpu[1]:.3f}, dpkt {cpu[2]:.3f} ({cpu[2] / cpu[0]:.1f}x, "
        f"{cpu[2] / cpu[1]:.1f}x); minor faults: copy {faults[0]:,}, view {faults[1]:,}, dpkt {faults[2]:,}; "
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})"
    )
    return {
        "pcap_bytes": len(raw),
        "packets": packets,
        "pcap_layouts_s": t_copy,
        "pcap_layouts_view_s": t_view,
        "pcap_dpkt_s": t_dpkt,
        "pcap_copyto_s": t_ceiling,
        "pcap_dpkt_ratio": t_dpkt / t_copy,
        "pcap_dpkt_ratio_view": t_dpkt / t_view,
        "pcap_layouts_cpu_s": cpu[0],
        "pcap_layouts_view_cpu_s": cpu[1],
        "pcap_dpkt_cpu_s": cpu[2],
        "pcap_layouts_minflt": faults[0],
        "pcap_layouts_view_minflt": faults[1],
        "pcap_dpkt_minflt": faults[2],
        "pcap_load_average": load,
    }


def _fixed_records(name, path, spec, type_name, dtype, offset, count, repeat):
    """read_stream of a file against read_records + to_soa of its fixed records, the
    ``_offset`` column alone (the index read_stream writes: 8 bytes a record into new
    memory, as it does) and ``np.copyto`` of the file's bytes into a reused buffer (the
    ceiling), rounds interleaved."""
    from layouts._stream.frame import padded_int64
    from layouts.kernels.stream import arith_threaded

    size = os.path.getsize(path)
    record = (size - offset) // count if count else 0
    src = np.fromfile(path, np.uint8)
    dst = np.empty_like(src)

    def index():
        arith_threaded(padded_int64(count), offset, record)

    lo.read_stream(path, spec)
    lo.read_records(path, dtype, offset=offset, count=count).to_soa()
    index()
    cpu: list = []
    faults: list = []
    t_stream, t_records, t_index, t_copy = interleaved(
        [
            lambda: lo.read_stream(path, spec),
            lambda: lo.read_records(path, dtype, offset=offset, count=count).to_soa(),
            index,
            lambda: np.copyto(dst, src),
        ],
        repeat,
        cpu,
        faults,
    )
    load = os.getloadavg()
    print(
        f"| {name} | {size / 1e6:.0f} MB | {count:,} | {t_stream:.4f} | {t_records:.4f} | "
        f"{t_stream / t_records:.2f}x | {t_index:.4f} | {t_copy:.4f} | {t_stream / t_copy:.2f} / "
        f"{t_records / t_copy:.2f} | {size / t_stream / 1e9:.2f} | {cpu[0]:.4f} / {cpu[1]:.4f} | "
        f"{faults[0]:,} / {faults[1]:,} | {load[0]:.1f} |"
    )
    return {
        "bytes": size,
        "records": count,
        "record_bytes": record,
        "read_stream_s": t_stream,
        "read_records_s": t_records,
        "offset_column_s": t_index,
        "copyto_s": t_copy,
        "read_stream_cpu_s": cpu[0],
        "read_records_cpu_s": cpu[1],
        "offset_column_cpu_s": cpu[2],
        "read_stream_minflt": faults[0],
        "read_records_minflt": faults[1],
        "threads": _threads(),
        "load_average": load,
    }


def _fixed_head(repeat, tmp):
    print(
        f"\nheader-driven fixed records, files in {tmp} (page cache), median of {repeat} interleaved rounds, "
        f"{_threads()} kernel threads"
    )
    print(
        "| file | size | records | read_stream s | read_records + to_soa s | ratio | _offset alone s | "
        "np.copyto s | time / copyto (each) | GB/s | CPU s (each) | minor faults (each) | load |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")


def run_las(points, repeat, tmp):
    try:
        import laspy
    except ImportError:
        print("LAS: laspy is not installed (pip install laspy); skipped")
        return {}
    rng = np.random.default_rng(0)
    las = laspy.create(point_format=1, file_version="1.2")
    las.x, las.y, las.z = (rng.uniform(0, 1000, points) for _ in range(3))
    las.intensity = rng.integers(0, 65535, points)
    las.gps_time = np.sort(rng.uniform(0, 1e6, points))
    path = os.path.join(tmp, "points.las")
    las.write(path)
    header = laspy.read(path).header
    return _fixed_records(
        "LAS 1.2 format 1", path, "las", "format1", las.points.array.dtype, header.offset_to_point_data, points, repeat
    )


def run_segy(traces, samples, repeat, tmp):
    try:
        import segyio
    except ImportError:
        print("SEG-Y: segyio is not installed (pip install segyio); skipped")
        return {}
    path = os.path.join(tmp, "traces.sgy")
    spec = segyio.spec()
    spec.format, spec.samples, spec.tracecount = 5, list(range(samples)), traces  # IEEE floats
    data = np.random.default_rng(0).standard_normal((traces, samples)).astype(np.float32)
    with segyio.create(path, spec) as f:
        f.trace = data
        for k in range(traces):
            f.header[k] = {segyio.su.tracf: k + 1, segyio.su.ns: samples}
    layout = lo.read_stream(path, "segy")["float32"].layout
    fields = [(n, layout.dtype.fields[n][0]) for n in layout.dtype.names if not n.startswith("_")]
    dtype = np.dtype(fields)  # the trace record as the file holds it: 240 bytes of header, then the samples
    assert dtype.itemsize == 240 + 4 * samples, dtype.itemsize
    return _fixed_records(f"SEG-Y rev 1, {samples} IEEE samples", path, "segy", "float32", dtype, 3600, traces, repeat)


def run_fixed(points, traces, repeat, samples=1000):
    """The LAS rows (one per size in ``points``) and the SEG-Y row. ``las``: the first
    size's figures (the key of earlier results); ``las_by_size``: every size's."""
    result: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        _fixed_head(repeat, tmp)
        rows = [run_las(n, repeat, tmp) for n in points]
        result["las"], result["las_by_size"] = rows[0], rows
        result["segy"] = run_segy(traces, samples, repeat, tmp)
    if len(rows) > 1 and all(rows):
        a, b = rows[0], rows[-1]
        print(
            f"LAS from {a['records']:,} to {b['records']:,} points ({b['bytes'] / a['bytes']:.1f}x the bytes): "
            f"read_stream {b['read_stream_s'] / a['read_stream_s']:.1f}x the time, read_records "
            f"{b['read_records_s'] / a['read_records_s']:.1f}x; ratio "
            + ", ".join(f"{r['read_stream_s'] / r['read_records_s']:.2f}x" for r in rows)
        )
    return result


def run(itch_mb, packets, repeat, points=(2_000_000,), traces=20_000, samples=1000):
    result = {"itch": run_itch(itch_mb, repeat)}
    result.update(run_pcap(packets, repeat))
    result.update(run_fixed(points, traces, repeat, samples))
    first = result["itch"][0]  # the keys of the smoke test and of earlier results
    result.update(
        itch_bytes=first["bytes"],
        messages=first["messages"],
        read_s=first["read_s"],
        write_s=first["write_s"],
        copy_s=first["copy_s"],
    )
    return result


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.streams",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument(
        "--itch-mb",
        type=float,
        nargs="+",
        default=[25.0, 100.0, 250.0],
        help="sizes of the ITCH days in MB (default: %(default)s)",
    )
    p.add_argument("--packets", type=int, default=200_000, help="packets in the pcap (default: %(default)s)")
    p.add_argument(
        "--points", type=int, nargs="+", default=[2_000_000], help="LAS points, a row each (default: %(default)s)"
    )
    p.add_argument("--traces", type=int, default=20_000, help="SEG-Y traces of 1000 samples (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=5, help="interleaved rounds, median reported (default: %(default)s)")
    p.add_argument("--small", action="store_true", help="a smoke test: 2 MB of ITCH, 2,000 packets, 2 rounds")
    p.add_argument("--json", help="also write the figures to this JSON file")
    p.add_argument(
        "--only",
        choices=["itch", "pcap", "fixed"],
        help="run only this part (itch: the ITCH days; pcap: copied tails and views against dpkt; "
        "fixed: the LAS and SEG-Y rows)",
    )
    a = p.parse_args(argv)
    if a.small:
        a.itch_mb, a.packets, a.points, a.traces, a.repeat = [2.0], 2_000, [20_000], 200, 2
    load_before = os.getloadavg()
    if a.only == "itch":
        result = {"itch": run_itch(a.itch_mb, a.repeat)}
    elif a.only == "pcap":
        result = run_pcap(a.packets, a.repeat)
    elif a.only == "fixed":
        result = run_fixed(a.points, a.traces, a.repeat)
    else:
        result = run(a.itch_mb, a.packets, a.repeat, a.points, a.traces)
    if a.json:
        result["machine"] = {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "processor": platform.processor(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        }  # (a shared machine's load)
        result["command"] = "python -m benchmarks.streams " + " ".join(argv if argv is not None else sys.argv[1:])
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
