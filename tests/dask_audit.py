"""A local file system for fsspec that logs every byte range read, for the Dask tests.

Worker processes receive the file system pickled, log path included, and append one line
per read (``path start stop``) to the shared log file.
"""

import os

from fsspec.implementations.local import LocalFileSystem


class AuditFileSystem(LocalFileSystem):
    protocol = "audit"

    def __init__(self, log, **kwargs):
        super().__init__(**kwargs)
        self.log = log

    def _open(self, path, mode="rb", block_size=None, **kwargs):
        return AuditFile(super()._open(path, mode, block_size, **kwargs), self._strip_protocol(path), self.log)


class AuditFile:
    def __init__(self, f, path, log):
        self.f, self.path, self.log = f, path, log

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def seek(self, pos, whence=0):
        return self.f.seek(pos, whence)

    def tell(self):
        return self.f.tell()

    def read(self, n=-1):
        start = self.f.tell()
        data = self.f.read(n)
        self._record(start, len(data))
        return data

    def readinto(self, buffer):
        start = self.f.tell()
        n = self.f.readinto(buffer)
        self._record(start, n)
        return n

    def _record(self, start, n):
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{self.path} {start} {start + n}\n".encode())
        finally:
            os.close(fd)

    def close(self):
        self.f.close()
