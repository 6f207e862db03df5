"""Compile every CUDA kernel to PTX, without a GPU: ``python -m kernels.ptx [--cc 9.0]``.

Type errors in the kernels surface here rather than on the first real GPU. Needs
numba-cuda with its CUDA toolkit wheels (``numba-cuda[cu13]``), not a driver. Device
functions are compiled for the compute capability asked for, not the current device's.
"""

import argparse
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kernels.ptx", description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="9.0", help="compute capability, e.g. 9.0 for H100/H200")
    args = parser.parse_args(argv)
    cc = tuple(int(x) for x in args.cc.split("."))

    from numba import cuda
    from numba.cuda import dispatcher

    class _Target:  # what device-function compilation asks of "the current device"
        compute_capability = cc

    dispatcher.get_current_device = lambda: _Target()

    from . import cuda as kernels_cuda
    from . import cuda_reduce

    kernels = dict(kernels_cuda.KERNELS())
    kernels.update({f"reduce_{name}": entry for name, entry in cuda_reduce.signatures().items()})
    for name, (kernel, signature) in kernels.items():
        t0 = time.perf_counter()
        ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=cc)
        print(f"{name}: {len(ptx)} bytes of PTX for sm_{cc[0]}{cc[1]} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
