"""layouts: records between AoS (structs, structured arrays) and SoA (Arrow columns).

>>> import numpy as np, layouts as lo
>>> a = np.zeros(3, dtype=[("ts", "<i8"), ("px", ">f8")])
>>> soa = lo.AoS(a).to_soa()
>>> soa.to_arrow().num_rows
3
"""

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for the command's start
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "Layout",
    "Field",
    "Encoding",
    "LayoutError",
    "ConversionError",
    "__version__",
    "AoS",
    "SoA",
    "Column",
    "read_records",
    "convert",
    "ConvertResult",
    "memory_stats",
    "Stream",
    "read_stream",
    "write_stream",
]

_WHERE = {
    "Layout": "_layout",
    "Field": "_layout",
    "Encoding": "_layout",
    "LayoutError": "_errors",
    "ConversionError": "_errors",
    "AoS": "_aos",
    "SoA": "_soa",
    "Column": "_soa",
    "read_records": "_files",
    "convert": "_convert",
    "ConvertResult": "_convert",
    "Stream": "_stream",
    "read_stream": "_stream",
    "write_stream": "_stream",
}


def __getattr__(name):
    """The public names, each loaded (and kept here) on first use."""
    if name == "__version__":
        value = _version()
    elif name in _WHERE:
        from importlib import import_module

        value = getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    setattr(sys.modules[__name__], name, value)
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


def _version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("layouts-arrow")
    except PackageNotFoundError:  # a source checkout that was never installed
        return "0+unknown"


def memory_stats() -> "dict[str, Any]":
    """What the GPU memory pool holds (see :func:`layouts._cuda.device.pool_stats`); imports
    nothing GPU-related that is not loaded already."""
    from ._cuda.device import pool_stats

    return pool_stats()


# Nothing heavy is imported here: each public name loads its module (NumPy, pyarrow, Numba:
# about 0.5 s) when it is first used, so `import layouts` takes milliseconds and the command's
# --help and --version answer at once (and a Ctrl-C while the modules load is the command's one
# line and status 130, not an import's traceback). `from layouts import AoS` loads it as well.
if TYPE_CHECKING:  # the names as a type checker sees them
    from ._aos import AoS
    from ._convert import ConvertResult, convert
    from ._errors import ConversionError, LayoutError
    from ._files import read_records
    from ._layout import Field, Layout
    from ._soa import Column, SoA
    from ._stream import Stream, read_stream, write_stream

    __version__: str
