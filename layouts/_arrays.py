"""Arrow arrays built from their buffers.

pyarrow's conversion of Python or NumPy objects (``pa.array``, ``pa.table`` of arrays,
``Schema.empty_table``) imports pandas the first time, to look for its types: 0.5-0.7 s
of a command's start wherever pandas is installed. The few small arrays the library
makes itself on a conversion's path are built here from their buffers instead.
"""

import numpy as np
import pyarrow as pa


def strings(values: "list[str]") -> pa.Array:
    """``pa.array(values, pa.string())``."""
    data = [v.encode() for v in values]
    ends = np.zeros(len(data) + 1, np.int32)
    np.cumsum([len(d) for d in data], out=ends[1:])
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(ends), pa.py_buffer(b"".join(data))])


def from_numpy(values: np.ndarray) -> pa.Array:
    """``pa.array(values)`` of a one-dimensional array of numbers (no nulls)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])
