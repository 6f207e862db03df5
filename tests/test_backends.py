"""The backend registry (layouts._backends): where data lives picks the backend, a device
name goes through the registry once, mixed inputs are refused, and no module outside the
backends compares device names."""

import gc
import pathlib
import pickle
import re

import numpy as np
import pytest

import layouts as lo
from layouts import _backends as backends
from layouts._plan import Span

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORDS = np.array([(1, 2.5), (2, 3.5), (3, -1.0)], dtype=[("qty", "<i4"), ("px", "<f8")])


class _DeviceLike:
    """Stands for device memory: the registry looks only at ``__cuda_array_interface__``."""

    __cuda_array_interface__ = {"shape": (8,), "typestr": "|u1", "data": (0, False), "version": 3}


def test_where_the_data_lives_picks_the_backend():
    assert backends.backend_of(RECORDS).name == "cpu"
    assert backends.backend_of(b"abc").name == "cpu"
    assert backends.backend_of(memoryview(bytearray(4))).name == "cpu"
    assert backends.backend_of(_DeviceLike()).name == "cuda"  # found without importing any GPU library


def test_a_device_name_resolves_to_one_backend_object():
    cpu = backends.get("cpu")
    assert backends.get("cpu") is cpu and cpu.name == "cpu" and cpu.host
    cuda = backends.get("cuda")  # importing the CUDA backend imports no GPU library and needs no GPU
    assert cuda is backends.get("cuda") and cuda.name == "cuda" and not cuda.host
    assert backends.get(None, cuda) is cuda and backends.get(None) is cpu
    assert pickle.loads(pickle.dumps(cpu)) is cpu and pickle.loads(pickle.dumps(cuda)) is cuda


@pytest.mark.parametrize("bad", ["gpu", "CUDA", "", 0, None])
def test_unknown_device_names_are_refused_with_the_names_there_are(bad):
    if bad is None:
        assert backends.get(bad).name == "cpu"  # None: the default, the CPU
        return
    with pytest.raises(lo.LayoutError, match=re.escape(f"device must be one of ('cpu', 'cuda'), got {bad!r}")):
        backends.get(bad)
    with pytest.raises(lo.LayoutError, match=re.escape(f"device must be one of ('cpu', 'cuda'), got {bad!r}")):
        lo.AoS(RECORDS).to_soa(device=bad)


def test_mixed_inputs_are_refused_saying_how_to_bring_them_together():
    assert backends.common([("records", RECORDS), ("out", np.empty(3, RECORDS.dtype))]).name == "cpu"
    assert backends.common([("records", _DeviceLike()), ("out", _DeviceLike())]).name == "cuda"
    with pytest.raises(lo.LayoutError) as err:
        backends.common([("records", RECORDS), ("out", _DeviceLike())])
    text = str(err.value)
    assert "inputs live on different devices (records on cpu, out on cuda)" in text
    assert ".to_device('cpu') or .to_device('cuda')" in text and "cupy.asnumpy" in text


def test_a_device_name_goes_through_the_registry_once_per_call(monkeypatch):
    calls = []
    real = backends.get

    def counting(device, default=None):
        calls.append(device)
        return real(device, default)

    monkeypatch.setattr(backends, "get", counting)
    soa = lo.AoS(RECORDS).to_soa(device="cpu")
    assert calls == ["cpu"]
    calls.clear()
    back = soa.to_aos(device="cpu")
    assert calls == ["cpu"] and bytes(back.to_numpy().tobytes()) == RECORDS.tobytes()
    calls.clear()
    assert soa.to_device("cpu") is soa and calls == ["cpu"]


def test_containers_hold_a_backend_and_show_its_name():
    aos = lo.AoS(RECORDS)
    soa = aos.to_soa()
    assert aos.device == soa.device == soa["px"].device == "cpu"
    assert soa.parts().backend is backends.get("cpu") and soa.parts().arena.capacity == 3
    assert soa["px"].__dlpack_device__() == (1, 0)
    assert not hasattr(soa["px"], "__cuda_array_interface__")


def test_an_out_on_another_backend_is_refused():
    soa = lo.AoS(RECORDS).to_soa()
    fake_cuda_soa = lo.SoA(
        soa.layout, 3, soa.parts().columns, arena=soa.parts().arena, memory=soa.arena, backend=backends.get("cuda")
    )
    with pytest.raises(lo.LayoutError, match="out= is on cuda; these records convert on cpu: pass an SoA made there"):
        lo.AoS(RECORDS).to_soa(out=fake_cuda_soa)


def test_host_columns_are_spans_that_keep_their_bytes_alive():
    soa = lo.AoS(RECORDS).to_soa(nulls={"qty": 2})
    assert all(isinstance(b, Span) for c in soa.parts().columns for b in (c.validity, c.data) if b is not None)
    view, table, column = np.asarray(soa["px"]), soa.to_arrow(), soa["qty"].to_arrow()
    del soa
    gc.collect()
    churn = [np.full(4096, 7.0) for _ in range(64)]  # memory freed too early would be reused here
    assert view.tolist() == [2.5, 3.5, -1.0] and table.column("px").to_pylist() == [2.5, 3.5, -1.0]
    assert column.to_pylist() == [1, None, 3] and len(churn) == 64
    borrowed = lo.SoA.from_arrow(table, RECORDS.dtype, fill={"qty": 2})
    data = borrowed.parts().columns[1].data
    assert isinstance(data, Span) and data.arrow().address == data.address
    again = pickle.loads(pickle.dumps(borrowed))
    assert again.to_aos().to_numpy().tobytes() == RECORDS.tobytes()


def test_device_columns_are_spans_of_the_device_arena_and_move_back():
    gpu = lo.AoS(RECORDS).to_soa(device="cuda")  # the simulator stands in where there is no GPU
    assert gpu.device == "cuda" and gpu.parts().backend is backends.get("cuda")
    spans = [b for c in gpu.parts().columns for b in (c.validity, c.offsets, c.data) if b is not None]
    assert spans and all(isinstance(b, Span) and 0 < b.address < gpu.nbytes for b in spans)  # offsets, not pointers
    host = gpu.to_device("cpu")
    assert host.to_arrow().equals(lo.AoS(RECORDS).to_soa().to_arrow())
    assert gpu.to_aos().to_device("cpu").to_numpy().tobytes() == RECORDS.tobytes()
    with pytest.raises(lo.LayoutError, match="out= is on cuda; these records convert on cpu: pass an SoA made there"):
        lo.AoS(RECORDS).to_soa(out=gpu)


_COMPARES = re.compile(
    r"""(==|!=)\s*["'](cpu|cuda)["']|["'](cpu|cuda)["']\s*(==|!=)|\bon_gpu\b|\bin DEVICES\b"""
    r"""|\bdevice\s*(==|!=)(?!\s*["']auto["'])"""
)  # ("auto" is the command's choice, not a device)


def test_no_module_outside_the_backends_compares_device_names():
    found = []
    files = sorted((ROOT / "layouts").rglob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("layouts/_backends/", "layouts/kernels/", "layouts/benchmarks/")):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if _COMPARES.search(code):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "device names compared outside layouts/_backends (ask the backend instead):\n" + "\n".join(found)
