"""The examples in the docstrings run, and print what they say (doctest)."""

import doctest
import importlib
import pkgutil

import pytest

import layouts


def _modules():
    names = ["layouts"]
    for info in pkgutil.walk_packages(layouts.__path__, "layouts."):
        if not info.name.startswith(("layouts.kernels", "layouts.benchmarks")) and not info.name.endswith(
            ".__main__"
        ):  # (runs the command when imported)
            names.append(info.name)
    return names


def _with_examples():
    found = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional dependency (CuPy, cuDF, Dask) missing here
            continue
        examples = [e for t in doctest.DocTestFinder().find(module) for e in t.examples]
        if any(not e.options.get(doctest.SKIP) for e in examples):  # (dask's examples need a cluster: skipped)
            found.append(name)
    return found


@pytest.mark.parametrize("name", _with_examples())
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0 and result.failed == 0, (
        f"{result.failed} of {result.attempted} examples of {name} failed (see above)"
    )
