"""``layouts convert --stream`` and ``layouts inspect --stream``: record streams (several
record types, framed records, a header) to a directory of one table per record type, and back."""

import os
import re
import sys

from .. import _backends as backends
from .._formats import SUFFIXES
from .errors import CommandError
from .interrupts import Interrupts
from .options import codec_of

# Options of one record type that mean nothing with --stream (the description has the types): (flag, attribute,
# the value when not given). --byteorder, --format and --compression are checked by direction.
_NOT_WITH_STREAM: "tuple[tuple[str, str, object], ...]" = (
    ("--string", "string", []),
    ("--bytes-as", "bytes_as", []),
    ("--enum-as", "enum_as", "dictionary"),
    ("--unions", "unions", []),
    ("--flatten", "flatten", False),
    ("--null", "null", []),
    ("--fill", "fill", []),
    ("--truncate", "truncate", False),
    ("--cast", "cast", "strict"),
    ("--time-unit", "time_unit", []),
    ("--drop-extra", "drop_extra", []),
    ("--header", "header", None),
    ("--chunk", "chunk", None),
    ("--offset", "offset", 0),
    ("--count", "count", None),
    ("--trailing", "trailing", "error"),
    ("--pack", "pack", None),
    ("--pointers", "pointers", "error"),
    ("-I", "include", []),
    ("-D", "define", []),
    ("--compiler", "compiler", "auto"),
)


def _refuse_with_stream(args, command):
    for flag, name, unset in _NOT_WITH_STREAM:
        if hasattr(args, name) and getattr(args, name) != unset:
            if flag == "--fill" and command == "convert":
                if os.path.isdir(args.src):
                    continue  # going back: --fill TYPE.FIELD=VALUE (_stream_fills)
                raise CommandError(
                    "--fill applies going back (a directory of tables -> the stream), where --fill "
                    "TYPE.FIELD=VALUE writes VALUE where that column of the type's table is null; "
                    "leave it out"
                )
            raise CommandError(
                f"{flag} does not apply with --stream: the record types and their fields come from "
                f"the stream description; leave {flag} out"
            )
    device = getattr(args, "device", "auto")
    if device != "auto" and not backends.get(device).host:
        raise CommandError("--device cuda: record streams are read and written on the CPU; leave --device out")
    if command == "inspect" and args.byteorder != "native":
        raise CommandError(
            f"--byteorder {args.byteorder}: a stream's byte order comes from its description (or its "
            f"magic number); leave --byteorder out"
        )
    if command == "inspect" and args.struct is not None:
        raise CommandError(
            f"STRUCT {args.struct!r} does not apply with --stream: every record type of the stream "
            f"is shown; leave it out"
        )


def _stream_of(spec):
    """The description --stream names, its errors in the command's words."""
    from .._errors import LayoutError
    from .._stream.read import resolve

    if spec in ("rdw", "bdw"):
        raise LayoutError(
            f"--stream {spec}: the {spec} framing needs the record's fields: write a .toml description "
            f'with framing = "{spec}" in its [[section]] and the fields in [section.types.record] '
            f"(docs/streams.md), and pass --stream FILE.toml"
        )
    try:
        return resolve(spec)
    except LayoutError as err:
        text = str(err).replace(
            ", or pass a path to a .toml description or a Stream",
            "; give --stream NAME or --stream PATH.toml (a description, see docs/streams.md)",
        )
        raise LayoutError(f"--stream {spec}: {text}" if spec not in text else text) from err


def convert_stream(args):
    """``layouts convert --stream``: a stream file -> a directory of one table per record
    type, or such a directory -> the stream file."""
    _refuse_with_stream(args, "convert")
    if args.src == "-" or (args.dst == "-" and not os.path.isdir(args.src)):
        raise CommandError(
            "--stream reads a stream file (not standard input) into a directory of tables (not standard "
            "output): give paths instead of -; going back (SRC a directory of tables), --to - writes the "
            "stream to standard output"
        )
    stream = _stream_of(args.stream)
    interrupts = getattr(args, "interrupts", None) or Interrupts()
    if os.path.isdir(args.src):
        return _stream_back(args, stream, interrupts)
    return _stream_out(args, stream, interrupts)


def _stream_out(args, stream, interrupts):
    from .._stream.files import SUFFIX, convert_to_dir

    if args.byteorder != "native":
        raise CommandError(
            f"--byteorder {args.byteorder}: a stream's byte order comes from its description (or its "
            f"magic number); --byteorder applies on the way back (directory -> stream); leave it out"
        )
    fmt = args.format or "parquet"
    if fmt not in SUFFIX:
        raise CommandError(
            f"--format {fmt}: --stream writes a directory of tables, one file per record type: "
            f"--format {'|'.join(SUFFIX)}"
        )
    if (
        not os.path.isdir(args.dst)
        and not args.dst.endswith(os.sep)
        and os.path.splitext(args.dst)[1].lower() in SUFFIXES
    ):
        raise CommandError(
            f"--to {args.dst}: --stream writes a directory, one file per record type, and "
            f"{args.dst!r} looks like a file name; give a directory, e.g. --to "
            f"{os.path.splitext(args.dst)[0]}/ (or --to {args.dst}/ for a directory of that name)"
        )
    codec = codec_of(args, fmt)
    here = os.path.dirname(os.path.abspath(args.src))
    if os.path.isdir(args.dst) and os.path.samefile(here, args.dst) and args.src.lower().endswith(SUFFIX[fmt]):
        raise CommandError(
            f"{args.src} is in --to {args.dst} and named as its tables are ({SUFFIX[fmt]}): the set written "
            f"there would replace it; give another --to directory (or rename the stream file)"
        )
    interrupts.check()
    try:  # window by window: memory bounded by the window, not the file (docs/streams.md)
        written, _, counts = convert_to_dir(
            args.src,
            stream,
            args.dst,
            fmt,
            compression=codec,
            overwrite=args.overwrite,
            check=interrupts.check,
            placed=lambda: setattr(args, "kept", args.dst),
        )
    except KeyboardInterrupt as err:  # held while the files were moved into place: they are there, whole
        args.kept = getattr(err, "_layouts_output_kept", None) or getattr(args, "kept", None)
        raise
    args.kept = args.dst
    interrupts.quiet = True  # the set is in place: done, whatever Ctrl-C comes now
    if not args.quiet:
        types = [t.name for s in stream.sections for t in s.types]
        n = sum(counts[t][0] for t in types)
        filled = ", ".join(f"{t} {counts[t][0]:,}" for t in types if counts[t][0])
        total = sum(b for _, b in counts.values())
        print(
            f"converted {args.src}: {n:,} records{f' ({filled})' if filled else ''}, {total:,} bytes -> "
            f"{args.dst} ({len(written)} files)"
        )
        _report_invalid(stream, args.dst, fmt, counts)
        _report_signs(args.src, stream, args.dst, fmt, counts)
    return 0


_SIGN_BATCH = 64 << 20  # bytes of the stream read at a time to count signs


def _report_signs(src, stream, dst, fmt, counts):
    """For each copybook type, the count per field of packed and zoned values whose sign the
    way back writes otherwise (as ``convert --copybook`` says it): its records read again
    from the stream at the offsets its table holds, a batch at a time."""
    import numpy as np

    import layouts.cobol as cobol

    from .._errors import ConversionError
    from .._stream.files import SUFFIX
    from .copybook import has_signs, read_columns, say_sign_counts

    for section in stream.sections:
        for t in section.types:
            layout = getattr(t.record, "layout", None)
            if not counts.get(t.name, (0,))[0] or layout is None or not has_signs(layout):
                continue
            table = read_columns(os.path.join(dst, t.name + SUFFIX[fmt]), ["_offset"], fmt)
            starts = table.column("_offset").to_numpy() + int(section.framing.prefix or 0)
            size, found = layout.itemsize, {}
            with open(src, "rb") as f:
                i = 0
                while i < len(starts):
                    j = max(i + 1, int(np.searchsorted(starts, starts[i] + _SIGN_BATCH - size, "right")))
                    at, end = int(starts[i]), int(starts[j - 1]) + size
                    data = os.pread(f.fileno(), end - at, at)
                    if len(data) < end - at:
                        raise ConversionError(
                            f"{src}: the file ends at byte {at + len(data):,}, inside a {t.name} record (bytes {at:,} to "
                            f"{end:,}) that was read before: it changed while it was converted; convert it again"
                        )
                    rows = np.frombuffer(data, np.uint8)[(starts[i:j] - at)[:, None] + np.arange(size)]
                    for name, k in cobol.sign_counts(rows.view(layout.dtype).reshape(-1), layout).items():
                        found[name] = found.get(name, 0) + k
                    i = j
            say_sign_counts(found, layout, suffix=f" ({t.name})", keep=" (--keep-signs does not apply with --stream)")


def _report_invalid(stream, dst, fmt, counts):
    """The count of invalid values each type's ``invalid = "null"`` fields made null, as
    ``convert --copybook --invalid null`` says it (read back from the files written)."""
    from .._stream.files import SUFFIX
    from .copybook import report_invalid_file

    for section in stream.sections:
        for t in section.types:
            layout = getattr(t.record, "layout", None)  # (a copybook type's: its fields have Encodings)
            if layout is not None and counts.get(t.name, (0,))[0]:
                report_invalid_file(os.path.join(dst, t.name + SUFFIX[fmt]), layout, fmt, suffix=f" ({t.name})")


def _stream_back(args, stream, interrupts):
    from .._errors import ConversionError, LayoutError
    from .._stream.files import READ_SUFFIXES, scan_dir, write_back

    if args.compression is not None:
        raise CommandError(
            "--compression applies when writing tables (stream -> directory); the stream is written "
            "as it was: leave --compression out"
        )
    if args.format is not None and args.format not in set(READ_SUFFIXES.values()):
        raise CommandError(
            f"--format {args.format}: going back (a directory -> the stream), --format chooses which "
            f"files of the directory are read: {'|'.join(dict.fromkeys(READ_SUFFIXES.values()))}"
        )
    if os.path.isdir(args.dst):
        raise CommandError(
            f"--to {args.dst} is a directory; going back (SRC {args.src} is a directory of tables), "
            f"--to names the stream file to write"
        )
    d = scan_dir(args.src, stream, args.format)
    order, files = d.order, d.labels
    refuse_own_input(args.dst, files.values())
    if args.byteorder != "native":
        order = args.byteorder
    if stream.byteorder is not None and order is None:
        raise ConversionError(
            f"{args.src}: {stream.name}'s byte order comes from the file's magic number, and these "
            f"files do not say which it was (they were not written by layouts convert --stream); "
            f"pass --byteorder big or --byteorder little"
        )
    fill = _stream_fills(stream, getattr(args, "fill", []), order)
    interrupts.check()
    try:
        # window by window where the stream allows (docs/streams.md), else the tables whole
        # (a FIFO, a device, standard output: streamed into; a regular file: whole or not at all)
        dst = sys.stdout.buffer if args.dst == "-" else args.dst
        n = write_back(d, stream, dst, order=order, overwrite=args.overwrite, check=interrupts.check, fill=fill)
    except (ConversionError, LayoutError) as err:
        text = re.sub(
            r"(?:table )?'(\w+)'",
            lambda m: f"{m.group(0)} ({files[m.group(1)]})" if m.group(1) in files else m.group(0),
            str(err),
            count=1,
        )
        # write_stream's fill={'TYPE': {'FIELD': value}} is the command's --fill TYPE.FIELD=VALUE
        text = re.sub(r"\bfill=\{'([^']*)': \{'([^']*)': value\}\}", r"--fill \1.\2=VALUE", text)
        err.args = (re.sub(r"\bfill\['([^']*)'\]\['([^']*)'\]=", r"--fill \1.\2=", text),)
        raise
    args.kept = args.dst
    interrupts.quiet = True
    if not args.quiet:
        size = f", {os.path.getsize(args.dst):,} bytes" if args.dst != "-" and os.path.isfile(args.dst) else ""
        print(
            f"converted {args.src} ({len(files)} files): {n:,} records{size} -> {args.dst}",
            file=sys.stderr if args.dst == "-" else sys.stdout,
        )
    return 0


def refuse_own_input(dst, inputs):
    """A CommandError if ``dst`` is one of the files read (a table the way back reads: it
    would be replaced by the records, the table set lost)."""
    try:
        st = os.fstat(sys.stdout.fileno()) if dst == "-" else os.stat(dst)
    except (OSError, ValueError):
        return
    for path in inputs:
        try:
            same = os.path.samestat(st, os.stat(path))
        except OSError:
            continue
        if same:
            raise CommandError(
                f"--to {dst}{' (standard output)' if dst == '-' else ''} is {path}, one of the input's tables (also with --overwrite: the set would be "
                f"lost); write the records to another file"
            )


def _stream_fills(stream, items, order) -> dict:
    """write_stream's ``fill`` from --fill TYPE.FIELD=VALUE (each value read as the field's type)."""
    import numpy as np

    from .._stream.read import _keep_prefix
    from .options import field_values

    fill: dict = {}
    types = {t.name: (s, t) for s in stream.sections for t in s.types}

    def leaves_of(kind):
        s, t = types[kind]
        layout = t.record.plan(order or stream.orders()[0], int(s.framing.prefix or 0), True, _keep_prefix(s))[0]
        return layout, [f for f in layout.names if f not in ("_offset", "_prefix")]

    for name, text in items:
        kind, dot, field = name.partition(".")
        if not dot or kind not in types:  # a bare FIELD: the one type that has it
            field, owners = name, [k for k in types if name in leaves_of(k)[1]]
            if len(owners) != 1:
                why = (
                    f"types {', '.join(owners)} all have a field {name!r}"
                    if owners
                    else f"no type has a field {name!r}"
                )
                raise CommandError(
                    f"--fill {name}={text}: {why}; with --stream, --fill TYPE.FIELD=VALUE (types: {', '.join(types)})"
                )
            kind = owners[0]
        layout, leaves = leaves_of(kind)
        if field not in leaves:
            raise CommandError(
                f"--fill {name}={text}: record type {kind!r} has no field {field!r} (its fields: {', '.join(leaves)})"
            )
        leaf = layout[field]
        if field in fill.get(kind, {}):
            raise CommandError(f"--fill {kind}.{field} is given twice; give one value per field")
        if leaf.encoding is not None:  # a copybook field: a value of its Arrow type
            value = _arrow_value(leaf, text, f"--fill {name}={text}")
        else:
            value = field_values(layout, [(field, text)], "--fill", owner=f"{kind}.")[field]
            base = leaf.dtype.base
            info = np.iinfo(base) if base.kind in "iu" else None
            if info is not None and isinstance(value, int) and not info.min <= value <= info.max:
                raise CommandError(
                    f"--fill {name}={text}: field {field!r} ({base}) holds {info.min} to {info.max}; give a value in that range"
                )
        fill.setdefault(kind, {})[field] = value
    return fill


def _arrow_value(leaf, text, where):
    """A command-line value of a copybook field as its Arrow type holds it (a decimal, an
    integer, a float or text)."""
    import decimal

    import pyarrow as pa

    t = leaf.arrow_type
    try:
        if pa.types.is_decimal(t):
            value = decimal.Decimal(text.strip())
            if not value.is_finite():
                raise ValueError
            return value
        if pa.types.is_integer(t):
            return int(text.strip(), 10)
        if pa.types.is_floating(t):
            return float(text)
        if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t):
            return text.encode()
    except (ValueError, decimal.InvalidOperation):
        raise CommandError(
            f"{where}: not a value of field {leaf.name!r} ({leaf.encoding.short()}, Arrow {t})"
        ) from None
    return text


def inspect_stream(args):
    """``layouts inspect SOURCE --stream SPEC``: the header's values and, per record type
    (and reserved table), its records and bytes."""
    from .._stream.files import count_stream

    _refuse_with_stream(args, "inspect")
    if args.source == "-":
        raise CommandError(
            "inspect --stream reads a stream file, not standard input (it reads the file window by window): "
            "give its path"
        )
    stream = _stream_of(args.stream)
    order, head, counts = count_stream(args.source, stream)  # window by window: bounded memory
    header = None
    if head is not None:
        header = head.to_arrow().drop_columns(["_offset"]).to_pylist()[0]
    size = sum(b for _, b in counts.values())
    names = [t.name for s in stream.sections for t in s.types] + [n for n in counts if n.startswith("_")]
    if args.json:
        import json

        def plain(v):
            return v.hex() if isinstance(v, bytes) else v

        print(
            json.dumps(
                {
                    "source": args.source,
                    "stream": stream.name,
                    "order": order,
                    "bytes": size,
                    "header": None if header is None else {k: plain(v) for k, v in header.items()},
                    "tables": {n: {"records": counts[n][0], "bytes": counts[n][1]} for n in names},
                },
                indent=2,
            )
        )
        return 0
    print(f"{args.source}: a {stream.name} stream, {size:,} bytes, byte order {order}")
    if header is not None:
        width = max(map(len, header))
        print(f"header ({counts['_header'][1]:,} bytes):")
        for k, v in header.items():
            print(f"  {k:<{width}}  {v!r}" if isinstance(v, (bytes, str)) else f"  {k:<{width}}  {v}")
    rows = [(n, f"{counts[n][0]:,}", f"{counts[n][1]:,}") for n in names]
    rows.append(
        ("total", f"{sum(counts[n][0] for n in names if n not in ('_header', '_gaps', '_blocks')):,}", f"{size:,}")
    )
    w = [max(len(r[i]) for r in rows + [("table", "records", "bytes")]) for i in range(3)]
    print(f"{'table':<{w[0]}}  {'records':>{w[1]}}  {'bytes':>{w[2]}}")
    for r in rows:
        print(f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:>{w[2]}}")
    return 0
