"""A faster Numba CUDA simulator for the tests: each module's globals swapped once per launch.

The simulator runs every GPU thread as a Python thread, and on *each call* of a device
function it swaps the ``cuda`` name in the function's module for the launch's fake
module and back (``numba.cuda.simulator.kernelapi.swapped_cuda_module``), under one
lock per module. Hundreds of threads calling small device functions queue on that lock:
a 95-record transpose took 62 s. Here the first call from a module swaps it for the rest
of the launch and later calls go straight through; the originals are put back when the
last launch or swap that did any work ends. Launches (from host threads) are always
counted, so a launch from a second thread keeps the swap until it ends too. What a kernel computes is unchanged: it
sees the same fake module as before, only swapped fewer times (5 s for the same test).

Installed by ``conftest.py`` and by subprocesses the tests start under the simulator
(``python -c "import fast_simulator"`` on the path); without the simulator it does nothing.
"""

import contextlib
import os
import threading


def install():
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0"):
        return
    from numba.cuda.simulator import kernel

    if getattr(kernel.swapped_cuda_module, "swapped_once", False):
        return
    original = kernel.swapped_cuda_module
    lock = threading.Lock()
    held = {}  # id(module globals) -> the ExitStack that undoes its swap
    entered = [0]  # launches and first swaps of a module that have not ended yet

    @contextlib.contextmanager
    def swapped_cuda_module(fn, fake_cuda_module):
        inside = isinstance(threading.current_thread(), kernel.BlockThread)
        if inside and id(fn.__globals__) in held:  # a device call, swapped already in this launch
            yield
            return
        with lock:
            if id(fn.__globals__) not in held:
                stack = contextlib.ExitStack()
                stack.enter_context(original(fn, fake_cuda_module))
                held[id(fn.__globals__)] = stack
            entered[0] += 1
        try:
            yield
        finally:
            with lock:
                entered[0] -= 1
                if entered[0] == 0:
                    for stack in held.values():
                        stack.close()
                    held.clear()

    swapped_cuda_module.swapped_once = True
    kernel.swapped_cuda_module = swapped_cuda_module
