"""Unaligned loads and stores at raw addresses, and byte swaps, for Numba CPU kernels.

Records of packed C structs put fields at any byte offset, so every access is an
LLVM load/store with ``align 1`` (cheap on x86-64 and AArch64). Values travel as
unsigned integers of the field's width: the bits move exactly, floats included.
"""

import ctypes
import mmap
import platform
import signal
import sys
import threading

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


def _accessors(bits):
    """Build the load, store and byte-swap intrinsics for one integer width."""
    utype = getattr(types, f"uint{bits}")
    llty = ir.IntType(bits)

    @intrinsic
    def load(typingctx, addr):
        def codegen(context, builder, sig, args):
            ptr = builder.inttoptr(args[0], llty.as_pointer())
            return builder.load(ptr, align=1)

        return utype(types.int64), codegen

    @intrinsic
    def store(typingctx, addr, value):
        def codegen(context, builder, sig, args):
            ptr = builder.inttoptr(args[0], llty.as_pointer())
            builder.store(context.cast(builder, args[1], sig.args[1], utype), ptr, align=1)
            return context.get_dummy_value()

        return types.void(types.int64, value), codegen

    @intrinsic
    def bswap(typingctx, value):
        def codegen(context, builder, sig, args):
            return builder.bswap(context.cast(builder, args[0], sig.args[0], utype))

        return utype(value), codegen

    return load, store, bswap


load8, store8, _ = _accessors(8)
load16, store16, bswap16 = _accessors(16)
load32, store32, bswap32 = _accessors(32)
load64, store64, bswap64 = _accessors(64)


# ------------------------------------------------- streaming stores past the caches

# Output much larger than the caches is written with non-temporal stores: the line
# goes to memory without being read first (a plain store reads every line it will
# overwrite), so writing N bytes costs N of memory traffic, not 2N. x86-64 has them
# for 16- and 32-byte vectors (MOVNTDQ, VMOVNTPS); elsewhere LLVM emits the
# platform's hint or a plain store.
_X86 = platform.machine().lower() in ("x86_64", "amd64")


@intrinsic
def stream_line(typingctx, dst, src):
    """Copy the 64 bytes at ``src`` (any alignment) to ``dst`` (64-byte aligned) with
    streaming stores: two 32-byte vector stores (AVX), four 16-byte ones (SSE2) or the
    platform's equivalent."""

    def codegen(context, builder, sig, args):
        vec = ir.VectorType(ir.IntType(64), 4)
        hint = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        for half in (0, 32):
            s = builder.inttoptr(builder.add(args[1], ir.Constant(ir.IntType(64), half)), vec.as_pointer())
            d = builder.inttoptr(builder.add(args[0], ir.Constant(ir.IntType(64), half)), vec.as_pointer())
            builder.store(builder.load(s, align=1), d, align=32).set_metadata("nontemporal", hint)
        return context.get_dummy_value()

    return types.void(types.int64, types.int64), codegen


@intrinsic
def prefetch(typingctx, addr):
    """Ask for the cache line at ``addr`` to be loaded (a hint: never faults)."""

    def codegen(context, builder, sig, args):
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", [i8p], ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        )
        ptr = builder.inttoptr(args[0], i8p)
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(types.int64), codegen


@intrinsic
def stream_fence(typingctx):
    """Order this thread's streaming stores before its later stores (x86: SFENCE),
    so a thread that sees the kernel finished also sees its output."""

    def codegen(context, builder, sig, args):
        if _X86:
            fn = builder.module.declare_intrinsic("llvm.x86.sse.sfence", fnty=ir.FunctionType(ir.VoidType(), []))
            builder.call(fn, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


# ------------------------------------------------------- mapped files that shrink

# A file mapped into memory can be truncated by another process: reading a page past
# its new end raises SIGBUS, which kills the process. While a mapping is guarded, a
# SIGBUS handler puts a page of zeros where the missing page was (so the read that
# faulted goes on, reading zeros) and records the first address that faulted; the
# reader checks afterwards (MappedGuard.fault) and reports the file as truncated.
# Faults outside every guarded range go to the handler there was before.

_GUARDS = 64  # ranges guarded at once (one per mapped input being converted)
SIGBUS_TABLE = "layouts_sigbus_guards"  # the linker symbol of the table (kernels/_sigbus.py)
_SA_SIGINFO = 4


class _Sigaction(ctypes.Structure):
    """``struct sigaction`` of glibc on Linux (x86-64 and AArch64)."""

    _fields_ = [
        ("handler", ctypes.c_void_p),
        ("mask", ctypes.c_ulong * 16),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


_table = []


def guard_table():
    """The process's table of guarded ranges and the ``struct sigaction`` the handler
    restores, made once and bound to the linker symbol the handler finds it by
    (kernels/_sigbus.py), before the handler is loaded. Per range: first address, end,
    first faulting address (0: none), unused; then a row of the handler's constants:
    the previous sigaction's address, the page size."""
    if not _table:
        table = np.zeros((_GUARDS + 1, 4), dtype=np.int64)
        previous = _Sigaction()
        table[_GUARDS, :2] = ctypes.addressof(previous), mmap.PAGESIZE
        llvm.add_symbol(SIGBUS_TABLE, table.ctypes.data)
        _table.extend((table, previous))
    return _table[0], _table[1]


class _Guards:
    """The process's table of guarded ranges and its SIGBUS handler (made on first use)."""

    def __init__(self):
        libc = ctypes.CDLL(None, use_errno=True)
        self.sigaction = libc.sigaction
        self.sigaction.restype = ctypes.c_int
        self.sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        self.table, self.previous = guard_table()
        self.lock = threading.Lock()
        from ._sigbus import on_sigbus

        self.handler = on_sigbus

    def installed(self):
        now = _Sigaction()
        self.sigaction(signal.SIGBUS, None, ctypes.byref(now))
        return now.handler == self.handler.address

    def add(self, lo, hi):
        with self.lock:
            if not self.installed():
                new = _Sigaction()
                new.handler, new.flags = self.handler.address, _SA_SIGINFO
                if self.sigaction(signal.SIGBUS, ctypes.byref(new), ctypes.byref(self.previous)) != 0:
                    raise OSError(ctypes.get_errno(), "sigaction(SIGBUS) failed")
            free = np.flatnonzero(self.table[:_GUARDS, 0] == 0)
            if not len(free):
                return -1  # too many at once: this one goes unguarded
            k = int(free[0])
            self.table[k, 2] = 0
            self.table[k, 1] = hi
            self.table[k, 0] = lo
            return k

    def remove(self, k):
        with self.lock:
            self.table[k, 0] = 0


_guards = None


class MappedGuard:
    """Guard reads of ``[address, address + nbytes)`` (memory mapped from a file) against
    the file shrinking: see the comment above. Use as a context manager; ``fault()``
    is the offset of the first byte that could not be read, or None. On systems without
    glibc's ``sigaction`` nothing is guarded (``fault()`` stays None)."""

    def __init__(self, address, nbytes):
        global _guards
        self.slot = -1
        if not nbytes or not sys.platform.startswith("linux"):
            return
        if _guards is None:
            _guards = _Guards()
        self.address = address
        self.slot = _guards.add(address, address + nbytes)

    def fault(self):
        if self.slot < 0:
            return None
        addr = int(_guards.table[self.slot, 2])
        return addr - self.address if addr else None

    def close(self):
        if self.slot >= 0:
            _guards.remove(self.slot)
            self.slot = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
