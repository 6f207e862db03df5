"""The ``layouts`` program (``python -m layouts`` too): :func:`main` loads the command
(:mod:`layouts._cli`) and runs it.

The command takes Ctrl-C over as it starts (:func:`layouts._cli.main`), and a Ctrl-C
from then on ends it with one line and status 130. One that comes while the command's
own modules load, before that, ends it the same way here, not with Python's traceback
and a death by SIGINT.

A command that a Ctrl-C or SIGTERM ended has unwound (its outputs removed, its threads
told to stop) when it returns; the process then ends at once, without the interpreter's
finalisation, which frees memory that a thread stopped in mid-work may still touch (CI saw
one such exit end in SIGSEGV after the "interrupted" line).
"""

import os
import sys

_SUBCOMMANDS = ("convert", "inspect", "demo", "bench")


def main():
    """Run the command line of the process; returns the exit status (see
    :func:`layouts._cli.main`)."""
    try:
        from ._cli import main as command
    except KeyboardInterrupt:
        return _interrupted_while_loading(sys.argv[1:])
    status = command()
    if status in (130, 143):  # Ctrl-C, SIGTERM
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed or gone reader: nothing more to say there
                pass
        os._exit(status)
    return status


def _interrupted_while_loading(argv):
    """The one line and the status of a Ctrl-C that came before the command had read its
    command line: nothing was written."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the process ends next; a second Ctrl-C changes nothing
    from .kernels.threads import forget_caught_interrupt

    forget_caught_interrupt()
    command = argv[0] if argv[:1] and argv[0] in _SUBCOMMANDS else None
    to_stdout = any(a == "--to=-" or (a == "--to" and argv[i + 1 : i + 2] == ["-"]) for i, a in enumerate(argv))
    line = "interrupted; no output was written" if command == "convert" and not to_stdout else "interrupted"
    print(f"layouts {command}: {line}" if command else f"layouts: {line}", file=sys.stderr)
    return 130
