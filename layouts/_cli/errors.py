"""What the command says when something is wrong: one line on stderr, prefixed with the
command, and the exit status (2 for a wrong command line, 1 for a failure, 141 when standard
output's reader left). The library's hints, written for Python callers, become the command's
flags here."""

import os
import re
import sys


class CommandError(Exception):
    """A wrong option value found after parsing: one line, exit status 2 (a usage error)."""


USAGE = 2  # the exit status of a wrong command line (argparse's, and the usual Unix tools')


def say(command, text):
    """One line on stderr, prefixed with the command: ``layouts convert: ...`` (``layouts: ...``
    before the command line is read)."""
    print(
        f"layouts {command}: {one_line(text)}" if command else f"layouts: {one_line(text)}", file=sys.stderr, flush=True
    )


def one_line(text):
    return " ".join(str(text).split())


# The library's hints name keyword arguments; the command's messages name its flags.
_FLAGS = {
    "fill": "--fill",
    "nulls": "--null",
    "bytes_as": "--bytes-as",
    "truncate": "--truncate",
    "overwrite": "--overwrite",
    "trailing": "--trailing",
    "pointers": "--pointers",
    "unions": "--unions",
    "enum_as": "--enum-as",
    "device": "--device",
    "flatten": "--flatten",
    "cast": "--cast",
    "chunk_bytes": "--chunk",
    "offset": "--offset",
    "compression": "--compression",
    "format": "--format",
    "count": "--count",
    "time_unit": "--time-unit",
    "header": "--header",
    "codepage": "--codepage",
    "floating_point": "--floating-point",
}


_NAMES = "|".join(_FLAGS)


def command_hints(text):
    """A library message with its Python hints (``fill={'qty': value}``,
    ``truncate=True``, ``enum_as='int'``) written as the command's flags."""
    text = re.sub(r"Layout\.from_c\(\.\.\., ([^()]*)\)", r"\1", text)
    text = re.sub(
        r"\bextra=\[([^\[\]]*)\]", lambda m: "--drop-extra " + ",".join(re.findall(r"'([^']*)'", m.group(1))), text
    )

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


def error_line(err):
    """The one line an exception becomes."""
    from .._errors import ConversionError, LayoutError

    text = command_hints(one_line(err))
    fixes = getattr(err, "fixes", None)
    if fixes and len(getattr(err, "problems", ())) > 1:  # every flag the conversion needs, as one list
        from .._errors import fix_text

        flags = " ".join(command_hints(fix_text({key: value})) for key, value in fixes.items())
        text = text.replace(f"to convert, pass {command_hints(fix_text(fixes))}", f"to convert, add {flags}")
    if isinstance(err, (LayoutError, ConversionError, CommandError)):
        return text
    if isinstance(err, OSError):
        return text if text else type(err).__name__
    return f"{type(err).__name__}: {text} (--debug shows where)"


def show_warning(command, interrupts=None):
    def show(message, category, filename, lineno, file=None, line=None):
        if interrupts is not None and interrupts.count:
            return  # after a Ctrl-C: what the interrupted work left behind (files a module left open), not news
        say(command, f"warning: {command_hints(str(message))}")

    return show


def closed_pipe():
    """Standard output's reader went away (``| head``): end quietly, as a pipe does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush at exit
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE, as the shell reports a command a closed pipe ended


def parser_class():
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
            prog = self.prog
            argv = getattr(self, "_argv", [])
            if argv and argv[0] in _subcommands(self):  # the command's extra arguments come back to the top
                prog = f"{self.prog} {argv[0]}"
            print(f"{prog}: error: {one_line(message)} (see {prog} --help)", file=sys.stderr)
            raise SystemExit(USAGE)

    return _Parser


def _subcommands(parser):
    """The names of ``parser``'s subcommands (none for a subcommand's own parser)."""
    import argparse

    return {name for a in parser._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices}


def _unknown_options(parser, argv):
    """The options in ``argv`` that ``parser`` does not know (``--bogus``, ``--bogus=1``)."""
    known = parser._option_string_actions
    return [
        a
        for a in argv
        if a.startswith("-")
        and a != "-"
        and a != "--"
        and a.split("=", 1)[0] not in known
        and not re.fullmatch(r"-\d+(\.\d*)?", a)
        and not (a[1:2] != "-" and a[:2] in known)  # -I/usr/include
        and not any(k.startswith(a.split("=", 1)[0]) for k in known if k.startswith("--"))
    ]
