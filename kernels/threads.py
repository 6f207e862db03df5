"""The kernels' threads and Ctrl-C: one pool of worker threads, the chunks of a kernel
call shared between them, and the holding of SIGINT while something must not be cut.

Everything in ``layouts`` that runs kernels in threads, holds Ctrl-C or stops the
workers goes through this module (the bottom layer, so every other can import it):

* :func:`thread_pool` makes the pool once, all its threads started with Ctrl-C held;
  :func:`shutdown` stops it (the command calls it before it exits);
* :func:`run_chunks` runs a kernel over the chunks of a call (:func:`chunk_starts`) in
  the pool and in the calling thread, and stops them all at the next block of rows on an
  interrupt;
* :func:`hold_sigint` counts a Ctrl-C instead of raising it while a block runs.
"""

import contextlib
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["default_threads", "chunk_starts", "thread_pool", "shutdown", "hold_sigint", "run_chunks",
           "ROW_ALIGN", "MIN_CHUNK_BYTES"]

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
        n = default_threads()
        pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="layouts")
        with hold_sigint() as held:
            gate = threading.Barrier(n + 1, timeout=10)
            for _ in range(n):
                pool.submit(gate.wait)  # each blocks until all are up: n threads start
            try:
                gate.wait()
            except threading.BrokenBarrierError:  # a thread did not start in time: the pool starts it later
                pass
        _pool = pool
        if held:
            raise KeyboardInterrupt
    return _pool


@contextlib.contextmanager
def hold_sigint():
    """In the main thread, with Python's own SIGINT handler in place: Ctrl-C is counted
    (in the list yielded) instead of raised while the block runs."""
    held = []
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield held
        return
    while True:
        try:
            signal.signal(signal.SIGINT, lambda *_: held.append(1))
            break
        except KeyboardInterrupt:
            held.append(1)
    try:
        yield held
    finally:
        while True:
            try:
                signal.signal(signal.SIGINT, signal.default_int_handler)
                break
            except KeyboardInterrupt:
                held.append(1)


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
            row, op, code = bad[np.argmin(bad[:, 0])]
            return int(row), int(op), int(code)
        return None


def run_chunks(fn, starts, args, owners):
    """Call fn(*args[:2], r0, r1, *args[2:], err, stop) on every chunk, in parallel
    threads (see :class:`_Chunks`); returns the first fault or None. ``owners`` are the
    objects whose memory the kernels read and write."""
    if starts.shape[0] == 2:  # one chunk: in this thread, no worker to wait for
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
