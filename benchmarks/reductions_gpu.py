"""The GPU half of the reduction suite: CuPy over SoA columns, a Numba CUDA kernel over
AoS records, both in device memory, and the host-to-device copies that put them there.

Used only when CuPy finds a CUDA device (see ``reductions.gpu_backend``).
"""

import cupy as cp
import numpy as np
from numba import cuda

from layouts.benchmarks import reduce_cuda as cuda_reduce

from .reductions import OFFSETS, THRESHOLDS, timed


def cupy_ops(col, x):
    return {
        "sum": col.sum,
        "mean": col.mean,
        "min": col.min,
        "max": col.max,
        "count>x": lambda: cp.count_nonzero(col > x),
    }


def kernel_ops(a, column, x):
    return {op: (lambda op=op: cuda_reduce.reduce_field(a, column, op, x)) for op in cuda_reduce.OPS}


class GPU:
    """Device-resident copies of one record array, and the methods over them."""

    def __init__(self):
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        self.name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]

    @staticmethod
    def sync():
        cp.cuda.Device().synchronize()

    def methods(self, records, name):
        offset, dtype = OFFSETS[name]
        x = THRESHOLDS[name]
        device_records = cp.asarray(records.view(np.uint8).reshape(-1))
        matrix, column = cuda_reduce.field_matrix(device_records, records.dtype.itemsize, offset, dtype)
        soa_column = cp.ascontiguousarray(matrix[:, column])
        return {
            ("AoS", "numba cuda kernel"): kernel_ops(cuda.as_cuda_array(matrix), column, x),
            ("SoA", "cupy"): cupy_ops(soa_column, x),
            ("SoA", "numba cuda kernel"): kernel_ops(cuda.as_cuda_array(soa_column.reshape(-1, 1)), 0, x),
        }

    def conversions(self, records, repeat):
        """Host-to-device copies (records, one column) and a device-to-device copy of the
        records (the bandwidth ceiling), as conversion-table rows."""
        host = records.view(np.uint8).reshape(-1)
        column = np.ascontiguousarray(records["px"])
        device = cp.asarray(host)
        copies = {
            "host-to-device copy of the records": (lambda: cp.asarray(host), host.nbytes),
            "host-to-device copy of the column": (lambda: cp.asarray(column), column.nbytes),
            "device-to-device copy of the records (ceiling)": (lambda: device.copy(), host.nbytes),
        }
        rows = []
        for method, (fn, nbytes) in copies.items():
            seconds = timed(fn, repeat, self.sync)
            rows.append(
                {
                    "device": "gpu",
                    "itemsize": records.dtype.itemsize,
                    "method": method,
                    "seconds": seconds,
                    "GB/s": nbytes / seconds / 1e9,
                }
            )
        return rows
