"""The GPU path of the converter (``device="cuda"``): each chunk goes through a slot of
:mod:`layouts._cuda.transpose` (pinned host buffers, device buffers, its own CUDA stream)
in the same pipeline as on the CPU, the transfers of one chunk overlapping the kernels
of another and the writing of a third. The converter asks here whether a conversion runs
on the GPU (:func:`chosen`); nothing else of it names a device. The CUDA modules are
imported only when it does.
"""

import itertools

from .._errors import ConversionError
from .positions import later_values, record_position, rows_named

__all__ = ["chosen", "slots", "forward", "reverse"]


def chosen(options):
    """Whether the conversion runs on the GPU (a backend whose memory is not the host's)."""
    from .. import _backends

    return not _backends.get(options.device).host


def slots(options):
    """Buffer sets that take turns in the pipeline: three pinned sets on the GPU (one
    chunk written, one converting, one queued), two on the CPU."""
    return 3 if chosen(options) else 2


def forward(chunks, layout, options, pipe, name, total):
    """Records -> Arrow on the GPU, overlapped (:func:`through_gpu`, with
    :class:`layouts._cuda.transpose.ForwardSlot`)."""
    from .._cuda import transpose as _gpu

    progress = options.progress
    slots = [_gpu.ForwardSlot(layout, options.rows(layout), options.nulls or {}) for _ in range(pipe.nslots)]

    def finished(i):
        slot, first = slots[i], pipe.records  # chunks finish in order
        with record_position(layout, first, name, options.offset):
            soa = slot.finish()
        pipe.put(i, soa.to_record_batch(), len(soa))
        if progress is not None:
            progress(pipe.records, pipe.records * layout.itemsize, total)

    through_gpu((aos.array for aos in chunks), slots, pipe, options.overlap, finished)


def reverse(parts, layout, options, pipe, name, report):
    """Arrow -> records on the GPU, overlapped (:func:`through_gpu`, with
    :class:`layouts._cuda.transpose.ReverseSlot`); ``report()`` after each chunk.
    ``parts``: an iterator (a failed chunk's error takes the parts not yet queued from it)."""
    from .._cuda import transpose as _gpu

    slots = [_gpu.ReverseSlot(layout) for _ in range(pipe.nslots)]
    queued: list = []

    def finished(i):
        n = len(slots[i].soa)
        try:
            with rows_named(name, pipe.records, n):
                records = slots[i].finish()
        except ConversionError as err:  # the chunks queued after it and the parts not yet read searched too
            later = itertools.chain([slots[j].soa for j in queued], parts)
            raise later_values(err, later, name, pipe.records, n) from None
        pipe.put(i, records, n)
        report()

    through_gpu(parts, slots, pipe, options.overlap, finished, queued)


def through_gpu(items, slots, pipe, overlap, finished, queued=None):
    """Drive chunks through GPU slots, each with its own CUDA stream and buffers: chunk
    k+1 is queued on its slot (host copy into pinned memory, host-to-device copy,
    kernels, device-to-host copy) before chunk k is waited for and handed to
    ``finished(slot index)``, so one chunk's transfers overlap another's kernels while
    the writer thread writes a third. ``overlap=False`` waits for each chunk at once.
    ``queued``: the list of the slots queued and not yet finished, in order (to read)."""
    queued = [] if queued is None else queued
    try:
        for item in items:
            i = pipe.take()
            slots[i].submit(item)
            queued.append(i)
            if len(queued) > 1 or not overlap:
                finished(queued.pop(0))
        while queued:
            finished(queued.pop(0))
    finally:  # on an error too: no copy or kernel may outlive the buffers it uses
        for slot in slots:
            slot.stream.synchronize()
