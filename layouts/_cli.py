"""The ``layouts`` command: ``convert``, ``inspect``, ``demo`` and ``bench`` (docs/command.md).

Every failure is one line on stderr and exit status 1 (2 for a wrong command line, 130
for Ctrl-C); warnings are one line too. Heavy imports (NumPy, pyarrow, Numba) wait until
a subcommand needs them, so ``--help`` and ``--version`` answer at once, and a Ctrl-C
while they load is the same one line and status 130 as at any other moment.
"""

# only what the interpreter has loaded as it starts: the rest is imported where it is used, after main()
# has taken Ctrl-C over
import io
import os
import re
import sys
import time
import warnings

from ._formats import DEFAULT_CHUNK, FORMATS, SUFFIXES

__all__ = ["main"]

DEMO_HEADER = """\
/* tick.h: the record a (fictional) legacy feed handler writes, one after another */
#include <stdint.h>

#define NSYM 8

enum side { BUY = 0, SELL = 1 };

struct tick {
    int64_t   ts_ns;        /* nanoseconds since 1970 */
    double    px;
    int32_t   qty;          /* -1: missing */
    enum side side;
    char      sym[NSYM];    /* NUL-padded */
    float     pos[3];
    uint8_t   flag : 1,
              venue : 7;
};
"""

CODECS = {
    "parquet": ("none", "snappy", "gzip", "brotli", "zstd", "lz4"),
    "feather": ("none", "lz4", "zstd"),
    "arrow": ("none", "lz4", "zstd"),
    "arrows": ("none", "lz4", "zstd"),
    "records": (),
}
_CODEC_ALIASES = {"uncompressed": "none"}
_BYTES_MODES = ("fixed", "binary", "string")


class CommandError(Exception):
    """A wrong option value found after parsing: one line, exit status 2 (a usage error)."""


USAGE = 2  # the exit status of a wrong command line (argparse's, and the usual Unix tools')


def _version():
    from . import __version__  # layouts' one version: the installed distribution's

    return __version__


def _say(command, text):
    """One line on stderr, prefixed with the command: ``layouts convert: ...`` (``layouts: ...``
    before the command line is read)."""
    print(f"layouts {command}: {_one_line(text)}" if command else f"layouts: {_one_line(text)}", file=sys.stderr,
          flush=True)


def _one_line(text):
    return " ".join(str(text).split())


# --------------------------------------------------------------------------- demo


def demo_records(layout, n, seed=0):
    """Tick-like records of the demo header's layout, as the legacy program would write them."""
    import numpy as np
    import pyarrow as pa

    import layouts as lo

    rng = np.random.default_rng(seed)
    qty = rng.integers(1, 1000, n).astype(np.int32)
    qty[::50] = -1  # the feed's "missing" marker
    table = pa.table({
        "ts_ns": 1_763_803_800_000_000_000 + np.arange(n, dtype=np.int64) * 1_000_000,
        "px": 100 + rng.normal(0, 1, n).cumsum() * 0.01,
        "qty": qty,
        "side": pa.DictionaryArray.from_arrays(rng.integers(0, 2, n).astype(np.int32), ["BUY", "SELL"]),
        "sym": rng.choice(["AAPL", "MSFT", "NVDA", "BRK.B"], n),
        "pos": pa.FixedSizeListArray.from_arrays(rng.normal(size=3 * n).astype(np.float32), 3),
        "flag": (rng.random(n) < 0.1).astype(np.uint8),
        "venue": rng.integers(0, 128, n).astype(np.uint8),
    })
    return lo.SoA.from_arrow(table, layout).to_aos().array


def demo(args):
    """Write a C header and a legacy file laid out by it, convert the file to Parquet and
    back with ``layouts convert``, and show each step's command or code and its output."""
    import tempfile

    if args.dir is not None:
        os.makedirs(args.dir, exist_ok=True)
        return _demo_in(args, args.dir, kept=True)
    with tempfile.TemporaryDirectory(prefix="layouts-demo-") as tmp:
        return _demo_in(args, tmp, kept=False)


def _demo_in(args, where, kept):
    import pyarrow.parquet as pq

    import layouts as lo

    header, records, parquet, back = (os.path.join(where, name)
                                      for name in ("tick.h", "tick.bin", "tick.parquet", "back.bin"))
    import shlex

    q = shlex.quote
    with open(header, "w") as f:
        f.write(DEMO_HEADER)
    print(f"# 1. A C header, as a legacy program has it ({header}):\n")
    print(DEMO_HEADER)
    print(f"# 2. {args.records:,} records written the way that program writes them, in Python:\n")
    print(">>> import layouts as lo")
    print(f">>> layout = lo.Layout.from_c({header!r}, 'struct tick', bytes_as='string')")
    print(f">>> demo_records(layout, {args.records}).tofile({records!r})   # layouts._cli.demo_records\n")
    layout = lo.Layout.from_c(header, "struct tick", bytes_as="string")
    with open(records, "wb") as f:
        demo_records(layout, args.records).tofile(f)
    print("# 3. Its layout, as the C compiler places the fields (print(layout)):\n")
    print(layout)
    print("\n# 4. Records -> Parquet: sym as text, qty -1 as null:\n")
    there = _demo_command(args, ["convert", records, "--struct", f"{header}:tick", "--string", "sym", "--null",
                           "qty=-1", "--to", parquet, "--overwrite"])
    if there:
        return there
    table = pq.read_table(parquet)
    if _has_pandas():
        import pandas as pd

        print(f"\n>>> pq.read_table({parquet!r}).slice(0, 5).to_pandas(types_mapper=pd.ArrowDtype)")
        print(table.slice(0, 5).to_pandas(types_mapper=pd.ArrowDtype).to_string())
    else:
        print(f"\n>>> pq.read_table({parquet!r}).slice(0, 5)")
        print(table.slice(0, 5))
    print(f"qty nulls: {table.column('qty').null_count:,}")
    print("\n# 5. Parquet -> records: nulls back to -1:\n")
    again = _demo_command(args, ["convert", parquet, "--struct", f"{header}:tick", "--string", "sym", "--fill",
                           "qty=-1", "--to", back, "--overwrite"])
    if again:
        return again
    exact = _same_file(records, back)
    print(f"\n$ cmp {q(records)} {q(back)}")
    print(f"round trip bit-exact: {exact}")
    if kept:
        print(f"\nThe files are in {where}; run the commands above again, or change them.")
    else:
        print("\n(The files were in a temporary directory, now removed; `layouts demo --dir DIR` keeps them.)")
    return 0 if exact else 1


def _demo_command(demo_args, argv):
    """Show a ``layouts`` command line and run it in this process."""
    import shlex

    print("$ layouts " + " ".join(shlex.quote(a) for a in argv))
    args = _parser().parse_args(argv)
    args.interrupts, args.last_step = getattr(demo_args, "interrupts", None), False
    return convert(args)


def _same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def _has_pandas():
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def _c_options(args):
    return {"include_dirs": args.include, "defines": dict(_define(d) for d in args.define),
            "byteorder": args.byteorder, "pack": args.pack, "pointers": args.pointers}


def inspect(args):
    """Print the layout of one struct, or of every struct the source defines: a C header,
    or an ELF object, executable or shared library built with -g (read from its DWARF)."""
    if args.stream is not None:
        return inspect_stream(args)
    import layouts as lo
    from layouts._cdecl import dwarf_record_names, is_elf, record_names

    options = _c_options(args)
    if is_elf(args.source):  # never blocks: a FIFO or a device is refused by the C path, saying what it is
        names = [args.struct] if args.struct else dwarf_record_names(args.source)
        byteorder = None if args.byteorder == "native" else args.byteorder
        make = lambda name: lo.Layout.from_dwarf(args.source, name, byteorder=byteorder,  # noqa: E731
                                                 pointers=options["pointers"])
    else:
        compiler = {"auto": "auto", "none": None}.get(args.compiler, args.compiler)
        names = [args.struct] if args.struct else record_names(
            args.source, include_dirs=options["include_dirs"], defines=options["defines"], compiler=compiler)
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
        print("\n\n".join(str(layout) + "".join(f"\n  note: {n}" for n in (layout.c.notes if layout.c else ()))
                          for layout in layouts))
    return 0


def _define(text):
    name, eq, value = text.partition("=")
    return name, (value if eq else None)


def _size(text):
    import argparse

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)i?[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a size like 64M, 1G or 65536, got {text!r}")
    return int(float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()])


def _whole(what):
    """An argparse type: a whole number >= 0 of ``what``."""
    import argparse

    def number(text):
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number: give the {what}, 0 or more") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"{value} is negative: give the {what}, 0 or more")
        return value

    return number


def _assignment(text):
    """``NAME=VALUE`` (for --null, --fill, --unions, --bytes-as NAME=MODE)."""
    import argparse

    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


# ------------------------------------------------------------------ the record type


def _layout_of(args):
    """The Layout --struct or --dtype names, with --bytes-as/--string, --flatten,
    --enum-as, --unions and --pointers applied."""
    import layouts as lo

    default, per_field = _bytes_modes(args)
    if args.dtype:
        for flag, value, unset in (("--enum-as", args.enum_as, "dictionary"), ("--unions", args.unions, []),
                                   ("--pointers", args.pointers, "error")):
            if value != unset:
                raise CommandError(f"{flag} applies to C declarations (--struct HEADER:NAME), not to --dtype")
        import ast

        import numpy as np

        try:
            spec = ast.literal_eval(args.dtype) if args.dtype.lstrip()[:1] in "[{(" else args.dtype
            dtype = np.dtype(spec)
        except (ValueError, SyntaxError, TypeError) as err:
            raise CommandError(f"--dtype {args.dtype!r} is not a NumPy structured dtype: {err}") from None
        layout = lo.Layout.from_dtype(dtype, bytes_as=default, flatten=args.flatten)
    else:
        header, colon, name = args.struct.rpartition(":")
        if not colon or not header:
            header, name = args.struct, None
        layout = lo.Layout.from_c(header, name or None, bytes_as=default, flatten=args.flatten,
                                  enum_as=args.enum_as, unions=_unions(args.unions) or None, **_c_options(args))
    if per_field:
        modes = dict(layout.bytes_as)
        unknown = sorted(set(per_field) - set(modes))
        if unknown:
            raise CommandError(f"--string/--bytes-as name {unknown}, which are not char-array (S<n>) fields; "
                               f"those are {sorted(modes) or 'none'}")
        modes.update(per_field)
        layout = layout.replace(bytes_as=modes)
    return layout


def _bytes_modes(args):
    """``(mode for every S<n> field, {field: mode})`` from --bytes-as and --string."""
    default, per_field = "fixed", {}
    for item in args.bytes_as:
        name, eq, mode = item.rpartition("=")
        if mode not in _BYTES_MODES:
            raise CommandError(f"--bytes-as {item!r}: the mode must be one of {', '.join(_BYTES_MODES)}")
        if eq:
            per_field[name] = mode
        else:
            default = mode
    for name in args.string:
        per_field[name] = "string"
    return default, per_field


def _unions(items):
    """``{union: member or [members]}`` from --unions U=F[,G] options."""
    unions = {}
    for union, members in items:
        chosen = [m.strip() for m in members.split(",") if m.strip()]
        if not chosen:
            raise CommandError(f"--unions {union}= names no member; give --unions {union}=MEMBER[,MEMBER]")
        unions[union] = chosen[0] if len(chosen) == 1 else chosen
    return unions


def _values(layout, items, flag):
    """``{leaf: value}`` from --null/--fill NAME=VALUE, each value read as the leaf's type."""
    fields = {f.name: f for f in layout.fields}
    out = {}
    for name, text in items:
        field = fields.get(name)
        if field is None:
            raise CommandError(f"{flag} {name}={text}: {name!r} is not a leaf field; the leaves are "
                               f"{', '.join(fields)}")
        out[name] = _typed(field, text, flag)
    return out


def _typed(field, text, flag):
    """A command-line value as a Python value of the field's type."""
    import pyarrow as pa

    kind = field.dtype.kind
    try:
        if field.enum:
            return _integer(text) if re.fullmatch(r"[-+]?(0[xX][0-9a-fA-F]+|\d+)", text.strip()) else text
        if kind in "iu" and field.kind != "bool":
            return _integer(text)
        if kind == "f" or kind == "c":
            try:
                return float(text)
            except ValueError:
                raise ValueError("expected a number (nan and inf too)") from None
        if kind == "b" or field.kind == "bool":
            low = text.strip().lower()
            if low in ("true", "1", "yes"):
                return True
            if low in ("false", "0", "no"):
                return False
            raise ValueError("expected true or false")
        if kind in "SV":
            string = pa.types.is_string(field.arrow_type) or pa.types.is_large_string(field.arrow_type)
            return text if string else text.encode()
    except ValueError as err:
        raise CommandError(f"{flag} {field.name}={text}: not a value of field {field.name!r} "
                           f"({field.dtype.str}): {err}") from None
    return text  # datetimes ("2025-01-01T00:00", "NaT"), U<n> text: as NumPy reads them


def _integer(text):
    text = text.strip()
    try:
        return int(text, 10) if text.lstrip("+-").isdigit() else int(text, 0)  # 0x7fff, 0o17, 0b101
    except ValueError:
        raise ValueError("expected an integer (decimal, or hex as 0x...)") from None


# ------------------------------------------------------------------- convert


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
        raise CommandError(f"cannot tell the output format of {args.dst!r} from {said}; the formats are {known}: "
                           f"name the file so, or pass --format {'|'.join(FORMATS)}")
    return fmt


def _compression(args, fmt):
    """--compression checked against the output format (and what pyarrow was built with)."""
    if args.compression is None:
        return None
    codec = _CODEC_ALIASES.get(args.compression.lower(), args.compression.lower())
    allowed = CODECS[fmt]
    if not allowed:
        raise CommandError(f"--compression {args.compression}: {fmt} output is not compressed; "
                           f"leave --compression out")
    if codec not in allowed:
        raise CommandError(f"--compression {args.compression!r} is not a codec for {fmt} output, which takes "
                           f"{', '.join(allowed)}")
    if codec != "none":
        import pyarrow as pa

        if not pa.Codec.is_available(codec):
            raise CommandError(f"--compression {codec}: this pyarrow was built without {codec}; "
                               f"choose another of {', '.join(allowed)}")
    return codec


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


class _Stdin(io.RawIOBase):
    """Standard input with its first bytes read ahead (to tell its format) and then
    given back first."""

    def __init__(self, raw):
        super().__init__()
        self.raw, self.name = raw, "standard input"
        head = b""
        while len(head) < 8:
            more = raw.read(8 - len(head))
            if not more:
                break
            head += more
        self.head, self.ahead = head, head

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.ahead:
            n = min(len(buffer), len(self.ahead))
            buffer[:n], self.ahead = self.ahead[:n], self.ahead[n:]
            return n
        return self.raw.readinto(buffer)


def _open_stdin():
    """Standard input, buffered, its first bytes read ahead (``.raw.head``)."""
    return io.BufferedReader(_Stdin(sys.stdin.buffer), buffer_size=1 << 20)


def _stdout_format(args, src):
    """--to -: --format, else records for a Parquet/Arrow input and an Arrow IPC stream
    (``arrows``) for records."""
    return args.format or ("records" if _is_arrow_input(src) else "arrows")


def convert(args):
    """``layouts convert``: one file to another, streaming, with a progress bar."""
    if args.stream is not None:
        return convert_stream(args)
    import layouts as lo
    from ._backends import auto_device

    to_stdout = args.dst == "-"
    _check_open(args)
    if to_stdout and sys.stdout.isatty():
        raise CommandError("--to - writes binary data, and standard output is a terminal: pipe it into a "
                           "program (| ...) or redirect it (> FILE)")
    src = _open_stdin() if args.src == "-" else args.src
    fmt = _stdout_format(args, src) if to_stdout else _output_format(args)
    codec = _compression(args, fmt)
    layout = _layout_of(args)
    chunk = DEFAULT_CHUNK if args.chunk is None else args.chunk
    if chunk < layout.itemsize:
        raise CommandError(f"--chunk {chunk} is smaller than one record ({layout.itemsize} bytes); "
                           f"give at least {layout.itemsize}, e.g. --chunk 64M")
    if fmt == "records" and args.null:
        raise CommandError("--null turns values of records into nulls, but this writes records; "
                           "use --fill NAME=VALUE for nulls of the Arrow input")
    _check_way_back(args, fmt)
    if fmt != "records" and (args.fill or args.truncate or args.cast != "strict"):
        flag = "--fill" if args.fill else "--truncate" if args.truncate else "--cast"
        raise CommandError(f"{flag} applies when writing records (Arrow -> records), but this writes {fmt}; "
                           f"use --null NAME=VALUE for sentinels in the records")
    nulls = _values(layout, args.null, "--null")
    fill = _values(layout, args.fill, "--fill")
    device = auto_device() if args.device == "auto" else args.device
    if fmt in ("parquet", "records"):  # Parquet out, or maybe in: imported before the conversion's clock starts
        import pyarrow.parquet  # noqa: F401
    interrupts = getattr(args, "interrupts", None) or _Interrupts()
    warm_up(layout, device, "records" if fmt == "records" else "arrow", "convert", args.quiet)
    interrupts.check()  # a Ctrl-C that the compiler's callbacks swallowed (see _Interrupts)
    options = dict(format=fmt, chunk_bytes=chunk, compression=codec, overwrite=args.overwrite, offset=args.offset,
                   trailing=args.trailing, device=device, count=args.count)
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
            result = lo.convert(src, layout, sys.stdout.buffer if to_stdout else args.dst, progress=progress,
                                **options)
        except lo.LayoutError as err:
            _hint_alignment(err, args, layout)
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
    return 0


# ------------------------------------------------------------------- streams

# Options of one record type that mean nothing with --stream (the description has the types): (flag, attribute,
# the value when not given). --byteorder, --format and --compression are checked by direction.
_NOT_WITH_STREAM: "tuple[tuple[str, str, object], ...]" = (
    ("--string", "string", []), ("--bytes-as", "bytes_as", []), ("--enum-as", "enum_as", "dictionary"),
    ("--unions", "unions", []), ("--flatten", "flatten", False), ("--null", "null", []), ("--fill", "fill", []),
    ("--truncate", "truncate", False), ("--cast", "cast", "strict"), ("--time-unit", "time_unit", []),
    ("--drop-extra", "drop_extra", []), ("--header", "header", None), ("--chunk", "chunk", None),
    ("--offset", "offset", 0), ("--count", "count", None), ("--trailing", "trailing", "error"),
    ("--pack", "pack", None), ("--pointers", "pointers", "error"), ("-I", "include", []), ("-D", "define", []),
    ("--compiler", "compiler", "auto"),
)


def _refuse_with_stream(args, command):
    for flag, name, unset in _NOT_WITH_STREAM:
        if hasattr(args, name) and getattr(args, name) != unset:
            raise CommandError(f"{flag} does not apply with --stream: the record types and their fields come from "
                               f"the stream description; leave {flag} out")
    if getattr(args, "device", "auto") == "cuda":
        raise CommandError("--device cuda: record streams are read and written on the CPU; leave --device out")
    if command == "inspect" and args.byteorder != "native":
        raise CommandError(f"--byteorder {args.byteorder}: a stream's byte order comes from its description (or its "
                           f"magic number); leave --byteorder out")
    if command == "inspect" and args.struct is not None:
        raise CommandError(f"STRUCT {args.struct!r} does not apply with --stream: every record type of the stream "
                           f"is shown; leave it out")


def _stream_of(spec):
    """The description --stream names, its errors in the command's words."""
    from ._errors import LayoutError
    from ._stream.read import resolve

    if spec in ("rdw", "bdw"):
        raise LayoutError(f"--stream {spec}: the {spec} framing needs the record's fields: write a .toml description "
                          f"with framing = \"{spec}\" in its [[section]] and the fields in [section.types.record] "
                          f"(docs/streams.md), and pass --stream FILE.toml")
    try:
        return resolve(spec)
    except LayoutError as err:
        text = str(err).replace(", or pass a path to a .toml description or a Stream",
                                "; give --stream NAME or --stream PATH.toml (a description, see docs/streams.md)")
        raise LayoutError(f"--stream {spec}: {text}" if spec not in text else text) from err


def convert_stream(args):
    """``layouts convert --stream``: a stream file -> a directory of one table per record
    type, or such a directory -> the stream file."""
    _refuse_with_stream(args, "convert")
    if "-" in (args.src, args.dst):
        raise CommandError("--stream reads and writes files (a stream file, a directory of tables), not standard input "
                           "or output: give paths instead of -")
    stream = _stream_of(args.stream)
    interrupts = getattr(args, "interrupts", None) or _Interrupts()
    if os.path.isdir(args.src):
        return _stream_back(args, stream, interrupts)
    return _stream_out(args, stream, interrupts)


def _stream_out(args, stream, interrupts):
    import layouts as lo
    from ._stream.files import SUFFIX, table_bytes, write_dir

    if args.byteorder != "native":
        raise CommandError(f"--byteorder {args.byteorder}: a stream's byte order comes from its description (or its "
                           f"magic number); --byteorder applies on the way back (directory -> stream); leave it out")
    fmt = args.format or "parquet"
    if fmt not in SUFFIX:
        raise CommandError(f"--format {fmt}: --stream writes a directory of tables, one file per record type: "
                           f"--format {'|'.join(SUFFIX)}")
    if not os.path.isdir(args.dst) and not args.dst.endswith(os.sep) \
            and os.path.splitext(args.dst)[1].lower() in SUFFIXES:
        raise CommandError(f"--to {args.dst}: --stream writes a directory, one file per record type, and "
                           f"{args.dst!r} looks like a file name; give a directory, e.g. --to "
                           f"{os.path.splitext(args.dst)[0]}/ (or --to {args.dst}/ for a directory of that name)")
    codec = _compression(args, fmt)
    tables = lo.read_stream(args.src, stream)
    interrupts.check()
    try:
        written = write_dir(tables, stream, tables.order, args.dst, fmt, compression=codec, overwrite=args.overwrite,
                            check=interrupts.check)
    except KeyboardInterrupt as err:  # held while the files were moved into place: they are there, whole
        args.kept = getattr(err, "_layouts_output_kept", None)
        raise
    args.kept = args.dst
    interrupts.quiet = True  # the set is in place: done, whatever Ctrl-C comes now
    if not args.quiet:
        counts = table_bytes(stream, tables, tables.order)
        types = [t.name for s in stream.sections for t in s.types]
        n = sum(counts[t][0] for t in types)
        filled = ", ".join(f"{t} {counts[t][0]:,}" for t in types if counts[t][0])
        total = sum(b for _, b in counts.values())
        print(f"converted {args.src}: {n:,} records{f' ({filled})' if filled else ''}, {total:,} bytes -> "
              f"{args.dst} ({len(written)} files)")
    return 0


def _stream_back(args, stream, interrupts):
    import layouts as lo
    from ._errors import ConversionError, LayoutError
    from ._stream.files import READ_SUFFIXES, read_dir

    if args.compression is not None:
        raise CommandError("--compression applies when writing tables (stream -> directory); the stream is written "
                           "as it was: leave --compression out")
    if args.format is not None and args.format not in set(READ_SUFFIXES.values()):
        raise CommandError(f"--format {args.format}: going back (a directory -> the stream), --format chooses which "
                           f"files of the directory are read: {'|'.join(dict.fromkeys(READ_SUFFIXES.values()))}")
    if os.path.isdir(args.dst):
        raise CommandError(f"--to {args.dst} is a directory; going back (SRC {args.src} is a directory of tables), "
                           f"--to names the stream file to write")
    if os.path.lexists(args.dst) and (os.path.islink(args.dst) or not os.path.isfile(args.dst)):
        raise ConversionError(f"{args.dst} exists and is not a regular file (a link, a pipe or a device); it is never "
                              f"replaced: remove it, or give another --to")
    tables, order, files = read_dir(args.src, stream, args.format)
    if args.byteorder != "native":
        order = args.byteorder
    if stream.byteorder is not None and order is None:
        raise ConversionError(f"{args.src}: {stream.name}'s byte order comes from the file's magic number, and these "
                              f"files do not say which it was (they were not written by layouts convert --stream); "
                              f"pass --byteorder big or --byteorder little")
    interrupts.check()
    try:
        lo.write_stream(tables, stream, args.dst, order=order, overwrite=args.overwrite)
    except (ConversionError, LayoutError) as err:
        err.args = (re.sub(r"(?:table )?'(\w+)'", lambda m: f"{m.group(0)} ({files[m.group(1)]})"
                           if m.group(1) in files else m.group(0), str(err), count=1),)
        raise
    args.kept = args.dst
    interrupts.quiet = True
    if not args.quiet:
        n = sum(t.num_rows for name, t in tables.items() if not name.startswith("_"))
        print(f"converted {args.src} ({len(files)} files): {n:,} records, {os.path.getsize(args.dst):,} bytes -> "
              f"{args.dst}")
    return 0


def inspect_stream(args):
    """``layouts inspect SOURCE --stream SPEC``: the header's values and, per record type
    (and reserved table), its records and bytes."""
    import layouts as lo
    from ._stream.files import table_bytes

    _refuse_with_stream(args, "inspect")
    stream = _stream_of(args.stream)
    tables = lo.read_stream(args.source, stream)
    counts = table_bytes(stream, tables, tables.order)
    header = None
    if "_header" in tables:
        row = tables["_header"].to_arrow().drop_columns(["_offset"]).to_pylist()[0]
        header = row
    size = sum(b for _, b in counts.values())
    names = [t.name for s in stream.sections for t in s.types] + [n for n in counts if n.startswith("_")]
    if args.json:
        import json

        def plain(v):
            return v.hex() if isinstance(v, bytes) else v

        print(json.dumps({"source": args.source, "stream": stream.name, "order": tables.order, "bytes": size,
                          "header": None if header is None else {k: plain(v) for k, v in header.items()},
                          "tables": {n: {"records": counts[n][0], "bytes": counts[n][1]} for n in names}},
                         indent=2))
        return 0
    print(f"{args.source}: a {stream.name} stream, {size:,} bytes, byte order {tables.order}")
    if header is not None:
        width = max(map(len, header))
        print(f"header ({counts['_header'][1]:,} bytes):")
        for k, v in header.items():
            print(f"  {k:<{width}}  {v!r}" if isinstance(v, (bytes, str)) else f"  {k:<{width}}  {v}")
    rows = [(n, f"{counts[n][0]:,}", f"{counts[n][1]:,}") for n in names]
    rows.append(("total", f"{sum(counts[n][0] for n in names if n not in ('_header', '_gaps', '_blocks')):,}",
                 f"{size:,}"))
    w = [max(len(r[i]) for r in rows + [("table", "records", "bytes")]) for i in range(3)]
    print(f"{'table':<{w[0]}}  {'records':>{w[1]}}  {'bytes':>{w[2]}}")
    for r in rows:
        print(f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:>{w[2]}}")
    return 0


_CLOSED: "set[str]" = set()  # standard streams closed when the command started (see _standard_streams)


def _standard_streams():
    """Standard input, output or error closed as the command starts (``<&-``, ``>&-``,
    ``2>&-``), where Python sets ``sys.stdin``/``stdout``/``stderr`` to None. Each closed
    descriptor is opened on /dev/null, so that no file the command opens takes its
    number (what a library then writes to descriptor 1 or 2 would land in that file),
    and the Python stream is made over it: text for a closed stream goes nowhere, never
    to another stream or a file. Returns the names of the streams that were closed."""
    closed = set()
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        closed.add(name)
        try:
            os.fstat(fd)
        except OSError:  # the descriptor is closed: hold its number with /dev/null
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))
    return closed


def _check_open(args):
    """``-`` for a standard stream that was closed as the command started: an error that says so."""
    if args.dst == "-" and "stdout" in _CLOSED:
        raise CommandError("--to -: standard output is closed (>&-), so the data has nowhere to go; redirect it to a "
                           "file or a pipe, or give --to FILE")
    if args.src == "-" and "stdin" in _CLOSED:
        raise CommandError("SRC -: standard input is closed (<&-), so there is nothing to read; pipe the input in "
                           "(... | layouts convert - ...) or give its path")


def _check_way_back(args, fmt):
    """The options of Arrow -> records, refused in the other direction; --offset on the
    way back needs --header (it would be ignored), and --header needs --offset."""
    if fmt != "records":
        for flag, value in (("--time-unit", args.time_unit), ("--drop-extra", args.drop_extra),
                            ("--header", args.header)):
            if value:
                raise CommandError(f"{flag} applies when writing records (Arrow -> records), but this writes {fmt}")
        return
    if args.count is not None:  # a usage error, as the flags above are the other way
        from ._convert import count_on_the_way_back

        raise CommandError(command_hints(count_on_the_way_back(args.count, None if args.src == "-" else args.src)))
    if args.header is None and args.offset:
        raise CommandError(
            f"--offset {args.offset} skips a header when reading records, but this writes records from Arrow data, "
            f"where it would do nothing; to write the {args.offset}-byte header before the records, add --header "
            f"FILE: the first {args.offset} bytes of FILE (the original records file) are copied")
    if args.header is not None and args.offset <= 0:
        raise CommandError(f"--header {args.header} needs --offset N, the header's size in bytes: the first N bytes "
                           f"of {args.header} are written before the records")


def _way_back_options(args, layout):
    """``time_unit``, ``extra`` and ``header`` for :func:`layouts.convert` from --time-unit,
    --drop-extra and --header."""
    from ._arrow_in import TIME_UNITS

    units, names = {}, set(layout.names)
    for item in args.time_unit:
        name, eq, unit = item.rpartition("=")
        if unit not in TIME_UNITS + ("name",):
            raise CommandError(f"--time-unit {item!r}: the unit must be one of {', '.join(TIME_UNITS)} or name")
        if eq and name not in names:
            raise CommandError(f"--time-unit {item}: {name!r} is not a leaf field; the leaves are {', '.join(names)}")
        key = name if eq else None
        if key in units and units[key][0] != unit:
            raise CommandError(f"--time-unit {units[key][1]} and --time-unit {item} give "
                               f"{'the default unit' if key is None else f'field {name!r}'} two units; "
                               f"give one --time-unit {'UNIT' if key is None else f'{name}=UNIT'}")
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
        err.args = (f"{err}; note: a --dtype list is packed, {layout.itemsize} bytes with no padding, where a C "
                    f"compiler aligns each field and gets {aligned.itemsize} bytes: for a C struct, use --struct "
                    f"HEADER:NAME, or --dtype \"{{'names': [...], 'formats': [...], 'aligned': True}}\"",)


def _dtype_spec(text):
    import ast

    return ast.literal_eval(text) if text.lstrip()[:1] in "[{(" else text


class _progress_bar:
    """A tqdm bar on stderr when it is a terminal (and not --quiet); the progress callback."""

    def __init__(self, quiet):
        self.bar = None
        if not quiet and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(unit="B", unit_scale=True, unit_divisor=1000, desc="converting", file=sys.stderr,
                            leave=False)

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
    if device != "cpu":
        return  # the GPU kernels are compiled per launch shape inside the conversion
    import numpy as np

    import layouts as lo
    from ._backends import compile_kernels, kernels_cached

    if not quiet and sys.stderr.isatty() and kernels_cached("cpu", reverse=direction == "records") is False:
        # none shipped for this platform and these versions, none cached here yet: compiled
        # once for this machine, each kernel named as it starts, the time it took said after
        _say(command, "compiling the conversion kernels for this machine, once (no compiled copy for this "
                      "platform and these versions; later runs load them from disk)")
        t0 = time.perf_counter()

        def progress(name, i, n):
            print(f"\r  kernel {i + 1} of {n}: {name} ...", end="", file=sys.stderr, flush=True)

        compile_kernels("cpu", progress)
        print(file=sys.stderr)
        _say(command, f"compiled the kernels in {time.perf_counter() - t0:.1f} s")
    try:
        soa = lo.AoS(np.zeros(1, layout.dtype), layout).to_soa(threads=1)
        if direction == "records":
            soa.to_aos(threads=1)
    except Exception:  # noqa: BLE001 - a zero record may not convert (unions both ways): compiled all the same
        pass


# ---------------------------------------------------------- errors and warnings

# The library's hints name keyword arguments; the command's messages name its flags.
_FLAGS = {"fill": "--fill", "nulls": "--null", "bytes_as": "--bytes-as", "truncate": "--truncate",
          "overwrite": "--overwrite", "trailing": "--trailing", "pointers": "--pointers", "unions": "--unions",
          "enum_as": "--enum-as", "device": "--device", "flatten": "--flatten", "cast": "--cast",
          "chunk_bytes": "--chunk", "offset": "--offset", "compression": "--compression", "format": "--format",
          "count": "--count", "time_unit": "--time-unit", "header": "--header"}
_NAMES = "|".join(_FLAGS)


def command_hints(text):
    """A library message with its Python hints (``fill={'qty': value}``,
    ``truncate=True``, ``enum_as='int'``) written as the command's flags."""
    text = re.sub(r"Layout\.from_c\(\.\.\., ([^()]*)\)", r"\1", text)
    text = re.sub(r"\bextra=\[([^\[\]]*)\]", lambda m: "--drop-extra " + ",".join(re.findall(r"'([^']*)'", m.group(1))),
                  text)

    def mapping(m):
        items = re.findall(r"""['"]([^'"]*)['"]\s*:\s*('[^']*'|"[^"]*"|[^,}]+)""", m.group(2))
        return " ".join(f"{_FLAGS[m.group(1)]} {key}={_plain(value)}" for key, value in items) or m.group(0)

    text = re.sub(rf"\b({_NAMES})=\{{([^{{}}]*)\}}", mapping, text)
    text = re.sub(rf"\b({_NAMES})=True\b(\s*\(--[\w-]+\))?", lambda m: _FLAGS[m.group(1)], text)
    text = re.sub(rf"""\b({_NAMES})=['"]([^'"]*)['"]""", lambda m: f"{_FLAGS[m.group(1)]} {m.group(2)}", text)
    text = re.sub(rf"""\b({_NAMES})\[['"]([^'"]*)['"]\]""", lambda m: f"{_FLAGS[m.group(1)]} {m.group(2)}", text)
    text = re.sub(r"\b(offset|count)=(\d+)\b", lambda m: f"{_FLAGS[m.group(1)]} {m.group(2)}", text)
    return re.sub(rf"\b({_NAMES})=(?=\s|$)", lambda m: _FLAGS[m.group(1)], text)


def _plain(value):
    value = value.strip().strip("'\"")
    return "VALUE" if value == "value" else value


def _error_line(err):
    """The one line an exception becomes."""
    from ._errors import ConversionError, LayoutError

    text = command_hints(_one_line(err))
    fixes = getattr(err, "fixes", None)
    if fixes and len(getattr(err, "problems", ())) > 1:  # every flag the conversion needs, as one list
        from ._arrow_in import fix_text

        flags = " ".join(command_hints(fix_text({key: value})) for key, value in fixes.items())
        text = text.replace(f"to convert, pass {command_hints(fix_text(fixes))}", f"to convert, add {flags}")
    if isinstance(err, (LayoutError, ConversionError, CommandError)):
        return text
    if isinstance(err, OSError):
        return text if text else type(err).__name__
    return f"{type(err).__name__}: {text} (--debug shows where)"


def _show_warning(command, interrupts=None):
    def show(message, category, filename, lineno, file=None, line=None):
        if interrupts is not None and interrupts.count:
            return  # after a Ctrl-C: what the interrupted work left behind (files a module left open), not news
        _say(command, f"warning: {command_hints(str(message))}")

    return show


def _closed_pipe():
    """Standard output's reader went away (``| head``): end quietly, as a pipe does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush at exit
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE, as the shell reports a command a closed pipe ended


# ---------------------------------------------------------------- the parser


def _add_c_options(p):
    p.add_argument("--byteorder", choices=("native", "little", "big"), default="native",
                   help="byte order the records were written in")
    p.add_argument("--pack", type=int, help="maximum member alignment, as #pragma pack(N)")
    p.add_argument("--pointers", choices=("error", "int"), default="error",
                   help="pointer fields: an error, or unsigned integer columns")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="add a directory to the C preprocessor's include path")
    p.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="define a macro for the C preprocessor")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")


def _add_convert_options(p):
    """The record type's mapping to Arrow and the values that stand for nulls."""
    g = p.add_argument_group("record type <-> Arrow")
    g.add_argument("--string", action="append", default=[], metavar="NAME",
                   help="a char array (S<n>) field as text cut at the first NUL (repeatable)")
    g.add_argument("--bytes-as", action="append", default=[], metavar="[NAME=]MODE",
                   help="char arrays as fixed (exact bytes, default), binary (cut at the first NUL) or string; "
                        "NAME=MODE for one field (repeatable)")
    g.add_argument("--enum-as", choices=("dictionary", "int"), default="dictionary",
                   help="C enums as dictionary columns of names (default) or plain integers")
    g.add_argument("--unions", action="append", default=[], type=_assignment, metavar="UNION=MEMBER[,MEMBER]",
                   help="keep these members of a C union (writing records back needs one per union; repeatable)")
    g.add_argument("--flatten", action="store_true", help="nested structs as top-level 'a.b' columns")
    g = p.add_argument_group("nulls")
    g.add_argument("--null", action="append", default=[], type=_assignment, metavar="NAME=VALUE",
                   help="records -> Arrow: this value of field NAME becomes null, e.g. qty=-1, px=nan (repeatable)")
    g.add_argument("--fill", action="append", default=[], type=_assignment, metavar="NAME=VALUE",
                   help="Arrow -> records: write VALUE where column NAME is null, e.g. qty=-1 (repeatable)")
    g.add_argument("--truncate", action="store_true",
                   help="Arrow -> records: cut text longer than its char array instead of failing")
    g.add_argument("--cast", choices=("strict", "parse"), default="strict",
                   help="Arrow -> records: parse: also convert text to numbers, booleans to integers "
                        "(only when every value comes back unchanged)")
    g = p.add_argument_group("Arrow columns -> records: units, extra columns, the header")
    g.add_argument("--time-unit", action="append", default=[], metavar="[NAME=]UNIT",
                   help="Arrow -> records: integer field NAME takes times as counts of UNIT (s, ms, us, ns), e.g. "
                        "ts_ns=ns; UNIT name: from the end of the field's name (_ns, _us, _ms, _s); without NAME= "
                        "for every such field (repeatable)")
    g.add_argument("--drop-extra", action="append", default=[], metavar="NAME[,NAME]",
                   help="Arrow -> records: drop these columns, which the record type does not have (else an error)")
    g.add_argument("--header", metavar="FILE",
                   help="Arrow -> records: write the first --offset bytes of FILE (e.g. the original records file) "
                        "before the records")


def _parser_class():
    import argparse

    class _Parser(argparse.ArgumentParser):
        """argparse with one-line errors: ``layouts convert: error: ... (see --help)``, exit 2 (a
        wrong command line); an unknown option is named before the arguments it left missing."""

        def parse_known_args(self, args=None, namespace=None):
            self._argv = list(sys.argv[1:] if args is None else args)
            return super().parse_known_args(args, namespace)

        def error(self, message):
            unknown = _unknown_options(self, getattr(self, "_argv", []))
            if unknown and message.startswith(("the following arguments are required", "one of the arguments")):
                message = f"unrecognized arguments: {' '.join(unknown)}"  # the cause, not what it left missing
            elif unknown and not message.startswith("unrecognized arguments"):
                message = f"unrecognized arguments: {' '.join(unknown)}; and {message}"  # the unknown one first
            print(f"{self.prog}: error: {_one_line(message)} (see {self.prog} --help)", file=sys.stderr)
            raise SystemExit(USAGE)

    return _Parser


def _unknown_options(parser, argv):
    """The options in ``argv`` that ``parser`` does not know (``--bogus``, ``--bogus=1``)."""
    known = parser._option_string_actions
    return [a for a in argv if a.startswith("-") and a != "-" and a != "--" and a.split("=", 1)[0] not in known
            and not re.fullmatch(r"-\d+(\.\d*)?", a) and not (a[1:2] != "-" and a[:2] in known)  # -I/usr/include
            and not any(k.startswith(a.split("=", 1)[0]) for k in known if k.startswith("--"))]


def _parser():
    _Parser = _parser_class()
    parser = _Parser(prog="layouts", description="Records between AoS and Arrow SoA.")
    parser.add_argument("--version", action="version", version=f"layouts {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("bench", add_help=False,
                   help="reductions AoS vs SoA, conversion, break-even: tables, JSON, PNG (--full, --help)")
    p = sub.add_parser("demo", help="write a legacy file and its C header, convert it to Parquet and back",
                       description="Write a C header and a file of records laid out by it, convert the file to "
                                   "Parquet and back with `layouts convert`, and show every command and its "
                                   "output.")
    p.add_argument("--records", type=int, default=1_000_000, help="how many records (default 1,000,000)")
    p.add_argument("--dir", metavar="DIR", help="write and keep the files in DIR (default: a temporary directory)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    p.set_defaults(run=demo)


    p = sub.add_parser(
        "inspect", help="show a C struct's fields, offsets, types and padding (like pahole)",
        description="Lay out a C struct as the C compiler does and print, per field: offset, size, "
                    "C type, NumPy type and Arrow type, with every padding hole and the share of "
                    "bytes it wastes.")
    p.add_argument("source", help="a C header or source file, or an object/executable/shared library built "
                                  "with -g (its DWARF is read); with --stream, a stream file")
    p.add_argument("struct", nargs="?", help="'struct name', a tag or a typedef (default: every struct)")
    p.add_argument("--json", action="store_true", help="print the same as JSON")
    p.add_argument("--stream", metavar="SPEC",
                   help="SOURCE is a record stream of this description (a built-in: pcap, itch50; or a .toml "
                        "file): print its header and the records and bytes of each record type")
    p.add_argument("--compiler", default="auto", metavar="CC",
                   help="C compiler that lays the header out: auto ($CC, gcc, cc, clang; default), a name or "
                        "path, or none for the built-in pycparser/cffi path")
    _add_c_options(p)
    p.set_defaults(run=inspect)

    p = sub.add_parser(
        "convert", help="convert a legacy record file to Parquet/Feather/Arrow IPC, or back",
        description="Convert SRC chunk by chunk in bounded memory. Records -> Arrow when --to ends in "
                    ".parquet/.pq, .feather, .arrow/.ipc/.arrows (or --format says so); Arrow/Parquet -> records "
                    "when it ends in .bin, .dat, .rec, .records or .raw (or --format records). The output "
                    "appears only when complete. --to - streams to standard output: an Arrow IPC stream, or "
                    "records when SRC is Parquet/Arrow. --stream SPEC converts a record stream (a built-in: pcap, "
                    "itch50; or a .toml description) to a directory of one table per record type, and back: "
                    "layouts convert day.itch --stream itch50 --to day/; layouts convert day/ --stream itch50 "
                    "--to day.itch")
    p.add_argument("src", help="input file, or - for standard input")
    record = p.add_mutually_exclusive_group(required=True)
    record.add_argument("--struct", metavar="HEADER[:NAME]", help="the record type from a C header")
    record.add_argument("--dtype", metavar="SPEC", help="the record type as a NumPy dtype, e.g. \"[('a','<i4')]\"")
    record.add_argument("--stream", metavar="SPEC",
                        help="a record stream (several record types, framed records, a header): a built-in (pcap, "
                             "itch50) or a .toml description; SRC -> a directory DST/ of TYPE.parquet files, or a "
                             "directory SRC/ -> the stream file DST, e.g. layouts convert day.itch --stream itch50 "
                             "--to day/")
    p.add_argument("--to", dest="dst", required=True, metavar="DST", help="output file, or - for standard output")
    p.add_argument("--format", choices=FORMATS, help="output format (default: from DST's suffix)")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto",
                   help="where to convert; auto: the GPU when a driver and numba-cuda find one, else the CPU")
    p.add_argument("--chunk", type=_size, default=None, metavar="SIZE",
                   help="bytes of records per chunk (default 64M; at least one record)")
    p.add_argument("--offset", type=_whole("bytes of header before the first record"), default=0,
                   help="bytes of file header before the first record (from where SRC starts)")
    p.add_argument("--count", type=_whole("records to convert"), default=None, metavar="N",
                   help="convert N records (default: all after --offset); bytes after them (a trailer, extended "
                        "headers) are not read as records")
    p.add_argument("--trailing", choices=("error", "ignore"), default="error",
                   help="a partial record at the end: an error, or skipped with a warning")
    p.add_argument("--compression", metavar="CODEC",
                   help="parquet: none, snappy (default), gzip, brotli, zstd, lz4; feather: lz4 (default), zstd, "
                        "none; arrow: none (default), lz4, zstd")
    p.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary line, no compile notice")
    _add_convert_options(p)
    _add_c_options(p)
    p.set_defaults(run=convert)
    return parser


def bench(argv):
    """``layouts bench``: the benchmark suite of ``benchmarks/`` (``python -m benchmarks``)."""
    from .benchmarks.__main__ import main as suite, parser

    check = parser()

    def error(message):  # one line, as the other subcommands' usage errors (the suite's parser prints its usage)
        print(f"layouts bench: error: {_one_line(message)} (see layouts bench --help)", file=sys.stderr)
        raise SystemExit(USAGE)

    check.error = error
    check.parse_args(argv)  # a wrong command line stops here, before the suite starts
    return suite(argv)


class _Interrupts:
    """Ctrl-C (SIGINT) for the command: raises ``KeyboardInterrupt`` as Python's own
    handler does, and counts.

    A ``KeyboardInterrupt`` raised while Python code runs for C code can be printed and
    dropped there: as a callback (``Exception ignored on calling ctypes callback
    function``; Numba's compiler calls llvmlite's object cache that way as it compiles or
    loads kernels), or in an import that an extension module makes and reports with
    ``PyErr_Print``. A Ctrl-C then used to be lost (the command finished, status 0) with
    a traceback printed. Here such a drop prints nothing, and :meth:`check` (after the
    kernels load, and before each chunk) raises the ``KeyboardInterrupt`` again; once a
    Ctrl-C has come, what the interrupted work leaves behind (an object half made, whose
    ``__del__`` then fails) is not reported either. Once the command's outcome is decided
    (``quiet``), a Ctrl-C is only counted.
    """

    def __init__(self):
        self.count, self.quiet, self.installed = 0, False, False
        self.previous = self.hook = self.excepthook = None

    def __call__(self, signum, frame):
        self.count += 1
        if not self.quiet:
            raise KeyboardInterrupt

    def check(self):
        """Raise ``KeyboardInterrupt`` if a Ctrl-C came and was dropped on its way."""
        if self.count and not self.quiet:
            raise KeyboardInterrupt

    def install(self):
        """Take SIGINT over where Python's default handler has it: where it is ignored (a
        background job) or another handler has it, it is left as it is."""
        import signal
        import threading

        self.hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        self.excepthook, sys.excepthook = sys.excepthook, self._printed
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.previous = signal.signal(signal.SIGINT, self)
            self.installed = True

    def _unraisable(self, info):
        if not (self.count or issubclass(info.exc_type, KeyboardInterrupt)):
            self.hook(info)

    def _printed(self, kind, value, tb):
        if not (self.count or issubclass(kind, KeyboardInterrupt)):
            self.excepthook(kind, value, tb)

    def finish(self, exiting):
        """The command is over. ``exiting``: the process ends next, and SIGINT is ignored
        until it has (see :func:`main`); else SIGINT's handler is given back."""
        import signal

        self.quiet = True
        if self.excepthook is not None:  # an uncaught exception from here on (--debug) is shown as ever
            sys.excepthook, self.excepthook = self.excepthook, None
        if exiting:
            _release_kernel_threads()
            _forget_caught_interrupt()
            if self.installed or signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                try:  # (not installed: a Ctrl-C came as it was)
                    signal.signal(signal.SIGINT, signal.SIG_IGN)
                except ValueError:  # not the main thread
                    pass
            return
        if self.installed:
            self.installed = False
            signal.signal(signal.SIGINT, self.previous)  # one still pending is counted here (quiet)
        sys.unraisablehook = self.hook


def _release_kernel_threads():
    """Tell the CPU kernels' pool threads to end once idle. They are not daemons, so the
    interpreter waits for them as it exits; a Ctrl-C that lands while the pool starts a
    thread leaves one that the pool does not know of and that nothing would tell to end,
    and the exit would wait for it forever (kernels/threads.py: ``_Chunks.run`` submits,
    ``Thread.start`` is interrupted before the pool records the thread)."""
    threads = sys.modules.get(f"{__package__}.kernels.threads")
    if threads is not None:
        threads.shutdown(wait=False)  # each worker passes the stop marker on to the next, known or not


def _forget_caught_interrupt():
    """Clear CPython's note of an uncaught ``KeyboardInterrupt``: ``exec()`` of source text
    (dataclasses, namedtuples and Numba make classes and functions that way) sets it when
    a ``KeyboardInterrupt`` leaves the text, and nothing clears it when the interrupt is
    then caught, so the interpreter ended a command that had handled its Ctrl-C (130) by
    killing itself with SIGINT (``python -m layouts``: status -2). The status is main's."""
    try:
        import ctypes

        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0
    except (ImportError, AttributeError, ValueError, OSError):  # another interpreter: nothing to clear
        pass


class _Run:
    """What the message for a Ctrl-C needs to know about the command it ended."""

    command = args = None
    debug = False

    def interrupted(self):
        dst, kept = getattr(self.args, "dst", None), getattr(self.args, "kept", None)
        if kept:
            return f"interrupted after the output was complete: {kept} was written whole and kept"
        if self.command != "convert" or dst == "-":
            return "interrupted"
        return "interrupted; no output was written"


def main(argv=None):
    """Run the command line ``argv`` (default: the process's arguments); returns the exit
    status: 0, 1 for an error, 2 for a wrong command line, 130 for Ctrl-C, 141 when standard
    output's reader left.

    A Ctrl-C at any moment, while the modules load too, ends the command with one line
    (``layouts convert: interrupted; no output was written``) and 130; ``--debug`` shows
    its traceback instead. With ``argv=None`` (the ``layouts`` program and ``python -m
    layouts``) SIGINT is ignored from the moment the status is decided until the process
    has exited: while Python shuts down it restores SIGINT's default action, and a Ctrl-C
    there would kill the process (status -2) after the command was done.
    """
    exiting = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    _CLOSED.update(_standard_streams())
    interrupts, run = _Interrupts(), _Run()
    try:
        try:
            interrupts.install()
            return _command(argv, interrupts, run)
        except KeyboardInterrupt:
            interrupts.quiet = True
            if run.debug:
                raise
            _say(run.command, run.interrupted())
            return 130
    except KeyboardInterrupt:  # a second Ctrl-C while the first one was reported
        interrupts.quiet = True
        if run.debug:
            raise
        return 130
    finally:
        interrupts.quiet = True  # first: nothing raises from here on
        interrupts.finish(exiting)


def _wraps_interrupt(err):
    """Whether ``err`` was raised because of a ``KeyboardInterrupt`` (its cause or context)."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def _command(argv, interrupts, run):
    if argv[:1] in (["convert"], ["inspect"], ["demo"], ["bench"]):  # for a Ctrl-C before the line is read
        run.command = argv[0]
    if argv[:1] == ["bench"]:  # the suite parses its own options
        return bench(argv[1:])
    if not argv:  # bare `layouts`: the help, not an error
        _parser().print_help()
        return 0
    args = _parser().parse_args(argv)
    run.command, run.debug, run.args = args.command, getattr(args, "debug", False), args
    args.interrupts = interrupts
    if getattr(args, "records", 1) < 1:
        print(f"layouts demo: error: --records must be >= 1, got {args.records} (see layouts demo --help)",
              file=sys.stderr)
        return USAGE
    command, debug = args.command, run.debug
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = _show_warning(command, interrupts)
        try:
            return args.run(args)
        except BrokenPipeError:
            interrupts.quiet = True
            return _closed_pipe()
        except Exception as err:  # noqa: BLE001 - one line, never a traceback (--debug shows it)
            if _wraps_interrupt(err):  # Python 3.11 wraps one raised in __set_name__ (as a class is made)
                raise KeyboardInterrupt from err
            if debug:
                raise
            interrupts.quiet = True  # the outcome is decided: a Ctrl-C now would only add a line
            _say(command, f"error: {_error_line(err)}")
            return USAGE if isinstance(err, CommandError) else 1


if __name__ == "__main__":
    sys.exit(main())
