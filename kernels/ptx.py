"""Compile every CUDA kernel for a GPU without one, and report what each costs the GPU:
``python -m layouts.kernels.ptx [--cc 9.0] [--json]``.

Each kernel is compiled to PTX by NVVM (type errors surface here rather than on the
first real GPU), then linked to machine code for the compute capability by nvJitLink
(``cuda.bindings.nvjitlink``), whose verbose log gives the registers per thread, the
spills and the static shared memory. With the launch configuration the host code uses
(threads per block, dynamic shared memory of a 48-byte record's tile) that gives the
theoretical occupancy. Needs numba-cuda with its CUDA toolkit wheels
(``numba-cuda[cu13]``), not a driver.
"""

import argparse
import json
import re
import sys
import time

# Per-SM limits of compute capability 9.0 (H100, H200): the CUDA occupancy rules.
SM90 = {
    "registers": 65536,
    "shared": 228 * 1024,
    "shared_reserved_per_block": 1024,
    "threads": 2048,
    "blocks": 32,
    "warp_register_granule": 256,
    "max_registers_per_thread": 255,
}
RECORD_BYTES = 48  # the record whose tile sizes the transpose kernels' dynamic shared memory


def occupancy(registers, threads, shared_bytes, limits=SM90):
    """Theoretical occupancy (resident warps / 64) of a kernel using ``registers`` per
    thread and ``shared_bytes`` per block (static + dynamic), at ``threads`` per block."""
    warps = -(-threads // 32)
    granule = limits["warp_register_granule"]
    per_warp = -(-max(registers, 1) * 32 // granule) * granule
    by_registers = (limits["registers"] // per_warp) // warps
    by_shared = limits["shared"] // (shared_bytes + limits["shared_reserved_per_block"])
    by_threads = limits["threads"] // threads
    blocks = min(by_registers, by_shared, by_threads, limits["blocks"])
    return blocks * warps / (limits["threads"] // 32)


def link_info(ptx, name, cc):
    """Registers, spills and shared memory of one kernel, from nvJitLink's verbose log."""
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(3, [f"-arch=sm_{cc[0]}{cc[1]}", "-verbose", "-Xptxas=-v"])
    try:
        data = ptx.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), name)
        nvjitlink.complete(handle)
        log = bytearray(nvjitlink.get_info_log_size(handle))
        nvjitlink.get_info_log(handle, log)
    finally:
        nvjitlink.destroy(handle)
    text = log.decode(errors="replace")
    used = re.search(r"used (\d+) registers.*?(\d+) bytes smem.*?(\d+) bytes lmem", text)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    if used is None or spills is None:
        raise RuntimeError(f"{name}: nvJitLink's log has no resource line:\n{text}")
    return {
        "registers": int(used.group(1)),
        "shared_static": int(used.group(2)),
        "local": int(used.group(3)),
        "spill_stores": int(spills.group(1)),
        "spill_loads": int(spills.group(2)),
    }


def launches():
    """Threads per block and dynamic shared memory of each kernel, as the host launches it."""
    from . import cuda as kernels_cuda

    rows, slot, staged = kernels_cuda.tile_shape(RECORD_BYTES)
    tile = rows * slot + 8 if staged else 0
    threads = kernels_cuda.THREADS
    out = {
        "forward": (threads, tile),
        "reverse": (threads, tile),
        "copy_strings": (threads, 0),
        "copy_text": (threads, 0),
        "scan_blocks": (kernels_cuda.SCAN_THREADS, 0),
        "scan_sums": (1, 0),
        "scan_add": (kernels_cuda.SCAN_THREADS, 0),
    }
    bridge = (
        "bits_to_bits",
        "bits_to_bytes",
        "bytes_to_bits",
        "codes_with_nulls",
        "offsets_check[int32]",
        "offsets_check[int64]",
        "offsets_rebase[int32]",
        "offsets_rebase[int64]",
    )
    out.update({name: (threads, 0) for name in bridge})  # the cuDF bridge's, one element a thread
    return out


def _also(name):
    """Kernels of another module (``--also``): its ``KERNELS()`` and ``THREADS`` (or, where it
    has them, ``LAUNCHES()``: threads and dynamic shared memory per kernel), prefixed
    with ``PREFIX`` where it has one (benchmarks' reduction kernels: ``reduce_``)."""
    import importlib

    module = importlib.import_module(name)
    prefix = getattr(module, "PREFIX", "")
    kernels = {f"{prefix}{k}": v for k, v in module.KERNELS().items()}
    shapes = {k: (module.THREADS, 0) for k in kernels}
    if hasattr(module, "LAUNCHES"):  # kernels with dynamic shared memory say so
        shapes.update({f"{prefix}{k}": v for k, v in module.LAUNCHES().items()})
    return kernels, shapes


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m layouts.kernels.ptx", description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="9.0", help="compute capability, e.g. 9.0 for H100/H200")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=FORWARD/REVERSE",
        help="also the forward and reverse kernels specialised for the kind masks of a layout's "
        "plans (kernels.cuda.kinds_of), reported as forward[NAME] and reverse[NAME]",
    )
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="MODULE",
        help="also the kernels of MODULE (its KERNELS() and THREADS), e.g. "
        "layouts.benchmarks.reduce_cuda for the benchmarks' reductions",
    )
    args = parser.parse_args(argv)
    cc = tuple(int(x) for x in args.cc.split("."))

    from numba import cuda
    from numba.cuda import dispatcher

    class _Target:  # what device-function compilation asks of "the current device"
        compute_capability = cc

    dispatcher.get_current_device = lambda: _Target()

    from . import cuda as kernels_cuda

    kernels = dict(kernels_cuda.KERNELS())
    shapes = launches()
    for name in args.also:
        more, more_shapes = _also(name)
        kernels.update(more)
        shapes.update(more_shapes)
    for variant in args.variant:
        label, _, masks = variant.partition("=")
        forward_mask, _, reverse_mask = masks.partition("/")
        forward = kernels_cuda.specialised(int(forward_mask, 0))[0]
        reverse = kernels_cuda.specialised(int(reverse_mask, 0))[1]
        for direction, kernel in (("forward", forward), ("reverse", reverse)):
            kernels[f"{direction}[{label}]"] = (kernel, kernels[direction][1])
            shapes[f"{direction}[{label}]"] = shapes[direction]
    report = {}
    for name, (kernel, signature) in kernels.items():
        t0 = time.perf_counter()
        ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=cc)
        info = link_info(ptx, name, cc)
        threads, dynamic = shapes.get(name) or shapes[name.split("[")[0]]  # forward[mainframe]: as forward
        info.update(
            ptx_bytes=len(ptx),
            threads=threads,
            shared_dynamic=dynamic,
            occupancy=occupancy(info["registers"], threads, info["shared_static"] + dynamic),
            seconds=round(time.perf_counter() - t0, 2),
        )
        report[name] = info
        if not args.json:
            print(
                f"{name}: {len(ptx)} bytes of PTX for sm_{cc[0]}{cc[1]} in {info['seconds']:.1f} s; "
                f"{info['registers']} registers, {info['spill_stores'] + info['spill_loads']} bytes spilled, "
                f"shared {info['shared_static']} + {dynamic} B, {threads} threads: "
                f"occupancy {info['occupancy']:.0%}"
            )
    if args.json:
        print(json.dumps({"cc": list(cc), "kernels": report}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
