"""The converter's one way of running work beside the main thread: a :class:`Handoff`.

A handoff is one thread of its own, a queue of items between it and the calling thread,
and a fixed number of slots (sets of buffers) that the items travel in. The side that
sends takes a free slot (waiting while every slot is in use), fills it and puts it; the
side that receives gets it and, once done with what the slot holds, releases it. So the
sender is never more than ``slots`` items ahead, and a slot's buffers are never filled
again while the receiver still reads them.

The thread sends in :class:`ReadAhead` (it reads or decodes the input ahead of the
conversion: staging buffers of a stream, the pages of a memory-mapped file, Arrow
batches) and receives in :class:`layouts._convert.pipeline.Pipeline` (it writes chunk
k-1 while chunk k converts).

Ctrl-C comes to the main thread only. The thread is started and joined with Ctrl-C held
(:class:`layouts.kernels.threads.InterruptHold`): a ``KeyboardInterrupt`` raised inside
``Thread.start`` would leave a thread running that nothing stops, and one raised inside
``Thread.join`` makes the join return while the thread still runs (CPython gh-90882),
which would free buffers the thread uses. An exception in the thread is raised in the
calling thread at its next take, put or get; the thread is always joined.
"""

import itertools
import queue
import threading
from contextlib import contextmanager

from ..kernels.threads import InterruptHold

__all__ = ["Handoff", "ReadAhead", "in_slots", "wait_out", "closing_after"]

_END = object()  # in the items: nothing more comes; in the free slots: the handoff is closing


class _Closing(Exception):
    """Raised in the thread when it takes a slot as the handoff closes: its work ends."""


class Handoff:
    """Items in ``slots`` slots between the calling thread and one thread (see the module)."""

    def __init__(self, slots, name):
        self.nslots, self.name = slots, name
        self.items, self.free = queue.SimpleQueue(), queue.SimpleQueue()  # bounded by the slots
        for slot in range(slots):
            self.free.put(slot)
        self.error = None  # what the thread raised
        self.stopping = False  # the thread's work is abandoned: it stops at its next take, skips what it gets
        self.thread = None

    # ---------------------------------------------------------------- the sending side

    def take(self):
        """A free slot (waits for one). In the thread, as the handoff closes, ends the
        thread's work; in the calling thread, raises what the thread raised."""
        slot = self.free.get()
        if self._in_thread() and (slot is _END or self.stopping):
            raise _Closing
        if self.error is not None:
            raise self.error
        return slot

    def put(self, slot, item):
        """Hand ``item``, which lives in ``slot``'s buffers, to the receiving side."""
        self.items.put((slot, item))
        if not self._in_thread() and self.error is not None:
            raise self.error

    def end(self):
        """Nothing more is sent: the receiver gets what was put, then the end."""
        self.items.put((None, _END))

    # -------------------------------------------------------------- the receiving side

    def get(self):
        """``(slot, item)``, or ``(None, None)`` at the end (waits). In the calling thread,
        raises what the thread raised."""
        slot, item = self.items.get()
        if item is _END:
            if not self._in_thread() and self.error is not None:
                raise self.error
            return None, None
        return slot, item

    def release(self, slot):
        """The receiver is done with what ``slot`` held: the sender may fill it again."""
        self.free.put(slot)

    # -------------------------------------------------------------------- the thread

    def start(self, work):
        """Run ``work(self)`` in the handoff's thread. A Ctrl-C while it starts closes the
        handoff (the thread stops and is joined), then raises ``KeyboardInterrupt``."""
        self.thread = threading.Thread(target=self._run, args=(work,), name=self.name, daemon=True)
        with InterruptHold() as hold:
            self.thread.start()
        if hold.count:
            self.close()
            hold.deliver()
        return self

    def _run(self, work):
        try:
            work(self)
        except _Closing:
            pass
        except BaseException as err:  # noqa: BLE001 - raised in the calling thread
            self.error = err
            self.free.put(_END)  # wake a calling thread that waits for a slot
        finally:
            self.items.put((None, _END))  # wake a calling thread that waits for an item

    def _in_thread(self):
        return self.thread is not None and threading.current_thread() is self.thread

    def close(self, abandon=True):
        """:meth:`stop`, Ctrl-C held meanwhile (see :func:`wait_out`); returns the hold."""
        return wait_out(lambda: self.stop(abandon))

    def stop(self, abandon=True):
        """End the thread and wait for it: ``abandon`` stops its work at once (what it
        gets is skipped); else it first handles what was put, then the end. The caller
        holds Ctrl-C (:meth:`close`)."""
        if abandon:
            self.stopping = True
        else:
            self.end()
        while self.thread is not None and self.thread.is_alive():
            self.free.put(_END)  # a thread that waits for a slot ends
            if self.stopping:
                self.items.put((None, _END))  # a thread that waits for an item ends
            self.thread.join(timeout=0.05)
        while not self.items.empty():  # what the thread left: its buffers go now, not with the handoff
            self.items.get()


class ReadAhead:
    """``items``, produced by a thread of a :class:`Handoff` up to ``ahead`` items beyond
    the one the consumer has (pyarrow decodes Parquet and reads files, and page faults
    are served, without the GIL); ``overlap=False``: the same items, one after another,
    in the caller's thread. The consumer is done with an item when it asks for the next
    one. Iterate once; :meth:`close` when done (the owner: :func:`closing_after`)."""

    def __init__(self, items, ahead, overlap=True, name="layouts-reader"):
        self.items, self.overlap = iter(items), overlap
        self.handoff = Handoff(ahead + 1, name)

    def __iter__(self):
        if not self.overlap:
            yield from self.items
            return
        self.handoff.start(self._produce)  # here, not before: an iterator never used starts no thread
        while True:
            slot, item = self.handoff.get()
            if slot is None:
                return
            yield item
            del item  # nothing here may keep the slot's buffers once it is free
            self.handoff.release(slot)

    def _produce(self, handoff):
        while True:
            slot = handoff.take()  # before the item is made: it may fill the slot's buffer
            item = next(self.items, _END)
            if item is _END:
                handoff.end()
                return
            handoff.put(slot, item)

    def close(self):
        """Stop the thread and wait for it (see :func:`wait_out`); returns the hold."""
        return self.handoff.close()


def in_slots(buffers, fill):
    """For :class:`ReadAhead`: ``fill(buffer)`` into each of ``buffers`` in turn, for as
    long as it returns an item (None: the end). With ``len(buffers) == ahead + 1``, a
    buffer is filled again only once the consumer has gone past the item that used it."""
    for buffer in itertools.cycle(buffers):
        item = fill(buffer)
        if item is None:
            return
        yield item


def wait_out(wait):
    """Run ``wait()`` to its end, Ctrl-C held meanwhile (:class:`layouts.kernels.threads.InterruptHold`):
    it waits for a thread that uses buffers the caller is about to free, and a
    ``KeyboardInterrupt`` raised inside ``Thread.join`` would make the join return while
    the thread still runs (CPython gh-90882). Returns the hold: the caller calls its
    ``deliver()`` (raising ``KeyboardInterrupt`` for a Ctrl-C meanwhile) when no exception
    is on its way; when one is, a Ctrl-C meanwhile is dropped."""
    with InterruptHold() as hold:
        wait()
    return hold


@contextmanager
def closing_after(close):
    """Call ``close()`` (which returns an :class:`InterruptHold`, see :func:`wait_out`) when
    the block ends: a Ctrl-C held meanwhile is delivered when the block ended normally
    (a generator used up, or returning), dropped when an exception is on its way (an
    error, a Ctrl-C, or ``GeneratorExit`` as the consumer stops)."""
    try:
        yield
    except BaseException:
        close()
        raise
    close().deliver()
