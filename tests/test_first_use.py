"""First use in seconds: `import layouts` and the command's --help/--version load no Numba;
the compiled kernels are found by content (again after a reinstall's new mtimes), the
wheel carries them, and nothing about the cache can fail a conversion or a build."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import layouts as lo
from layouts.kernels import _cache, cpu

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("numba", "numpy", "pyarrow", "llvmlite")


def _python(code, env=None, cwd=None):
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)
    assert run.returncode == 0, run.stderr
    return run


def _imported(importtime_log):
    names = [line.rsplit("|", 1)[-1].strip() for line in importtime_log.splitlines() if line.startswith("import time:")]
    return {n.split(".")[0] for n in names}


def test_import_layouts_loads_nothing_heavy():
    run = _python(f"import sys, layouts; print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    assert run.stdout == "[]\n", run.stdout


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_no_numba(flag):
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "layouts", flag], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert "layouts" in run.stdout
    assert not _imported(run.stderr) & {"numba", "llvmlite", "pyarrow"}


def test_public_names_load_on_first_use():
    run = _python(
        "import sys, layouts as lo\n"
        "from layouts import Layout\n"
        "assert 'numba' not in sys.modules  # Layout needs no kernel\n"
        "print(lo.AoS.__name__, lo.ConversionError.__name__, isinstance(lo.__version__, str))\n"
        "print(sorted(set(lo.__all__) - set(dir(lo))))"
    )
    assert run.stdout == "AoS ConversionError True\n[]\n"


def _stats(kernel):
    return sum(kernel.stats.cache_hits.values()), sum(kernel.stats.cache_misses.values())


@pytest.mark.slow
def test_kernels_found_again_after_a_reinstall(tmp_path):
    """A reinstall writes the same kernel sources with new mtimes (which threw Numba's own
    cache away): a copy of the kernels package with new mtimes loads every kernel from
    disk, compiling none."""
    cpu.precompile()  # on disk now (loaded, or compiled once on a machine that had none)
    copy = tmp_path / "kernels"
    shutil.copytree(
        os.path.dirname(os.path.dirname(cpu.__file__)),
        copy,
        copy_function=shutil.copyfile,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for path in copy.rglob("*"):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    code = textwrap.dedent(
        """
        import kernels.cpu as c
        assert c.__file__.startswith(%r), c.__file__
        print(c.missing())
        c.precompile()
        print([(sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values()))
               for _, k, _ in c.host._entries()])
    """
        % str(tmp_path)
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    run = _python(code, env, cwd=tmp_path)  # (not the checkout's own kernels/)
    assert run.stdout == "[]\n[(1, 0), (1, 0), (1, 0)]\n", run.stdout + run.stderr


def test_conversions_use_only_the_precompiled_signatures():
    """Every kernel called from Python has the one signature that precompile() compiles,
    whatever the layout: nothing a conversion needs is left to compile on first use."""
    a = np.zeros(70_000, [("i", ">i4"), ("b", "?"), ("s", "S6"), ("u", "U3"), ("t", "M8[D]"), ("f", "<f8", (2, 2))])
    a["s"], a["u"], a["i"] = b"abc", "xy", np.arange(len(a))
    for threads in (1, 2):
        soa = lo.AoS(a).to_soa(threads=threads)
        assert (soa.to_aos(threads=threads).array == a).all()
    header = "enum side { BUY, SELL }; struct t { enum side side; unsigned flag : 1, venue : 7; char sym[4]; };"
    layout = lo.Layout.from_c(header, "struct t", compiler=None)
    records = np.zeros(100, layout.dtype)
    assert (
        lo.SoA.from_arrow(lo.AoS(records, layout).to_soa().to_arrow(), layout).to_aos().array.tobytes()
        == records.tobytes()
    )
    for _, kernel, args in cpu.host._entries():
        assert set(kernel.signatures) == {cpu.host._signature(kernel, args)}, kernel


def test_missing_tells_without_compiling(tmp_path):
    """With no compiled kernel anywhere, missing() names all three and compiles none."""
    env = dict(os.environ, LAYOUTS_SHIPPED_KERNELS="0", LAYOUTS_CACHE_DIR=str(tmp_path))
    run = _python(
        "from layouts.kernels import cpu\n"
        "print(cpu.missing(), cpu.missing(reverse=False))\n"
        "print([len(k.overloads) for _, k, _ in cpu.host._entries()])",
        env,
    )
    assert run.stdout == (
        "['records -> columns', 'strings', 'columns -> records'] ['records -> columns', 'strings']\n[0, 0, 0]\n"
    )
    cpu.precompile()
    assert cpu.missing() == []


_SMALL = textwrap.dedent("""
    import sys
    sys.path.insert(0, %r)
    from layouts.kernels import _cache

    @_cache.jit(nogil=True)
    def triple(x):
        return 3 * x

    print(triple(14), sum(triple.stats.cache_hits.values()), sum(triple.stats.cache_misses.values()))
""")


@pytest.mark.slow
def test_cache_folder_by_content_and_damage_is_a_miss(tmp_path):
    """A kernel compiled once is loaded by the next process from the per-machine folder
    (named by the content hash); a damaged index or data file is a miss (compiled again,
    the right answer), never an error."""
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "small.py").write_text(_SMALL % str(ROOT))
    env = dict(os.environ, LAYOUTS_CACHE_DIR=str(tmp_path / "cache"), LAYOUTS_SHIPPED_KERNELS="0")
    run = lambda: (
        subprocess.run(
            [sys.executable, str(tmp_path / "mod" / "small.py")],
            env=env,  # noqa: E731
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout
    )
    assert run() == "42 0 1\n"
    assert run() == "42 1 0\n"
    (folder,) = (tmp_path / "cache").iterdir()
    assert folder.name == f"kernels-{_cache.STAMP[:24]}"
    for damaged in sorted(folder.glob("small.triple-*")):
        damaged.write_bytes(b"\x80\x04garbage")
        assert run() == "42 0 1\n"  # compiled again, and saved again
        assert run() == "42 1 0\n"


def _setup_module():
    spec = importlib.util.spec_from_file_location("layouts_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_failed_precompile_never_fails_the_build(tmp_path, monkeypatch, capsys):
    """The build's precompile step failing leaves the kernels out of the wheel, with a
    warning, and the build goes on: here the step fails in the build folder, then the
    interpreter cannot even be started."""
    setup = _setup_module()
    kernels = tmp_path / "layouts" / "kernels"
    kernels.mkdir(parents=True)
    (tmp_path / "layouts" / "__init__.py").write_text("")
    (kernels / "__init__.py").write_text("")
    (kernels / "precompile.py").write_text(
        "import os, sys\nos.makedirs(sys.argv[2])\nraise SystemExit('no numba here')\n"
    )
    assert setup.ship_kernels(str(tmp_path)) is False
    assert "not compiled ahead of time (no numba here)" in capsys.readouterr().err
    assert not (kernels / "_compiled").exists()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    assert setup.ship_kernels(str(tmp_path)) is False
    assert "not compiled ahead of time" in capsys.readouterr().err


@pytest.mark.slow
def test_first_use_benchmark_runs_small(tmp_path):
    out = tmp_path / "first-use.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "layouts.benchmarks.first_use",
            "--records",
            "100",
            "--repeat",
            "1",
            "--no-cold",
            "--json",
            str(out),
        ],
        cwd=tmp_path,  # the installed package (from the checkout's root, the checkout's: no shipped kernels)
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    rows = {r["case"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["import layouts"]["numba_imported"] is False
    assert rows["layouts --help"]["numba_imported"] is False
    assert all(r["wall_s"] > 0 for r in rows.values()) and "first demo, as installed" in rows
