"""Compile the CPU kernels now, so that no conversion waits for them later.

    python -m layouts.kernels.precompile            # into this machine's cache (a Docker
                                                    # image, a CI cache step, Dask workers)
    python -m layouts.kernels.precompile --ship DIR # for the wheel being built (setup.py)

Without ``--ship``: kernels already on disk (shipped with the package, or cached on
this machine) are only loaded; the others are compiled for this CPU and saved to this
machine's cache (see :mod:`kernels._cache`). With ``--ship DIR``: compiled for the
baseline CPU of the platform (``NUMBA_CPU_NAME=generic``) and written to ``DIR``, the
package's ``kernels/_compiled`` in the wheel; this machine's cache keeps a copy, so the
next build on the same machine compiles nothing.
"""

import argparse
import os
import sys
import time


def ship_arguments(prog, description, argv=None):
    """The ``--ship DIR`` command line of this module and of ``layouts._warmup``: parsed, and
    with ``--ship``, the process set to save what it compiles into DIR, for the platform's
    baseline CPU (before Numba is imported, which reads the target once)."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--ship", metavar="DIR", help="compile for the platform's baseline CPU into DIR (wheel builds)")
    args = p.parse_args(argv)
    if args.ship:
        if "numba" in sys.modules:  # the target is read once, as Numba starts
            p.error("--ship must run before Numba is imported (run it as its own process)")
        os.makedirs(args.ship, exist_ok=True)
        os.environ["LAYOUTS_SHIP_KERNELS"] = os.path.abspath(args.ship)
        os.environ["NUMBA_CPU_NAME"] = "generic"
        os.environ.pop("NUMBA_CPU_FEATURES", None)
    return args


def main(argv=None):
    args = ship_arguments("python -m layouts.kernels.precompile", __doc__.split("\n")[0], argv)
    t0 = time.perf_counter()
    from . import _cache, cpu

    todo = cpu.missing()
    took = cpu.precompile(
        lambda name, i, n: print(
            f"kernel {i + 1}/{n} ({name}): {'compiling' if name in todo else 'loading'}", flush=True
        )
    )
    if args.ship:  # the kernels called from Python only: what they call is compiled into them
        keep = tuple(kernel._cache._impl.filename_base + "." for _, kernel, _ in cpu.host._entries())
        for name in os.listdir(args.ship):
            if not name.startswith(keep):
                os.remove(os.path.join(args.ship, name))
    for name, seconds in took.items():
        print(f"  {name}: {seconds:.1f} s", flush=True)
    where = args.ship or _cache.machine_dir() or "nowhere (no writable cache directory)"
    print(f"{len(todo)} of {len(took)} kernels compiled in {time.perf_counter() - t0:.1f} s; saved in {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
