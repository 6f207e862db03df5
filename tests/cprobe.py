"""Ask the machine's C compiler where it puts each field, to judge Layout.from_c.

:func:`compiler_facts` compiles a program that prints, for one record type, its size,
its alignment, the ``offsetof`` of every non-bit-field leaf and, for every bit-field,
the bytes that turn on when the field is set to all ones in a zeroed record.
:func:`layout_facts` says the same from a Layout; the two must be equal.
"""

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def run_c(source, *args, cwd=None, flags=()):
    """Compile C source with the system compiler (extra ``flags``), run it, return its stdout."""
    with tempfile.TemporaryDirectory() as tmp:
        c, exe = Path(tmp) / "probe.c", Path(tmp) / "probe"
        c.write_text(source)
        subprocess.run(
            [CC, "-std=gnu11", "-O0", "-w", *flags, "-o", str(exe), str(c)], check=True, capture_output=True, text=True
        )
        return subprocess.run([str(exe), *args], check=True, capture_output=True, text=True, cwd=cwd).stdout


def c_access(layout, name):
    """The C member expression of a leaf (``q[0].px``), indexing enclosing arrays at 0."""
    parts, dtype, out = name.split("."), layout.dtype, []
    for i, part in enumerate(parts):
        fdt = dtype.fields[part][0]
        own = fdt.shape if fdt.subdtype else ()
        out.append(part + ("[0]" * len(own) if i < len(parts) - 1 else ""))
        dtype = fdt.subdtype[0] if fdt.subdtype else fdt
    return ".".join(out)


def compiler_facts(declarations, typename, layout):
    """Lines of facts the compiler gives for ``typename``'s leaves."""
    lines = [f'printf("size %zu\\n", sizeof({typename}));', f'printf("align %zu\\n", (size_t)_Alignof({typename}));']
    for f in layout.fields:
        expr = c_access(layout, f.name)
        if f.bits:
            lines.append(
                f"{{ {typename} r; memset(&r, 0, sizeof r); r.{expr} = ~0; "
                f'unsigned char *p = (unsigned char *)&r; printf("mask {f.name}"); '
                f'for (size_t i = 0; i < sizeof r; i++) if (p[i]) printf(" %zu:%02x", i, p[i]); '
                f'printf("\\n"); }}'
            )
        else:
            lines.append(f'printf("off {f.name} %zu\\n", offsetof({typename}, {expr}));')
    program = (
        "#include <stdio.h>\n#include <stddef.h>\n#include <string.h>\n"
        + declarations
        + "\nint main(void) {\n"
        + "\n".join(lines)
        + "\nreturn 0; }\n"
    )
    return run_c(program).split("\n")[:-1]


def layout_facts(layout):
    """The same lines, from the Layout (native byte order)."""
    lines = [f"size {layout.itemsize}", f"align {layout.alignment}"]
    for f in layout.fields:
        if f.bits:
            shift, nbits, signed, first = f.bits
            record = np.zeros(8 * layout.itemsize, dtype=np.uint8)
            start = 8 * int(f.offset) + first
            record[start : start + nbits] = 1
            packed = np.packbits(record, bitorder="little")
            lines.append(f"mask {f.name}" + "".join(f" {i}:{b:02x}" for i, b in enumerate(packed) if b))
        else:
            lines.append(f"off {f.name} {f.offset}")
    return lines
