"""Where the compiled CPU kernels are kept: shipped inside the package, else once per machine.

Numba's own on-disk cache (``cache=True``) keys its index by the source file's mtime
and size, and keeps it next to the source: every install or upgrade writes new mtimes,
so the kernels were compiled again (about 30 s of CPU) after each ``pip install``, in
every fresh container and on every Dask worker. Here the same cache files (Numba's
index and data files, Numba's serialisation) are found by *content*:

* the stamp of every index is a hash of the kernels' sources (the modules whose code
  is compiled into them) with the versions of Numba, NumPy and Python, so a reinstall
  of the same kernels finds them again and an edit of any of those modules (not only
  of the file that holds the entry point) invalidates them;
* they are looked for first in the package itself, ``kernels/_compiled/``, which the
  wheel build fills (``setup.py``: ``python -m layouts.kernels.precompile --ship``)
  with code compiled for the baseline CPU of the platform (LLVM's ``generic``, as with
  ``NUMBA_CPU_NAME=generic``), so any machine of that platform loads it;
* then in a per-user cache directory, ``$LAYOUTS_CACHE_DIR`` or ``$NUMBA_CACHE_DIR/layouts``
  or the user cache directory (``~/.cache/layouts`` on Linux), one folder per content
  hash (one that cannot be written, a read-only mount of a filled cache, is still
  read). Kernels that had to be compiled (a wheel built with other versions, a source
  checkout, ``LAYOUTS_SHIPPED_KERNELS=0``) are saved there, for this machine's CPU:
  compiled once per machine, not once per install.

A failure to read any of it is a cache miss (the kernels are compiled), never an error,
and never a hang: a cache file that is not a regular file (a FIFO, a device, a folder
put in its place) is not read, it is a miss (:class:`_CacheFile`).
"""

import errno
import hashlib
import io
import os
import pickle
import stat
import sys
import tempfile

import numba
import numpy as np
from numba import njit
from numba.core import caching

__all__ = ["jit", "STAMP", "shipped_dir", "machine_dir", "ship_dir"]

HERE = os.path.dirname(os.path.abspath(__file__))
# the modules whose code the CPU kernels are compiled from: the package kernels/cpu/, what it imports, and
# the kernels of record streams, OCCURS DEPENDING ON and signs (one stamp: a kernel calling another module's
# functions is never left with their old code, as Numba's own cache, keyed by the caller's file, would)
SOURCES = (
    "plan.py",
    "values.py",
    "mainframe.py",
    "_memory.py",
    "_sigbus.py",
    "occurs.py",
    "signs.py",
    "stream.py",
    "threads.py",
) + tuple(sorted(f"cpu/{name}" for name in os.listdir(os.path.join(HERE, "cpu")) if name.endswith(".py")))
FORMAT = "layouts-kernels-1"  # bump when what a cached kernel is made of changes in another way
PORTABLE_CPU = "generic"  # the shipped kernels' target: the baseline of the platform's architecture


def _stamp():
    h = hashlib.sha256(FORMAT.encode())
    for name in SOURCES:
        with open(os.path.join(HERE, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read() + b"\0")
    numpy_minor = ".".join(np.__version__.split(".")[:2])
    h.update(f"numba {numba.__version__} numpy {numpy_minor} python {sys.version_info[:2]}".encode())
    return h.hexdigest()


try:
    STAMP = _stamp()
except OSError:  # sources not readable as files (a zip import): Numba's own cache instead
    STAMP = None


def shipped_dir():
    """The package's own compiled kernels (None with ``LAYOUTS_SHIPPED_KERNELS=0``)."""
    if os.environ.get("LAYOUTS_SHIPPED_KERNELS", "1") == "0":
        return None
    return os.path.join(HERE, "_compiled")


def ship_dir():
    """Where ``precompile --ship`` puts the kernels of the wheel being built (else None)."""
    return os.environ.get("LAYOUTS_SHIP_KERNELS") or None


def _writable(path):
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _machine_bases():
    if os.environ.get("LAYOUTS_CACHE_DIR"):
        return [os.environ["LAYOUTS_CACHE_DIR"]]
    if os.environ.get("NUMBA_CACHE_DIR"):
        return [os.path.join(os.environ["NUMBA_CACHE_DIR"], "layouts")]
    from numba.misc.appdirs import AppDirs

    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return [
        AppDirs(appname="layouts", appauthor=False).user_cache_dir,
        os.path.join(tempfile.gettempdir(), f"layouts-{uid}"),
    ]  # a home that cannot be written


_machine = []
_readonly = []


def readonly_dirs():
    """The cache folders of these sources that exist but cannot be written (a cache put in
    a Docker image or on a read-only mount), before the writable one: read, never saved to."""
    if not _readonly:
        found = []
        for base in _machine_bases():
            path = os.path.join(base, f"kernels-{STAMP[:24]}")
            if path == machine_dir():
                break
            if os.path.isdir(path) and os.access(path, os.R_OK | os.X_OK):
                found.append(path)
        _readonly.append(found)
    return _readonly[0]


def machine_dir():
    """This user's cache folder for the kernels of these sources (the first writable
    candidate, made if missing), or None where none can be written."""
    if not _machine:
        found = None
        for base in _machine_bases():
            path = os.path.join(base, f"kernels-{STAMP[:24]}")
            if _writable(path):
                found = path
                break
        _machine.append(found)
    return _machine[0]


class _Locator(caching._CacheLocator):
    """Numba's locator protocol, answered with a folder chosen above and the content stamp."""

    def __init__(self, py_func, path):
        self._py_file = py_func.__code__.co_filename
        self._lineno = py_func.__code__.co_firstlineno
        self._path = path

    def ensure_cache_path(self):
        os.makedirs(self._path, exist_ok=True)

    def get_cache_path(self):
        return self._path

    def get_source_stamp(self):
        return STAMP

    def get_disambiguator(self):
        return str(self._lineno)


def _module_name(path):
    """``cpu.forward`` for kernels/cpu/forward.py: the module's dotted name under kernels/."""
    rel = os.path.relpath(os.path.abspath(path), HERE)
    return (
        os.path.splitext(rel)[0].replace(os.sep, ".")
        if not rel.startswith("..")
        else os.path.splitext(os.path.basename(path))[0]
    )


class _Impl(caching.CompileResultCacheImpl):
    """Numba's serialisation of a compile result, with the locator given (not searched for)."""

    def __init__(self, py_func, locator):  # noqa: D107 - numba's __init__ would search its own locators
        self._lineno = py_func.__code__.co_firstlineno
        self._locator = locator
        module = _module_name(py_func.__code__.co_filename)
        self._filename_base = self.get_filename_base(f"{module}.{py_func.__qualname__}", getattr(sys, "abiflags", ""))


def _read_regular(path):
    """The bytes of the regular file at ``path``. Anything else there is an OSError, found
    without waiting: the file is opened non-blocking (a FIFO with no writer would block
    ``open`` for ever; a FIFO or a device would block or never end ``read``) and checked
    with ``fstat`` before a byte is read."""
    fd = os.open(
        path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    )
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file, so not a kernel cache file", path)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


class _CacheFile(caching.IndexDataCacheFile):
    """Numba's index and data files, read only when they are regular files
    (:func:`_read_regular`): an index that is not one holds nothing (then a kernel
    compiled is saved over it, renamed into place as Numba does), a data file that is not
    one is a miss."""

    def _load_index(self):
        try:
            raw = _read_regular(self._index_path)
        except FileNotFoundError:
            return {}
        except OSError as err:
            if err.errno == errno.EINVAL:  # not a regular file: nothing cached there
                return {}
            raise
        f = io.BytesIO(raw)
        if pickle.load(f) != self._version:  # another Numba's: its stream may not unpickle
            return {}
        stamp, overloads = pickle.loads(f.read())
        return overloads if stamp == self._source_stamp else {}

    def _load_data(self, name):
        return pickle.loads(_read_regular(self._data_path(name)))


class _Magic:
    """Stands for a codegen in Numba's index key: only its magic tuple is read."""

    def __init__(self, magic):
        self.magic = magic

    def magic_tuple(self):
        return self.magic


class KernelCache(caching.FunctionCache):
    """A Numba function cache over several folders: read from the shipped one (code for
    the platform's baseline CPU), then from this machine's (code for this CPU); saved to
    this machine's. While a wheel is built (:func:`ship_dir`), what is loaded or compiled
    is also saved to the wheel's folder."""

    def __init__(self, py_func):  # noqa: D107 - numba's __init__ would search its own locators
        self._name = repr(py_func)
        self._py_func = py_func
        mine, ship = machine_dir(), ship_dir()
        self._impl = _Impl(py_func, _Locator(py_func, mine or HERE))
        base = self._impl.filename_base
        self._sources = []  # (index file, whether it holds code for the portable target)
        shipped = shipped_dir()
        if shipped is not None and ship is None and os.path.isdir(shipped):
            self._sources.append((_CacheFile(shipped, base, STAMP), True))
        self._sources += [(_CacheFile(path, base, STAMP), False) for path in readonly_dirs()]
        self._targets = [] if mine is None else [_CacheFile(mine, base, STAMP)]
        self._sources += [(f, False) for f in self._targets]
        self._ship = _CacheFile(ship, base, STAMP) if ship is not None else None
        self._cache_path = mine or HERE
        self.enable()

    @property
    def _cache_file(self):
        """The index this machine's kernel is loaded from (a shipped one that holds it), else
        the one it would be saved to; for code that looks at Numba's single index file."""
        for f, portable in self._sources:
            if portable and os.path.exists(f._index_path):
                return f
        return self._targets[0] if self._targets else _CacheFile(HERE, self._impl.filename_base, STAMP)

    def flush(self):
        for f in self._targets:
            f.flush()

    def _keys(self, sig, magic):
        """Where to look, in order: the shipped kernels (the baseline CPU's code), then each
        folder of this machine for this CPU's code, then for the baseline CPU's (a wheel
        built on this machine left a copy there: a checkout of the same sources, or a
        process run from one, loads it rather than compiling)."""
        generic = (magic[0], PORTABLE_CPU, "")
        for f, portable in self._sources:
            for use in (generic,) if portable else (magic, generic):
                yield f, self._index_key(sig, _Magic(use))

    def holds(self, sig, magic):
        """Whether a compiled kernel for ``sig`` on a codegen with ``magic`` is on disk."""
        for f, key in self._keys(sig, magic):
            try:
                if key in f._load_index():
                    return True
            except Exception:  # noqa: BLE001 - an unreadable index holds nothing
                continue
        return False

    def _load_overload(self, sig, target_context):
        if not self._enabled:
            return None
        for f, key in self._keys(sig, target_context.codegen().magic_tuple()):
            try:
                data = f.load(key)
                if data is None:
                    continue
                if self._ship is not None:
                    self._ship.save(key, data)
                rebuilt = self._impl.rebuild(target_context, data)
                if numba.config.DEBUG_CACHE:  # as Numba's own cache says it (benchmarks.first_use counts these)
                    print(f"[cache] data loaded from {f._index_path}")
                return rebuilt
            except Exception:  # noqa: BLE001 - damaged or foreign: compile instead
                continue
        return None

    def _save_overload(self, sig, data):
        if not self._enabled or not self._impl.check_cachable(data):
            return
        key = self._index_key(sig, data.codegen)
        payload = self._impl.reduce(data)
        for f in self._targets + ([self._ship] if self._ship is not None else []):
            try:
                f.save(key, payload)
            except OSError:  # a full or read-only disk: compiled again next time
                pass
            except Exception:  # noqa: BLE001 - a damaged index: begun again
                try:
                    f.flush()
                    f.save(key, payload)
                except Exception:  # noqa: BLE001
                    pass


def jit(**options):
    """``numba.njit(**options)`` whose compiled code is cached as described above
    (Numba's own ``cache=True`` where the sources cannot be hashed)."""

    def wrap(fn):
        if STAMP is None:
            return njit(cache=True, **options)(fn)
        dispatcher = njit(**options)(fn)
        if hasattr(dispatcher, "py_func"):  # (not with NUMBA_DISABLE_JIT=1: the plain function)
            dispatcher._cache = KernelCache(dispatcher.py_func)
        return dispatcher

    return wrap
