"""The GPU suite must run on the GPU machines' image, which has no network and only these
packages (docs/gpu.md): every test module imports anything else through
``pytest.importorskip``, never at its top, so collection cannot fail there."""

import ast
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
# what the GPU machines' image holds (docs/gpu.md), and layouts' own dependencies that are
# carried there as wheels (pyelftools, cffi, pycparser, ebcdic)
IMAGE = {
    "numpy",
    "numba",
    "numba_cuda",
    "cupy",
    "pyarrow",
    "pandas",
    "pytest",
    "hypothesis",
    "tqdm",
    "matplotlib",
    "elftools",
    "cffi",
    "pycparser",
    "ebcdic",
    "layouts",
}
LOCAL = {p.stem for p in TESTS.glob("*.py")} | {"benchmarks"}


def top_level_imports(path):
    """Root names imported by statements at a module's top (not inside functions)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.slow
def test_test_modules_import_only_what_the_gpu_image_has():
    stdlib = set(sys.stdlib_module_names)
    found = {}
    for path in sorted(TESTS.glob("test_*.py")):
        extra = top_level_imports(path) - IMAGE - LOCAL - stdlib
        if extra:
            found[path.name] = sorted(extra)
    assert not found, f"import these with pytest.importorskip inside the module or the test: {found}"


def test_the_check_sees_a_missing_importorskip(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text("import polars as pl\nimport numpy as np\n")
    assert top_level_imports(bad) - IMAGE - set(sys.stdlib_module_names) == {"polars"}
