"""The output formats, the file suffixes that name them and the default chunk size: facts
that the converter and the command share, in a module that imports nothing (the command's
``--help`` and ``--version`` stay fast)."""

__all__ = ["FORMATS", "SUFFIXES", "DEFAULT_CHUNK"]

FORMATS = ("parquet", "feather", "arrow", "arrows", "records")  # arrows: the Arrow IPC stream format

# Output formats by suffix. Records files have no standard suffix: these are the usual ones, and
# anything else needs format= (--format), so that a typo (out.parqet) or out.csv is not taken for records.
SUFFIXES = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".feather": "feather",
    ".arrow": "arrow",
    ".ipc": "arrow",
    ".arrows": "arrows",
    ".bin": "records",
    ".dat": "records",
    ".rec": "records",
    ".records": "records",
    ".raw": "records",
}

DEFAULT_CHUNK = 64 << 20  # bytes of records per chunk: a Parquet row group or an IPC batch
