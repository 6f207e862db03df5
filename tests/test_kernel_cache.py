"""Compiled kernels are reused: no compile for a new layout, none in a new process."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import layouts as lo
from layouts.kernels import cpu


def test_new_layout_compiles_nothing():
    lo.AoS(np.zeros(10, [("a", "<i4")])).to_soa().to_aos()
    before = (len(cpu.forward._forward_rows.signatures), len(cpu.reverse._reverse_rows.signatures))
    other = np.zeros(100, [("x", ">f8", (2, 2)), ("s", "U3"), ("t", "M8[D]")])
    lo.AoS(other).to_soa().to_aos()
    assert (len(cpu.forward._forward_rows.signatures), len(cpu.reverse._reverse_rows.signatures)) == before


@pytest.mark.slow
def test_new_process_loads_kernels_from_disk(tmp_path):
    """The transpose's and the record streams' kernels, compiled by one process, are
    loaded by the next (one script for both: each compile from scratch costs ~30 s)."""
    script = textwrap.dedent("""
        import numpy as np, layouts as lo
        from layouts.kernels import cpu, stream
        lo.AoS(np.zeros(3, [("a", "<i8"), ("b", "?")])).to_soa()
        import struct
        lo.read_stream(b"\\x00\\x13D" + bytes(18), "itch50")  # (the grouped walks)
        pcap = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + struct.pack("<IIII", 0, 0, 4, 4) + b"abcd"
        lo.read_stream(pcap, "pcap")  # (the scan)
        for k in (cpu.forward._forward_rows, stream.scan, stream._walk_part):
            print(sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values()))
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), LAYOUTS_SHIPPED_KERNELS="0")  # not the wheel's kernels
    env.pop("LAYOUTS_CACHE_DIR", None)  # (it would name another cache than NUMBA_CACHE_DIR's)
    run = lambda: subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    first = run().stdout.split()
    second = run().stdout.split()
    assert first == ["0", "1"] * 3  # compiled and saved
    assert second == ["1", "0"] * 3  # loaded, not compiled
