"""The vector probe of benchmarks.mainframe_ceiling (issue 27's speed goal): it writes what
the library writes, both ways, and its per-block flags see every kind of invalid value it
claims to check (a probe whose flag missed them would be timed doing less than it says)."""

import sys
from pathlib import Path

import numpy as np
import pytest

import layouts as lo

ROOT = str(Path(__file__).resolve().parent.parent)  # (benchmarks/ is no package of the install)

pytestmark = pytest.mark.slow  # (the probe's two loops are compiled: seconds of CPU)


@pytest.fixture(scope="module")
def probe():
    sys.path.insert(0, ROOT)
    try:
        from benchmarks.mainframe import DTYPE, ENCODINGS, records
        from benchmarks.mainframe_ceiling import VectorCeiling
    finally:
        sys.path.remove(ROOT)

    recs = records(1500)  # two full blocks of 512 and a partial one
    table = lo.AoS(recs, lo.Layout.from_dtype(DTYPE, encodings=ENCODINGS)).to_soa(threads=1).to_arrow()
    v = VectorCeiling(recs, table)
    v.check(table)  # the library's values and records, both ways
    return v


@pytest.mark.parametrize(
    "record, offset, byte",
    [
        (0, 21, 0xA5),  # AMT: a digit nibble A
        (511, 25, 0x13),  # AMT: sign nibble 3
        (1499, 26, 0xB0),  # QTY: a digit nibble B (the partial block's last record)
        (600, 33, 0xE1),  # ZN: a zone E
        (600, 30, 0xFA),  # ZN: its first digit A
        (5, 38, 0x71),  # ZN: sign zone 7
        (512, 30, 0x31),  # ZN: its first zone 3
    ],
)
def test_forward_flags_each_invalid_value(probe, record, offset, byte):
    pos = record * 55 + offset
    old = probe.src[pos]
    probe.src[pos] = byte
    try:
        assert probe.run() != 0
        block = record // 512 * 512
        assert probe.run(block, min(block + 512, probe.n)) != 0  # that block alone
        assert probe.run(0, block) == 0  # the blocks before are clean
    finally:
        probe.src[pos] = old
    assert probe.run() == 0


def test_forward_text_outside_the_arithmetic_map_goes_through_the_table(probe):
    lower, question = "a".encode("cp037")[0], "?".encode("cp037")[0]
    old = probe.src[[10, 47]].copy()
    probe.src[10], probe.src[47] = lower, question
    try:
        probe.run()
        name, city = bytes(probe.outs[0][:20]), bytes(probe.outs[6][:12])
        assert name[10:11] == b"a" and city[4:5] == b"?"
    finally:
        probe.src[[10, 47]] = old
        probe.run()


@pytest.mark.parametrize(
    "column, record, value",
    [
        (2, 77, 10**11),  # AMT S9(9)V99: 12 digits
        (3, 1024, 10**7),  # QTY S9(7): 8 digits
        (4, 9, 10**9),  # ZN S9(7)V99: 10 digits
        (5, 1499, 2**31),  # CNT: over int32
    ],
)
def test_back_flags_values_the_field_cannot_hold(probe, column, record, value):
    words = probe.ins[column].view(np.uint64)
    old = words[2 * record : 2 * record + 2].copy()
    try:
        words.flags.writeable = True
    except ValueError:  # (read in place from Arrow: this test works on a copy)
        probe.ins[column] = probe.ins[column].copy()
        words = probe.ins[column].view(np.uint64)
    words[2 * record] = np.uint64(value)
    try:
        assert probe.run_back() != 0
        words[2 * record], words[2 * record + 1] = old[0], old[1] ^ np.uint64(1)  # high word not the sign
        assert probe.run_back() != 0
    finally:
        words[2 * record : 2 * record + 2] = old
    assert probe.run_back() == 0
