"""layouts: records between AoS (structs, structured arrays) and SoA (Arrow columns).

>>> import numpy as np, layouts as lo
>>> a = np.zeros(3, dtype=[("ts", "<i8"), ("px", ">f8")])
>>> soa = lo.AoS(a).to_soa()
>>> soa.to_arrow().num_rows
3
"""

import sys

__all__ = ["Layout", "Field", "LayoutError", "ConversionError", "__version__", "AoS", "SoA", "Column",
           "read_records", "convert", "ConvertResult", "memory_stats", "Stream", "read_stream", "write_stream"]

_WHERE = {"Layout": "_layout", "Field": "_layout", "LayoutError": "_errors", "ConversionError": "_errors",
          "AoS": "_aos", "SoA": "_soa", "Column": "_soa", "read_records": "_files", "convert": "_convert",
          "ConvertResult": "_convert", "Stream": "_stream", "read_stream": "_stream", "write_stream": "_stream"}


def _the_command_starting():
    """Whether this import is the ``layouts`` program starting: its console script, or
    ``python -m layouts``. Then the public names load their modules (NumPy, pyarrow,
    Numba: about 0.5 s) when first used, after the command has taken Ctrl-C over, so that
    a Ctrl-C while they load is its one line and status 130, not an import's traceback;
    and ``--help`` and ``--version`` answer at once. Any other import loads them now."""
    script = sys.argv[0].replace("\\", "/").rsplit("/", 1)[-1] if sys.argv and sys.argv[0] else ""
    if script.rsplit(".", 1)[0] in ("layouts", "layouts-script"):
        return True
    argv = list(getattr(sys, "orig_argv", ()))
    if "-mlayouts" in argv:
        return True
    return "-m" in argv and argv[argv.index("-m") + 1:argv.index("-m") + 2] == ["layouts"]


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


def memory_stats():
    """What the GPU memory pool holds (see :func:`layouts._cuda.device.pool_stats`); imports
    nothing GPU-related that is not loaded already."""
    from ._cuda.device import pool_stats

    return pool_stats()


if not _the_command_starting():  # a library import: everything loads now, as it always has
    from ._aos import AoS
    from ._convert import ConvertResult, convert
    from ._errors import ConversionError, LayoutError
    from ._files import read_records
    from ._layout import Field, Layout
    from ._soa import Column, SoA
    from ._stream import Stream, read_stream, write_stream

    __version__ = _version()
