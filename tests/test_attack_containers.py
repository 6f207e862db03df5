"""What an attacker found in the containers and the kernel cache, fixed.

Each scenario that could crash (SIGBUS) or hang runs in a child process with a
timeout: a signal or a hang there is a failed test, not the end of the run.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import layouts as lo

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGBUS on a truncated mapping, Linux")

ENV = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _child(code, timeout=120, env=None):
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env or ENV, timeout=timeout
    )
    assert run.returncode == 0, (run.returncode, run.stdout[-2000:], run.stderr[-3000:])
    return run.stdout


# ------------------------------------------------ 1. copies of a mapped file that shrank


@linux
@pytest.mark.parametrize("source", ["path", "file object"])
@pytest.mark.slow
def test_copies_of_a_mapped_file_that_shrank_are_conversion_errors(tmp_path, source):
    """pickle.dumps (what Dask does to ship an AoS) and np.array(aos) copy the mapped
    records: guarded, they raise the ConversionError to_soa raises, never SIGBUS."""
    out = _child(f"""
        import os, pickle, numpy as np, layouts as lo
        path = {str(tmp_path / "m.bin")!r}
        dt = [("a", "<i8"), ("b", "<i8")]
        np.zeros(100_000, dt).tofile(path)
        f = open(path, "rb")
        aos = lo.read_records(path if {source == "path"} else f, dt)
        part = lo.AoS(aos.to_numpy()[10:], aos.layout)  # a view of the map
        os.truncate(path, 4096)  # another program shrinks the file
        for what, call in [("to_soa", aos.to_soa), ("pickle", lambda: pickle.dumps(aos)),
                           ("pickle part", lambda: pickle.dumps(part)),
                           ("np.array", lambda: np.array(aos)), ("astype", lambda: np.asarray(aos, dtype="V16")),
                           ("copy=True", lambda: aos.__array__(copy=True))]:
            try:
                call()
            except lo.ConversionError as err:
                print(what, "|", err)
            else:
                print(what, "| no error")
    """)
    lines = dict(line.split(" | ", 1) for line in out.strip().splitlines())
    assert set(lines) == {"to_soa", "pickle", "pickle part", "np.array", "astype", "copy=True"}, out
    gone = "it is now 4,096 bytes, so record 256 (byte 4,096 of the file) and the ones after it are gone"
    assert f"m.bin shrank while it was being read: {gone}" in lines["to_soa"], out
    for what in ("pickle", "pickle part"):
        assert f"m.bin shrank while it was being pickled: {gone}" in lines[what], out
        assert "read it again (layouts.read_records) once it is complete" in lines[what], out
    for what in ("np.array", "astype", "copy=True"):
        assert f"m.bin shrank while it was being copied: {gone}" in lines[what], out


def test_a_mapped_aos_pickles_as_its_records(tmp_path):
    path = tmp_path / "m.bin"
    records = np.array([(1, 2.5), (3, -1.0)], [("a", "<i8"), ("b", "<f8")])
    records.tofile(path)
    import pickle

    aos = lo.read_records(path, records.dtype)
    back = pickle.loads(pickle.dumps(aos))
    assert type(back.array) is np.ndarray and back.array.tolist() == records.tolist()
    copied = np.array(aos)
    assert type(copied) is np.ndarray and copied.tolist() == records.tolist()
    assert not np.shares_memory(copied, aos.to_numpy())
    plain = lo.AoS(records)
    assert not np.shares_memory(plain.__array__(copy=True), records)
    assert np.asarray(plain) is records


def test_copies_of_records_keep_every_byte_and_casts_have_zero_padding(tmp_path):
    """NumPy copies a structured array field by field, leaving the copy's padding bytes as
    new memory held them: pickles and np.array() copies of an AoS copy the bytes instead
    (a mapped file's padding comes back as it is in the file), and a cast's padding is 0."""
    import pickle

    dt = np.dtype({"names": ["a"], "formats": ["<i2"], "offsets": [0], "itemsize": 8})
    raw = np.tile(np.frombuffer(bytes([7, 0, 1, 2, 3, 4, 5, 6]), np.uint8), 5000)
    raw.tofile(tmp_path / "p.bin")
    for _ in range(3):  # (garbage in freed memory, which a field-by-field copy would show)
        junk = [np.full(raw.size, 0xAB, np.uint8) for _ in range(8)]
        del junk
        aos = lo.read_records(tmp_path / "p.bin", dt)
        assert np.array(aos).view(np.uint8).tobytes() == raw.tobytes()
        assert pickle.loads(pickle.dumps(aos)).array.view(np.uint8).tobytes() == raw.tobytes()
        wide = np.dtype({"names": ["a"], "formats": ["<i4"], "offsets": [0], "itemsize": 8})
        cast = np.array(aos, dtype=wide)
        assert cast["a"].tolist() == [7] * 5000 and not cast.view(np.uint8).reshape(-1, 8)[:, 4:].any()


# ------------------------------------------------ 2. one file mapped twice

DT = np.dtype([("a", "<i8"), ("b", "<i8")])


def test_a_file_mapped_twice_is_one_buffer_to_the_claims(tmp_path):
    """Two maps of one file have different addresses and the same pages: a conversion
    writing through one refuses another reading or writing through the other."""
    from layouts._plan import claimed, file_span

    path = tmp_path / "shared.bin"
    np.zeros(1000, DT).tofile(path)
    out = np.memmap(path, dtype=DT, mode="r+")
    soa = lo.AoS(np.ones(850, DT)).to_soa()
    with claimed("test", file_span(out[100:200], "records 100-199 of the writer's map")):
        with pytest.raises(
            lo.LayoutError,
            match=r"AoS\.to_soa: the records being converted is being written right "
            r"now by another conversion .*writing records 100-199 of the "
            r"writer's map.*reading it now would mix old records with new ones",
        ):
            lo.read_records(path, DT).to_soa()
        with pytest.raises(
            lo.LayoutError,
            match=r"SoA\.to_aos: out= \(the records array passed\) is being written "
            r"right now .*two conversions writing one buffer at once",
        ):
            soa.to_aos(out=np.memmap(path, dtype=DT, mode="r+", offset=150 * DT.itemsize, shape=(850,)))
        # bytes of the file the writer does not hold are free: no false refusal
        assert len(lo.read_records(path, DT, offset=200 * DT.itemsize).to_soa()) == 800
        assert lo.read_records(path, DT, count=100).to_soa()["a"].to_arrow().to_pylist() == [0] * 100
        other = tmp_path / "other.bin"
        np.zeros(1000, DT).tofile(other)
        assert len(lo.read_records(other, DT).to_soa()) == 1000
    assert len(lo.read_records(path, DT).to_soa()) == 1000  # released


@pytest.mark.slow
def test_a_file_written_through_one_map_and_read_through_another_never_mixes(tmp_path):
    """The attack: one thread writes all-1 then all-2 records into a file through
    np.memmap(mode="r+"); another converts read_records of the same file. Each
    conversion is whole (a == b in every record) or refused, never mixed."""
    out = _child(f"""
        import threading, numpy as np, layouts as lo
        n, dt = 200_000, np.dtype([("a", "<i8"), ("b", "<i8")])
        path = {str(tmp_path / "shared.bin")!r}
        np.zeros(n, dt).tofile(path)
        out = np.memmap(path, dtype=dt, mode="r+")
        ones = lo.AoS(np.ones(n, dt)).to_soa()
        twos = lo.AoS(np.full(n, 2, "<i8").repeat(2).view(dt)).to_soa()
        done, writes = threading.Event(), [0, 0]
        def writer():
            while not done.is_set():
                try:
                    (ones if writes[0] % 2 else twos).to_aos(out=out)
                    writes[0] += 1
                except lo.LayoutError:
                    writes[1] += 1
        t = threading.Thread(target=writer)
        t.start()
        mixed = whole = refused = 0
        while whole + refused < 20 or writes[0] < 2:
            try:
                s = lo.read_records(path, dt).to_soa()
            except lo.LayoutError:
                refused += 1
                continue
            whole += 1
            mixed += int((np.asarray(s["a"]) != np.asarray(s["b"])).sum())
        done.set()
        t.join()
        print(mixed, whole, refused)
    """)
    mixed, whole, refused = map(int, out.split())
    assert mixed == 0 and whole + refused >= 20, out


# ------------------------------------------------ 3. a kernel cache of FIFOs

TINY = """
from layouts.kernels._cache import jit

@jit()
def plus_one(x):
    return x + 1
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_cache_files_that_are_fifos_are_misses_not_hangs(tmp_path):
    """A kernel cache whose index (or data) files are FIFOs hung the first call: Numba's
    loader opened them, and an open of a FIFO with no writer waits for ever. Now a
    cache file that is not a regular file is a miss: the kernel is compiled and saved
    over it. A small kernel through the same cache (cheap to compile), in a child."""
    (tmp_path / "tiny.py").write_text(TINY)
    cache = tmp_path / "cache"
    env = {
        **ENV,
        "LAYOUTS_CACHE_DIR": str(cache),
        "LAYOUTS_SHIPPED_KERNELS": "0",
        "PYTHONPATH": str(tmp_path) + os.pathsep + ENV["PYTHONPATH"],
    }
    index = _child(
        "import tiny; print(tiny.plus_one(41), tiny.plus_one._cache._cache_file._index_path)", env=env
    ).split()[1]  # compiled and saved: a regular index and data file
    os.unlink(index)
    os.mkfifo(index)
    out = _child(
        f"""
        import os, numba, tiny
        from layouts.kernels import _cache
        cache = tiny.plus_one._cache
        f = cache._cache_file
        assert f._index_path == {index!r}
        assert f._load_index() == {{}} and f.load("any key") is None
        assert not cache.holds((numba.int64,), ("x86_64", "host", ""))
        try:
            _cache._read_regular({index!r})
        except OSError as err:
            print(err)
        assert tiny.plus_one(41) == 42  # compiled, and saved over the FIFO
        assert os.path.isfile({index!r})
        (key, name), = f._load_index().items()
        os.unlink(os.path.join(os.path.dirname({index!r}), name))
        os.mkfifo(os.path.join(os.path.dirname({index!r}), name))
        assert f.load(key) is None  # a data file that is a FIFO: a miss
        print("done")
    """,
        env=env,
        timeout=60,
    )
    assert "not a regular file, so not a kernel cache file" in out and "done" in out, out


# ------------------------------------------------ 4. messages and raw exceptions


def test_datetime_nulls_take_nat_and_say_so_for_any_unit():
    """A day-unit field converts through another kernel than a second-unit one: the
    message named that ('converted as scale') and refused even NaT."""
    records = np.zeros(3, [("t", "<M8[D]"), ("d", "<m8[h]"), ("s", "<M8[s]")])
    records["t"][1] = records["d"][1] = records["s"][1] = np.datetime64("NaT")
    for name, value in [("t", np.datetime64(5, "D")), ("d", np.timedelta64(2, "h")), ("s", np.datetime64(5, "s"))]:
        with pytest.raises(
            lo.ConversionError,
            match=rf"nulls\['{name}'\]=.*: field '{name}' \(<[mM]8\[\w\] at offset "
            r"\d+\) is a datetime, whose null is NaT already \(nulls= "
            r"takes only NaT for it\).*write NaT in those records instead",
        ):
            lo.AoS(records).to_soa(nulls={name: value})
    nat = {"t": np.datetime64("NaT"), "d": np.timedelta64("NaT"), "s": np.datetime64("NaT")}
    soa = lo.AoS(records).to_soa(nulls=nat)
    assert [soa[n].null_count for n in "tds"] == [1, 1, 1]
    assert soa.to_aos().array.tobytes() == records.tobytes()
    assert lo.AoS(records).to_soa(out=soa).to_arrow().equals(lo.AoS(records).to_soa().to_arrow())


def test_a_complex_or_struct_field_names_its_leaf_columns():
    soa = lo.AoS(
        np.zeros(2, [("c", "<c16"), ("pos", [("x", "<f4"), ("y", "<f4")]), ("n", [("a", [("b", "u1")])])])
    ).to_soa()
    with pytest.raises(
        lo.LayoutError,
        match=r"no leaf column 'c': 'c' is a complex or struct field, whose leaf "
        r"columns are 'c\.re', 'c\.im'; take one of those \(soa\['c\.re'\]\), "
        r"or the whole field as an Arrow struct column with "
        r"soa\.to_arrow\(\)\.column\('c'\)",
    ):
        soa["c"]
    with pytest.raises(KeyError, match=r"no leaf column 'pos': .*leaf columns are 'pos\.x', 'pos\.y'"):
        soa["pos"]
    with pytest.raises(
        lo.LayoutError,
        match=r"'n\.a' is a complex or struct field, whose leaf columns are "
        r"'n\.a\.b'.*the Arrow struct column that holds it, "
        r"soa\.to_arrow\(\)\.column\('n'\)",
    ):
        soa["n.a"]
    with pytest.raises(
        KeyError,
        match=r"^no leaf column 'zz'; columns are \['c\.re', 'c\.im', 'pos\.x', 'pos\.y', "
        r"'n\.a\.b'\]$",
    ):
        soa["zz"]
    assert soa["c.im"].name == "c.im"


def test_to_pandas_with_numpy_types_names_the_date_they_cannot_hold():
    pytest.importorskip("pandas")
    soa = lo.AoS(np.array([(0,), (2**31 - 1,)], [("t", "<i8")]).view([("t", "<M8[D]")])).to_soa()
    for backend in ("numpy", "numpy_nullable"):
        with pytest.raises(
            lo.ConversionError,
            match=rf"SoA\.to_pandas\(dtype_backend='{backend}'\): column 't' "
            r"\(date32\[day\]\) holds the value 2147483647 \(days since "
            r"1970-01-01\), which that backend's types cannot hold "
            r"\(ValueError: .*\); use the default dtype_backend='pyarrow'",
        ):
            soa.to_pandas(dtype_backend=backend)
    assert str(soa.to_pandas()["t"].dtype) == "date32[day][pyarrow]"  # the default backend holds it


def test_an_soa_whose_arena_a_failed_call_reused_says_that_call_failed():
    dt = [("t", "<M8[D]")]
    good = np.zeros(2, dt)
    bad = np.array([(0,), (2**40,)], [("t", "<i8")]).view(dt)  # past date32
    first = lo.AoS(good).to_soa()
    with pytest.raises(lo.ConversionError, match=r"record 1: value 1099511627776 \(counts of D"):
        lo.AoS(bad).to_soa(out=first)
    with pytest.raises(
        lo.LayoutError,
        match=r"SoA\.to_arrow: this SoA's arena was reused by a later "
        r"to_soa\(out=\.\.\.\) that failed \(it raised, and returned no SoA\), "
        r"so its buffers now hold part of that call's records.*convert the "
        r"records again, into a new arena \(out=None\) or into this one",
    ):
        first.to_arrow()
    second = lo.AoS(good).to_soa(out=first)  # the fix works
    assert second.to_arrow().column("t").to_pylist() == [np.datetime64(0, "D").item()] * 2
    with pytest.raises(
        lo.LayoutError,
        match=r"SoA\.to_arrow: this SoA's arena was reused by a later "
        r"to_soa\(out=\.\.\.\), so its buffers now hold other records; use the "
        r"SoA that call returned",
    ):
        first.to_arrow()
