"""The kernels' threads and Ctrl-C: one pool of worker threads, the chunks of a kernel
call shared between them, and the holding of SIGINT while something must not be cut.

Everything in ``layouts`` that runs kernels in threads, holds Ctrl-C or stops the
workers goes through this module (the bottom layer, so every other can import it):

* :func:`thread_pool` makes the pool once, all its threads started with Ctrl-C held;
  :func:`shutdown` stops it (the command calls it before it exits);
* :func:`run_chunks` runs a kernel over the chunks of a call (:func:`chunk_starts`) in
  the pool and in the calling thread, and stops them all at the next block of rows on an
  interrupt;
* :func:`hold_sigint` (an :class:`InterruptHold`) counts a Ctrl-C instead of raising it
  while a block runs, and delivers it after: thread starts and joins, the few system
  calls that put an output in place;
* :class:`SigintCounter` is SIGINT's handler for a whole run of the ``layouts`` command.

Every ``signal.signal(SIGINT, ...)`` of ``layouts`` is here. NumPy and the thread pool's
module are imported where the kernels' calls need them, not with this module: the
command imports it as it starts.
"""

import contextlib
import os
import signal
import threading
import time

__all__ = [
    "default_threads",
    "chunk_starts",
    "thread_pool",
    "shutdown",
    "hold_sigint",
    "InterruptHold",
    "deferred_interrupts",
    "SigintCounter",
    "forget_caught_interrupt",
    "run_chunks",
    "ROW_ALIGN",
    "MIN_CHUNK_BYTES",
]

ROW_ALIGN = 64  # chunk starts are multiples of 64 rows: no two threads share a byte of a bitmap
MIN_CHUNK_BYTES = 1 << 20  # a chunk is at least this many bytes of records (else fewer threads)

_pool = None
_pool_lock = threading.Lock()


def default_threads():
    """Threads the CPU kernels use: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def chunk_starts(n, itemsize, threads):
    """Row starts of the chunks (multiples of ROW_ALIGN), with n appended."""
    import numpy as np

    threads = default_threads() if threads is None else threads
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    by_size = max(1, n * itemsize // MIN_CHUNK_BYTES)
    parts = min(threads, by_size)
    step = -(-n // parts)
    step = -(-step // ROW_ALIGN) * ROW_ALIGN
    return np.array(list(range(0, n, step)) + [n], dtype=np.int64) if n else np.zeros(1, np.int64)


def thread_pool():
    """The kernels' one pool of worker threads, made on first use with all its threads
    started at once, Ctrl-C held meanwhile: a KeyboardInterrupt inside ``Thread.start``
    would leave a worker running that the pool never stops (the process then hangs at
    exit). A Ctrl-C held is raised once the pool is whole."""
    global _pool
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor  # (not with the module: the command starts faster)

        n = default_threads()
        pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="layouts")
        with hold_sigint() as hold:
            gate = threading.Barrier(n + 1, timeout=10)
            for _ in range(n):
                pool.submit(gate.wait)  # each blocks until all are up: n threads start
            try:
                gate.wait()
            except threading.BrokenBarrierError:  # a thread did not start in time: the pool starts it later
                pass
        _pool = pool
        hold.deliver()
    return _pool


def hold_sigint():
    """Ctrl-C held while a block runs, then delivered: ``with hold_sigint() as hold: ...``
    and, when no exception is on its way, ``hold.deliver()`` (see :class:`InterruptHold`)."""
    return InterruptHold()


class InterruptHold:
    """Ctrl-C (SIGINT) held while a block runs: inside it a Ctrl-C raises nothing, it is
    counted (:attr:`count`); after it :meth:`deliver` raises what the handler there was
    before makes of one (Python's default: ``KeyboardInterrupt``), for a caller with no
    exception on its way already.

    For the waits and system calls that must run to their end: a ``KeyboardInterrupt``
    raised in the middle of ``Thread.join`` marks the thread as finished while it still
    runs (CPython gh-90882; seen with 3.11), so ``join`` returns at once from then on, and
    one raised in ``Thread.start`` leaves a thread running that its owner does not know of.

    Python runs signal handlers in the main thread only: in another thread (where no
    ``KeyboardInterrupt`` is raised) nothing is held. Neither is anything where SIGINT is
    ignored or its handler was set outside Python.
    """

    def __init__(self):
        self.count, self.previous, self.active = 0, None, False

    def _note(self, signum, frame):
        self.count += 1

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self
        while True:
            try:
                if signal.getsignal(signal.SIGINT) in (None, signal.SIG_IGN):  # set outside Python, or ignored
                    return self
                self.previous = signal.signal(signal.SIGINT, self._note)
                self.active = True
                return self
            except KeyboardInterrupt:  # one pending as the handler changed (signal() runs it first): held too
                self._note(signal.SIGINT, None)
            except (ValueError, OSError):  # not the main interpreter; no signals here
                return self

    def __exit__(self, *exc):
        if self.active:
            self.active = False
            signal.signal(signal.SIGINT, self.previous)  # one still pending is counted first, by _note
        return False

    def deliver(self):
        """Act on the Ctrl-Cs held, as one, as the handler there was before would have:
        Python's default raises ``KeyboardInterrupt``; ``SIG_DFL`` ends the process."""
        if not self.count:
            return
        self.count = 0
        previous = self.previous
        if callable(previous):
            previous(signal.SIGINT, None)
        elif previous == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGINT)


@contextlib.contextmanager
def deferred_interrupts():
    """Hold a Ctrl-C (SIGINT) that arrives inside the block until the block is done, then
    deliver it (:class:`InterruptHold`). When the block raises, that exception goes on
    and the Ctrl-C is dropped: it would only have replaced it."""
    hold = InterruptHold()
    with hold:
        yield
    hold.deliver()


def forget_caught_interrupt():
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


class SigintCounter:
    """SIGINT's handler for a run of a program (the ``layouts`` command): each Ctrl-C is
    counted and raised as ``KeyboardInterrupt``, as Python's own handler does, until the
    run's outcome is decided (``quiet``); from then on it is only counted. :meth:`check`
    raises again one that was raised where Python dropped it (see the command's
    ``layouts._cli.interrupts``)."""

    def __init__(self):
        self.count, self.quiet, self.installed, self.previous = 0, False, False, None

    def __call__(self, signum, frame):
        self.count += 1
        if not self.quiet:
            raise KeyboardInterrupt

    def check(self):
        """Raise ``KeyboardInterrupt`` if a Ctrl-C came and was dropped on its way."""
        if self.count and not self.quiet:
            raise KeyboardInterrupt

    def take_over(self):
        """Take SIGINT over where Python's default handler has it: where it is ignored (a
        background job) or another handler has it, it is left as it is."""
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self.previous = signal.signal(signal.SIGINT, self)
            self.installed = True

    def give_back(self):
        """Give SIGINT's handler back (one still pending is counted here, quiet)."""
        if self.installed:
            self.installed = False
            signal.signal(signal.SIGINT, self.previous)

    def ignore(self):
        """Ignore SIGINT from now on (the process ends next): where this took it over, or
        Python's default handler has it (not taken over: a Ctrl-C came as it was)."""
        if self.installed or signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            except ValueError:  # not the main thread
                pass


class _Chunks:
    """The chunks of one kernel call, claimed one at a time by the calling thread and by
    pool workers (a worker that starts after the call is over finds nothing to claim).

    The caller's buffers must outlive every worker that writes them. A KeyboardInterrupt
    (or any exception) in the calling thread therefore stops the call: ``stop`` is set,
    so no chunk is claimed after it and running kernels return at their next block of
    rows, and the caller waits until no worker runs a kernel before it goes on. The
    call's buffers (``owners``) are also held here, by every queued worker task, so
    that they stay alive even if the caller leaves early (a second interrupt).
    """

    def __init__(self, fn, starts, head, tail, owners):
        import numpy as np

        self.fn, self.starts, self.head, self.tail, self.owners = fn, starts, head, tail, owners
        self.count = starts.shape[0] - 1
        self.errs = np.full((max(self.count, 1), 3), -1, dtype=np.int64)
        self.stop = np.zeros(1, dtype=np.int64)
        self.lock = threading.Lock()
        self.next = self.running = self.finished = 0
        self.done = threading.Event()
        self.error = None

    def _claim(self, worker):
        with self.lock:
            if self.stop[0] or self.next >= self.count:
                return -1
            ci, self.next = self.next, self.next + 1
            self.running += worker
            return ci

    def _convert(self, ci):
        self.fn(*self.head, self.starts[ci], self.starts[ci + 1], *self.tail, self.errs[ci], self.stop)

    def _finished(self, worker):
        with self.lock:
            self.running -= worker
            self.finished += 1
            if self.finished == self.count:
                self.done.set()

    def work(self):
        """A pool worker's share: chunks until none is left or the call stops."""
        while (ci := self._claim(1)) >= 0:
            try:
                self._convert(ci)
            except BaseException as err:  # noqa: BLE001 - re-raised by the caller
                self.error = err
                self.stop[0] = 1
                self.done.set()
            finally:
                self._finished(1)

    def run(self, helpers):
        """Convert every chunk with ``helpers`` pool workers and the calling thread."""
        try:
            pool = thread_pool() if helpers else None
            for _ in range(helpers):
                pool.submit(self.work)
            while (ci := self._claim(0)) >= 0:
                self._convert(ci)
                self._finished(0)
            self.done.wait()
            if self.error is not None:
                raise self.error
        except BaseException:
            self.halt()
            raise

    def halt(self):
        """Stop the call and wait until no worker runs a kernel, through further
        interrupts (the first one is on its way up already)."""
        while True:
            try:
                self.stop[0] = 1  # (inside the try: a second Ctrl-C here must not skip the wait)
                with self.lock:
                    if self.running == 0:
                        return
                time.sleep(0.001)
            except KeyboardInterrupt:
                pass

    def fault(self):
        bad = self.errs[self.errs[:, 2] > 0]
        if len(bad):
            row, op, code = bad[bad[:, 0].argmin()]
            return int(row), int(op), int(code)
        return None


def run_chunks(fn, starts, args, owners):
    """Call fn(*args[:2], r0, r1, *args[2:], err, stop) on every chunk, in parallel
    threads (see :class:`_Chunks`); returns the first fault or None. ``owners`` are the
    objects whose memory the kernels read and write."""
    if starts.shape[0] == 2:  # one chunk: in this thread, no worker to wait for
        import numpy as np

        err, stop = np.full(3, -1, dtype=np.int64), np.zeros(1, dtype=np.int64)
        fn(*args[:2], starts[0], starts[1], *args[2:], err, stop)
        return (int(err[0]), int(err[1]), int(err[2])) if err[2] > 0 else None
    job = _Chunks(fn, starts, args[:2], args[2:], owners)
    if job.count:
        job.run(min(job.count - 1, default_threads()))
    return job.fault()


def shutdown(wait=True):
    """Stop the pool's worker threads (a later kernel call makes a new pool). The command
    calls it as it exits, so no worker outlives the interpreter's shutdown; a call that is
    still running keeps the threads it has until its chunks are done (``wait=True`` waits
    for them)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=wait, cancel_futures=True)
