"""layouts: records between AoS (structs, structured arrays) and SoA (Arrow columns).

>>> import numpy as np, layouts as lo
>>> a = np.zeros(3, dtype=[("ts", "<i8"), ("px", ">f8")])
>>> soa = lo.AoS(a).to_soa()
>>> soa.to_arrow().num_rows
3
"""

from importlib.metadata import PackageNotFoundError, version

from ._errors import ConversionError, LayoutError
from ._layout import Field, Layout

try:
    __version__ = version("layouts-arrow")
except PackageNotFoundError:  # a source checkout that was never installed
    __version__ = "0+unknown"

__all__ = ["Layout", "Field", "LayoutError", "ConversionError", "__version__"]
from ._aos import AoS
from ._convert import ConvertResult, convert
from ._files import read_records
from ._soa import Column, SoA

__all__ += ["AoS", "SoA", "Column", "read_records", "convert", "ConvertResult", "memory_stats"]


def memory_stats():
    """What the GPU memory pool holds (see :func:`layouts._cuda.device.pool_stats`); imports
    nothing GPU-related that is not loaded already."""
    from ._cuda.device import pool_stats

    return pool_stats()
