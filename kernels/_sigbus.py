"""The SIGBUS handler of :class:`kernels._memory.MappedGuard`, compiled once per machine.

The handler must find the process's table of guarded ranges without a Python call (it
runs inside a signal). It finds it through a linker symbol, :data:`TABLE`, bound to the
table's address (``llvmlite.binding.add_symbol``, in ``_memory.guard_table``) before the
handler is loaded, so the compiled code holds no address of
this process and the kernels' cache (:mod:`kernels._cache`: shipped in the wheel, else once
per machine) can keep it: the first guarded read of a process loads it (milliseconds)
instead of compiling it (a third of a second, in every process before).

The table's rows: one per guarded range, ``[first address, end, first faulting address
(0: none), unused]``, then one more, ``[address of the previous sigaction, page size, 0,
0]``. ``mmap`` and ``sigaction`` are libc's, called by name.
"""

import mmap
import signal

import numpy as np
from llvmlite import ir
from numba import types
from numba.core.ccallback import CFunc
from numba.extending import intrinsic

from ._cache import STAMP, KernelCache
from ._memory import _GUARDS, guard_table, load64, store64
from ._memory import SIGBUS_TABLE as TABLE

_PROT = mmap.PROT_READ | mmap.PROT_WRITE
_FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x10  # MAP_FIXED
_SIGBUS = int(signal.SIGBUS)
_map_page = types.ExternalFunction(
    "mmap", types.int64(types.int64, types.uint64, types.int32, types.int32, types.int32, types.int64)
)
_restore = types.ExternalFunction("sigaction", types.int32(types.int32, types.int64, types.int64))


@intrinsic
def _table(typingctx):
    """The address the symbol :data:`TABLE` is bound to."""

    def codegen(context, builder, sig, args):
        symbol = builder.module.globals.get(TABLE)
        if symbol is None:
            symbol = ir.GlobalVariable(builder.module, ir.IntType(8), name=TABLE)
            symbol.linkage = "external"
        return builder.ptrtoint(symbol, ir.IntType(64))

    return types.int64(), codegen


def _on_sigbus(sig, info, context):
    table = _table()
    last = table + _GUARDS * 32
    addr = np.int64(load64(info + 16))  # siginfo_t.si_addr
    for k in range(_GUARDS):
        row = table + k * 32
        lo = np.int64(load64(row))
        if lo != 0 and lo <= addr and addr < np.int64(load64(row + 8)):
            page = np.int64(load64(last + 8))
            _map_page(addr & ~(page - 1), page, _PROT, _FLAGS, -1, 0)
            if load64(row + 16) == 0:
                store64(row + 16, addr)
            return
    _restore(_SIGBUS, np.int64(load64(last)), 0)  # not ours: the read faults again, under that handler


def _compiled():
    guard_table()  # the symbol bound first: code linked with it unbound would not find the table
    handler = CFunc(_on_sigbus, ((types.int32, types.int64, types.int64), types.void), {}, {})
    if STAMP is not None:  # (sources not readable as files: compiled in each process)
        handler._cache = KernelCache(_on_sigbus)
    handler.compile()
    return handler


on_sigbus = _compiled()
