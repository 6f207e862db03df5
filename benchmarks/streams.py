"""Record streams: ``read_stream`` of a NASDAQ ITCH 5.0 day file and of a pcap capture.

    python -m benchmarks.streams                 # ITCH 100 MB in memory, pcap 200,000 packets
    python -m benchmarks.streams --small         # a smoke test (a few MB)
    python -m benchmarks.streams --itch-mb 200 --packets 500000 --repeat 7

ITCH: a synthetic file with the real message mix of a day file (mostly add order,
delete, replace, executed, cancel, trade: A/D/U/E/X/P, and some of every other type),
every byte after the type a letter so every text field decodes. Timed: ``read_stream``
to one table per message type (the scan, the gather and the per-type transposes),
``write_stream`` of those tables back into a reused in-memory file (checked equal to the
input), and in the same run, rounds interleaved with them, ``np.copyto`` of the same
bytes into a reused buffer (the ceiling). Reported: medians, messages/s, GB/s, and read time over copy time.

pcap: ``read_stream(..., "pcap")`` against dpkt's reader (``list(dpkt.pcap.Reader(f))``)
on the same capture in memory, packets/s each, interleaved rounds.
"""

import argparse
import io
import struct
import time

import numpy as np

import layouts as lo

# message type -> (total length, share of a day file's messages)
MIX = {"A": (36, 0.36), "D": (19, 0.30), "U": (35, 0.10), "E": (31, 0.08), "X": (23, 0.06), "P": (44, 0.04),
       "F": (40, 0.02), "C": (36, 0.01), "I": (50, 0.015), "S": (12, 0.0005), "R": (39, 0.001), "H": (25, 0.001),
       "Y": (20, 0.001), "L": (26, 0.001), "V": (35, 0.0003), "W": (12, 0.0002), "K": (28, 0.0002),
       "J": (35, 0.0002), "h": (21, 0.0002), "Q": (40, 0.002), "B": (19, 0.0005), "N": (20, 0.0015),
       "O": (48, 0.0001)}


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


def interleaved(fns, repeat):
    """Median seconds of each function, rounds interleaved (one call of each per round)."""
    times = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return [float(np.median(t)) for t in times]


def run(itch_mb, packets, repeat):
    buf, n = itch_bytes(itch_mb)
    spec = lo.Stream.builtin("itch50")
    warm = itch_bytes(0.1, seed=1)[0]
    lo.write_stream(lo.read_stream(warm, spec), spec)  # compile / load the kernels outside the timing
    dst = np.empty_like(buf)
    tables = lo.read_stream(buf, spec)
    out = io.BytesIO()

    def write():
        out.seek(0)
        lo.write_stream(tables, spec, out)

    t_read, t_write, t_copy = interleaved([lambda: lo.read_stream(buf, spec), write, lambda: np.copyto(dst, buf)],
                                          repeat)
    assert out.getvalue() == buf.tobytes()
    gb = buf.nbytes / 1e9
    print(f"ITCH 5.0: {buf.nbytes / 1e6:.0f} MB, {n:,} messages, median of {repeat} interleaved rounds")
    print("| step | seconds | messages/s | GB/s | time / copy |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| read_stream -> 23 tables | {t_read:.3f} | {n / t_read / 1e6:.1f} M | {gb / t_read:.2f} | "
          f"{t_read / t_copy:.1f}x |")
    print(f"| write_stream <- 23 tables | {t_write:.3f} | {n / t_write / 1e6:.1f} M | {gb / t_write:.2f} | "
          f"{t_write / t_copy:.1f}x |")
    print(f"| np.copyto (reused buffer) | {t_copy:.3f} | | {gb / t_copy:.2f} | 1.0x |")
    result = {"itch_bytes": buf.nbytes, "messages": n, "read_s": t_read, "write_s": t_write, "copy_s": t_copy}
    raw = pcap_bytes(packets)
    pspec = lo.Stream.builtin("pcap")
    lo.read_stream(pcap_bytes(10, seed=1), pspec)
    try:
        import dpkt
    except ImportError:
        print("pcap: dpkt is not installed (pip install dpkt); skipped")
        return result
    t_lo, t_dpkt = interleaved([lambda: lo.read_stream(raw, pspec),
                                lambda: list(dpkt.pcap.Reader(io.BytesIO(raw)))], repeat)
    print(f"\npcap: {len(raw) / 1e6:.0f} MB, {packets:,} packets, median of {repeat} interleaved rounds")
    print("| reader | seconds | packets/s | GB/s |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| layouts read_stream | {t_lo:.3f} | {packets / t_lo / 1e6:.2f} M | {len(raw) / t_lo / 1e9:.2f} |")
    print(f"| dpkt.pcap.Reader | {t_dpkt:.3f} | {packets / t_dpkt / 1e6:.2f} M | {len(raw) / t_dpkt / 1e9:.2f} |")
    result.update(pcap_bytes=len(raw), packets=packets, pcap_layouts_s=t_lo, pcap_dpkt_s=t_dpkt)
    return result


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.streams", description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--itch-mb", type=float, default=100.0, help="size of the ITCH file in MB (default: %(default)s)")
    p.add_argument("--packets", type=int, default=200_000, help="packets in the pcap (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=5, help="interleaved rounds, median reported (default: %(default)s)")
    p.add_argument("--small", action="store_true", help="a smoke test: 2 MB of ITCH, 2,000 packets, 2 rounds")
    a = p.parse_args(argv)
    if a.small:
        a.itch_mb, a.packets, a.repeat = 2.0, 2_000, 2
    return run(a.itch_mb, a.packets, a.repeat)


if __name__ == "__main__":
    main()
