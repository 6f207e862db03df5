"""The one place that picks a kernel backend from where the data lives."""

import importlib.util

from ._errors import LayoutError

DEVICES = ("cpu", "cuda")


def check_device(device, default):
    """``device``, or ``default`` (where the data is) when None, after checking the name."""
    device = default if device is None else device
    if device not in DEVICES:
        raise LayoutError(f"device must be one of {DEVICES}, got {device!r}")
    return device


def kernels_for(device):
    """The kernel module (``aos_to_soa``/``soa_to_aos`` host functions) for a device."""
    if check_device(device, "cpu") == "cpu":
        from .kernels import cpu

        return cpu
    from ._cuda import device as _device

    _device.cuda()  # the memory pool first, and a clear error without a GPU
    from .kernels import cuda

    return cuda


def gpu_available():
    """Whether numba-cuda is installed and finds a usable GPU (never the simulator)."""
    from ._cuda import device as _device

    if _device.simulated():
        return False
    if importlib.util.find_spec("numba_cuda") is None:
        return False
    from numba import cuda

    try:
        return bool(cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken driver means no GPU to use
        return False


def auto_device():
    """``"cuda"`` where a usable GPU is found, else ``"cpu"`` (``--device auto``)."""
    return "cuda" if gpu_available() else "cpu"
