"""Compile the kernels of whole jobs ahead of time by running each job once, on a few records.

    python -m layouts._warmup            # into this machine's cache (a Docker image, Dask workers)
    python -m layouts._warmup --ship DIR # for the wheel being built (setup.py, after
                                         # ``python -m layouts.kernels.precompile --ship DIR``)

``layouts.kernels.precompile`` compiles the transpose's three kernels from their
signatures. Record streams (scan, grouping, the transpose through an offset index and
the way back), records as long as their OCCURS DEPENDING ON counts, and kept signs have
more kernels, called with arrays whose exact types (read-only or not, which integer
width) only the library's own calls know. So they are compiled the way a user's first
call would compile them: by making those calls, here, on small inputs built below, from
bytes and from a file. Each kernel compiled is saved in the content-keyed cache
(:mod:`kernels._cache`), and with ``--ship`` into the wheel's folder too, for the
platform's baseline CPU. Without it, a fresh install's first ``read_stream`` compiled
for about 40-80 s of CPU, silently.
"""

import os
import struct
import sys
import tempfile
import time

# ------------------------------------------------------------ the small inputs

MULTI = """
name = "multi"
order = "little"

[header]
fields = [["magic", "S4"], ["n_fixed", "<u2"]]

[[section]]
count = "n_fixed"
framing = { size = 6 }
tag = { offset = 0, size = 2, order = "little" }
[section.types.temp]
tag = 1
fields = [["kind", "<u2"], ["celsius", "<f4"]]
[section.types.pressure]
tag = 2
fields = [["kind", "<u2"], ["pascal", "<u4"]]

[[section]]
framing = { length = { offset = 0, size = 2, order = "little", unit = "words", counts_itself = true } }
tail = "column"
[section.types.note]
fields = [["flags", "u1"]]
"""

BOOK = """\
       01  REC.
           05  NAME     PIC X(6).
           05  AMT      PIC S9(5)V99 COMP-3.
           05  QTY      PIC S9(3).
           05  CNT      PIC S9(4) COMP.
           05  RATE     COMP-2.
"""

VARIABLE = """\
       01  REC.
           05  N        PIC 9(1).
           05  ITEMS    OCCURS 0 TO 3 TIMES DEPENDING ON N.
              10  V     PIC X(2).
           05  TAIL     PIC S9(3) COMP-3.
"""

COPYBOOK_STREAM = """
name = "warmup-records"

[[section]]
framing = { length = { offset = 0, size = 2, order = "big" }, prefix = 4 }
[section.types.rec]
copybook = "rec.cob"
"""


def _itch():
    """Two messages of ITCH 5.0: a system event and an add order (2-byte lengths)."""
    head = lambda tag: tag + struct.pack(">HH", 1, 2) + (34_200_000_000_000).to_bytes(6, "big")  # noqa: E731
    event = head(b"S") + b"O"
    add = head(b"A") + struct.pack(">Q", 7) + b"B" + struct.pack(">I", 100) + b"AAPL    " + struct.pack(">I", 1_900_000)
    return b"".join(len(m).to_bytes(2, "big") + m for m in (event, add, event))


def _pcap():
    """A classic pcap (microseconds, little-endian) of two packets."""
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    packets = b"".join(
        struct.pack("<IIII", 1_700_000_000, k, len(p), len(p)) + p for k, p in enumerate([b"abcd", b"xyz"])
    )
    return header + packets


def _multi():
    fixed = struct.pack("<Hf", 1, 21.5) + struct.pack("<HI", 2, 101325) + struct.pack("<Hf", 1, -3.0)
    notes = struct.pack("<HB", 2, 7) + b"x" + struct.pack("<HB", 3, 9) + b"abc"
    return b"MLTI" + struct.pack("<H", 3) + fixed + notes


def _ebcdic_record(name, amt, qty, cnt):
    digits = bytes.fromhex(f"{abs(amt):07d}" + ("d" if amt < 0 else "c"))
    zoned = bytes(0xF0 + int(d) for d in f"{abs(qty):03d}")
    zoned = zoned[:-1] + bytes([(0xD0 if qty < 0 else 0xC0) | (zoned[-1] & 0x0F)])
    rate = bytes([0x41, 0x10, 0, 0, 0, 0, 0, 0])  # IBM hexadecimal 1.0
    return name.ljust(6).encode("cp037") + digits + zoned + struct.pack(">h", cnt) + rate


def _variable_record(items, tail):
    packed = bytes.fromhex(f"{abs(tail):03d}" + ("d" if tail < 0 else "c"))
    return str(len(items)).encode("cp037") + b"".join(v.encode("cp037") for v in items) + packed


# ------------------------------------------------------------ the jobs


def _jobs(folder):
    """``(name, function)`` of each job, in the order they run."""
    import layouts as lo
    from layouts import cobol

    def stream(spec, raw):
        path = os.path.join(folder, "stream.bin")
        with open(path, "wb") as f:
            f.write(raw)
        for src in (raw, path):  # bytes (read-only), and a mapped file
            tables = lo.read_stream(src, spec)
            assert lo.write_stream(tables, spec) == raw, spec

    def copybook_records():
        book = os.path.join(folder, "rec.cob")
        layout = lo.Layout.from_copybook(book)
        raw = _ebcdic_record("ABC", -12345, 7, 3) + _ebcdic_record("Zü", 1, -2, -1)
        records = lo.AoS(bytearray(raw), layout)
        table = records.to_soa().to_arrow()
        cobol.sign_counts(records.array, layout)
        kept = cobol.keep_signs(table, records.array, layout)
        back = lo.SoA.from_arrow(table, layout).to_aos().array
        cobol.put_signs(back, kept, layout)
        assert back.tobytes() == raw
        spec = os.path.join(folder, "records.toml")
        stream(
            spec,
            b"".join(
                (len(r) + 2).to_bytes(2, "big") + b"\0\0" + r for r in (raw[: len(raw) // 2], raw[len(raw) // 2 :])
            ),
        )

    def pcap():
        raw = _pcap()
        stream("pcap", raw)
        tables = lo.read_stream(raw, "pcap", tails="view")  # the tails as views (K.tail_views)
        assert lo.write_stream(tables, "pcap") == raw

    def variable():
        book = os.path.join(folder, "variable.cob")
        raw = _variable_record(["AB", "CD"], -5) + _variable_record([], 12) + _variable_record(["EF", "GH", "IJ"], 3)
        table = cobol.read_variable(raw, book)
        assert cobol.write_variable(table, book) == raw

    return [
        ("record streams: itch50", lambda: stream("itch50", _itch())),
        ("record streams: pcap, its tails copied and as views", pcap),
        (
            "record streams: a header, fixed records, framed records",
            lambda: stream(os.path.join(folder, "multi.toml"), _multi()),
        ),
        ("copybook records, signs, a copybook stream", copybook_records),
        ("OCCURS DEPENDING ON records", variable),
    ]


def run(progress=None):
    """Run every job once (compiling, or loading, its kernels). ``progress(name, i, n)``
    is called before job i of n. Returns ``{name: seconds}``."""
    took = {}
    with tempfile.TemporaryDirectory(prefix="layouts-warmup-") as folder:
        for name, text in (("multi.toml", MULTI), ("rec.cob", BOOK), ("variable.cob", VARIABLE)):
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
        with open(os.path.join(folder, "records.toml"), "w") as f:
            f.write(COPYBOOK_STREAM)
        jobs = _jobs(folder)
        for i, (name, job) in enumerate(jobs):
            if progress is not None:
                progress(name, i, len(jobs))
            t0 = time.perf_counter()
            job()
            took[name] = time.perf_counter() - t0
    return took


def main(argv=None):
    from .kernels.precompile import ship_arguments  # (imports neither Numba nor the kernels)

    ship_arguments("python -m layouts._warmup", __doc__.split("\n")[0], argv)
    t0 = time.perf_counter()
    took = run(lambda name, i, n: print(f"job {i + 1}/{n}: {name}", flush=True))
    for name, seconds in took.items():
        print(f"  {name}: {seconds:.1f} s", flush=True)
    print(f"{len(took)} jobs in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
