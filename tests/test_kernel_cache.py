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
    """A kernel compiled by one process is saved and loaded by the next (two small ones:
    one of kernels/cpu/, one calling another module's function; every kernel's cache is
    the same class, checked below, and the wheel test finds none compiled at all)."""
    script = textwrap.dedent("""
        import numpy as np
        from layouts.kernels import stream
        from layouts.kernels.cpu import gather
        a, b = np.arange(16, dtype=np.uint8), np.zeros(16, np.uint8)
        gather._copy_run(b.ctypes.data, a.ctypes.data, 11)
        out = np.zeros(4, np.int64)
        stream.arith(out, 3, 2)
        assert b[:11].tolist() == list(range(11)) and out.tolist() == [3, 5, 7, 9]
        for k in (gather._copy_run, stream.arith):
            print(sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values()))
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), LAYOUTS_SHIPPED_KERNELS="0")  # not the wheel's kernels
    env.pop("LAYOUTS_CACHE_DIR", None)  # (it would name another cache than NUMBA_CACHE_DIR's)
    run = lambda: subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    first = run().stdout.split()
    second = run().stdout.split()
    assert first == ["0", "1"] * 2  # compiled and saved
    assert second == ["1", "0"] * 2  # loaded, not compiled


@pytest.mark.slow
def test_a_cache_folder_that_cannot_be_written_is_still_read(tmp_path):
    """A filled cache on a read-only mount (a Docker image's, a CI cache's) is loaded
    from, not ignored: the kernel is not compiled again, and nothing is written there."""
    script = textwrap.dedent("""
        import sys, numpy as np
        from layouts.kernels import _cache
        if sys.argv[1] == "read-only":
            _cache._writable = lambda path: False  # (as a read-only mount answers; root could write a chmod'ed folder)
        from layouts.kernels import stream
        stream.arith(np.zeros(4, np.int64), 3, 2)
        print(sum(stream.arith.stats.cache_hits.values()), sum(stream.arith.stats.cache_misses.values()))
    """)
    env = dict(os.environ, LAYOUTS_CACHE_DIR=str(tmp_path / "cache"), LAYOUTS_SHIPPED_KERNELS="0")
    run = lambda how: subprocess.run(
        [sys.executable, "-c", script, how], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert run("writable") == ["0", "1"]
    files = sorted(p.name for p in (tmp_path / "cache").rglob("*"))
    assert run("read-only") == ["1", "0"]  # loaded, not compiled
    assert sorted(p.name for p in (tmp_path / "cache").rglob("*")) == files


@pytest.mark.slow
def test_the_baseline_cpus_code_a_wheel_build_left_is_loaded(tmp_path):
    """A wheel built on this machine leaves a copy of its kernels (the platform's baseline
    CPU's code) in this machine's cache; a process running the same sources from a
    checkout loads that rather than compiling (as CI's tests of the checkout do)."""
    script = textwrap.dedent("""
        import numpy as np
        from layouts.kernels import stream
        stream.arith(np.zeros(4, np.int64), 3, 2)
        print(sum(stream.arith.stats.cache_hits.values()), sum(stream.arith.stats.cache_misses.values()))
    """)
    env = dict(os.environ, LAYOUTS_CACHE_DIR=str(tmp_path / "cache"), LAYOUTS_SHIPPED_KERNELS="0")
    run = lambda env: subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    ship = dict(env, LAYOUTS_SHIP_KERNELS=str(tmp_path / "wheel"), NUMBA_CPU_NAME="generic")  # (as --ship sets)
    assert run(ship) == ["0", "1"]
    assert run(env) == ["1", "0"]


def test_every_kernel_is_cached_by_content():
    """Each CPU kernel of the package (each dispatcher of every module under
    ``layouts.kernels`` but the CUDA ones) keeps its code in the content-keyed cache
    (kernels/_cache.py), none in Numba's own (keyed by one file's mtime: stale code
    after an edit of another module, a compile after every install)."""
    import importlib
    import pkgutil

    from numba.core.registry import CPUDispatcher

    import layouts.kernels as pkg
    from layouts.kernels._cache import KernelCache

    found = {}
    for info in pkgutil.walk_packages(pkg.__path__, "layouts.kernels."):
        if ".cuda" in info.name or info.name.endswith((".ptx", ".precompile")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.__module__ == info.name:
                found[f"{info.name}.{name}"] = type(value._cache).__name__
    assert len(found) > 50, found
    assert {k: v for k, v in found.items() if v != KernelCache.__name__} == {}
