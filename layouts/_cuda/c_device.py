"""The Arrow C Device Data Interface for an SoA, built with ctypes.

``export_device_array(...)`` (called by ``SoA.__arrow_c_device_array__``) returns ``(schema capsule, device array capsule)``: the
schema from pyarrow, and an ``ArrowDeviceArray`` whose ``ArrowArray`` tree (a struct
of the record's fields, fixed_size_list for sub-arrays) points straight at the SoA's
buffers, on the GPU (device type CUDA) or the CPU. Every struct of the tree carries
the key of one export record in ``private_data``; the record holds the SoA (so its
arena), the ctypes structs and the buffer-pointer arrays, and is dropped when the
last struct of the tree is released. Consumers may move children out and release them
on their own, as the specification allows.
"""

import ctypes
import itertools

import pyarrow as pa

__all__ = ["export_device_array", "live_exports", "ARROW_DEVICE_CPU", "ARROW_DEVICE_CUDA"]

ARROW_DEVICE_CPU = 1
ARROW_DEVICE_CUDA = 2
_CAPSULE_NAME = b"arrow_device_array"


class ArrowArray(ctypes.Structure):
    pass


_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArray))
ArrowArray._fields_ = [
    ("length", ctypes.c_int64),
    ("null_count", ctypes.c_int64),
    ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowArray))),
    ("dictionary", ctypes.POINTER(ArrowArray)),
    ("release", _RELEASE),
    ("private_data", ctypes.c_void_p),
]


class ArrowDeviceArray(ctypes.Structure):
    _fields_ = [
        ("array", ArrowArray),
        ("device_id", ctypes.c_int64),
        ("device_type", ctypes.c_int32),
        ("sync_event", ctypes.c_void_p),
        ("reserved", ctypes.c_int64 * 3),
    ]


_exports: dict = {}  # key -> _Export, while any struct of its tree is unreleased
_capsules: dict = {}  # address of a capsule's ArrowDeviceArray -> the struct, while the capsule lives
_keys = itertools.count(1)


class _Export:
    """Everything one exported tree points at."""

    def __init__(self, owner):
        self.owner, self.keep, self.live = owner, [], 0


@_RELEASE
def _release(ptr):
    array = ptr.contents
    key = array.private_data
    for i in range(array.n_children):
        child = array.children[i].contents
        if child.release:
            child.release(array.children[i])
    if array.dictionary and array.dictionary.contents.release:
        array.dictionary.contents.release(array.dictionary)
    array.release = _RELEASE()
    export = _exports.get(key)
    if export is not None:
        export.live -= 1
        if export.live == 0:
            del _exports[key]


# The destructor gets the dying capsule as a raw pointer: turning it into a Python
# object again would resurrect it mid-deallocation.
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]
_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype, _new_capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, _DESTRUCTOR]


@_DESTRUCTOR
def _capsule_gone(capsule):
    address = _get_pointer(capsule, _CAPSULE_NAME)
    device_array = _capsules.pop(address, None)
    if device_array is not None and device_array.array.release:
        device_array.array.release(ctypes.pointer(device_array.array))


def live_exports():
    """Exports not yet released by their consumer (for tests and leak checks)."""
    return len(_exports)


def _node(export, key, length, buffers, children=(), offset=0, null_count=0, dictionary=None):
    node = ArrowArray()
    pointers = (ctypes.c_void_p * max(len(buffers), 1))(*buffers)
    kids = (ctypes.POINTER(ArrowArray) * max(len(children), 1))(*[ctypes.pointer(c) for c in children])
    node.length, node.null_count, node.offset = length, null_count, offset
    node.n_buffers, node.n_children = len(buffers), len(children)
    node.buffers = ctypes.cast(pointers, ctypes.POINTER(ctypes.c_void_p))
    node.children = ctypes.cast(kids, ctypes.POINTER(ctypes.POINTER(ArrowArray)))
    node.dictionary = ctypes.pointer(dictionary) if dictionary is not None else ctypes.POINTER(ArrowArray)()
    node.release, node.private_data = _release, key
    export.keep += [node, pointers, kids]
    export.live += 1
    return node


def _leaf(export, key, column, address, dictionary):
    bufs = (
        [column.validity, column.offsets, column.data] if column.offsets is not None else [column.validity, column.data]
    )
    return _node(
        export,
        key,
        column.length,
        [address(b) for b in bufs],
        offset=column.offset,
        null_count=-1 if column.validity is not None else 0,
        dictionary=dictionary,
    )


def _dictionary(export, key, values, backend):
    """A string dictionary as a child tree, its buffers where the backend's exports point
    (copied to the device when the data is there)."""
    placed = [None if b is None else backend.export_buffer(b) for b in values.buffers()]
    export.keep += [values, placed]
    pointers = [0 if p is None else p[1] for p in placed]
    return _node(export, key, len(values), pointers, offset=values.offset, null_count=values.null_count)


def export_device_array(schema, length, columns, memory, backend, owner):
    """``(schema capsule, ArrowDeviceArray capsule)`` over an SoA's column buffers
    (``columns``, over ``memory`` on ``backend``), no copy; ``owner`` (the SoA) is kept
    alive until the consumer releases the array."""
    export = _Export(owner)
    key = next(_keys)
    base, device_type, device_id = backend.arrow_device(memory)

    def address(buf):
        return 0 if buf is None else base + buf.address

    leaves = iter(columns)

    def build(arrow_type, length):
        if pa.types.is_fixed_size_list(arrow_type):
            child = build(arrow_type.value_type, length * arrow_type.list_size)
            return _node(export, key, length, [0], [child])
        if pa.types.is_struct(arrow_type):
            children = [build(arrow_type.field(i).type, length) for i in range(arrow_type.num_fields)]
            return _node(export, key, length, [0], children)
        column = next(leaves)
        dictionary = None if column.dictionary is None else _dictionary(export, key, column.dictionary, backend)
        return _leaf(export, key, column, address, dictionary)

    top = build(pa.struct(list(schema)), length)
    device_array = ArrowDeviceArray()
    ctypes.memmove(ctypes.addressof(device_array.array), ctypes.addressof(top), ctypes.sizeof(ArrowArray))
    top.release = _RELEASE()  # moved into the device array: the copy there owns the tree now
    device_array.device_id, device_array.device_type = device_id, device_type
    _exports[key] = export
    address_of = ctypes.addressof(device_array)
    _capsules[address_of] = device_array
    return schema.__arrow_c_schema__(), _new_capsule(address_of, _CAPSULE_NAME, _capsule_gone)
