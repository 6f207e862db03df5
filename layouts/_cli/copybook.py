"""COBOL copybooks on the command line: ``layouts convert DATA --copybook x.cob --to out.parquet``
(and back), ``layouts inspect x.cob``: the options, the Layout they make, the table."""

import contextlib
import re
import sys

from .._formats import SUFFIXES
from .errors import CommandError
from .interrupts import completing

COPYBOOK_SUFFIXES = (".cob", ".cbl", ".cpy", ".copy", ".copybook")

# Layout.from_copybook's keywords, as the command spells them in messages.
_FLAGS = {
    "record": "--record",
    "codepage": "--codepage",
    "invalid": "--invalid",
    "trim": "--trim",
    "as_integer": "--as-integer",
    "trunc": "--trunc",
    "floating_point": "--floating-point",
    "redefines": "--redefines",
    "names": "--names",
    "source_format": "--source-format",
    "record_start_offset": "--record-start-offset",
    "record_end_offset": "--record-end-offset",
    "fillers": "--fillers",
    "keep_signs": "--keep-signs",
}


def add_copybook_options(p, *, convert):
    """The copybook's options (``convert``: also those of the values)."""
    g = p.add_argument_group("COBOL copybooks (--copybook FILE)")
    g.add_argument("--record", metavar="NAME", help="the 01 record (or group) to use when the copybook has several")
    g.add_argument(
        "--codepage",
        default="cp037",
        metavar="CP",
        help="code page of text and zoned numbers: EBCDIC cp037 (default), cp273, cp277, cp278, cp280, "
        "cp284, cp285, cp297, cp500, cp871, cp1047, cp1140-cp1149; ASCII data: ascii or latin-1",
    )
    g.add_argument(
        "--redefines",
        action="append",
        default=[],
        metavar="ITEM=ALT[,ALT]",
        help="keep only these alternatives of a REDEFINES set (default: all, over the same bytes; "
        "writing records back needs one per set; repeatable)",
    )
    g.add_argument(
        "--names",
        choices=("cobol", "underscore"),
        default="cobol",
        help="column names as written (COMPANY-ID, default) or with _ for - (COMPANY_ID, as Cobrix)",
    )
    g.add_argument(
        "--floating-point",
        choices=("ibm", "ieee"),
        default="ibm",
        help="COMP-1/COMP-2 bytes: IBM hexadecimal floats (default) or IEEE 754 big-endian",
    )
    g.add_argument(
        "--trunc",
        choices=("std", "bin"),
        default="std",
        help="COMP/COMP-4/BINARY values beyond the PICTURE: invalid (std, default) or valid up to the "
        "bytes' range (bin; COMP-5 always is)",
    )
    g.add_argument(
        "--source-format",
        choices=("auto", "fixed", "free"),
        default="auto",
        help="copybook text in fixed columns (1-6 and 73-80 ignored, column 7 the indicator) or free",
    )
    g.add_argument(
        "--fillers",
        choices=("skip", "keep"),
        default="skip",
        help="FILLER items: padding (skip, default: written back as zeros) or FILLER-1, FILLER-2... "
        "columns of their bytes (keep: the way back is exact)",
    )
    g.add_argument(
        "--record-start-offset",
        type=_bytes,
        default=0,
        metavar="N",
        help="bytes before the copybook's record in every record of the file (skipped)",
    )
    g.add_argument(
        "--record-end-offset",
        type=_bytes,
        default=0,
        metavar="N",
        help="bytes after the copybook's record in every record of the file (skipped)",
    )
    if convert:
        g.add_argument(
            "--invalid",
            choices=("error", "null"),
            default="error",
            help="numbers whose bytes are not valid (bad digits or sign, spaces, low-values): an error "
            "naming the record and bytes (default), or nulls",
        )
        g.add_argument(
            "--trim",
            choices=("none", "right", "both"),
            default="none",
            help="text: keep every character (default: the way back is exact), or drop EBCDIC spaces "
            "(the way back pads after the text: leading spaces that 'both' dropped do not come back)",
        )
        g.add_argument(
            "--as-integer",
            action="store_true",
            help="numbers with no decimal places as int64 columns instead of decimal128",
        )
        g.add_argument(
            "--keep-signs",
            action="store_true",
            help="packed and zoned values whose sign the way back would write otherwise (C among F, "
            "A, B, E, negative zeros): a _sign.FIELD column of their signs, written back (the file is "
            "read whole); without it, the command says how many values come back with another sign",
        )


def _bytes(text):
    import argparse

    if not text.strip().isascii() or not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes (0 or more)")
    return int(text)


def _redefines(items):
    choices = {}
    for item in items:
        name, eq, alternatives = item.partition("=")
        chosen = [a.strip() for a in alternatives.split(",") if a.strip()]
        if not eq or not name.strip() or not chosen:
            raise CommandError(
                f"--redefines {item!r}: give ITEM=ALTERNATIVE[,ALTERNATIVE], e.g. "
                f"--redefines COMPANY-ID-NUM=COMPANY-ID-STR"
            )
        choices[name.strip()] = chosen
    return choices


def copybook_options(args):
    """``Layout.from_copybook``'s keywords from the command line."""
    options = {
        "record": args.record,
        "codepage": args.codepage,
        "redefines": _redefines(args.redefines) or None,
        "names": args.names,
        "floating_point": args.floating_point,
        "trunc": args.trunc,
        "source_format": args.source_format,
        "record_start_offset": args.record_start_offset,
        "record_end_offset": args.record_end_offset,
        "fillers": args.fillers,
    }
    for name in ("invalid", "trim", "as_integer"):
        if hasattr(args, name):
            options[name] = getattr(args, name)
    return options


def in_flags(message):
    """A message about ``Layout.from_copybook``'s keywords, in the command's flags."""
    message = re.sub(
        r"read the field with invalid='null' \(Encoding\(\.\.\., invalid='null'\)\)", "pass --invalid null", message
    )
    message = re.sub(r"Encoding\('\w+'\): code page", "--codepage: code page", message)
    message = message.replace("(Encoding(codepage=...))", "(--codepage NAME)")
    message = re.sub(r"\b(codepage|floating_point)='([^']*)' \(Layout\.from_copybook\)", r"\1=\2", message)
    message = (
        message.replace("(union members)", "(REDEFINES alternatives)")
        .replace("keep one member per union", "keep one alternative per REDEFINES set")
        .replace("--unions ", "--redefines ")
        .replace("drop the other members' columns", "drop the other alternatives' columns")
    )
    message = re.sub(r"Layout\.from_c\(\.\.\., unions=\{'([^']*)': '([^']*)'\}\)", r"--redefines \1=\2", message)
    if "'_sign." in message and "extra" in message:  # columns of layouts.cobol.keep_signs
        message += "; the _sign. columns are the signs --keep-signs kept: pass --keep-signs to write them back"
    for keyword, flag in _FLAGS.items():
        message = re.sub(rf"\b{keyword}=", f"{flag} ", message)
        message = re.sub(rf"\b{keyword} (must|names)\b", rf"{flag} \1", message)
    return message


def copybook_layout(args, path=None):
    """The Layout of ``--copybook FILE`` (or ``path``) with the copybook options; C-only
    flags refused."""
    import layouts as lo

    for flag, value, unset in (
        ("--enum-as", getattr(args, "enum_as", "dictionary"), "dictionary"),
        ("--unions", getattr(args, "unions", []), []),
        ("--pointers", getattr(args, "pointers", "error"), "error"),
        ("--bytes-as", getattr(args, "bytes_as", []), []),
        ("--string", getattr(args, "string", []), []),
        ("--pack", getattr(args, "pack", None), None),
        ("--byteorder", getattr(args, "byteorder", "native"), "native"),
    ):
        if value != unset:
            raise CommandError(
                f"{flag} applies to C declarations and NumPy dtypes, not to --copybook (a copybook's "
                f"binary items are big-endian)"
            )
    try:
        return lo.Layout.from_copybook(
            path or args.copybook, flatten=getattr(args, "flatten", False), **copybook_options(args)
        )
    except lo.LayoutError as err:
        message = in_flags(str(err))
        if path is None and message.startswith("the copybook "):
            message = "--copybook " + message[len("the copybook ") :]
        err.args = (message,)
        raise


def reject_copybook_options(args):
    """Copybook flags given without --copybook: a usage error naming them."""
    defaults = {
        "record": None,
        "codepage": "cp037",
        "redefines": [],
        "names": "cobol",
        "floating_point": "ibm",
        "trunc": "std",
        "source_format": "auto",
        "record_start_offset": 0,
        "record_end_offset": 0,
        "invalid": "error",
        "trim": "none",
        "as_integer": False,
        "fillers": "skip",
        "keep_signs": False,
    }
    for name, default in defaults.items():
        if getattr(args, name, default) != default:
            flag = _FLAGS[name]
            raise CommandError(f"{flag} applies to COBOL copybooks; add --copybook FILE (or leave {flag} out)")


def is_copybook(path):
    return str(path).lower().endswith(COPYBOOK_SUFFIXES)


def inspect_copybook(args):
    """``layouts inspect x.cob``: offsets, sizes, PICTURE and usage, kind and Arrow type of
    every field, with OCCURS DEPENDING ON counts and 88-level names."""
    import json

    from .._cobol import read_copybook

    if args.struct and not args.record:
        args.record = args.struct  # layouts inspect x.cob RECORD
    layout = copybook_layout(args, args.source)
    options = copybook_options(args)
    book = read_copybook(
        args.source,
        **{
            k: v
            for k, v in options.items()  # read once already: cannot fail
            if k not in ("trunc", "invalid", "trim", "as_integer")
        },
    )
    by_name = {f.name: f for f in layout.fields}
    rows = []
    for f in book.fields:
        leaf = by_name[f.name]
        rows.append(
            {
                "name": f.name,
                "offset": f.offset,
                "size": f.width * leaf.count,
                "line": f.line,
                "picture": f.picture,
                "usage": f.usage,
                "kind": f.kind,
                "encoding": leaf.encoding.short() if getattr(leaf, "encoding", None) else leaf.dtype.str,
                "arrow": str(layout.schema.field(f.path[0]).type)
                if len(f.path) == 1 and not leaf.shape
                else _arrow(leaf),
                "occurs": list(f.shape),
                "depending_on": [d for d in f.depending_on if d],
                "conditions": {name: list(values) for name, values in f.conditions},
            }
        )
    if args.json:
        print(
            json.dumps(
                {
                    "record": book.record,
                    "size": layout.itemsize,
                    "fields": rows,
                    "holes": [{"offset": o, "size": s} for o, s in layout.holes],
                    "group_conditions": _group_conditions(book),
                },
                indent=2,
            )
        )
        return 0
    print(_table(book, layout, rows))
    return 0


def _common_group(names):
    """The dotted group that holds every one of ``names`` (``""`` if none)."""
    parts = [n.split(".")[:-1] for n in names]
    common = []
    for level in zip(*parts):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return ".".join(common)


def _arrow(leaf):
    from .._layout import _wrap

    return str(_wrap(leaf.arrow_type, leaf.shape))


def _table(book, layout, rows):
    head = ("offset", "size", "field", "line", "PIC", "usage", "kind", "arrow")
    cells = [head] + [
        (
            str(r["offset"]),
            str(r["size"]),
            r["name"],
            str(r["line"]),
            r["picture"] or "-",
            r["usage"],
            r["encoding"],
            r["arrow"],
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = [f"{book.record}: {layout.itemsize} bytes per record, {len(rows)} fields ({book.source.origin})"]
    under = widths[0] + widths[1] + 8  # 88 levels below their field, under its name and two in
    for c, r in zip(cells, [None, *rows]):
        lines.append(
            "  "
            + "  ".join(
                [f"{c[0]:>{widths[0]}}", f"{c[1]:>{widths[1]}}"]
                + [f"{x:<{w}}" for x, w in zip(c[2:-1], widths[2:-1])]
                + [c[-1]]
            ).rstrip()
        )
        for name, values in (r or {}).get("conditions", {}).items():
            lines.append(f"{'':<{under}}88 {name} VALUE {' '.join(values)}")
    tables = {}
    for r in rows:
        if r["depending_on"]:
            tables.setdefault((tuple(r["occurs"]), tuple(r["depending_on"])), []).append(r["name"])
    for (occurs, counts), names in tables.items():
        table = _common_group(names)
        lines.append(
            f"  note: {table or ', '.join(names)}: OCCURS {' x '.join(map(str, occurs))} DEPENDING ON "
            f"{', '.join(counts)} (read at the maximum size)"
        )
    for offset, size in layout.holes:
        lines.append(f"  note: bytes {offset}-{offset + size - 1} are FILLER or skipped (no column)")
    for group in _group_conditions(book):  # 88 levels of the record, groups and FILLERs: no leaf column
        what = group["path"] or f"record {group['item']}"
        lines.append(
            f"  88 levels of {what} (bytes {group['offset']}-{group['offset'] + group['size'] - 1}, line "
            f"{group['line']}):"
        )
        for name, values in group["conditions"].items():
            lines.append(f"      88 {name} VALUE {' '.join(values)}")
    return "\n".join(lines)


def _group_conditions(book):
    """``book.group_conditions`` as inspect shows them (and its JSON gives them)."""
    from .._cobol.metadata import group_rows

    return group_rows(book.group_conditions)


# ------------------------------------------------------------------ multi-segment files
def add_segment_options(p):
    """convert --copybook with --segment: RDW/BDW files of several segment types."""
    g = p.add_argument_group("multi-segment files (--copybook FILE --segment ID=RECORD ...)")
    g.add_argument(
        "--segment",
        action="append",
        default=[],
        metavar="ID=RECORD",
        help="records whose segment id is ID are laid out by the copybook's RECORD (an 01 or a group); "
        "repeatable: DATA -> a directory DST/ of ID.parquet tables, or such a directory -> DATA",
    )
    g.add_argument(
        "--segment-field",
        metavar="NAME|OFFSET:SIZE",
        help="where the segment id is: a field of the records, or its offset and size after the RDW",
    )
    g.add_argument(
        "--framing",
        choices=("rdw", "bdw", "rdw-little"),
        default=None,  # None: not given (rdw), so that a --framing without --segment is refused
        help="rdw: IBM V (a 4-byte RDW, big-endian length counting it; default); bdw: VB blocks; "
        "rdw-little: two zero bytes and a little-endian length not counting the RDW",
    )
    g.add_argument(
        "--short",
        choices=("error", "pad"),
        default="error",
        help="a record shorter than its layout: an error (default), or read with zeros past its end",
    )


def _segment_types(args):
    import layouts as lo

    types = {}
    for item in args.segment:
        value, eq, record = item.partition("=")
        if not eq or not value or not record.strip():
            raise CommandError(f"--segment {item!r}: give ID=RECORD, e.g. --segment C=COMPANY-DETAILS")
        if value in types:
            raise CommandError(f"--segment {value}=... is given twice; give each segment id one RECORD")
        args.record = record.strip()
        args.segment_record = {**getattr(args, "segment_record", {}), value: args.record}
        try:
            types[value] = copybook_layout(args)
        except lo.LayoutError as err:  # (the copybook's message names the RECORD as --record's)
            err.args = (
                f"--segment {item}: {str(err).replace(f'--record {args.record!r}: ', f'RECORD {args.record!r}: ')}",
            )
            raise
    field = args.segment_field
    if field is None:
        raise CommandError("--segment needs --segment-field NAME (or OFFSET:SIZE): where each record's id is")
    m = re.fullmatch(r"(\d+):(\d+)", field)
    if not m:
        return types, field
    offset, size = int(m.group(1)), int(m.group(2))
    value = min(types, key=lambda v: types[v].itemsize)  # every record is as long as its RECORD (or shorter)
    n = types[value].itemsize
    if not 1 <= size <= 8:
        raise CommandError(
            f"--segment-field {field}: the id's SIZE is 1 to 8 bytes, got {size}; give OFFSET:SIZE, e.g. "
            f"--segment-field 0:1, or the id field's NAME"
        )
    if offset + size > n:
        raise CommandError(
            f"--segment-field {field}: the segment id would be bytes {offset} to {offset + size - 1} of each record "
            f"(after its RDW), but the records of --segment {value}={args.segment_record[value]} are {n} bytes; give "
            f"an OFFSET:SIZE within the first {n} bytes, or the id field's NAME"
        )
    return types, (offset, size)


def convert_segments(args):
    """``layouts convert DATA --copybook x.cob --segment ID=RECORD ... --to DIR/`` and back."""
    import os

    import layouts as lo
    from layouts import cobol

    if args.record:
        raise CommandError("--record does not apply with --segment: each --segment ID=RECORD names its record")
    _reject_whole_file_flags(args)
    _check_source(args)
    types, segment = _segment_types(args)
    options = {"segment": segment, "framing": args.framing or "rdw", "codepage": args.codepage}
    if not os.path.isdir(args.src) and os.path.exists(args.dst) and not os.path.isdir(args.dst):
        raise CommandError(
            f"--to {args.dst}: is a file; with --segment the output is a directory of ID.parquet tables "
            f"(one per --segment): name a directory"
        )
    if not os.path.isdir(args.src) and not os.path.isdir(args.dst) and args.dst.lower().endswith(_TABLE_SUFFIXES):
        raise CommandError(
            f"--to {args.dst}: with --segment the output is a directory of ID.parquet tables (one per "
            f"--segment), and {args.dst!r} looks like a file name; give a directory, e.g. --to "
            f"{os.path.splitext(args.dst)[0]}/"
        )
    try:
        if os.path.isdir(args.src):  # the way back: DIR/ID.parquet -> the segments file
            from .streams import refuse_own_input

            tables, paths = {}, [os.path.join(args.src, f"{v}.parquet") for v in [*types, "_blocks"]]
            refuse_own_input(args.dst, paths)
            for value in types:
                path = os.path.join(args.src, f"{value}.parquet")
                if not os.path.exists(path):
                    raise CommandError(f"{args.src} has no {value}.parquet for --segment {value}=...")
                tables[value] = _read_parquet(path)
                if not args.keep_signs and any(c.startswith("_sign.") for c in tables[value].column_names):
                    raise CommandError(
                        f"{path} has _sign. columns, the signs --keep-signs kept: pass --keep-signs to "
                        f"write them back (or drop the columns)"
                    )
            blocks = os.path.join(args.src, "_blocks.parquet")
            if os.path.exists(blocks):
                if options["framing"] != "bdw":
                    raise CommandError(
                        f"{blocks} holds the blocks of a file read with --framing bdw, and this writes "
                        f"--framing {options['framing']}: they would be lost; pass --framing bdw, or move "
                        f"_blocks.parquet away for records without blocks"
                    )
                tables["_blocks"] = _read_parquet(blocks)
            _check_destination(args)
            data = cobol.write_segments(tables, types, **options)
            _check_interrupts(args)
            _write_whole(args, data)
            if not args.quiet:
                print(
                    f"wrote {sum(t.num_rows for k, t in tables.items() if k != '_blocks'):,} records, "
                    f"{len(data):,} bytes -> {args.dst}",
                    file=_said(args),
                )
            return 0
        tables = cobol.read_segments(_source(args), types, short=args.short, signs=True, **options)
    except (lo.LayoutError, lo.ConversionError) as err:
        err.args = (
            in_flags(str(err))
            .replace("segment=", "--segment-field ")
            .replace("short='pad'", "--short pad")
            .replace(
                "the file is damaged, or give that segment id a Layout in types",
                "the file is damaged, or it needs one more --segment ID=RECORD",
            )
            .replace("(the ids of types: ", "(the --segment types: ")
            .replace("read_segments's framing: 'rdw', 'rdw-little' or 'bdw'", "--framing rdw, rdw-little or bdw"),
        )
        raise
    signs = {name: kept_sign_counts(t) for name, t in tables.items()}
    if not args.keep_signs:  # said below instead: the count per field of signs that come back otherwise
        tables = {
            name: t.drop_columns([c for c in t.column_names if c.startswith("_sign.")]) for name, t in tables.items()
        }
    _check_interrupts(args)
    _write_tables(tables, args)
    if not args.quiet:
        counts = ", ".join(f"{name}: {t.num_rows:,}" for name, t in tables.items() if name != "_blocks")
        print(f"converted {counts} records -> {args.dst}")
        for value, layout in types.items():
            name = cobol._table_name(value)
            report_invalid(tables[name], layout, suffix=f" (segment {value})")
            if not args.keep_signs:
                say_sign_counts(signs[name], layout, suffix=f" (segment {value})")
        if args.keep_signs:
            kept = sum(len(c) for c in signs.values())
            print(f"signs kept: {kept} fields hold some")
    return 0


_TABLE_SUFFIXES = tuple(s for s, fmt in SUFFIXES.items() if fmt != "records")  # (the table formats' names)


def _read_parquet(path):
    """A table file of the way back; a damaged one is a ConversionError naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from layouts import ConversionError

    try:
        return pq.ParquetFile(path).read()  # (read_table imports pandas)
    except (pa.ArrowException, OSError) as err:
        raise ConversionError(f"cannot read {path} as a Parquet table: {err}; convert the file again") from None


# convert's flags that --segment does not take: (flag, attribute, value when not given)
_NOT_WITH_SEGMENTS: "tuple[tuple[str, str, object], ...]" = (
    ("--count", "count", None),
    ("--offset", "offset", 0),
    ("--chunk", "chunk", None),
    ("--trailing", "trailing", "error"),
    ("--compression", "compression", None),
    ("--format", "format", None),
    ("--header", "header", None),
    ("--null", "null", []),
    ("--fill", "fill", []),
    ("--truncate", "truncate", False),
    ("--cast", "cast", "strict"),
    ("--time-unit", "time_unit", []),
)


def _reject_whole_file_flags(
    args, option="--segment", what="the whole file is read, each record by its segment's layout, into ID.parquet tables"
):
    """Flags of convert that a multi-segment file (or one of records as long as their
    counts) does not use: a usage error, not a flag silently ignored (``--count 1``
    converted every record)."""
    for flag, name, unset in _NOT_WITH_SEGMENTS:
        if getattr(args, name, unset) != unset:
            raise CommandError(f"{flag} does not apply with {option} ({what}); leave {flag} out")


def _check_interrupts(args):
    """A Ctrl-C that the compiler's callbacks swallowed while the records converted (see
    ``layouts._cli.interrupts``): raised now, before any output is kept."""
    interrupts = getattr(args, "interrupts", None)
    if interrupts is not None:
        interrupts.check()


def _write_tables(tables, args):
    """``DST/ID.parquet`` for each table, all or none: written beside under temporary
    names, then renamed, so that a Ctrl-C or a failure leaves no half-written table (and
    a directory made for them is removed again)."""
    import os

    import pyarrow.parquet as pq

    dst, overwrite = args.dst, args.overwrite
    if dst == "-":
        raise CommandError(
            "--segment writes a directory of ID.parquet tables, one per segment, which standard output "
            "(--to -) cannot hold: give --to DIR/"
        )
    if os.path.exists(dst) and os.listdir(dst) and not overwrite:
        raise CommandError(f"{dst} is not empty; pass --overwrite to replace its tables")
    made = not os.path.exists(dst)
    partial = {name: os.path.join(dst, f".{name}.parquet.partial-{os.getpid()}") for name in tables}
    try:
        os.makedirs(dst, exist_ok=True)  # (in the try: a Ctrl-C right after it removes it again)
        for name, table in tables.items():
            pq.write_table(table, partial[name])
        with completing(args):  # (all renamed, or none: a Ctrl-C or SIGTERM meanwhile waits for the last)
            for name in tables:
                os.replace(partial[name], os.path.join(dst, f"{name}.parquet"))
    except BaseException:
        for path in partial.values():
            if os.path.exists(path):
                os.remove(path)
        if made and os.path.isdir(dst) and not os.listdir(dst):
            os.rmdir(dst)
        raise


def _write_whole(args, data):
    """The records file, whole or not at all, as every output of the command (see
    :func:`_write_out`)."""
    _write_out(args, lambda f: f.write(data), lambda: (_stdout().write(data), sys.stdout.buffer.flush()))


def _stdout():
    """Standard output's binary file, every write() written whole: a pipe whose reader
    went away takes part of a large write and returns its count (no error), and the
    rest was lost while the command said it wrote everything (attack6); the next write
    raises BrokenPipeError (status 141)."""
    from layouts._files import _Counting

    return _Counting(sys.stdout.buffer)


def _write_out(args, write, to_stdout):
    """``write(file)`` into ``--to``: a regular file whole or not at all (an unnamed or
    temporary file put in place), replacing one only with --overwrite and through a link
    its target; a FIFO, a device or /dev/stdout written into; a directory, the input itself
    (by any path, also standard input's file) refused (``layouts._files.open_output``);
    ``-``: ``to_stdout()``."""
    from layouts._files import open_output

    if args.dst == "-":
        to_stdout()
        return
    src = sys.stdin.buffer if args.src == "-" else args.src
    out = open_output(args.dst, overwrite=args.overwrite, src=src)
    try:
        f = out.records_file()
        write(f)
        f.flush()
        if not out.stream:
            f.close()  # (the buffer's; the descriptor stays the output's)
        with completing(args):
            out.commit()
    except BaseException:
        out.discard()
        raise


# ------------------------------------------------------------------ records as long as their counts
def add_variable_options(p):
    """convert --copybook with --variable-occurs: records as long as their OCCURS DEPENDING ON counts."""
    g = p.add_argument_group("records as long as their counts (--copybook FILE --variable-occurs)")
    g.add_argument(
        "--variable-occurs",
        action="store_true",
        help="each record only as long as its OCCURS DEPENDING ON counts make it (Cobrix's "
        "variable_size_occurs): DATA -> one table, and back; with --framing rdw|bdw|rdw-little each in an RDW",
    )
    g.add_argument(
        "--occurs-mapping",
        action="append",
        default=[],
        metavar="TABLE=TEXT:COUNT[,TEXT:COUNT]",
        help="the count of TABLE, whose DEPENDING ON item is text, for each text value (Cobrix's "
        "occurs_mappings); repeatable",
    )


def _occurs_mappings(items):
    mappings = {}
    for item in items:
        table, eq, pairs = item.partition("=")
        mapping = {}
        for pair in pairs.split(","):
            text, colon, count = pair.rpartition(":")
            if not colon or not count.strip().isdigit():
                raise CommandError(
                    f"--occurs-mapping {item!r}: give TABLE=TEXT:COUNT[,TEXT:COUNT], e.g. --occurs-mapping DETAIL1=A:0,B:1"
                )
            if text.rstrip(" ") in {
                t.rstrip(" ") for t in mapping
            }:  # (a count's text is compared without its trailing spaces)
                raise CommandError(
                    f"--occurs-mapping {item!r}: the text {text!r} is given twice; give each text one count"
                )
            mapping[text] = int(count)
        if not eq or not table.strip():
            raise CommandError(f"--occurs-mapping {item!r}: give TABLE=TEXT:COUNT[,TEXT:COUNT]")
        if table.strip() in mappings:
            raise CommandError(
                f"--occurs-mapping {item!r}: the table {table.strip()} is given twice; give all its texts in one "
                f"--occurs-mapping {table.strip()}=TEXT:COUNT[,TEXT:COUNT]"
            )
        mappings[table.strip()] = mapping
    return mappings or None


def _variable_flags(message):
    """read_variable's and write_variable's advice in the command's flags."""
    message = message.replace(
        "read the field with invalid='null' (read_variable(..., invalid='null'))", "pass --invalid null"
    )
    message = re.sub(r"write_variable\(\.\.\., redefines=\{'([^']*)': '([^']*)'\}\)", r"--redefines \1=\2", message)
    message = re.sub(r"table\.drop_columns\(\[([^\]]*)\]\)", r"remove the column \1 from the table file", message)
    message = re.sub(r"drop them from the table \(remove", "drop them (remove", message)
    message = re.sub(  # (write_variable's fill= and truncate=: the command has no flags for them here)
        r"pass fill=\{'([^']*)': value\} to write a value in their place",
        r"give \1 a value in those rows of the table file",
        message,
    )
    message = re.sub(
        r"pass truncate=True to cut such values to (\d+) characters", r"shorten them to \1 characters", message
    )
    message = message.replace("(framing=None)", "(without --framing)")
    message = message.replace(
        "read_variable's framing: 'rdw', 'rdw-little' or 'bdw'", "--framing rdw, rdw-little or bdw"
    )
    message = re.sub(r"framing='([\w-]+)'", r"--framing \1", message)
    message = re.sub(r"the framing is not '([\w-]+)'", r"the framing is not --framing \1", message)
    message = message.replace("invalid='null' made it null", "--invalid null made it null")
    message = message.replace("invalid='error' (the default)", "--invalid error (the default)")
    return message.replace("(read_variable gives it)", "(layouts convert --variable-occurs gives it)")


def convert_variable(args):
    """``layouts convert DATA --copybook x.cob --variable-occurs --to out.parquet`` and back
    (an Arrow or Parquet file -> DATA)."""

    import pyarrow.parquet as pq

    import layouts as lo
    from layouts import cobol

    if args.segment:
        raise CommandError("--variable-occurs and --segment: give one of them (a file of one record type, or segments)")
    _reject_whole_file_flags(args, "--variable-occurs", "the whole file is read into one table")
    if args.flatten:
        raise CommandError("--flatten does not apply with --variable-occurs (its tables are lists of nested records)")
    options = {k: v for k, v in copybook_options(args).items() if v is not None}
    extra = {"framing": args.framing, "occurs_mappings": _occurs_mappings(args.occurs_mapping)}
    back = str(args.src).lower().endswith((".parquet", ".arrow", ".feather", ".ipc"))
    _check_source(args)
    _check_destination(args)
    if args.src == "-" and sys.stdin.buffer.peek(6)[:6].startswith((b"PAR1", b"ARROW1", b"\xff\xff\xff\xff")):
        raise CommandError(
            "SRC -: standard input holds a Parquet or Arrow file, and --variable-occurs reads records from "
            "it; the way back (a table -> records) reads the table by its path: give SRC as FILE.parquet"
        )
    if not back and args.dst != "-" and not args.dst.lower().endswith(_TABLE_SUFFIXES) and not _written_into(args.dst):
        raise CommandError(
            f"--to {args.dst}: --variable-occurs writes a Parquet or Arrow IPC file here (records -> a table), "
            f"and the name does not say so; name it .parquet or .arrow (records come from a table file: SRC FILE.parquet)"
        )
    try:
        if back:
            import pyarrow.feather as feather

            table = pq.read_table(args.src) if args.src.lower().endswith(".parquet") else feather.read_table(args.src)
            data = cobol.write_variable(table, args.copybook, **extra, **options)
            _check_interrupts(args)
            _write_whole(args, data)
            if not args.quiet:
                print(f"wrote {table.num_rows:,} records, {len(data):,} bytes -> {args.dst}", file=_said(args))
            return 0
        src = _source(args)
        count_signs = not args.quiet and has_signs(copybook_layout(args))
        if count_signs:  # read once, for the table and the count of signs the way back writes otherwise
            with open(src, "rb") if isinstance(src, str) else contextlib.nullcontext(src) as f:
                src = f.read()
        table = cobol.read_variable(src, args.copybook, **extra, **options)
        signs = cobol.variable_sign_counts(src, args.copybook, **extra, **options) if count_signs else {}
    except (lo.LayoutError, lo.ConversionError) as err:
        message = re.sub(
            r"occurs_mappings=\{'([^']*)': \{text: count\}\}", r"--occurs-mapping \1=TEXT:COUNT[,TEXT:COUNT]", str(err)
        )
        if not back and message.startswith("the data: "):  # (read into memory first: named by the file here)
            message = f"{'standard input' if args.src == '-' else args.src}: {message[len('the data: ') :]}"
        err.args = (in_flags(_variable_flags(message)).replace("occurs_mappings", "--occurs-mapping"),)
        raise
    _check_interrupts(args)
    _write_table(table, args)
    if not args.quiet:
        print(f"converted {table.num_rows:,} records -> {args.dst}", file=_said(args))
        report_invalid(table, copybook_layout(args), out=_said(args))
        say_sign_counts(
            signs,
            copybook_layout(args),
            _said(args),
            keep=" (--keep-signs keeps them with fixed-length records, not yet with --variable-occurs)",
        )
    return 0


def _written_into(dst):
    """Whether ``dst`` is a FIFO or a device, which any format is written into."""
    import os
    import stat

    try:
        mode = os.stat(dst).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _check_destination(args):
    """``--to``: a file that exists is replaced only with ``--overwrite``; a directory is no
    file; ``-``, a FIFO or a device (/dev/null) is written into."""
    import os

    if args.dst == "-":
        return
    if os.path.isdir(args.dst):
        raise CommandError(f"--to {args.dst}: is a directory; name the output file")
    if os.path.isfile(args.dst) and not args.overwrite:
        raise CommandError(f"{args.dst} exists; pass --overwrite to replace it")


def _check_source(args):
    """The input exists (``-``: standard input), as the command's other paths say it (and
    with their exit status: 1, a failure, not a wrong command line)."""
    import os

    if args.src != "-" and not os.path.exists(args.src):
        raise FileNotFoundError(f"cannot read {args.src!r}: No such file or directory")


def _source(args):
    """The input of a whole-file conversion: the path, or standard input for ``-``."""
    return sys.stdin.buffer if args.src == "-" else args.src


def _said(args):
    """Where the summary lines go: standard error when the data goes to standard output."""
    return sys.stderr if args.dst == "-" else sys.stdout


def _write_table(table, args):
    """One Parquet (or, by its suffix, Arrow IPC) file, as :func:`_write_out` puts it; ``-``:
    an Arrow IPC stream on standard output."""
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    def write(target):  # an open file, in the format of dst's suffix
        if str(args.dst).lower().endswith((".arrow", ".feather", ".ipc")):
            feather.write_feather(table, target)
        else:
            pq.write_table(table, target)

    def to_stdout():
        with pa.ipc.new_stream(_stdout(), table.schema) as writer:
            writer.write_table(table)
        sys.stdout.buffer.flush()

    _write_out(args, write, to_stdout)


def report_invalid(table, layout, out=None, suffix=""):
    """One line per field whose invalid values became nulls (``--invalid null``): the count
    and the field."""
    from layouts import cobol

    for name, count in cobol.invalid_counts(table, layout).items():
        noun = "value" if count == 1 else "values"
        print(f"  {count:,} invalid {noun} of {name} made null{suffix}", file=out or sys.stdout)


def report_invalid_file(path, layout, fmt=None, out=None, suffix=""):
    """:func:`report_invalid` for the Parquet or Arrow IPC file ``convert`` wrote: the
    columns of the fields read with ``invalid="null"`` read back (memory-mapped for IPC)."""
    wanted = [f for f in layout.fields if f.encoding is not None and f.encoding.invalid == "null"]
    if not wanted:
        return
    columns = sorted({f.name if f.name in layout.schema.names else f.name.split(".")[0] for f in wanted})
    report_invalid(read_columns(path, columns, fmt), layout, out, suffix)


def read_columns(path, columns, fmt=None):
    """``columns`` of the Parquet or Arrow IPC file (``fmt``, else its suffix's) ``convert`` wrote."""
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    if fmt == "parquet" or (fmt is None and str(path).lower().endswith(".parquet")):
        return pq.ParquetFile(path).read(columns=columns)  # (read_table imports pandas)
    if fmt == "arrows":  # the Arrow IPC stream format
        import pyarrow as pa

        with pa.memory_map(str(path)) as f:
            return pa.ipc.open_stream(f).read_all().select(columns)
    return feather.read_table(path, columns=columns, memory_map=True)


# ------------------------------------------------------------------ signs
def has_signs(layout):
    """Whether ``layout`` has packed or zoned fields (whose signs the way back may write otherwise)."""
    from layouts._cobol.signs import sign_fields  # (here: the module loads pyarrow, which --help does not)

    return bool(sign_fields(layout))


def report_signs(records, layout, out=None):
    """One line per packed or zoned field with values whose sign the way back writes
    otherwise (without ``--keep-signs``): the count and the field."""
    from layouts import cobol

    say_sign_counts(cobol.sign_counts(records, layout), layout, out)


def has_floats(layout):
    """Whether ``layout`` has IBM float fields (COMP-1, COMP-2: values the way back may write otherwise)."""
    return any(f.encoding is not None and f.encoding.kind == "hfloat" for f in layout.fields)


def report_floats(records, layout, out=None, suffix=""):
    """One line per IBM float field with values the way back writes as other bytes
    (``layouts.cobol.float_counts``): the count and the field."""
    from layouts import cobol

    for name, count in cobol.float_counts(records, layout).items():
        noun = "value" if count == 1 else "values"
        print(
            f"  {count:,} {noun} of {name}{suffix} will come back as other bytes (IBM floats are read as IEEE "
            f"floats and written back normalized: unnormalized values, zeros with an exponent, values rounded; "
            f"see docs/mainframe.md, IBM floats)",
            file=out or sys.stdout,
        )


def report_uncovered(records, layout, out=None):
    """A line if records hold bytes other than zero where no field is (FILLER, a REDEFINES
    alternative left out, record start or end bytes): the way back writes zeros there."""
    from layouts import cobol

    count = cobol.uncovered_count(records, layout)
    if count:
        noun = "record holds" if count == 1 else "records hold"
        print(
            f"  {count:,} {noun} bytes other than zero where no field is (FILLER, a REDEFINES alternative left "
            f"out, record start or end bytes): the way back writes zeros there; --fillers keep keeps FILLER's",
            file=out or sys.stdout,
        )


def say_sign_counts(counts, layout, out=None, suffix="", keep="; pass --keep-signs to keep them"):
    """:func:`report_signs`'s lines of ``{field: count}`` (``layouts.cobol.sign_counts``);
    ``keep``: the advice (none where --keep-signs does not apply yet)."""
    from layouts import cobol

    separate = cobol.separate_sign_fields(layout)
    for name, count in counts.items():
        if name in separate:
            noun = "negative zero" if count == 1 else "negative zeros"
            said = "will come back as +0 (a separate sign's '-' of a zero)"
        else:
            noun = "value" if count == 1 else "values"
            said = "will come back with another sign byte (the field's own)"
        print(f"  {count:,} {noun} of {name}{suffix} {said}{keep}", file=out or sys.stdout)


def kept_sign_counts(table):
    """``{field: count}`` of the signs in ``table``'s ``_sign.FIELD`` columns (those not null)."""
    import pyarrow as pa

    counts = {}
    for name in table.column_names:
        if name.startswith("_sign."):
            column = table.column(name).combine_chunks()
            while pa.types.is_fixed_size_list(column.type):  # (an OCCURS field's; a null list: none kept)
                column = column.flatten()
            if len(column) - column.null_count:
                counts[name[len("_sign.") :]] = len(column) - column.null_count
    return counts


def convert_keep_signs(args, layout, fmt, fill):
    """``layouts convert DATA --copybook x.cob --keep-signs --to out.parquet``, and back: the
    whole file in memory; ``_sign.FIELD`` columns (layouts.cobol.keep_signs) out, put back
    into the records (layouts.cobol.put_signs) on the way back."""

    import layouts as lo
    from layouts import cobol

    if args.dst == "-" or args.src == "-":
        raise CommandError("--keep-signs reads and writes files (the file is read whole); give --to FILE and a file")
    _check_source(args)
    _check_destination(args)
    if args.device not in ("auto", "cpu"):
        raise CommandError(f"--keep-signs converts on the CPU (the file whole); leave out --device {args.device}")
    for flag, given in (("--null", args.null), ("--chunk", args.chunk), ("--compression", args.compression)):
        if given:
            raise CommandError(f"{flag} does not apply with --keep-signs (the file is converted whole); leave it out")
    try:
        if fmt == "records":
            import pyarrow.feather as feather
            import pyarrow.parquet as pq

            table = (
                pq.read_table(args.src) if str(args.src).lower().endswith(".parquet") else feather.read_table(args.src)
            )
            soa = lo.SoA.from_arrow(table, layout, extra="drop", fill=fill, truncate=args.truncate, cast=args.cast)
            records = soa.to_aos().array  # (not np.array(): a copy of records leaves their padding undefined)
            cobol.put_signs(records, table, layout)
            _check_interrupts(args)
            _write_whole(args, records.tobytes())
            if not args.quiet:
                print(f"wrote {len(records):,} records, {records.nbytes:,} bytes -> {args.dst}")
            return 0
        if fmt not in ("parquet", "arrow", "feather"):
            raise CommandError(
                f"--keep-signs writes Parquet or Arrow IPC files, not {fmt}; name the file .parquet or .arrow"
            )
        records = lo.read_records(args.src, layout, args.offset, args.count, trailing=args.trailing)
        table = cobol.keep_signs(records.to_soa().to_arrow(), records, layout)
    except (lo.LayoutError, lo.ConversionError) as err:
        err.args = (in_flags(str(err)),)
        raise
    _check_interrupts(args)
    _write_table(table, args)
    if not args.quiet:
        kept = sum(table.column(n).null_count != table.num_rows for n in table.column_names if n.startswith("_sign."))
        print(f"converted {table.num_rows:,} records -> {args.dst} (signs kept: {kept} fields hold some)")
        report_invalid(table, layout)
    return 0
