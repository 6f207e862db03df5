"""Unaligned loads and stores at raw addresses, and byte swaps, for Numba CPU kernels.

Records of packed C structs put fields at any byte offset, so every access is an
LLVM load/store with ``align 1`` (cheap on x86-64 and AArch64). Values travel as
unsigned integers of the field's width: the bits move exactly, floats included.
"""

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

