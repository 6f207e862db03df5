"""Build hook: the wheel carries its CPU kernels compiled (docs/performance.md, "First use").

Everything else about the build is in pyproject.toml. After ``build_py`` has copied the
package, ``python -m layouts.kernels.precompile --ship`` compiles the CPU kernels for the
baseline CPU of the platform into ``layouts/kernels/_compiled`` of the build, then
``python -m layouts._warmup --ship`` adds those of record streams, variable copybook
records and signs by running each job once (about 60 + 40 s of CPU the first time; a
later build on the same machine reuses that machine's cache).
Any failure leaves the kernels out and the build goes on: they are then compiled on
first use, once per machine. ``LAYOUTS_PRECOMPILE=0`` skips the step; an editable
install (``pip install -e``) never ships any (the kernels compile on first use, once).
"""

import os
import shutil
import subprocess
import sys


def ship_kernels(build_lib):
    """Compile the CPU kernels into ``build_lib``'s package; False (and a warning on
    stderr) where that failed: the wheel then goes without them."""
    lib = os.path.abspath(build_lib)
    target = os.path.join(lib, "layouts", "kernels", "_compiled")
    shutil.rmtree(target, ignore_errors=True)
    path = os.pathsep.join([lib] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    ok, out = _run([sys.executable, "-m", "layouts.kernels.precompile", "--ship", target], path, lib)
    if ok:
        print(out, end="")
        # the kernels of record streams, copybooks' variable records and signs: their jobs run once
        more, also = _run([sys.executable, "-m", "layouts._warmup", "--ship", target], path, lib)
        if more:
            print(also, end="")
        else:  # the transpose's kernels are shipped all the same
            tail = " | ".join(also.strip().splitlines()[-3:])
            print(
                f"layouts: the record streams' kernels were not compiled ahead of time ({tail}); "
                "they will be compiled on first use, once per machine",
                file=sys.stderr,
            )
        return True
    shutil.rmtree(target, ignore_errors=True)
    tail = " | ".join(out.strip().splitlines()[-3:])
    print(
        f"layouts: the CPU kernels were not compiled ahead of time ({tail}); they will be compiled "
        "on first use, once per machine",
        file=sys.stderr,
    )
    return False


def _run(argv, path, cwd):
    """(whether it exited 0, its output) of a build step's process."""
    try:
        run = subprocess.run(
            argv, env=dict(os.environ, PYTHONPATH=path), cwd=cwd, capture_output=True, text=True, timeout=1800
        )
        return run.returncode == 0, run.stdout + run.stderr
    except (OSError, subprocess.SubprocessError) as err:
        return False, str(err)


if __name__ == "__main__":  # as setuptools runs it (tests import ship_kernels alone)
    from setuptools import setup
    from setuptools.command.build_py import build_py

    class BuildWithKernels(build_py):
        def run(self):
            super().run()
            if not getattr(self, "editable_mode", False) and os.environ.get("LAYOUTS_PRECOMPILE", "1") != "0":
                ship_kernels(self.build_lib)

    setup(cmdclass={"build_py": BuildWithKernels})
