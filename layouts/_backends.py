"""The one place that picks a kernel backend from where the data lives."""

import ctypes
import importlib.util
import numbers
import sys

from ._errors import LayoutError

DEVICES = ("cpu", "cuda")


def check_device(device, default):
    """``device``, or ``default`` (where the data is) when None, after checking the name."""
    device = default if device is None else device
    if device not in DEVICES:
        raise LayoutError(f"device must be one of {DEVICES}, got {device!r}")
    return device


def check_threads(threads):
    """``threads`` after checking it is None or a whole number >= 1 (not a bool)."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral):
        raise LayoutError(f"threads must be a whole number >= 1 or None (all CPUs), got {threads!r}")
    if threads < 1:
        raise LayoutError(f"threads must be >= 1 or None (all CPUs), got {threads}")
    return int(threads)


def kernels_for(device):
    """The kernel module (``aos_to_soa``/``soa_to_aos`` host functions) for a device."""
    if check_device(device, "cpu") == "cpu":
        from .kernels import cpu

        return cpu
    from ._cuda import device as _device

    _device.cuda()  # the memory pool first, and a clear error without a GPU
    from .kernels import cuda

    return cuda


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
    from ._cuda import device as _device

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
    return "cuda" if gpu_available() else "cpu"


def kernels_cached(device="cpu", reverse=False):
    """Whether the conversion kernels for ``device`` are compiled and cached on disk
    already (so the next conversion only loads them), or None where that cannot be told.

    The kernels look for their compiled code by content, in the package (the wheel ships
    it) and in this machine's cache (``kernels/_cache.py``); this asks those indexes whether
    the kernel records -> Arrow runs (and, with ``reverse``, the one Arrow -> records runs)
    is there for this CPU, without compiling or loading anything.
    """
    if check_device(device, "cpu") != "cpu":
        return None
    from .kernels import cpu

    try:
        return not cpu.missing(reverse=reverse)
    except Exception:  # noqa: BLE001 - another Numba's internals: unknown
        return None


def compile_kernels(device="cpu", progress=None):
    """Load the conversion kernels for ``device`` now, compiling (once per machine) those
    that are on disk nowhere; ``progress(name, i, n)`` is called before each. Returns
    ``{name: seconds}`` (empty where the device compiles per launch instead)."""
    if check_device(device, "cpu") != "cpu":
        return {}
    from .kernels import cpu

    return cpu.precompile(progress)
