"""What `pip install` puts on a machine, and the house rules CI keeps: one import package,
the free distribution name everywhere, metadata, the layers contract and the type check."""

import inspect
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import layouts as lo

ROOT = Path(__file__).resolve().parent.parent
DIST = "layouts-arrow"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (path,) = out.glob("layouts_arrow-*.whl")
    return zipfile.ZipFile(path)


@pytest.mark.slow
def test_wheel_ships_the_compiled_kernels(wheel, tmp_path):
    """The wheel carries the kernels compiled for the platform's baseline CPU (the
    transpose's, and those of whole jobs that layouts._warmup ran), and an install of it
    converts and reads a record stream with no compilation (the per-machine cache left
    empty). (The same wheel as the other tests here: each build compiles or loads them all.)"""
    names = wheel.namelist()
    shipped = sorted(
        n.rsplit("/", 1)[1].split("-")[0]
        for n in names
        if n.startswith("layouts/kernels/_compiled/") and n.endswith(".nbi")
    )
    assert {"cpu.forward._compact_strings", "cpu.forward._forward_rows", "cpu.reverse._reverse_rows"} <= set(shipped)
    assert {"stream.scan", "occurs.scan_places", "signs.read_signs"} <= set(shipped), shipped  # layouts._warmup's jobs
    assert "_sigbus._on_sigbus" in shipped  # the guard of mapped files' reads (a C callback, not a dispatcher)
    wheel.extractall(tmp_path / "site")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"), LAYOUTS_CACHE_DIR=str(tmp_path / "cache"))
    code = (
        "import sys, layouts, numpy as np\n"
        "from layouts.kernels import cpu\n"
        "from numba.core.registry import CPUDispatcher\n"
        "from layouts.benchmarks import itch_day\n"
        "assert layouts.__file__.startswith(%r)\n"
        "print(cpu.missing())\n"
        "a = np.zeros(10, [('a', '<i4'), ('s', 'S3')])\n"
        "assert (layouts.AoS(a).to_soa().to_aos().array == a).all()\n"
        "print([sum(k.stats.cache_misses.values()) for _, k, _ in cpu.host._entries()])\n"
        "raw = itch_day.day_bytes(200_000, seed=3, slice_messages=2_000).tobytes()\n"  # a user's day, not the warm-up's
        "open('day.itch', 'wb').write(raw)\n"
        "assert layouts.write_stream(layouts.read_stream('day.itch', 'itch50'), 'itch50') == raw\n"
        "compiled = {f'{m.__name__}.{n}': sum(v.stats.cache_misses.values()) for m in list(sys.modules.values())\n"
        "            if getattr(m, '__name__', '').startswith('layouts.kernels') for n, v in vars(m).items()\n"
        "            if isinstance(v, CPUDispatcher)}\n"
        "compiled['_sigbus.on_sigbus'] = 1 - sys.modules['layouts.kernels._sigbus'].on_sigbus._cache_hits\n"
        "print({k: v for k, v in compiled.items() if v})"
    ) % str(tmp_path / "site")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert out.stdout == "[]\n[0, 0, 0]\n{}\n", out.stdout + out.stderr


@pytest.mark.slow
def test_wheel_installs_one_import_package(wheel):
    names = wheel.namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"layouts"}
    for needed in (
        "layouts/kernels/cpu/forward.py",
        "layouts/kernels/cuda/transpose.py",
        "layouts/kernels/threads.py",
        "layouts/benchmarks/__main__.py",
        "layouts/_cuda/transpose.py",
        "layouts/_cdecl/program.py",
        "layouts/_cli/convert.py",
        "layouts/_convert/readahead.py",
        "layouts/_cobol/parse.py",
        "layouts/cobol.py",
        "layouts/_backends/__init__.py",
        "layouts/_backends/cpu.py",
        "layouts/_backends/cuda.py",
        "layouts/_arena.py",
        "layouts/_cuda/arena.py",
        "layouts/py.typed",
    ):
        assert needed in names
    assert not [n for n in names if "/tests/" in n or Path(n).name.startswith("test_") or "/results/" in n]


@pytest.mark.slow
def test_wheel_metadata(wheel):
    (meta,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    text = wheel.read(meta).decode()
    assert f"Name: {DIST}\n" in text
    assert "Apache-2.0" in text
    assert "Project-URL: Source," in text
    assert any(n.endswith("/LICENSE") or "/licenses/LICENSE" in n for n in wheel.namelist())
    (entry,) = [n for n in wheel.namelist() if n.endswith("entry_points.txt")]
    assert "layouts = layouts._main:main" in wheel.read(entry).decode()


def test_version_from_metadata():
    from importlib.metadata import version

    assert lo.__version__ == version(DIST)
    run = subprocess.run([sys.executable, "-m", "layouts", "--version"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == f"layouts {lo.__version__}"


def test_install_hints_name_this_distribution():
    """`pip install layouts[...]` installs an unrelated project: no hint may say it."""
    offenders = []
    for path in list((ROOT / "layouts").rglob("*.py")) + [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        if "benchmarks" in path.parts and path.parent.name == "results":
            continue
        text = path.read_text(errors="replace")
        for bad in ("install layouts", "'layouts[", "install -U layouts", '"layouts['):
            if bad in text:
                offenders.append(f"{path.relative_to(ROOT)}: {bad}")
    assert not offenders, offenders


def test_public_signatures():
    assert list(inspect.signature(lo.Layout).parameters) == ["dtype", "bytes_as", "flatten", "void_as", "encodings"]
    params = inspect.signature(lo.Layout.from_copybook).parameters
    assert not [p for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    assert {
        "record",
        "codepage",
        "invalid",
        "trim",
        "as_integer",
        "trunc",
        "redefines",
        "names",
        "flatten",
        "fillers",
    } <= set(params)
    params = inspect.signature(lo.Layout.from_c).parameters
    assert not [p for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    assert {
        "byteorder",
        "pack",
        "unions",
        "pointers",
        "enum_as",
        "bytes_as",
        "flatten",
        "include_dirs",
        "defines",
        "preprocessor",
    } <= set(params)


def _tool(*args):
    exe = Path(sys.executable).with_name(args[0])
    run = subprocess.run(
        [str(exe) if exe.exists() else args[0], *args[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )
    return run.returncode, run.stdout + run.stderr


def test_layers_contract():
    """Imports flow one way (pyproject's [tool.importlinter]); lint-imports checks every import."""
    code, out = _tool("lint-imports")
    assert code == 0, out
    assert "0 broken" in out


@pytest.mark.slow
def test_type_check():
    code, out = _tool("mypy", "-p", "layouts")
    assert code == 0, out


def test_lint_and_format():
    """ruff's lint rules and its formatter (pyproject's [tool.ruff]) hold for the whole tree;
    fix with `ruff check --fix . && ruff format .` (or `pre-commit install` once)."""
    code, out = _tool("ruff", "check", ".")
    assert code == 0, out
    code, out = _tool("ruff", "format", "--check", ".")
    assert code == 0, out


def test_pre_commit_config_runs_the_same_checks():
    """The hooks a contributor installs run the tools the suite checks, from the same
    environment (local hooks: nothing fetched at commit time)."""
    text = (ROOT / ".pre-commit-config.yaml").read_text()
    for entry in ("ruff check --fix", "ruff format", "lint-imports", "mypy -p layouts"):
        assert f"entry: {entry}" in text, entry
    if shutil.which("pre-commit") or Path(sys.executable).with_name("pre-commit").exists():
        code, out = _tool("pre-commit", "validate-config", ".pre-commit-config.yaml")
        assert code == 0, out
