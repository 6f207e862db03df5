"""``layouts bench``: the benchmark suite of ``benchmarks/``, which parses its own options."""

import sys

from .errors import USAGE, one_line


def bench(argv):
    """``layouts bench``: the benchmark suite of ``benchmarks/`` (``python -m benchmarks``)."""
    from ..benchmarks.__main__ import main as suite
    from ..benchmarks.__main__ import parser

    check = parser()

    def error(message):  # one line, as the other subcommands' usage errors (the suite's parser prints its usage)
        print(f"layouts bench: error: {one_line(message)} (see layouts bench --help)", file=sys.stderr)
        raise SystemExit(USAGE)

    check.error = error
    check.parse_args(argv)  # a wrong command line stops here, before the suite starts
    return suite(argv)


def add_parser(sub):
    """The ``bench`` subcommand: its options are the suite's own (``layouts bench --help``)."""
    sub.add_parser(
        "bench",
        add_help=False,
        help="reductions AoS vs SoA, conversion, break-even: tables, JSON, PNG (--full, --help)",
    )
