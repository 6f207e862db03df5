"""Ctrl-C (SIGINT) for the command: one line and status 130 at any moment, the modules'
loading included, and nothing the interrupted work leaves behind is printed."""

import contextlib
import signal
import sys
import threading

from ..kernels.threads import SigintCounter, forget_caught_interrupt, shutdown


class Interrupts(SigintCounter):
    """Ctrl-C (SIGINT) for the command: raises ``KeyboardInterrupt`` as Python's own
    handler does, and counts (:class:`layouts.kernels.threads.SigintCounter`).

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
        super().__init__()
        self.hook = self.excepthook = None
        self.terminated, self.term_previous = False, None

    def install(self):
        """Take SIGINT over where Python's default handler has it (see
        :meth:`~layouts.kernels.threads.SigintCounter.take_over`), SIGTERM where its
        default action (death, leaving temporary files) has it, and the hooks that print
        what Python drops."""
        self.hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        self.excepthook, sys.excepthook = sys.excepthook, self._printed
        self.take_over()
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self.term_previous = signal.signal(signal.SIGTERM, self._terminate)

    def _terminate(self, signum, frame):
        """SIGTERM (kill, timeout, a service stopped): as a Ctrl-C, the work undone and
        its outputs removed; status 143."""
        self.terminated = True
        if self.installed and not self.quiet and signal.getsignal(signal.SIGINT) is not self:
            # a block holds Ctrl-C (InterruptHold: files being put in place): the SIGTERM waits with it, as a
            # Ctrl-C it counts, and is raised when the block is done (status 143: terminated)
            signal.raise_signal(signal.SIGINT)
            return
        self(signum, frame)

    def _unraisable(self, info):
        if not (self.count or issubclass(info.exc_type, KeyboardInterrupt)):
            self.hook(info)

    def _printed(self, kind, value, tb):
        if not (self.count or issubclass(kind, KeyboardInterrupt)):
            self.excepthook(kind, value, tb)

    def finish(self, exiting):
        """The command is over. ``exiting``: the process ends next, and SIGINT is ignored
        until it has (see :func:`main`); else SIGINT's handler is given back."""
        self.quiet = True
        if self.term_previous is not None:  # the work is over: a SIGTERM may end the process as ever, but
            # for the moments the process takes to exit once its status is decided (as SIGINT, below)
            signal.signal(signal.SIGTERM, signal.SIG_IGN if exiting else self.term_previous)
            self.term_previous = None
        if self.excepthook is not None:  # an uncaught exception from here on (--debug) is shown as ever
            sys.excepthook, self.excepthook = self.excepthook, None
        if exiting:
            # The kernels' pool threads are not daemons: the interpreter waits for them as it exits, and one
            # started as a Ctrl-C came may be unknown to the pool; told to end once idle, each worker passes
            # the stop marker on to the next, known or not
            shutdown(wait=False)
            forget_caught_interrupt()
            self.ignore()
            return
        self.give_back()
        sys.unraisablehook = self.hook


@contextlib.contextmanager
def completing(args):
    """The step that puts an output in place (a rename, or the renames of a set of
    tables), Ctrl-C and SIGTERM only counted meanwhile; then ``args.kept`` (the line
    for an interrupt says the output was written whole and kept), and one that came
    meanwhile is raised."""
    interrupts = getattr(args, "interrupts", None)
    if interrupts is None:
        yield
        args.kept = args.dst
        return
    quiet, interrupts.quiet = interrupts.quiet, True
    try:
        yield
        args.kept = args.dst
    finally:
        interrupts.quiet = quiet
    interrupts.check()


class Run:
    """What the message for a Ctrl-C needs to know about the command it ended."""

    command = args = None
    debug = False

    def interrupted(self, word="interrupted"):
        """The line for a Ctrl-C (``word``: ``"terminated"`` for a SIGTERM) that ended the command."""
        dst, kept = getattr(self.args, "dst", None), getattr(self.args, "kept", None)
        if kept:
            return f"{word} after the output was complete: {kept} was written whole and kept"
        if self.command != "convert" or dst == "-":
            return word
        return f"{word}; no output was written"


def wraps_interrupt(err):
    """Whether ``err`` was raised because of a ``KeyboardInterrupt`` (its cause or context)."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False
