"""Startup of the command: no Numba CUDA import without a driver, kernels loaded (or
compiled) before the conversion's clock starts."""

import subprocess
import sys

import numpy as np
import pytest

import layouts as lo
from layouts import _backends, _cli


def _convert_in_a_child(tmp_path, how, imported):
    """``layouts convert a.bin <how> --to a.parquet`` in a new process: its exit status
    and the modules it imported whose names start with one of ``imported``."""
    code = (
        "import sys; from layouts._cli import main; "
        f"rc = main(['convert', {str(tmp_path / 'a.bin')!r}, *{how!r}, '--to', {str(tmp_path / 'a.parquet')!r}, "
        f"'--quiet']); print(rc, sorted(m for m in sys.modules if m.startswith({imported!r})))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return run.stdout + run.stderr


@pytest.mark.slow
def test_no_driver_no_numba_cuda_import(tmp_path):
    """Without a driver, --device auto decides on the CPU without importing Numba CUDA
    (about half a second of a small conversion's time)."""
    if _backends.driver_present():
        return  # a machine with a GPU driver: numba.cuda is imported to ask it
    np.arange(10, dtype=np.int32).tofile(tmp_path / "a.bin")
    out = _convert_in_a_child(tmp_path, ["--dtype", "[('a', '<i4')]"], ("numba.cuda", "cuda", "cupy"))
    assert out == "0 []\n"


@pytest.mark.slow
def test_a_conversion_with_enums_and_a_mapped_file_imports_no_pandas(tmp_path):
    """pyarrow imports pandas (0.5-0.7 s) the first time it converts Python objects: the
    command's own path builds its few small arrays from buffers instead (an enum's
    dictionary here), and loads the mapped file's guard from the cache."""
    np.zeros(10, [("a", "<i4"), ("side", "<i4")]).tofile(tmp_path / "a.bin")
    header = tmp_path / "t.h"
    header.write_text("enum side { BUY, SELL };\nstruct t { int a; enum side side; };\n")
    assert _convert_in_a_child(tmp_path, ["--struct", f"{header}:t"], ("pandas",)) == "0 []\n"
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "a.parquet").column("side").to_pylist() == ["BUY"] * 10


def test_driver_probe(monkeypatch):
    loaded = []

    def cdll(name):
        loaded.append(name)
        if name != "libcuda.so":
            raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(_backends.sys, "platform", "linux")
    monkeypatch.setattr(_backends.ctypes, "CDLL", cdll)
    assert _backends.driver_present() is True and loaded == ["libcuda.so.1", "libcuda.so"]

    def absent(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(_backends.ctypes, "CDLL", absent)
    assert _backends.driver_present() is False and _backends.auto_device() == "cpu"
    monkeypatch.setattr(_backends.sys, "platform", "darwin")
    assert _backends.driver_present() is False


def test_kernels_cached_is_told_without_compiling():
    assert _backends.kernels_cached("cpu") in (True, False, None)
    assert _backends.kernels_cached("cpu", reverse=True) in (True, False, None)
    assert _backends.kernels_cached("cuda") is None


def test_kernels_load_before_the_clock_starts(tmp_path, monkeypatch, capsys):
    """The command loads (or compiles) the kernels before ``convert`` times itself."""
    order = []
    monkeypatch.setattr(_cli, "warm_up", lambda *args: order.append("warm_up"))
    real = lo.convert
    monkeypatch.setattr(lo, "convert", lambda *a, **k: order.append("convert") or real(*a, **k))
    np.arange(10, dtype=np.int32).tofile(tmp_path / "a.bin")
    assert (
        _cli.main(["convert", str(tmp_path / "a.bin"), "--dtype", "[('a', '<i4')]", "--to", str(tmp_path / "a.arrow")])
        == 0
    )
    assert order == ["warm_up", "convert"] and "converted 10 records" in capsys.readouterr().out
