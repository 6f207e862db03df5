"""The converter's one thread primitive (layouts/_convert/readahead.py): items in order,
never more than ``ahead`` beyond the consumer, a slot's buffer never refilled while the
consumer holds it, the thread's exception raised in the caller, Ctrl-C while it waits,
and the thread always joined."""

import os
import signal
import threading
import time

import numpy as np
import pytest

from layouts._convert.pipeline import Pipeline
from layouts._convert.readahead import Handoff, ReadAhead, closing_after, in_slots


def _threads(name):
    return [t for t in threading.enumerate() if t.name == name and t.is_alive()]


@pytest.mark.parametrize("overlap", [True, False])
def test_items_in_order_and_the_thread_joined(overlap):
    ahead = ReadAhead(range(1000), ahead=2, overlap=overlap)
    with closing_after(ahead.close):
        assert list(ahead) == list(range(1000))
    assert not _threads("layouts-reader")


def test_never_more_than_ahead_beyond_the_consumer():
    made = []
    ahead = ReadAhead((made.append(i) or i for i in range(50)), ahead=2)
    with closing_after(ahead.close):
        for i in ahead:
            time.sleep(0.002)  # a slow consumer: the producer waits for slots
            assert len(made) <= i + 1 + 2, (i, len(made))
    assert made == list(range(50))


def test_a_buffer_is_not_refilled_while_the_consumer_holds_it():
    buffers = [np.zeros(1000, np.int64) for _ in range(3)]  # ahead + 1
    count = iter(range(200))

    def fill(buf):
        i = next(count, None)
        if i is None:
            return None
        buf[:] = i
        return buf, i

    ahead = ReadAhead(in_slots(buffers, fill), ahead=2)
    with closing_after(ahead.close):
        for buf, i in ahead:
            time.sleep(0.0005)  # the producer runs meanwhile, as far as it may
            assert (buf == i).all(), (i, np.unique(buf))


@pytest.mark.parametrize("overlap", [True, False])
def test_the_producers_error_is_raised_in_the_consumer(overlap):
    def items():
        yield 1
        yield 2
        raise ValueError("the input is damaged at item 3")

    ahead = ReadAhead(items(), ahead=2, overlap=overlap)
    got = []
    with pytest.raises(ValueError, match="damaged at item 3"):
        with closing_after(ahead.close):
            for item in ahead:
                got.append(item)
    assert got == [1, 2] and not _threads("layouts-reader")


def test_a_consumer_that_stops_early_ends_the_thread():
    endless = iter(int, 1)  # never ends: the producer waits for a slot once two are ahead
    ahead = ReadAhead(endless, ahead=2)
    with closing_after(ahead.close):
        for i, _ in enumerate(ahead):
            if i == 5:
                break
    assert not _threads("layouts-reader")


def test_an_iterator_never_used_starts_no_thread():
    ahead = ReadAhead(range(3), ahead=2)
    ahead.close().deliver()
    assert ahead.handoff.thread is None


@pytest.mark.slow
def test_ctrl_c_while_the_consumer_waits_is_raised_and_the_thread_joined():
    def slow():
        yield 0
        time.sleep(1)  # the consumer waits for the next item meanwhile
        yield 1

    ahead = ReadAhead(slow(), ahead=2)
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        with closing_after(ahead.close):
            for _ in ahead:
                pass
    assert time.perf_counter() - t0 < 5  # raised as it waited, not after the item came (joined after the sleep)
    assert not _threads("layouts-reader")


def test_ctrl_c_while_waiting_for_the_writer_drops_what_is_queued():
    sink = _Sink(delay=0.5)
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        with Pipeline(sink, True) as pipe:
            for i in range(10):
                pipe.put(pipe.take(), i, 1)  # the third take waits for the writer
    assert len(sink.written) < 10 and sink.closed and not _threads("layouts-writer")


class _Sink:
    def __init__(self, fail_at=None, delay=0.001):
        self.written, self.closed, self.fail_at, self.delay = [], False, fail_at, delay

    def write(self, item):
        if self.fail_at is not None and len(self.written) == self.fail_at:
            raise OSError(28, "No space left on device")
        time.sleep(self.delay)
        self.written.append(item)

    def close(self):
        self.closed = True


@pytest.mark.parametrize("overlap", [True, False])
def test_the_writer_writes_every_chunk_in_order(overlap):
    sink = _Sink()
    with Pipeline(sink, overlap) as pipe:
        for i in range(100):
            pipe.put(pipe.take(), i, 1)
    assert sink.written == list(range(100)) and sink.closed and pipe.records == 100
    assert not _threads("layouts-writer")


@pytest.mark.parametrize("overlap", [True, False])
def test_the_writers_error_is_raised_in_the_converting_thread(overlap):
    sink = _Sink(fail_at=10)
    with pytest.raises(OSError, match="No space left"):
        with Pipeline(sink, overlap) as pipe:
            for i in range(100):
                pipe.put(pipe.take(), i, 1)
    assert sink.written == list(range(10)) and sink.closed
    assert not _threads("layouts-writer")


def test_an_error_in_the_converting_thread_abandons_what_is_queued():
    sink = _Sink()
    with pytest.raises(RuntimeError, match="a kernel failed"):
        with Pipeline(sink, True) as pipe:
            for i in range(10):
                pipe.put(pipe.take(), i, 1)
            raise RuntimeError("a kernel failed")
    assert sink.written == list(range(len(sink.written))) and sink.closed  # in order, what was not dropped
    assert not _threads("layouts-writer")


def test_a_slot_comes_back_only_once_written():
    handoff = Handoff(2, "layouts-test")
    taken = [handoff.take(), handoff.take()]
    assert sorted(taken) == [0, 1] and handoff.free.empty()
    handoff.release(taken[0])
    assert handoff.take() == taken[0]
