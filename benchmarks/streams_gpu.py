"""Is the CPU scan the bottleneck of ``read_stream(device="cuda")``? One row per ITCH day size.

    python -m benchmarks.streams_gpu --itch-mb 200 --repeat 5 --json out.json

The device path scans the stream on the CPU (every record's offset, type and length, then
the offsets grouped by type), copies the stream to the GPU once and transposes each type
there through the offsets. Timed here, rounds interleaved, medians: the CPU part (the
scan and the grouping, the same calls read_stream makes; wall and CPU seconds), ``np.copyto`` of the same bytes
into a reused host buffer (the ceiling of any pass over them), and, with a GPU, the
host-to-device copy of the stream (CUDA events; pageable memory, as read_stream copies it)
and the whole ``read_stream(device="cuda")``. Without a GPU the copy is given at the
documented bus bandwidth ``--bus-gbs`` (default 63 GB/s: PCIe 5.0 x16, 32 GT/s a lane,
one direction, before protocol overhead; an H100/H200 PCIe card's link): a lower bound on
the copy's time, so "scan / copy" is then an upper bound on how far the copy hides the scan.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

import layouts as lo
from layouts._stream.frame import detect_order, scan_section
from layouts._stream.read import section_range
from layouts.kernels import stream as K

from .convert_cpu import machine
from .itch_day import day_bytes

PCIE5_X16_GBS = 63.0


def scan_only(buf, stream):
    """What read_stream does on the CPU before any kernel: each section scanned and its
    offsets grouped by type (here: ITCH, no header)."""
    order = detect_order(stream, buf, "<bench>")
    pos, found = 0, 0
    for i, s in enumerate(stream.sections):
        where = f"{stream.name} section[{i}]"
        start, end, limit = section_range(s, {}, where, "<bench>", buf.shape[0], pos)
        got = scan_section(stream, s, buf, "<bench>", order, {}, start, end, limit, where)
        g_offsets, g_lengths = np.empty_like(got.offsets), np.empty_like(got.lengths)
        K.group(got.types, len(s.types), got.offsets, got.lengths, g_offsets, g_lengths)
        pos, found = got.end, found + len(got.offsets)
    return found


def _gpu():
    """(CuPy, numba.cuda) where a real GPU is present, else None."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return None
    try:
        import cupy as cp
        from numba import cuda

        cp.cuda.runtime.getDeviceCount()
        return cp, cuda
    except Exception:  # noqa: BLE001 - no CuPy, no driver or no device: the bus figure instead
        return None


def run(sizes_mb, repeat, bus_gbs):
    spec = lo.Stream.builtin("itch50")
    gpu = _gpu()
    scan_only(day_bytes(200_000, seed=1), spec)  # compile / load outside the timing
    rows = []
    for mb in sizes_mb:
        buf = day_bytes(int(mb * 1e6))
        dst = np.empty_like(buf)
        times = {"scan_s": [], "scan_cpu_s": [], "copy_s": [], "h2d_s": [], "read_cuda_s": []}
        if gpu is not None:
            cp, cuda = gpu
            dev = cuda.device_array(buf.nbytes, np.uint8)
            lo.read_stream(buf, spec, device="cuda")  # the kernels compiled outside the timing
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            messages = scan_only(buf, spec)
            times["scan_s"].append(time.perf_counter() - t0)
            times["scan_cpu_s"].append(time.process_time() - c0)  # one thread: less noisy under load
            t0 = time.perf_counter()
            np.copyto(dst, buf)
            times["copy_s"].append(time.perf_counter() - t0)
            if gpu is not None:
                start, stop = cuda.event(), cuda.event()
                start.record()
                dev.copy_to_device(buf)
                stop.record()
                stop.synchronize()
                times["h2d_s"].append(cuda.event_elapsed_time(start, stop) / 1e3)
                t0 = time.perf_counter()
                lo.read_stream(buf, spec, device="cuda")
                cuda.synchronize()
                times["read_cuda_s"].append(time.perf_counter() - t0)
        med = {k: float(np.median(v)) if v else None for k, v in times.items()}
        h2d = med["h2d_s"] if med["h2d_s"] is not None else buf.nbytes / (bus_gbs * 1e9)
        rows.append(
            {
                "bytes": int(buf.nbytes),
                "messages": int(messages),
                **med,
                "h2d_from": "measured (CUDA events)" if gpu is not None else f"{bus_gbs} GB/s bus figure",
                "h2d_used_s": h2d,
                "scan_over_h2d": med["scan_s"] / h2d,
                "scan_over_copy": med["scan_s"] / med["copy_s"],
                "loadavg": os.getloadavg(),
            }
        )
    _print(rows, repeat)
    return rows


def _print(rows, repeat):
    print(f"ITCH days (benchmarks.itch_day): the device path's CPU scan vs the copy to the GPU; median of {repeat}")
    for r in rows:
        gbs = r["bytes"] / 1e9
        line = (
            f"  {r['bytes'] / 1e6:,.0f} MB, {r['messages']:,} messages: scan + group {r['scan_s'] * 1e3:.0f} ms "
            f"({gbs / r['scan_s']:.2f} GB/s; {r['scan_cpu_s'] * 1e3:.0f} ms of CPU), np.copyto {r['copy_s'] * 1e3:.0f} ms ({gbs / r['copy_s']:.1f} GB/s), "
            f"host->device {r['h2d_used_s'] * 1e3:.0f} ms ({r['h2d_from']}): scan / copy to the GPU "
            f"= {r['scan_over_h2d']:.1f}x"
        )
        if r["read_cuda_s"] is not None:
            line += f", read_stream(device='cuda') {r['read_cuda_s'] * 1e3:.0f} ms"
        print(line + f"; load {r['loadavg'][0]:.1f}")


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.streams_gpu",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--itch-mb", type=float, nargs="+", default=[200.0], help="day sizes in MB (default: 200)")
    p.add_argument("--repeat", type=int, default=5, help="interleaved rounds, median reported (default: %(default)s)")
    p.add_argument(
        "--bus-gbs",
        type=float,
        default=PCIE5_X16_GBS,
        help="host-to-device GB/s to assume without a GPU (default: %(default)s, PCIe 5.0 x16)",
    )
    p.add_argument("--small", action="store_true", help="a smoke test: 2 MB, 2 rounds")
    p.add_argument("--json", help="also write the figures to this JSON file")
    a = p.parse_args(argv)
    if a.small:
        a.itch_mb, a.repeat = [2.0], 2
    rows = run(a.itch_mb, a.repeat, a.bus_gbs)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": machine(), "itch": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
