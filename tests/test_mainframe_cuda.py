"""Mainframe kinds on the CUDA backend against the CPU one (in Numba's CUDA simulator,
small inputs; on a GPU when there is one): packed, zoned, binary and hfloat, both ways,
invalid bytes as faults and as nulls, and EBCDIC text."""

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from test_mainframe_kinds import _layout, _records, encodings, valid_cell

import layouts as lo

E = lo.Encoding
SIM = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.mark.slow
@seed(90)
@SIM
@given(data=st.data())
def test_cuda_matches_cpu_both_ways(data):
    enc, width = data.draw(encodings())
    cells = data.draw(st.lists(valid_cell(enc, width), min_size=1, max_size=40))
    layout = _layout(enc, width)
    recs = _records(layout, [[c] for c in cells])
    try:
        cpu = lo.AoS(recs, layout).to_soa().to_arrow()
    except lo.ConversionError as err:
        with pytest.raises(lo.ConversionError) as got:
            lo.AoS(recs, layout).to_soa(device="cuda")
        assert str(got.value) == str(err)  # the same first record, field and bytes
        return
    gpu = lo.AoS(recs, layout).to_soa(device="cuda").to_device("cpu").to_arrow()
    assert gpu.column("x").to_pylist() == cpu.column("x").to_pylist()
    assert gpu.column("x").null_count == cpu.column("x").null_count
    if cpu.column("x").null_count:
        return  # nulls have no bytes to write back
    back_cpu = lo.SoA.from_arrow(cpu, layout).to_aos().array.tobytes()
    back_gpu = lo.SoA.from_arrow(cpu, layout).to_device("cuda").to_aos().to_device("cpu").array.tobytes()
    assert back_gpu == back_cpu


def test_cuda_wide_decimals_and_sub_arrays():
    enc = E("packed", 31, 4, signed=True)
    cells = [
        bytes.fromhex("1234567890123456789012345678901C"),
        bytes.fromhex("0000000000000000000000000000001D"),
        bytes.fromhex("9999999999999999999999999999999D"),
        bytes.fromhex("0000000000000000000000000000000F"),
    ]
    layout = _layout(enc, 16, count=2)
    recs = _records(layout, [cells[:2], cells[2:]])
    cpu = lo.AoS(recs, layout).to_soa().to_arrow()
    gpu = lo.AoS(recs, layout).to_soa(device="cuda").to_device("cpu").to_arrow()
    assert gpu.column("x").to_pylist() == cpu.column("x").to_pylist()
    back = lo.SoA.from_arrow(cpu, layout).to_device("cuda").to_aos().to_device("cpu").array
    assert back.tobytes() == lo.SoA.from_arrow(cpu, layout).to_aos().array.tobytes()


def test_cuda_invalid_as_null_and_fault():
    enc = E("zoned", 3, signed=True, invalid="null")
    layout = _layout(enc, 3)
    recs = _records(layout, [[b"\xf1\xf2\xc3"], [b"\x40\x40\x40"], [b"\xf1\xf2\xd3"]])
    col = lo.AoS(recs, layout).to_soa(device="cuda").to_device("cpu").to_arrow().column("x")
    assert col.null_count == 1 and col.to_pylist()[::2] == [123, -123]
    strict = _layout(E("zoned", 3, signed=True), 3)
    with pytest.raises(lo.ConversionError, match=r"record 1: byte 6 .*bytes 40 40 40 .*EBCDIC spaces"):
        lo.AoS(_records(strict, [[b"\xf1\xf2\xc3"], [b"\x40\x40\x40"]]), strict).to_soa(device="cuda")


@pytest.mark.slow
def test_cuda_text_both_ways():
    cells = [[("Grüße € ".encode("cp1141"))], [b"\x40" * 8], [("  ab    ").encode("cp1141")]]
    for trim in ("none", "right", "both"):
        layout = _layout(E("text", codepage="cp1141", trim=trim), 8)
        recs = _records(layout, cells)
        cpu = lo.AoS(recs, layout).to_soa().to_arrow()
        gpu = lo.AoS(recs, layout).to_soa(device="cuda").to_device("cpu").to_arrow()
        assert gpu.column("x").to_pylist() == cpu.column("x").to_pylist()
        back = lo.SoA.from_arrow(cpu, layout).to_device("cuda").to_aos().to_device("cpu").array
        assert back.tobytes() == lo.SoA.from_arrow(cpu, layout).to_aos().array.tobytes()
    assert cpu.column("x").to_pylist() == ["Grüße €", "", "ab"]
    layout = _layout(E("text", codepage="cp037"), 4)
    table = pa.table({"pre": pa.array([1], pa.uint8()), "x": ["a€"], "post": pa.array([2], pa.uint8())})
    with pytest.raises(lo.ConversionError, match=r"'a€' holds '€' \(U\+20AC\), which code page cp037 has no byte"):
        lo.SoA.from_arrow(table, layout).to_device("cuda").to_aos()
