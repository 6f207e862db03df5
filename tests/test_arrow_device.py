"""SoA.__arrow_c_device_array__: the Arrow C Device Data Interface built with ctypes,
read by pyarrow (CPU) and nanoarrow (CPU and CUDA), no copy, released exactly once."""

import gc

import numpy as np
import pyarrow as pa
import pytest
from conftest import ticks

import layouts as lo
from layouts._cuda.c_device import ARROW_DEVICE_CPU, ARROW_DEVICE_CUDA, live_exports

nd = pytest.importorskip("nanoarrow.device")

SIDES = """
enum side { BUY = 1, SELL = 2 };
struct r { int id; enum side side; char sym[5]; double pos[2]; struct { short a; unsigned b : 4; } q; };
"""


def sample():
    layout = lo.Layout.from_c(SIDES, "struct r", bytes_as="string")
    a = np.zeros(50, layout.dtype)
    a["id"] = np.arange(50)
    a["side"] = np.where(np.arange(50) % 3 == 0, 2, 1)
    a["side"][7] = 9  # no enumerator: joins the dictionary as "9"
    a["sym"] = [b"AB", b"XYZ12"] * 25
    a["pos"] = np.arange(100).reshape(50, 2) / 2
    return layout, a


def addresses(batch):
    """Buffer addresses of every leaf of a record batch, depth first."""
    out = []

    def walk(arr):
        if pa.types.is_struct(arr.type):
            for i in range(arr.type.num_fields):
                walk(arr.field(i))
        elif pa.types.is_fixed_size_list(arr.type):
            walk(arr.values)
        else:
            out.append([b.address if b is not None else 0 for b in arr.buffers()[:3]])

    for col in batch.columns:
        walk(col)
    return out


def test_pyarrow_imports_the_cpu_export_without_a_copy():
    layout, a = sample()
    soa = lo.AoS(a, layout).to_soa(nulls={"id": 3})
    before = live_exports()
    schema, array = soa.__arrow_c_device_array__()
    batch = pa.RecordBatch._import_from_c_device_capsule(schema, array)
    assert batch.equals(soa.to_record_batch())
    assert batch.column("side").dictionary.to_pylist() == ["BUY", "SELL", "9"]
    assert batch.column("id").null_count == 1
    assert addresses(batch) == addresses(soa.to_record_batch())  # the SoA's own buffers
    del array
    assert live_exports() == before + 1  # the batch holds the tree
    del batch
    gc.collect()
    assert live_exports() == before


def test_an_unconsumed_capsule_releases_its_tree():
    before = live_exports()
    _, array = lo.AoS(ticks(10)).to_soa().__arrow_c_device_array__()
    assert live_exports() == before + 1
    del array
    gc.collect()
    assert live_exports() == before


@pytest.mark.slow
def test_nanoarrow_reads_cpu_and_gpu_exports():
    layout, a = sample()
    host = lo.AoS(a, layout).to_soa()
    x = nd.c_device_array(host)
    assert x.device_type == nd.DeviceType.CPU and x.device_type.value == ARROW_DEVICE_CPU
    assert x.array.length == 50 and x.array.n_children == 5
    gpu = lo.AoS(a, layout).to_soa(device="cuda")
    y = nd.c_device_array(gpu)
    assert y.device_type.value == ARROW_DEVICE_CUDA and y.array.length == 50
    px = y.array.child(3).child(0)  # pos: fixed_size_list -> float64 values
    assert px.length == 100 and px.buffers[1] == gpu["pos"].__cuda_array_interface__["data"][0]
    assert y.array.child(0).buffers[1] == gpu["id"].__cuda_array_interface__["data"][0]
    del x, y
    gc.collect()


@pytest.mark.cuda
def test_pylibcudf_imports_the_gpu_export():
    plc = pytest.importorskip("pylibcudf")
    soa = lo.AoS(ticks(100)).to_soa(device="cuda")
    table = plc.Table.from_arrow(soa)
    assert table.num_rows() == 100
