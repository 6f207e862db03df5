"""``layouts inspect``: the layout of a C struct (from a header, or from the DWARF of an object
built with -g), as pahole shows it, or as JSON (``--stream``: see :mod:`.streams`; a COBOL
copybook: see :mod:`.copybook`)."""

from .copybook import add_copybook_options, inspect_copybook, is_copybook, reject_copybook_options
from .options import add_c_options, c_options
from .streams import inspect_stream


def inspect(args):
    """Print the layout of one struct, or of every struct the source defines: a C header,
    or an ELF object, executable or shared library built with -g (read from its DWARF)."""
    if args.stream is not None:
        return inspect_stream(args)
    if args.copybook or is_copybook(args.source):
        return inspect_copybook(args)
    reject_copybook_options(args)
    import layouts as lo
    from layouts._cdecl import dwarf_record_names, is_elf, record_names

    options = c_options(args)
    if is_elf(args.source):  # never blocks: a FIFO or a device is refused by the C path, saying what it is
        names = [args.struct] if args.struct else dwarf_record_names(args.source)
        byteorder = None if args.byteorder == "native" else args.byteorder
        make = lambda name: lo.Layout.from_dwarf(
            args.source,
            name,
            byteorder=byteorder,  # noqa: E731
            pointers=options["pointers"],
        )
    else:
        compiler = {"auto": "auto", "none": None}.get(args.compiler, args.compiler)
        names = (
            [args.struct]
            if args.struct
            else record_names(
                args.source, include_dirs=options["include_dirs"], defines=options["defines"], compiler=compiler
            )
        )
        make = lambda name: lo.Layout.from_c(args.source, name, compiler=compiler, **options)  # noqa: E731
    if not names:
        raise lo.LayoutError(f"{args.source} defines no struct or union")
    layouts = [make(name) for name in names]
    if args.json:
        import json

        out = [layout.describe() for layout in layouts]
        for d, layout in zip(out, layouts):
            if layout.c is not None and layout.c.notes:
                d["notes"] = list(layout.c.notes)
        print(json.dumps(out[0] if args.struct else out, indent=2))
    else:
        print(
            "\n\n".join(
                str(layout) + "".join(f"\n  note: {n}" for n in (layout.c.notes if layout.c else ()))
                for layout in layouts
            )
        )
    return 0


def add_parser(sub):
    """The ``inspect`` subcommand and its options."""
    p = sub.add_parser(
        "inspect",
        help="show a C struct's fields, offsets, types and padding (like pahole)",
        description="Lay out a C struct as the C compiler does and print, per field: offset, size, "
        "C type, NumPy type and Arrow type, with every padding hole and the share of "
        "bytes it wastes.",
    )
    p.add_argument(
        "source",
        help="a C header or source file, or an object/executable/shared library built "
        "with -g (its DWARF is read); with --stream, a stream file",
    )
    p.add_argument("struct", nargs="?", help="'struct name', a tag or a typedef (default: every struct)")
    p.add_argument("--json", action="store_true", help="print the same as JSON")
    p.add_argument(
        "--stream",
        metavar="SPEC",
        help="SOURCE is a record stream of this description (a built-in: pcap, itch50; or a .toml "
        "file): print its header and the records and bytes of each record type",
    )
    p.add_argument(
        "--compiler",
        default="auto",
        metavar="CC",
        help="C compiler that lays the header out: auto ($CC, gcc, cc, clang; default), a name or "
        "path, or none for the built-in pycparser/cffi path",
    )
    p.add_argument(
        "--copybook",
        action="store_true",
        help="SOURCE is a COBOL copybook (the default for .cob, .cbl, .cpy, .copy, .copybook): print "
        "every field's offset, size, copybook line, PICTURE, usage, kind and Arrow type",
    )
    add_c_options(p)
    add_copybook_options(p, convert=False)
    p.set_defaults(run=inspect)
