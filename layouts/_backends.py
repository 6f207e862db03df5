"""The one place that picks a kernel backend from where the data lives."""

from ._errors import LayoutError

DEVICES = ("cpu",)


def kernels_for(device):
    """The kernel module (``aos_to_soa``/``soa_to_aos`` host functions) for a device."""
    if device == "cpu":
        from kernels import cpu

        return cpu
    if device == "cuda":
        raise LayoutError(
            "device='cuda' is not available in this version of layouts: only the CPU backend "
            "is installed; use device='cpu'"
        )
    raise LayoutError(f"device must be one of {DEVICES}, got {device!r}")
