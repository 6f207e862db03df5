"""layouts: records between AoS (structs, structured arrays) and SoA (Arrow columns).

>>> import numpy as np, layouts as lo
>>> a = np.zeros(3, dtype=[("ts", "<i8"), ("px", ">f8")])
>>> soa = lo.AoS(a).to_soa()
>>> soa.to_arrow().num_rows
3
"""

from ._errors import ConversionError, LayoutError
from ._layout import Field, Layout

__all__ = ["Layout", "Field", "LayoutError", "ConversionError"]
from ._aos import AoS
from ._convert import ConvertResult, convert
from ._files import read_records
from ._soa import Column, SoA

__all__ += ["AoS", "SoA", "Column", "read_records", "convert", "ConvertResult", "memory_stats"]


def memory_stats():
    """What the GPU memory pool holds (see :func:`layouts._device.pool_stats`); imports
    nothing GPU-related that is not loaded already."""
    from ._device import pool_stats

    return pool_stats()
