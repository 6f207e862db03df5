"""Options shared by the subcommands: argparse value types, the C front-end's options
(``-I``, ``-D``, ``--byteorder``, ``--pack``, ``--pointers``) and the record type that
``--struct``/``--dtype`` and the mapping options name, with values read as a field's type."""

import re

from .errors import CommandError

_BYTES_MODES = ("fixed", "binary", "string")


def c_options(args):
    return {
        "include_dirs": args.include,
        "defines": dict(_define(d) for d in args.define),
        "byteorder": args.byteorder,
        "pack": args.pack,
        "pointers": args.pointers,
    }


def _define(text):
    name, eq, value = text.partition("=")
    return name, (value if eq else None)


def byte_size(text):
    import argparse

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)i?[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a size like 64M, 1G or 65536, got {text!r}")
    return int(float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()])


def whole_number(what):
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


def assignment(text):
    """``NAME=VALUE`` (for --null, --fill, --unions, --bytes-as NAME=MODE)."""
    import argparse

    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


def add_c_options(p):
    p.add_argument(
        "--byteorder",
        choices=("native", "little", "big"),
        default="native",
        help="byte order the records were written in",
    )
    p.add_argument("--pack", type=int, help="maximum member alignment, as #pragma pack(N)")
    p.add_argument(
        "--pointers",
        choices=("error", "int"),
        default="error",
        help="pointer fields: an error, or unsigned integer columns",
    )
    p.add_argument(
        "-I",
        dest="include",
        action="append",
        default=[],
        metavar="DIR",
        help="add a directory to the C preprocessor's include path",
    )
    p.add_argument(
        "-D",
        dest="define",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="define a macro for the C preprocessor",
    )
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")


def layout_of(args):
    """The Layout --struct or --dtype names, with --bytes-as/--string, --flatten,
    --enum-as, --unions and --pointers applied."""
    import layouts as lo

    default, per_field = _bytes_modes(args)
    if args.dtype:
        for flag, value, unset in (
            ("--enum-as", args.enum_as, "dictionary"),
            ("--unions", args.unions, []),
            ("--pointers", args.pointers, "error"),
        ):
            if value != unset:
                raise CommandError(f"{flag} applies to C declarations (--struct HEADER:NAME), not to --dtype")
        import ast

        import numpy as np

        try:
            spec = ast.literal_eval(args.dtype) if args.dtype.lstrip()[:1] in "[{(" else args.dtype
            dtype = np.dtype(spec)
        except (ValueError, SyntaxError, TypeError) as err:
            raise CommandError(f"--dtype {args.dtype!r} is not a NumPy structured dtype: {err}") from None
        if dtype.names is None:
            raise CommandError(
                f"--dtype {args.dtype!r} has no named fields (it is one {dtype} value); records need names: "
                f"--dtype \"[('value', '{dtype.str}')]\""
            )
        layout = lo.Layout.from_dtype(dtype, bytes_as=default, flatten=args.flatten)
    else:
        header, colon, name = args.struct.rpartition(":")
        if not colon or not header:
            header, name = args.struct, None
        layout = lo.Layout.from_c(
            header,
            name or None,
            bytes_as=default,
            flatten=args.flatten,
            enum_as=args.enum_as,
            unions=_unions(args.unions) or None,
            **c_options(args),
        )
    if per_field:
        modes = dict(layout.bytes_as)
        unknown = sorted(set(per_field) - set(modes))
        if unknown:
            raise CommandError(
                f"--string/--bytes-as name {unknown}, which are not char-array (S<n>) fields; "
                f"those are {sorted(modes) or 'none'}"
            )
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


def field_values(layout, items, flag, owner=""):
    """``{leaf: value}`` from --null/--fill NAME=VALUE, each value read as the leaf's type;
    ``owner``: what the command line writes before NAME (``--fill TYPE.FIELD``: ``"TYPE."``)."""
    fields = {f.name: f for f in layout.fields}
    out = {}
    for name, text in items:
        field = fields.get(name)
        if field is None:
            raise CommandError(
                f"{flag} {owner}{name}={text}: {name!r} is not a leaf field; the leaves are {', '.join(fields)}"
            )
        out[name] = _typed(field, text, f"{flag} {owner}")
    return out


def _typed(field, text, written):
    """A command-line value as a Python value of the field's type; ``written``: what comes
    before the field's name on the command line (``"--fill "``, ``"--fill TYPE."``)."""
    import pyarrow as pa

    kind = field.dtype.kind
    try:
        if field.encoding is not None:  # a mainframe field: a value of its Arrow type, not of its bytes
            return _mainframe_value(field, text)
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
        raise CommandError(
            f"{written}{field.name}={text}: not a value of field {field.name!r} "
            f"({field.arrow_type if field.encoding is not None else field.dtype.str}): {err}"
        ) from None
    return text  # datetimes ("2025-01-01T00:00", "NaT"), U<n> text: as NumPy reads them


def _mainframe_value(field, text):
    """A value of a mainframe field's Arrow type (decimal128, int64, float, string) that
    fits it (a ValueError says why not)."""
    import decimal

    import pyarrow as pa

    arrow_type = field.arrow_type
    if pa.types.is_decimal(arrow_type):
        try:
            value = decimal.Decimal(text.strip())
        except decimal.InvalidOperation:
            raise ValueError("expected a decimal number, e.g. 0 or -12.50") from None
        try:
            exact = value.is_finite() and value == value.quantize(decimal.Decimal(1).scaleb(-arrow_type.scale))
            if exact:
                pa.scalar(value, type=arrow_type)
        except (pa.ArrowInvalid, decimal.InvalidOperation):
            exact = False
        if not exact:
            raise ValueError(
                f"expected a number of at most {arrow_type.precision} digits, {arrow_type.scale} of them after the point"
            )
        return value
    if pa.types.is_integer(arrow_type):
        return _integer(text)
    if pa.types.is_floating(arrow_type):
        try:
            return float(text)
        except ValueError:
            raise ValueError("expected a number") from None
    return text


def _integer(text):
    text = text.strip()
    try:
        return int(text, 10) if text.lstrip("+-").isdigit() else int(text, 0)  # 0x7fff, 0o17, 0b101
    except ValueError:
        raise ValueError("expected an integer (decimal, or hex as 0x...)") from None


CODECS = {
    "parquet": ("none", "snappy", "gzip", "brotli", "zstd", "lz4"),
    "feather": ("none", "lz4", "zstd"),
    "arrow": ("none", "lz4", "zstd"),
    "arrows": ("none", "lz4", "zstd"),
    "records": (),
}


_CODEC_ALIASES = {"uncompressed": "none"}


def codec_of(args, fmt):
    """--compression checked against the output format (and what pyarrow was built with)."""
    if args.compression is None:
        return None
    codec = _CODEC_ALIASES.get(args.compression.lower(), args.compression.lower())
    allowed = CODECS[fmt]
    if not allowed:
        raise CommandError(f"--compression {args.compression}: {fmt} output is not compressed; leave --compression out")
    if codec not in allowed:
        raise CommandError(
            f"--compression {args.compression!r} is not a codec for {fmt} output, which takes {', '.join(allowed)}"
        )
    if codec != "none":
        import pyarrow as pa

        if not pa.Codec.is_available(codec):
            raise CommandError(
                f"--compression {codec}: this pyarrow was built without {codec}; choose another of {', '.join(allowed)}"
            )
    return codec
