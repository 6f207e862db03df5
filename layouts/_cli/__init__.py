"""The ``layouts`` command: ``convert``, ``inspect``, ``demo`` and ``bench`` (docs/command.md).

Every failure is one line on stderr and exit status 1 (2 for a wrong command line, 130
for Ctrl-C); warnings are one line too. Heavy imports (NumPy, pyarrow, Numba) wait until
a subcommand needs them, so ``--help`` and ``--version`` answer at once, and a Ctrl-C
while they load is the same one line and status 130 as at any other moment.

One module per subcommand (:mod:`.convert`, :mod:`.inspect`, :mod:`.demo`, :mod:`.bench`;
the ``--stream`` forms of convert and inspect in :mod:`.streams`), each with its options
(``add_parser``); shared pieces: :mod:`.errors` (one-line errors and usage),
:mod:`.interrupts` (Ctrl-C), :mod:`.options` (option types, the record type),
:mod:`.stdio` (the standard streams). Here: :func:`main`, the parser, the exit statuses.
"""

# only what the interpreter has loaded as it starts: the rest is imported where it is used, after main()
# has taken Ctrl-C over
import sys
import warnings

from . import bench, convert, demo, inspect
from .convert import warm_up
from .demo import demo_records
from .errors import USAGE, CommandError, closed_pipe, command_hints, error_line, parser_class, say, show_warning
from .interrupts import Interrupts, Run, wraps_interrupt
from .stdio import CLOSED, standard_streams

# warm_up is looked up here by the convert subcommand as it runs, so that a test can replace it
__all__ = ["main", "USAGE", "CommandError", "command_hints", "demo_records", "warm_up"]


def _version():
    from .. import __version__  # layouts' one version: the installed distribution's

    return __version__


def build_parser():
    """The command line's parser: each subcommand adds its own options."""
    _Parser = parser_class()
    parser = _Parser(prog="layouts", description="Records between AoS and Arrow SoA.")
    parser.add_argument("--version", action="version", version=f"layouts {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for subcommand in (bench, demo, inspect, convert):  # the order --help lists them in
        subcommand.add_parser(sub)
    return parser


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
    CLOSED.update(standard_streams())
    interrupts, run = Interrupts(), Run()
    try:
        try:
            interrupts.install()
            return _command(argv, interrupts, run)
        except KeyboardInterrupt:
            interrupts.quiet = True
            if run.debug:
                raise
            say(run.command, run.interrupted("terminated" if interrupts.terminated else "interrupted"))
            return 143 if interrupts.terminated else 130
    except KeyboardInterrupt:  # a second Ctrl-C while the first one was reported
        interrupts.quiet = True
        if run.debug:
            raise
        return 143 if interrupts.terminated else 130
    finally:
        interrupts.quiet = True  # first: nothing raises from here on
        interrupts.finish(exiting)


def _command(argv, interrupts, run):
    if argv[:1] in (["convert"], ["inspect"], ["demo"], ["bench"]):  # for a Ctrl-C before the line is read
        run.command = argv[0]
    if argv[:1] == ["bench"]:  # the suite parses its own options
        return bench.bench(argv[1:])
    if not argv:  # bare `layouts`: the help, not an error
        build_parser().print_help()
        return 0
    args = build_parser().parse_args(argv)
    run.command, run.debug, run.args = args.command, getattr(args, "debug", False), args
    args.interrupts = interrupts
    if getattr(args, "records", 1) < 1:
        print(
            f"layouts demo: error: --records must be >= 1, got {args.records} (see layouts demo --help)",
            file=sys.stderr,
        )
        return USAGE
    command, debug = args.command, run.debug
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show_warning(command, interrupts)
        try:
            return args.run(args)
        except BrokenPipeError:
            interrupts.quiet = True
            return closed_pipe()
        except Exception as err:  # noqa: BLE001 - one line, never a traceback (--debug shows it)
            # Python 3.11 wraps one raised in __set_name__ (as a class is made); and one that came while a
            # module loaded can leave it half made, whose next use fails (pandas: "partially initialized
            # module"): after a Ctrl-C (or SIGTERM), an error is its consequence
            if wraps_interrupt(err) or (interrupts.count and not interrupts.quiet):
                raise KeyboardInterrupt from err
            if debug:
                raise
            interrupts.quiet = True  # the outcome is decided: a Ctrl-C now would only add a line
            say(command, f"error: {error_line(err)}")
            return USAGE if isinstance(err, CommandError) else 1
