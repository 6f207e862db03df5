"""Backends: where records and columns live, and the one place that picks one.

A :class:`Backend` owns memory of one kind (host memory, a GPU's memory) and everything
done to it: allocating an arena, the transposes both ways (run through the kernels of
that device, with the same arguments on every backend), copies to and from the host,
describing a column for export, and waiting for queued work. Containers
(:class:`layouts.AoS`, :class:`layouts.SoA`) hold a backend and call it; they never
compare device names. The backends are :mod:`layouts._backends.cpu` and
:mod:`layouts._backends.cuda` (which imports CuPy and Numba CUDA only when first used).

The registry picks a backend from where data lives (:func:`backend_of`: an object with
``__cuda_array_interface__`` is CUDA memory, anything else is host memory) or from a
device name given by the user (:func:`get`, once, at the API edge), and refuses inputs
that live on different backends (:func:`common`).
"""

import ctypes
import importlib.util
import numbers
import sys
from typing import Any, Callable, ContextManager, Iterable, Optional, Protocol, Tuple

from .._errors import LayoutError

DEVICES = ("cpu", "cuda")
_MODULES = {"cpu": "cpu", "cuda": "cuda"}  # device name -> module of this package holding its backend
_made: "dict[str, Backend]" = {}


class Backend(Protocol):
    """What a container needs from the memory its data lives in.

    ``records`` are the backend's record arrays (a NumPy structured array on the host,
    a uint8 device array on a GPU); ``memory`` is one arena's allocation
    (:meth:`allocate`); ``columns`` are the :class:`layouts._plan.ColumnBuffers` of an
    SoA over that memory. Claims are the ``(space, first, end, what)`` ranges of
    :func:`layouts._plan.claimed`.
    """

    name: str  #: the device name users pass and ``.device`` shows ("cpu", "cuda")
    host: bool  #: whether NumPy, Arrow and Python read this memory directly
    arena_name: str  #: how messages name an arena on this backend

    def kernels(self) -> Any:
        """The kernel module whose host functions this backend calls."""

    def allocate(self, arena: Any) -> Any:
        """One new allocation for ``arena`` (a :class:`layouts._arena.Arena`)."""

    def adopt_records(self, obj: Any, layout: Any) -> "Tuple[Any, Any]":
        """``(records array, layout)`` over the memory of ``obj`` (no copy), checked."""

    def length(self, records: Any, itemsize: int) -> int:
        """How many records ``records`` holds."""

    def new_records(self, layout: Any, n: int) -> "Tuple[Any, Any]":
        """``(target, records)``: a new allocation for n records that :meth:`soa_to_aos`
        writes (``target``) and the records array over it for an AoS (``records``)."""

    def aos_to_soa(
        self, records: Any, layout: Any, n: int, arena: Any, memory: Any, nulls: Any, *, threads: "Optional[int]" = None
    ) -> Any:
        """Transpose n records into the columns ``arena`` places in ``memory``; None or
        the first fault ``(row, op, code)``."""

    def soa_to_aos(
        self,
        target: Any,
        layout: Any,
        n: int,
        columns: Any,
        memory: Any,
        fills: Any,
        truncate: bool,
        *,
        threads: "Optional[int]" = None,
    ) -> Any:
        """Write n records into ``target`` from ``columns`` (over ``memory``, or
        borrowed Arrow buffers when it is None); None or the first fault."""

    def arena_columns(self, arena: Any, memory: Any, n: int, dictionaries: Any) -> "list[Any]":
        """The ColumnBuffers of the first n records of an arena the kernels just wrote."""

    def read(self, memory: Any, start: int, nbytes: int) -> Any:
        """``nbytes`` of an arena at ``start`` as host uint8 (a view where it can be)."""

    def write(self, memory: Any, start: int, data: Any) -> None:
        """Put host bytes ``data`` into an arena at ``start``."""

    def claims(self, array: Any, what: str) -> "list[tuple]":
        """The claim ranges of the memory of ``array`` (records or an arena)."""

    def guarded(self, records: Any, itemsize: int) -> ContextManager[Any]:
        """A context in which reading ``records`` faults into a ConversionError, not a crash."""

    def overlaps(self, a: Any, b: Any) -> bool:
        """Whether two arrays of this backend may share a byte."""

    def records_to_host(self, records: Any, layout: Any) -> Any:
        """The records as a host structured array (``records`` itself on the host)."""

    def records_from_host(self, host: Any, layout: Any) -> Any:
        """Host records moved to this backend (``host`` itself on the host)."""

    def columns_to_host(self, memory: Any, columns: Any) -> "Tuple[Any, list]":
        """``(host memory or None, host columns)`` of an SoA's memory and columns."""

    def columns_from_host(self, memory: Any, columns: Any) -> "Tuple[Any, list]":
        """Host memory (None: borrowed Arrow buffers) and columns moved to this backend."""

    def column_interface(self, memory: Any, buffers: Any, dtype: Any, shape: tuple, name: str) -> "dict":
        """``__cuda_array_interface__`` of a column's values, or AttributeError."""

    def dlpack(self, column: Any, **kwargs: Any) -> Any:
        """A DLPack capsule of a column's values."""

    def dlpack_device(self) -> "Tuple[int, int]":
        """``(device type, device id)`` as DLPack numbers them."""

    def arrow_device(self, memory: Any) -> "Tuple[int, int, int]":
        """``(base address, ArrowDeviceType, device id)`` of an arena for the Arrow C
        Device interface (base 0 where column buffers hold addresses already)."""

    def export_buffer(self, buffer: Any) -> "Tuple[Any, int]":
        """``(keep alive, address)`` of a host pyarrow Buffer placed where this backend's
        exports point (a dictionary exported with device columns goes to the device)."""

    def sync(self) -> None:
        """Wait for every copy and kernel queued on this backend."""

    def kernels_cached(self, reverse: bool) -> "Optional[bool]":
        """Whether the conversion kernels are compiled and on disk (None: cannot tell)."""

    def compile_kernels(self, progress: "Optional[Callable[..., Any]]") -> "dict[str, float]":
        """Load the kernels now, compiling those on disk nowhere; ``{name: seconds}``."""


def check_device(device, default):
    """``device``, or ``default`` (where the data is) when None, after checking the name."""
    device = default if device is None else device
    if device not in DEVICES:
        raise LayoutError(f"device must be one of {DEVICES}, got {device!r}")
    return device


def get(device: "str | None", default: "Backend | None" = None) -> "Backend":
    """The backend of a device name the user gave (``device=``), or ``default`` (where
    the data already is) when it is None. Unknown names are a LayoutError naming the
    ones there are. Call it once, where the name comes in."""
    if device is None and default is not None:
        return default
    return _loaded(check_device(device, "cpu"))


def host() -> "Backend":
    """The CPU backend (host memory)."""
    return _loaded("cpu")


def _loaded(name: str) -> "Backend":
    """The backend object of a checked device name, its module imported on first use."""
    backend = _made.get(name)
    if backend is None:
        module = importlib.import_module(f"{__name__}.{_MODULES[name]}")
        backend = _made.setdefault(name, module.BACKEND)
    return backend


def on_device(obj: Any) -> bool:
    """Whether ``obj`` is device memory, found without importing anything GPU-related:
    it has ``__cuda_array_interface__`` (CuPy, PyTorch, Numba), or it is one of Numba's
    device arrays (the simulator's has no such attribute)."""
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    return type(obj).__name__ in ("FakeCUDAArray", "DeviceNDArray")


def backend_of(obj: Any) -> "Backend":
    """The backend whose memory ``obj`` is: CUDA for ``__cuda_array_interface__``
    objects, the CPU for anything else (buffer protocol, ``__array_interface__``, Arrow)."""
    return _loaded(DEVICES[1] if on_device(obj) else DEVICES[0])


def common(named: "Iterable[Tuple[str, Any]]") -> "Backend":
    """The one backend holding every ``(argument name, object)`` of ``named``; mixed
    inputs (some on the host, some on a GPU) are a LayoutError saying which is where and
    how to bring them together."""
    named = list(named)
    if not named:
        return host()
    where = [(what, backend_of(obj)) for what, obj in named]
    first = where[0][1]
    if all(b is first for _, b in where):
        return first
    places = ", ".join(f"{what} on {b.name}" for what, b in where)
    return _refuse_mixed(places)


def _refuse_mixed(places: str) -> "Backend":
    raise LayoutError(
        f"inputs live on different devices ({places}); one call reads and writes memory of one device: move "
        f"them together first, e.g. with .to_device('cpu') or .to_device('cuda') on the AoS/SoA, "
        f"cupy.asnumpy(x) or cupy.asarray(x) on arrays"
    )


def check_threads(threads):
    """``threads`` after checking it is None or a whole number >= 1 (not a bool)."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral):
        raise LayoutError(f"threads must be a whole number >= 1 or None (all CPUs), got {threads!r}")
    if threads < 1:
        raise LayoutError(f"threads must be >= 1 or None (all CPUs), got {threads}")
    return int(threads)


def driver_present():
    """Whether a CUDA driver may be here, found without importing Numba CUDA (0.15-0.3 s
    of a small ``layouts convert`` only to learn that there is no GPU).

    The driver is its library (``libcuda.so.1``, ``nvcuda.dll``): where it cannot be
    loaded there is no GPU to use. Device nodes are not looked at: ``/dev/nvidia*``
    may appear only when the driver first starts. True means "ask Numba", not "there
    is a usable GPU".
    """
    if sys.platform.startswith("linux"):
        names = ("libcuda.so.1", "libcuda.so")
    elif sys.platform == "win32":
        names = ("nvcuda.dll",)
    else:  # macOS has had no CUDA driver since 10.14
        return False
    for name in names:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


def gpu_available():
    """Whether numba-cuda is installed and finds a usable GPU (never the simulator)."""
    from .._cuda import device as _device

    if _device.simulated():
        return False
    if importlib.util.find_spec("numba_cuda") is None:
        return False
    if not driver_present():
        return False
    from numba import cuda

    try:
        return bool(cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken driver means no GPU to use
        return False


def auto_device():
    """``"cuda"`` where a usable GPU is found, else ``"cpu"`` (``--device auto``)."""
    return DEVICES[1] if gpu_available() else DEVICES[0]


def kernels_cached(device="cpu", reverse=False):
    """Whether the conversion kernels for ``device`` are compiled and cached on disk
    already (so the next conversion only loads them), or None where that cannot be told.

    The kernels look for their compiled code by content, in the package (the wheel ships
    it) and in this machine's cache (``kernels/_cache.py``); this asks those indexes whether
    the kernel records -> Arrow runs (and, with ``reverse``, the one Arrow -> records runs)
    is there for this CPU, without compiling or loading anything.
    """
    return get(device).kernels_cached(reverse)


def compile_kernels(device="cpu", progress=None):
    """Load the conversion kernels for ``device`` now, compiling (once per machine) those
    that are on disk nowhere; ``progress(name, i, n)`` is called before each. Returns
    ``{name: seconds}`` (empty where the device compiles per launch instead)."""
    return get(device).compile_kernels(progress)
