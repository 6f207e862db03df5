"""Record streams: files with a header, framed records and several record types.

A :class:`Stream` describes them (in Python, or in a TOML file: see docs/streams.md);
:func:`read_stream` gives one SoA per record type and :func:`write_stream` takes them
back, byte for byte.
"""

from .read import StreamTables, read_stream
from .spec import ByteOrder, Framing, Length, Record, RecordType, Section, Stream, builtin_names, load
from .write import write_stream

__all__ = [
    "Stream",
    "Section",
    "Framing",
    "Length",
    "Record",
    "RecordType",
    "ByteOrder",
    "StreamTables",
    "read_stream",
    "write_stream",
    "load",
    "builtin_names",
]
