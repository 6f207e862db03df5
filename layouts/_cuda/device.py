"""GPU memory for layouts: one pool for CuPy, Numba and cuDF, device arrays, transfers.

Nothing here is imported until data goes to a GPU. Device memory comes from one place:

* **RMM**, when it is installed. What is already set up is kept (``import cudf`` makes
  RMM CuPy's and Numba's allocator); if nobody chose an RMM resource, a pool resource
  is installed.
* Otherwise **CuPy's memory pool**, with Numba pointed at it through Numba's External
  Memory Management plugin interface (:class:`CuPyNumbaManager`), so that arrays Numba
  allocates and arrays CuPy allocates come from the same pool.
* Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, no GPU), plain simulated
  device arrays.

Device arrays are Numba device arrays of ``uint8``; :func:`pointer` gives the device
address (the simulated host address under the simulator).
"""

import ctypes
import os

import numpy as np

from .._errors import LayoutError

__all__ = [
    "cuda",
    "kernels",
    "simulated",
    "empty",
    "to_device",
    "to_host",
    "pointer",
    "words",
    "wrap",
    "from_interface",
    "pool_stats",
    "pinned_empty",
]

_state = {"pool": None, "allocations": 0, "bytes": 0}
EXTRA = "pip install 'layouts-arrow[cuda13]' (or layouts-arrow[cuda12] for a CUDA 12 driver)"


def simulated():
    """True when Numba's CUDA simulator stands in for a GPU."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def cuda():
    """``numba.cuda``, with the memory pool installed before its first allocation."""
    try:
        from numba import cuda as numba_cuda
    except ImportError as err:  # pragma: no cover - numba is a dependency
        raise ImportError(f"the CUDA backend needs numba-cuda: {EXTRA}") from err
    if _state["pool"] is None:
        _state["pool"] = "simulator" if simulated() else _install_pool(numba_cuda)
    if not simulated() and not numba_cuda.is_available():
        raise LayoutError(
            "device='cuda' was asked for but no usable CUDA GPU and driver were found "
            f"(numba.cuda.is_available() is False); use device='cpu', or check the driver and {EXTRA}"
        )
    return numba_cuda


def kernels():
    """:mod:`kernels.cuda` (its host functions), with the memory pool installed first and
    a clear error where there is no GPU."""
    cuda()
    from ..kernels import cuda as kernels_cuda

    return kernels_cuda


def dlpack_device():
    """``(kDLCUDA, device id)`` of the current device (0 under the simulator)."""
    if simulated():
        return (2, 0)
    return (2, cuda().get_current_device().id)


def _cupy():
    try:
        import cupy
    except ImportError as err:
        raise ImportError(f"this needs CuPy: {EXTRA}") from err
    return cupy


def _install_pool(numba_cuda):
    """Make RMM (if installed) or CuPy's pool the allocator of CuPy and Numba."""
    try:
        import rmm
    except ImportError:
        rmm = None
    if rmm is not None:
        from rmm.allocators.numba import RMMNumbaManager

        if type(rmm.mr.get_current_device_resource()).__name__ == "CudaMemoryResource":
            rmm.mr.set_current_device_resource(rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource()))
        try:
            import cupy
            from rmm.allocators.cupy import rmm_cupy_allocator

            if cupy.cuda.get_allocator() is not rmm_cupy_allocator:
                cupy.cuda.set_allocator(rmm_cupy_allocator)
        except ImportError:
            pass
        _set_numba_manager(numba_cuda, RMMNumbaManager)
        return "rmm"
    try:
        import cupy
    except ImportError:
        return "numba"  # Numba's own allocator: no pool to share
    cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
    cupy.cuda.set_pinned_memory_allocator(cupy.get_default_pinned_memory_pool().malloc)
    _set_numba_manager(numba_cuda, _cupy_numba_manager(numba_cuda))
    return "cupy"


def _set_numba_manager(numba_cuda, manager):
    from numba.cuda.cudadrv import driver

    current = getattr(driver, "_memory_manager", None)
    if current is not None and current.__name__ != "NumbaCUDAMemoryManager":
        return  # someone (cuDF, the user) already chose Numba's allocator: keep it
    numba_cuda.set_memory_manager(manager)


def _cupy_numba_manager(numba_cuda):
    """An EMM plugin class for Numba that allocates from CuPy's current allocator."""
    import cupy

    class CuPyNumbaManager(numba_cuda.GetIpcHandleMixin, numba_cuda.HostOnlyCUDAMemoryManager):
        def initialize(self):
            pass

        def memalloc(self, size):
            mem = cupy.cuda.alloc(size)

            def release(mem=mem):  # the pool gets the block back when Numba lets go
                del mem

            return numba_cuda.MemoryPointer(self.context, ctypes.c_void_p(int(mem.ptr)), size, finalizer=release)

        def get_memory_info(self):
            free, total = cupy.cuda.runtime.memGetInfo()
            return numba_cuda.MemoryInfo(free=free, total=total)

        @property
        def interface_version(self):
            return 1

    return CuPyNumbaManager


def empty(nbytes):
    """A device array of ``nbytes`` uint8 (at least 4, rounded up to whole 64 bytes, so
    word views always cover it) from the pool."""
    nb = cuda()
    size = max(64, -(-int(nbytes) // 64) * 64)
    _state["allocations"] += 1
    _state["bytes"] += size
    return nb.device_array(size, dtype=np.uint8)


def to_device(host):
    """Copy a host buffer (anything NumPy can view as bytes) to a new device array, in
    one transfer."""
    raw = np.ascontiguousarray(np.asarray(host)).reshape(-1).view(np.uint8)
    dev = empty(raw.nbytes)
    if raw.nbytes:
        dev[: raw.nbytes].copy_to_device(raw)
    return dev


def to_host(dev, nbytes=None, out=None):
    """Copy the first ``nbytes`` of a device array to host memory (one transfer)."""
    nbytes = dev.shape[0] if nbytes is None else nbytes
    out = np.empty(nbytes, dtype=np.uint8) if out is None else out
    if nbytes:
        dev[:nbytes].copy_to_host(out[:nbytes])
    return out


def pointer(dev):
    """The device address of a device array's first byte."""
    cai = getattr(dev, "__cuda_array_interface__", None)
    if cai is not None:
        return cai["data"][0]
    return dev._ary.__array_interface__["data"][0]  # the simulator keeps device data on the host


def words(dev, nbytes):
    """The device bytes as uint32 words covering ``nbytes``; copies into a fresh
    allocation only when the start is not 4-byte aligned or the words would overrun."""
    cover = -(-nbytes // 4) * 4
    if pointer(dev) % 4 == 0 and dev.shape[0] >= cover:
        return dev[:cover].view(np.uint32) if cover else empty(4).view(np.uint32)
    fresh = empty(nbytes)
    if nbytes:
        fresh[:nbytes].copy_to_device(dev[:nbytes])
    return fresh[: max(cover, 4)].view(np.uint32)


def wrap(obj):
    """A uint8 device array over the memory of a device object (``__cuda_array_interface__``:
    CuPy, PyTorch, Numba; a simulator array), without a copy."""
    nb = cuda()
    arr = obj if simulated() and hasattr(obj, "_ary") else nb.as_cuda_array(obj)
    if not arr.is_c_contiguous():
        raise LayoutError(
            f"a device record buffer must be C-contiguous, got strides {arr.strides} for shape {arr.shape}; "
            f"make a contiguous copy first (e.g. cupy.ascontiguousarray)"
        )
    flat = arr.reshape(arr.size) if arr.ndim != 1 else arr
    return flat.view(np.uint8)


def from_interface(desc, owner=None):
    """A uint8 device array over the bytes a ``__cuda_array_interface__`` dict describes,
    without a copy (a ``mask`` entry is left aside: pass it on its own). The memory must
    be contiguous; a ``stream`` it names is waited for. ``owner`` is kept alive by the
    array. Under the simulator the address is a host address."""
    shape = tuple(int(s) for s in desc["shape"])
    itemsize = np.dtype(desc["typestr"]).itemsize
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    strides = desc.get("strides")
    if strides is not None:
        expect, step = [], itemsize
        for s in reversed(shape):
            expect.insert(0, step)
            step *= s
        if count > 1 and tuple(strides) != tuple(expect):
            raise LayoutError(
                f"device buffer of shape {shape} has strides {tuple(strides)}, not contiguous ones {tuple(expect)}; "
                f"make a contiguous copy first"
            )
    nbytes = count * itemsize
    nb = cuda()
    if nbytes == 0:
        return nb.device_array(0, dtype=np.uint8)
    ptr = int(desc["data"][0])
    if simulated():
        view = (ctypes.c_uint8 * nbytes).from_address(ptr)
        view.owner = owner  # the NumPy array over it keeps it, and so the owner, alive
        return nb.cudadrv.devicearray.FakeCUDAArray(np.ctypeslib.as_array(view))
    plain = {
        "shape": (nbytes,),
        "typestr": "|u1",
        "data": (ptr, False),
        "strides": None,
        "version": 3,
        "stream": desc.get("stream"),
    }
    return nb.from_cuda_array_interface(plain, owner=owner)


def pinned_empty(nbytes):
    """A host uint8 array of ``nbytes`` in page-locked memory, so that copies to and from
    the device can run on a stream while the host goes on: from CuPy's pinned pool when
    CuPy is installed (blocks are reused), else from Numba (``cuda.pinned_array``)."""
    nb = cuda()
    if not simulated():
        try:
            import cupy
        except ImportError:
            cupy = None
        if cupy is not None:
            mem = cupy.cuda.alloc_pinned_memory(max(int(nbytes), 1))
            return np.frombuffer(mem, dtype=np.uint8, count=int(nbytes))
    return nb.pinned_array(int(nbytes), dtype=np.uint8)


def pool_stats():
    """What the device pool holds: which allocator, bytes in use and reserved.

    Returns a dict with ``allocator`` (``"rmm"``, ``"cupy"``, ``"numba"``,
    ``"simulator"`` or None before first use), ``arenas`` and ``arena_bytes`` (device
    allocations layouts made, and their bytes), and, for CuPy's pools, ``used_bytes``,
    ``reserved_bytes``, ``free_blocks`` and ``pinned_free_blocks``; for an RMM pool,
    ``reserved_bytes``.
    """
    stats = {"allocator": _state["pool"], "arenas": _state["allocations"], "arena_bytes": _state["bytes"]}
    if _state["pool"] == "cupy":
        import cupy

        pool, pinned = cupy.get_default_memory_pool(), cupy.get_default_pinned_memory_pool()
        stats.update(
            used_bytes=pool.used_bytes(),
            reserved_bytes=pool.total_bytes(),
            free_blocks=pool.n_free_blocks(),
            pinned_free_blocks=pinned.n_free_blocks(),
        )
    elif _state["pool"] == "rmm":
        import rmm

        mr = rmm.mr.get_current_device_resource()
        stats["resource"] = type(mr).__name__
        if hasattr(mr, "pool_size"):
            stats["reserved_bytes"] = mr.pool_size()
    return stats
