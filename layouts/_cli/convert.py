"""``layouts convert``: a records file to Parquet/Feather/Arrow IPC, or back, streaming with a
progress bar (``--stream``: see :mod:`.streams`)."""

import os
import sys
import time

from .._backends import DEVICES
from .._formats import DEFAULT_CHUNK, FORMATS, SUFFIXES
from .copybook import (
    add_copybook_options,
    add_segment_options,
    add_variable_options,
    convert_keep_signs,
    convert_segments,
    convert_variable,
    copybook_layout,
    has_floats,
    has_signs,
    in_flags,
    reject_copybook_options,
    report_floats,
    report_invalid_file,
    report_signs,
    report_uncovered,
)
from .errors import CommandError, command_hints, say
from .interrupts import Interrupts
from .options import add_c_options, assignment, byte_size, codec_of, field_values, layout_of, whole_number
from .stdio import check_open, open_stdin
from .streams import convert_stream


def convert(args):
    """``layouts convert``: one file to another, streaming, with a progress bar."""
    if args.stream is not None:
        return convert_stream(args)
    import layouts as lo

    from .._backends import auto_device
    from . import warm_up  # the package's name, which a test may replace

    if getattr(args, "keep_signs", False) and getattr(args, "variable_occurs", False):
        raise CommandError(
            "--keep-signs applies to fixed-length records and --segment, not yet with --variable-occurs; leave it out"
        )
    if args.segment or getattr(args, "variable_occurs", False):  # the whole file, read or written at once
        _check_standard_streams(args)
    if args.segment:
        if not args.copybook:
            raise CommandError("--segment lays records out by a copybook's records; add --copybook FILE")
        return convert_segments(args)
    if getattr(args, "variable_occurs", False):
        if not args.copybook:
            raise CommandError("--variable-occurs reads records by a copybook's counts; add --copybook FILE")
        return convert_variable(args)
    if getattr(args, "occurs_mapping", []):
        raise CommandError("--occurs-mapping applies with --variable-occurs (or leave it out)")
    for flag, value, unset in (
        ("--segment-field", args.segment_field, None),
        ("--framing", args.framing, None),
        ("--short", args.short, "error"),
    ):
        if value != unset:
            raise CommandError(f"{flag} applies to multi-segment files; add --segment ID=RECORD (or leave {flag} out)")
    to_stdout = args.dst == "-"
    _check_standard_streams(args)
    if args.copybook:  # (the options first: nothing is read from standard input for a wrong one)
        layout = copybook_layout(args)
    else:
        reject_copybook_options(args)
        layout = layout_of(args)
    chunk = DEFAULT_CHUNK if args.chunk is None else args.chunk
    if chunk < layout.itemsize:
        mib = max(-(-layout.itemsize // 2**20), DEFAULT_CHUNK // 2**20)  # (64M unless a record is larger)
        said = f"--chunk {chunk} is" if args.chunk is not None else f"the default chunk ({chunk // 2**20} MiB) is"
        raise CommandError(
            f"{said} smaller than one record ({layout.itemsize:,} bytes); "
            f"give at least {layout.itemsize}, e.g. --chunk {mib}M"
        )
    nulls = field_values(layout, args.null, "--null")
    fill = field_values(layout, args.fill, "--fill")
    fmt = None if to_stdout else _output_format(args)
    codec = None if to_stdout else codec_of(args, fmt)
    if not to_stdout:
        _check_format_options(args, fmt)
    src = open_stdin() if args.src == "-" else args.src
    if to_stdout:  # the format from the input's first bytes
        fmt = _stdout_format(args, src)
        codec = codec_of(args, fmt)
        _check_format_options(args, fmt)
    if args.copybook and getattr(args, "keep_signs", False):
        return convert_keep_signs(args, layout, fmt, fill)
    device = auto_device() if args.device == "auto" else args.device
    if fmt in ("parquet", "records"):  # Parquet out, or maybe in: imported before the conversion's clock starts
        import pyarrow.parquet  # noqa: F401
    interrupts = getattr(args, "interrupts", None) or Interrupts()
    warm_up(layout, device, "records" if fmt == "records" else "arrow", "convert", args.quiet)
    interrupts.check()  # a Ctrl-C that the compiler's callbacks swallowed (see Interrupts)
    options = dict(
        format=fmt,
        chunk_bytes=chunk,
        compression=codec,
        overwrite=args.overwrite,
        offset=args.offset,
        trailing=args.trailing,
        device=device,
        count=args.count,
    )
    if fmt == "records":
        options.update(fill=fill, truncate=args.truncate, cast=args.cast)
        options.update(_way_back_options(args, layout))
    else:
        options["nulls"] = nulls
    with _progress_bar(args.quiet) as bar:

        def progress(*done):
            interrupts.check()  # before the next chunk, and before the output is kept
            bar(*done)

        try:
            result = lo.convert(src, layout, sys.stdout.buffer if to_stdout else args.dst, progress=progress, **options)
        except lo.LayoutError as err:
            _hint_alignment(err, args, layout)
            if args.copybook:
                err.args = (in_flags(str(err)),)
            raise
        except lo.ConversionError as err:
            if args.copybook:  # the copybook's options, as this command spells them
                err.args = (in_flags(str(err)),)
            raise
        except KeyboardInterrupt as err:  # held while the output was put in place: it is there, whole
            args.kept = getattr(err, "_layouts_output_kept", None)
            raise
        args.kept = None if to_stdout else args.dst
    if getattr(args, "last_step", True):  # the output is in place: done, whatever Ctrl-C comes now
        interrupts.quiet = True
    if not args.quiet:
        # with --to -, standard output is the data: the summary goes to standard error
        print(f"converted {result} (on {device})", file=sys.stderr if to_stdout else sys.stdout)
        if args.copybook and args.invalid == "null" and fmt != "records" and not to_stdout:
            report_invalid_file(args.dst, layout, fmt)  # the count per field of invalid values made null
        said = sys.stderr if to_stdout else sys.stdout
        if args.copybook and fmt != "records" and src is args.src:  # values whose bytes come back otherwise
            records = lo.read_records(src, layout, args.offset, args.count, trailing=args.trailing)
            report_signs(records, layout, said)
            if has_floats(layout):
                report_floats(records, layout, said)
            report_uncovered(records, layout, said)
        elif args.copybook and fmt != "records" and (has_signs(layout) or has_floats(layout)):  # (read once)
            print(
                "  signs and IBM floats not checked (the records came from standard input): a packed or zoned "
                "value with another sign than its field's comes back with the field's, an IBM float "
                "normalized; convert the file itself to count them",
                file=said,
            )
    return 0


def _check_standard_streams(args):
    """``-`` names a standard stream that is open, and ``--to -`` no terminal."""
    check_open(args)
    if args.dst == "-" and sys.stdout.isatty():
        raise CommandError(
            "--to - writes binary data, and standard output is a terminal: pipe it into a "
            "program (| ...) or redirect it (> FILE)"
        )
    if args.src == "-" and sys.stdin.isatty():
        raise CommandError(
            "SRC -: standard input is a terminal, not data: pipe the input in (... | layouts convert - ...) "
            "or redirect it (< FILE), or give its path"
        )
    if args.dst == "-" and _same_file(1, 0 if args.src == "-" else args.src):
        raise CommandError(
            f"--to -: standard output is the input's file ({'standard input' if args.src == '-' else args.src}) "
            f"itself: the output would be read back as input, or overwrite it; redirect it to another file"
        )


def _same_file(fd, other):
    """Whether descriptor ``fd`` and ``other`` (a descriptor or a path) are one regular file."""
    import stat

    try:
        a = os.fstat(fd)
        b = os.fstat(other) if isinstance(other, int) else os.stat(other)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(a.st_mode) and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _output_format(args):
    """The output format: --format, else from DST's suffix; an unknown suffix is an error."""
    if args.format:
        return args.format
    if args.dst == "-":
        return None  # from the input: see _stdout_format
    suffix = os.path.splitext(args.dst)[1]
    fmt = SUFFIXES.get(suffix.lower())
    if fmt is None:
        known = "; ".join(f"{f} ({', '.join(s for s, g in SUFFIXES.items() if g == f)})" for f in FORMATS)
        said = f"suffix {suffix!r}" if suffix else "no suffix"
        raise CommandError(
            f"cannot tell the output format of {args.dst!r} from {said}; the formats are {known}: "
            f"name the file so, or pass --format {'|'.join(FORMATS)}"
        )
    return fmt


def _is_arrow_input(src):
    """Whether the input is Parquet or Arrow IPC: by its suffix, else by its first bytes
    (``PAR1``, ``ARROW1``, or an IPC stream's first message: ``0xFFFFFFFF`` and a
    metadata length that is a positive multiple of 8)."""
    if not isinstance(src, str):
        head = src.raw.head
    else:
        fmt = SUFFIXES.get(os.path.splitext(src)[1].lower())
        if fmt is not None:
            return fmt != "records"
        try:
            with open(src, "rb") as f:
                head = f.read(8)
        except OSError:
            return False  # the conversion says why it cannot be read
    if head[:4] == b"PAR1" or head[:6] == b"ARROW1":
        return True
    size = int.from_bytes(head[4:8], "little") if len(head) == 8 else 0
    return head[:4] == b"\xff\xff\xff\xff" and 0 < size < 1 << 24 and size % 8 == 0


def _stdout_format(args, src):
    """--to -: --format, else records for a Parquet/Arrow input and an Arrow IPC stream
    (``arrows``) for records."""
    return args.format or ("records" if _is_arrow_input(src) else "arrows")


def _check_format_options(args, fmt):
    """The options that apply one way only, against the output's format ``fmt``."""
    if fmt == "records" and args.null:
        raise CommandError(
            "--null turns values of records into nulls, but this writes records; "
            "use --fill NAME=VALUE for nulls of the Arrow input"
        )
    _check_way_back(args, fmt)
    if fmt != "records" and (args.fill or args.truncate or args.cast != "strict"):
        flag = "--fill" if args.fill else "--truncate" if args.truncate else "--cast"
        raise CommandError(
            f"{flag} applies when writing records (Arrow -> records), but this writes {fmt}; "
            f"use --null NAME=VALUE for sentinels in the records"
        )


def _check_way_back(args, fmt):
    """The options of Arrow -> records, refused in the other direction; --offset on the
    way back needs --header (it would be ignored), and --header needs --offset."""
    if fmt != "records":
        for flag, value in (
            ("--time-unit", args.time_unit),
            ("--drop-extra", args.drop_extra),
            ("--header", args.header),
        ):
            if value:
                raise CommandError(f"{flag} applies when writing records (Arrow -> records), but this writes {fmt}")
        return
    if args.count is not None:  # a usage error, as the flags above are the other way
        from .._convert import count_on_the_way_back

        raise CommandError(command_hints(count_on_the_way_back(args.count, None if args.src == "-" else args.src)))
    if args.header is None and args.offset:
        raise CommandError(
            f"--offset {args.offset} skips a header when reading records, but this writes records from Arrow data, "
            f"where it would do nothing; to write the {args.offset}-byte header before the records, add --header "
            f"FILE: the first {args.offset} bytes of FILE (the original records file) are copied"
        )
    if args.header is not None and args.offset <= 0:
        raise CommandError(
            f"--header {args.header} needs --offset N, the header's size in bytes: the first N bytes "
            f"of {args.header} are written before the records"
        )


def _way_back_options(args, layout):
    """``time_unit``, ``extra`` and ``header`` for :func:`layouts.convert` from --time-unit,
    --drop-extra and --header."""
    from .._arrow_in import TIME_UNITS

    units, names = {}, set(layout.names)
    for item in args.time_unit:
        name, eq, unit = item.rpartition("=")
        if unit not in TIME_UNITS + ("name",):
            raise CommandError(f"--time-unit {item!r}: the unit must be one of {', '.join(TIME_UNITS)} or name")
        if eq and name not in names:
            raise CommandError(f"--time-unit {item}: {name!r} is not a leaf field; the leaves are {', '.join(names)}")
        key = name if eq else None
        if key in units and units[key][0] != unit:
            raise CommandError(
                f"--time-unit {units[key][1]} and --time-unit {item} give "
                f"{'the default unit' if key is None else f'field {name!r}'} two units; "
                f"give one --time-unit {'UNIT' if key is None else f'{name}=UNIT'}"
            )
        units.setdefault(key, (unit, item))
    units = {key: unit for key, (unit, _) in units.items()}
    default = units.pop(None, None)
    if default is not None:
        fields = [f for f in layout.fields if f.dtype.kind in "iumM" and not f.enum and f.kind != "bool"]
        units = {**{f.name: default for f in fields}, **units}
    drop = [n.strip() for item in args.drop_extra for n in item.split(",") if n.strip()]
    return {"time_unit": units or None, "extra": drop or "error", "header": args.header}


def _hint_alignment(err, args, layout):
    """A --dtype list is packed (no padding); when the input's size does not divide into
    records, say so if a C compiler's alignment would give another record size."""
    if not args.dtype or "left over" not in str(err):
        return
    import numpy as np

    try:
        aligned = np.dtype(_dtype_spec(args.dtype), align=True)
    except (ValueError, SyntaxError, TypeError):
        return
    if aligned.itemsize != layout.itemsize:
        err.args = (
            f"{err}; note: a --dtype list is packed, {layout.itemsize} bytes with no padding, where a C "
            f"compiler aligns each field and gets {aligned.itemsize} bytes: for a C struct, use --struct "
            f"HEADER:NAME, or --dtype \"{{'names': [...], 'formats': [...], 'aligned': True}}\"",
        )


def _dtype_spec(text):
    import ast

    return ast.literal_eval(text) if text.lstrip()[:1] in "[{(" else text


class _progress_bar:
    """A tqdm bar on stderr when it is a terminal (and not --quiet); the progress callback."""

    def __init__(self, quiet):
        self.bar = None
        if not quiet and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(
                unit="B", unit_scale=True, unit_divisor=1000, desc="converting", file=sys.stderr, leave=False
            )

    def __call__(self, records, nbytes, total):
        if self.bar is not None:
            self.bar.total = total
            self.bar.set_postfix_str(f"{records:,} records", refresh=False)
            self.bar.update(nbytes - self.bar.n)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False


def warm_up(layout, device, direction, command, quiet):
    """Load (or, the first time on this machine, compile) the conversion kernels before
    the clock of the conversion starts, saying so on a terminal when they are compiled."""
    from .. import _backends

    if not _backends.get(device).host:
        return  # the GPU kernels are compiled per launch shape inside the conversion
    import numpy as np

    import layouts as lo

    from .._backends import compile_kernels, kernels_cached

    if not quiet and sys.stderr.isatty() and kernels_cached("cpu", reverse=direction == "records") is False:
        # none shipped for this platform and these versions, none cached here yet: compiled
        # once for this machine, each kernel named as it starts, the time it took said after
        say(
            command,
            "compiling the conversion kernels for this machine, once (no compiled copy for this "
            "platform and these versions; later runs load them from disk)",
        )
        t0 = time.perf_counter()

        def progress(name, i, n):
            print(f"\r  kernel {i + 1} of {n}: {name} ...", end="", file=sys.stderr, flush=True)

        compile_kernels("cpu", progress)
        print(file=sys.stderr)
        say(command, f"compiled the kernels in {time.perf_counter() - t0:.1f} s")
    try:
        soa = lo.AoS(np.zeros(1, layout.dtype), layout).to_soa(threads=1)
        if direction == "records":
            soa.to_aos(threads=1)
    except Exception:  # noqa: BLE001 - a zero record may not convert (unions both ways): compiled all the same
        pass


def _add_convert_options(p):
    """The record type's mapping to Arrow and the values that stand for nulls."""
    g = p.add_argument_group("record type <-> Arrow")
    g.add_argument(
        "--string",
        action="append",
        default=[],
        metavar="NAME",
        help="a char array (S<n>) field as text cut at the first NUL (repeatable)",
    )
    g.add_argument(
        "--bytes-as",
        action="append",
        default=[],
        metavar="[NAME=]MODE",
        help="char arrays as fixed (exact bytes, default), binary (cut at the first NUL) or string; "
        "NAME=MODE for one field (repeatable)",
    )
    g.add_argument(
        "--enum-as",
        choices=("dictionary", "int"),
        default="dictionary",
        help="C enums as dictionary columns of names (default) or plain integers",
    )
    g.add_argument(
        "--unions",
        action="append",
        default=[],
        type=assignment,
        metavar="UNION=MEMBER[,MEMBER]",
        help="keep these members of a C union (writing records back needs one per union; repeatable)",
    )
    g.add_argument("--flatten", action="store_true", help="nested structs as top-level 'a.b' columns")
    g = p.add_argument_group("nulls")
    g.add_argument(
        "--null",
        action="append",
        default=[],
        type=assignment,
        metavar="NAME=VALUE",
        help="records -> Arrow: this value of field NAME becomes null, e.g. qty=-1, px=nan (repeatable)",
    )
    g.add_argument(
        "--fill",
        action="append",
        default=[],
        type=assignment,
        metavar="NAME=VALUE",
        help="Arrow -> records: write VALUE where column NAME is null, e.g. qty=-1 (repeatable); with --stream, "
        "going back: TYPE.FIELD=VALUE",
    )
    g.add_argument(
        "--truncate",
        action="store_true",
        help="Arrow -> records: cut text longer than its char array instead of failing",
    )
    g.add_argument(
        "--cast",
        choices=("strict", "parse"),
        default="strict",
        help="Arrow -> records: parse: also convert text to numbers, booleans to integers "
        "(only when every value comes back unchanged)",
    )
    g = p.add_argument_group("Arrow columns -> records: units, extra columns, the header")
    g.add_argument(
        "--time-unit",
        action="append",
        default=[],
        metavar="[NAME=]UNIT",
        help="Arrow -> records: integer field NAME takes times as counts of UNIT (s, ms, us, ns), e.g. "
        "ts_ns=ns; UNIT name: from the end of the field's name (_ns, _us, _ms, _s); without NAME= "
        "for every such field (repeatable)",
    )
    g.add_argument(
        "--drop-extra",
        action="append",
        default=[],
        metavar="NAME[,NAME]",
        help="Arrow -> records: drop these columns, which the record type does not have (else an error)",
    )
    g.add_argument(
        "--header",
        metavar="FILE",
        help="Arrow -> records: write the first --offset bytes of FILE (e.g. the original records file) "
        "before the records",
    )


def add_parser(sub):
    """The ``convert`` subcommand and its options."""
    p = sub.add_parser(
        "convert",
        help="convert a legacy record file to Parquet/Feather/Arrow IPC, or back",
        description="Convert SRC chunk by chunk in bounded memory. Records -> Arrow when --to ends in "
        ".parquet/.pq, .feather, .arrow/.ipc/.arrows (or --format says so); Arrow/Parquet -> records "
        "when it ends in .bin, .dat, .rec, .records or .raw (or --format records). The output "
        "appears only when complete. --to - streams to standard output: an Arrow IPC stream, or "
        "records when SRC is Parquet/Arrow. --stream SPEC converts a record stream (a built-in: pcap, "
        "itch50; or a .toml description) to a directory of one table per record type, and back: "
        "layouts convert day.itch --stream itch50 --to day/; layouts convert day/ --stream itch50 "
        "--to day.itch",
    )
    p.add_argument("src", help="input file, or - for standard input")
    record = p.add_mutually_exclusive_group(required=True)
    record.add_argument("--struct", metavar="HEADER[:NAME]", help="the record type from a C header")
    record.add_argument("--dtype", metavar="SPEC", help="the record type as a NumPy dtype, e.g. \"[('a','<i4')]\"")
    record.add_argument(
        "--copybook",
        metavar="FILE",
        help="the record type from a COBOL copybook (EBCDIC text, packed and zoned decimals, "
        "binary, IBM floats; see docs/mainframe.md), e.g. layouts convert DATA --copybook x.cob "
        "--to out.parquet, and back: layouts convert out.parquet --copybook x.cob --to DATA2",
    )
    record.add_argument(
        "--stream",
        metavar="SPEC",
        help="a record stream (several record types, framed records, a header): a built-in (pcap, "
        "itch50) or a .toml description; SRC -> a directory DST/ of TYPE.parquet files, or a "
        "directory SRC/ -> the stream file DST, e.g. layouts convert day.itch --stream itch50 "
        "--to day/",
    )
    p.add_argument("--to", dest="dst", required=True, metavar="DST", help="output file, or - for standard output")
    p.add_argument("--format", choices=FORMATS, help="output format (default: from DST's suffix)")
    p.add_argument(
        "--device",
        choices=(*DEVICES, "auto"),
        default="auto",
        help="where to convert; auto: the GPU when a driver and numba-cuda find one, else the CPU",
    )
    p.add_argument(
        "--chunk",
        type=byte_size,
        default=None,
        metavar="SIZE",
        help="bytes of records per chunk (default 64M; at least one record)",
    )
    p.add_argument(
        "--offset",
        type=whole_number("bytes of header before the first record"),
        default=0,
        help="bytes of file header before the first record (from where SRC starts)",
    )
    p.add_argument(
        "--count",
        type=whole_number("records to convert"),
        default=None,
        metavar="N",
        help="convert N records (default: all after --offset); bytes after them (a trailer, extended "
        "headers) are not read as records",
    )
    p.add_argument(
        "--trailing",
        choices=("error", "ignore"),
        default="error",
        help="a partial record at the end: an error, or skipped with a warning",
    )
    p.add_argument(
        "--compression",
        metavar="CODEC",
        help="parquet: none, snappy (default), gzip, brotli, zstd, lz4; feather: lz4 (default), zstd, "
        "none; arrow: none (default), lz4, zstd",
    )
    p.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary line, no compile notice")
    _add_convert_options(p)
    add_c_options(p)
    add_copybook_options(p, convert=True)
    add_segment_options(p)
    add_variable_options(p)
    p.set_defaults(run=convert)
