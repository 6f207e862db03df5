"""Mutated pcap and ITCH files, read in a child process (a crash or a hang fails the
test instead of taking pytest down): every mutation gives a library error, or tables
that write back to the same bytes."""

import ast
import os
import re
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = textwrap.dedent(r"""
    import struct, sys
    import numpy as np
    import layouts as lo
    sys.path.insert(0, {here!r})
    from test_streams import _pcap_by_hand, _packets, itch_file, ITCH

    def mutate(raw, rng):
        b = bytearray(raw)
        kind = int(rng.integers(0, 6))
        if kind == 0 and b:                      # flip a bit
            i = int(rng.integers(0, len(b))); b[i] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1 and b:                    # set a byte
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        elif kind == 2:                          # cut the end
            del b[int(rng.integers(0, len(b) + 1)):]
        elif kind == 3:                          # insert bytes
            i = int(rng.integers(0, len(b) + 1)); b[i:i] = bytes(rng.integers(0, 256, int(rng.integers(1, 5)),
                                                                             dtype=np.uint8))
        elif kind == 4 and len(b) > 2:           # delete bytes
            i = int(rng.integers(0, len(b) - 1)); del b[i:i + int(rng.integers(1, 4))]
        elif b:                                  # extreme values in a 2- or 4-byte word
            i = int(rng.integers(0, max(1, len(b) - 4)))
            b[i:i + 2] = bytes([255, 255]) if rng.integers(0, 2) else bytes([0, 0])
        return bytes(b)

    def run(raw, spec, seed, n):
        rng = np.random.default_rng(seed)
        ok = errors = 0
        for _ in range(n):
            m = mutate(raw, rng)
            try:
                t = lo.read_stream(m, spec)
            except (lo.ConversionError, lo.LayoutError) as err:
                assert "<buffer>" in str(err), str(err)
                errors += 1
                continue
            back = lo.write_stream(t, spec)
            assert back == m, (spec, seed)
            ok += 1
        return ok, errors

    n = {n}
    rng = np.random.default_rng(11)
    pcap_le = _pcap_by_hand("<", False, _packets(rng, 12, snaplen=40), snaplen=40)
    pcap_be = _pcap_by_hand(">", True, _packets(rng, 12))
    itch, _ = itch_file(rng, list(ITCH), 60)
    totals = [run(pcap_le, "pcap", 1, n), run(pcap_be, "pcap", 2, n), run(itch, "itch50", 3, 2 * n)]
    print("OK", totals)
""")


def _fuzz(n, timeout):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.format(here=HERE, n=n)], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("OK "))
    return ast.literal_eval(line[3:])  # [(parsed, errors) per file]


@pytest.mark.slow
def test_fuzz_small():
    totals = _fuzz(15, 300)
    assert [sum(t) for t in totals] == [15, 15, 30]


@pytest.mark.slow
def test_fuzz_hundreds_of_mutations():
    totals = _fuzz(100, 600)  # 100 + 100 pcap, 200 ITCH (the attackers fuzz more, outside the suite)
    assert [sum(t) for t in totals] == [100, 100, 200]
    # both outcomes occur: some mutations still parse (and wrote back exactly), others are errors
    assert all(ok > 0 and errors > 0 for ok, errors in totals), totals


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGBUS on a truncated mapping, Linux")
@pytest.mark.slow
def test_a_file_that_shrinks_while_mapped_is_a_clear_error(tmp_path):
    path = tmp_path / "day.itch"
    code = textwrap.dedent(f"""
        import os, sys
        import numpy as np
        import layouts as lo
        from layouts._stream import read
        sys.path.insert(0, {HERE!r})
        from test_streams import itch_file, ITCH
        raw, _ = itch_file(np.random.default_rng(1), list(ITCH), 3000)
        path = {str(path)!r}
        open(path, "wb").write(raw)
        real = read.scan_section

        def shrink_then_scan(*args, **kwargs):  # the file is mapped by now
            os.truncate(path, 4096)
            return real(*args, **kwargs)

        read.scan_section = shrink_then_scan
        try:
            lo.read_stream(path, "itch50")
        except lo.ConversionError as err:
            print(err)
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")])),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(
        rf"^{re.escape(str(path))}: the file shrank while it was read: it was \d+ bytes, it is 4096 bytes now, "
        r"and byte 409[6-9] was gone when read; read it again",
        proc.stdout,
    ), proc.stdout
