"""Device paths to and from cuDF, checked by contract without cuDF: ``SoA.from_cudf``
takes device buffers, and ``layouts.dask.read_records(device="cuda")`` converts each
partition on the GPU and hands its device columns to cuDF.

A stand-in ``cudf`` module (and ``dask_cudf``) is put in ``sys.modules``. Its columns
keep their values in Numba device arrays (simulated here, real on a GPU) and expose
what cuDF exposes: ``Series.__cuda_array_interface__`` with a ``"<t1"`` bit ``mask``
object where there are nulls (and NotImplementedError for strings and categoricals, as
cuDF raises), ``Series.null_count``/``dtype``, ``Series.to_pylibcudf()`` whose column
exports ``__arrow_c_device_array__`` (strings), ``Series.from_categorical(categorical,
codes=)``, ``DataFrame(dict)``/``columns``/``df[name]``, ``RangeIndex``. Every way to
the host (``to_arrow``, ``to_pandas``, ``to_numpy``, ``values_host``) raises unless a
test allows it, and records that it was called.
"""

import ctypes
import sys
import types

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo
from layouts._cuda import device as _device

ROWS = 37  # not a multiple of 8: the last validity and boolean bytes are partial


# ----------------------------------------------------------------------- the stand-in
class HostRoundTrip(AssertionError):
    pass


class FakeCudf:
    """State shared by the stand-in module: which host conversions are allowed, and
    which were made."""

    def __init__(self):
        self.allow_host = set()  # column names whose to_arrow() is allowed
        self.host_calls = []


def _dev(host):
    """A device array holding a copy of a host array (test setup only)."""
    return _device.cuda().to_device(np.ascontiguousarray(host))


def _pack(valid):
    return np.packbits(np.asarray(valid, dtype=bool), bitorder="little")


class _Mask:
    """What cuDF puts under ``"mask"``: an object whose interface is the bitmap as bits."""

    def __init__(self, bits, n):
        self.bits = bits
        self.__cuda_array_interface__ = {
            "shape": (n,),
            "typestr": "<t1",
            "data": (_device.pointer(bits), True),
            "strides": None,
            "version": 1,
        }


def make_module(state):
    cudf = types.ModuleType("cudf")
    cudf.state = state

    class Series:
        """A cuDF-like column: values + validity on the device, or strings, or a categorical."""

        def __init__(self, data=None, nan_as_null=True, *, mask=None, dtype=None, name=None):
            self.name, self._kind, self._mask_bits = name, "values", None
            if isinstance(data, Series):
                self.__dict__.update(data.__dict__)
                return
            cai = getattr(data, "__cuda_array_interface__", None)
            if cai is not None:  # device memory from layouts: wrapped, not copied (as cuDF does)
                assert nan_as_null is False, "layouts must pass nan_as_null=False"
                self._owner, self._dtype = data, np.dtype(cai["typestr"])
                n, size = cai["shape"][0], self._dtype.itemsize
                stride = (cai.get("strides") or (size,))[0]
                if stride == size:
                    self._values = _device.from_interface(cai, owner=data)
                else:  # cuDF makes strided input contiguous (a device copy); so does this stand-in
                    extent = _device.from_interface(
                        {**cai, "shape": ((n - 1) * stride + size,), "typestr": "|u1", "strides": None}, owner=data
                    ).copy_to_host()
                    rows = np.lib.stride_tricks.as_strided(extent, (n, size), (stride, 1))
                    self._values = _dev(np.ascontiguousarray(rows).reshape(-1))
                self._n = n
                m = cai.get("mask")
                if m is not None:
                    md = m.__cuda_array_interface__
                    assert md["typestr"] == "<t1" and md["shape"] == (n,), md
                    self._mask_bits = _device.from_interface(
                        {**md, "typestr": "|u1", "shape": ((n + 7) // 8,)}, owner=m
                    )
                    self._mask_owner = m
                return
            host = np.asarray(data, dtype=dtype)  # test setup: host data copied to the device once
            self._dtype, self._n = host.dtype, len(host)
            self._values = _dev(host.view(np.uint8).reshape(-1) if host.size else np.zeros(0, np.uint8))
            if mask is not None:
                self._mask_bits = _dev(_pack(mask))

        # --- construction of the other kinds (test setup and layouts' to_cudf)
        @classmethod
        def strings(cls, values, name=None, large=False):
            s = cls.__new__(cls)
            s.name, s._kind, s._n, s._dtype = name, "strings", len(values), np.dtype("O")
            encoded = [b"" if v is None else v.encode() for v in values]
            ends = np.concatenate([[0], np.cumsum([len(b) for b in encoded])]).astype("<i8" if large else "<i4")
            s._large = large
            s._offsets = _dev(ends)
            s._chars = _dev(np.frombuffer(b"".join(encoded) or b"\0", np.uint8))
            s._mask_bits = _dev(_pack([v is not None for v in values])) if None in values else None
            return s

        @classmethod
        def from_pylibcudf(cls, column, metadata=None):
            """A string column over a (stand-in) pylibcudf column's buffers, no copy."""
            assert column.type.id == "STRING"
            offsets = column.children[0]
            s = cls.__new__(cls)
            s.name, s._kind, s._n, s._dtype = None, "strings", column.size, np.dtype("O")
            s._large = offsets.type.id == "INT64"
            s._offsets = _device.from_interface(offsets.data.obj.__cuda_array_interface__, owner=offsets.data)
            s._chars = _device.from_interface(column.data.obj.__cuda_array_interface__, owner=column.data)
            s._mask_bits = (
                None
                if column.mask is None
                else _device.from_interface(column.mask.obj.__cuda_array_interface__, owner=column.mask)
            )
            o = column.offset
            if o:  # the stand-in keeps no offset: it makes its own offset-free copy (test side)
                ends = s._offsets.copy_to_host().view("<i8" if s._large else "<i4")[o : o + column.size + 1]
                s._offsets = _dev(ends)
                if s._mask_bits is not None:
                    bits = np.unpackbits(s._mask_bits.copy_to_host(), bitorder="little")[o : o + column.size]
                    s._mask_bits = _dev(_pack(bits))
            assert column.null_count == s.null_count
            return s

        @classmethod
        def from_categorical(cls, categorical, codes=None):
            codes = cls(codes, nan_as_null=False) if codes is not None else cls(np.asarray(categorical.codes))
            s = cls.__new__(cls)
            s.name, s._kind, s._n, s._dtype = None, "category", codes._n, _CategoryDtype()
            s._codes, s._categories, s._mask_bits = codes, list(categorical.categories), None
            return s

        # --- what cuDF exposes
        @property
        def dtype(self):
            return self._dtype

        def __len__(self):
            return self._n

        @property
        def null_count(self):
            if self._kind == "category":
                return int((self._codes.values() == -1).sum())
            if self._mask_bits is None:
                return 0
            return int(self._n - self.valid().sum())

        @property
        def __cuda_array_interface__(self):
            if self._kind != "values":  # cuDF: "dtype ... is not yet supported via __cuda_array_interface__"
                raise NotImplementedError(f"dtype {self._dtype} is not yet supported via `__cuda_array_interface__`")
            out = {
                "shape": (self._n,),
                "strides": (self._dtype.itemsize,),
                "typestr": self._dtype.str,
                "data": (_device.pointer(self._values), False),
                "version": 1,
            }
            if self._mask_bits is not None and self.null_count:
                out["mask"] = _Mask(self._mask_bits, self._n)
            return out

        def to_pylibcudf(self):
            return _PlcColumn(self), {"name": self.name}

        def to_arrow(self):
            state.host_calls.append(("to_arrow", self.name))
            if self.name not in state.allow_host:
                raise HostRoundTrip(f"Series.to_arrow() of column {self.name!r}: a host round trip")
            return self.arrow()

        def _host(self, what):
            state.host_calls.append((what, self.name))
            raise HostRoundTrip(f"Series.{what} of column {self.name!r}: a host round trip")

        def to_pandas(self, *a, **k):
            self._host("to_pandas")

        def to_numpy(self, *a, **k):
            self._host("to_numpy")

        def to_cupy(self, *a, **k):
            self._host("to_cupy")

        @property
        def values_host(self):
            return self._host("values_host")

        def tolist(self):
            self._host("tolist")

        # --- test inspection (not part of the interface layouts may use)
        def valid(self):
            if self._kind == "category":
                return self._codes.values() != -1
            if self._mask_bits is None:
                return np.ones(self._n, bool)
            bits = self._mask_bits.copy_to_host()
            return np.unpackbits(bits, bitorder="little")[: self._n].astype(bool)

        def values(self):
            if self._kind == "category":
                return self._codes.values()
            return self._values.copy_to_host()[: self._n * self._dtype.itemsize].view(self._dtype)

        def arrow(self):
            mask = None if self._mask_bits is None else ~self.valid()
            if self._kind == "strings":
                ends = self._offsets.copy_to_host().view("<i8" if self._large else "<i4")
                chars = self._chars.copy_to_host().tobytes()
                items = [chars[ends[i] : ends[i + 1]].decode() for i in range(self._n)]
                return pa.array(
                    [None if mask is not None and mask[i] else v for i, v in enumerate(items)],
                    pa.large_string() if self._large else pa.string(),
                )
            if self._kind == "category":
                codes = self._codes.values()
                return pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes == -1), self._categories)
            return pa.array(self.values(), mask=mask)

    class _CategoryDtype:
        def __str__(self):
            return "category"

        def __eq__(self, other):
            return isinstance(other, _CategoryDtype)

        __hash__ = object.__hash__

    class DataFrame:
        def __init__(self, data):
            self._data = {}
            for name, s in data.items():
                s = s if isinstance(s, Series) else Series(s)
                s.name = name
                self._data[name] = s
            self.index = RangeIndex(0, len(self))

        @property
        def columns(self):
            return list(self._data)

        def __getitem__(self, name):
            return self._data[name]

        def __len__(self):
            return len(next(iter(self._data.values()))) if self._data else 0

        def to_arrow(self, *a, **k):
            state.host_calls.append(("DataFrame.to_arrow", None))
            raise HostRoundTrip("DataFrame.to_arrow(): a host round trip")

        def to_pandas(self, *a, **k):
            state.host_calls.append(("DataFrame.to_pandas", None))
            raise HostRoundTrip("DataFrame.to_pandas(): a host round trip")

    class RangeIndex:
        def __init__(self, start, stop):
            self.start, self.stop = start, stop

    cudf.Series, cudf.DataFrame, cudf.RangeIndex = Series, DataFrame, RangeIndex
    return cudf


class _PlcColumn:
    """``pylibcudf.Column`` as far as layouts uses it: the Arrow C Device Data
    Interface export of a string column (validity, offsets, chars on the device)."""

    released = 0

    def __init__(self, series):
        self.series = series

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        from layouts._cuda import c_device as cd

        s = self.series
        assert s._kind == "strings", "only strings are exported this way in these tests"
        buffers = (ctypes.c_void_p * 3)(
            0 if s._mask_bits is None else _device.pointer(s._mask_bits),
            _device.pointer(s._offsets),
            _device.pointer(s._chars),
        )
        device_array = cd.ArrowDeviceArray()
        arr = device_array.array
        arr.length, arr.null_count, arr.offset, arr.n_buffers, arr.n_children = s._n, s.null_count, 0, 3, 0
        arr.buffers = ctypes.cast(buffers, ctypes.POINTER(ctypes.c_void_p))
        arr.release = _release
        device_array.device_type, device_array.device_id = cd.ARROW_DEVICE_CUDA, 0
        address = ctypes.addressof(device_array)
        cd._capsules[address] = device_array
        _keep[address] = (buffers, s)
        capsule = cd._new_capsule(address, b"arrow_device_array", cd._capsule_gone)
        schema = (pa.large_string() if s._large else pa.string()).__arrow_c_schema__()
        return schema, capsule


_keep: dict = {}


def _release_impl(ptr):
    from layouts._cuda import c_device as cd

    array = ptr.contents
    array.release = cd._RELEASE()
    _PlcColumn.released += 1


def _make_release():
    from layouts._cuda import c_device as cd

    return cd._RELEASE(_release_impl)


_release = _make_release()


def make_pylibcudf():
    """``pylibcudf`` as far as ``to_cudf`` uses it to build string columns."""
    plc = types.ModuleType("pylibcudf")
    plc.TypeId = types.SimpleNamespace(INT32="INT32", INT64="INT64", STRING="STRING")

    class DataType:
        def __init__(self, type_id):
            self.id = type_id

    class gpumemoryview:  # noqa: N801 - pylibcudf's name
        def __init__(self, obj):
            assert hasattr(obj, "__cuda_array_interface__")
            self.obj = obj

    class Column:
        def __init__(self, data_type, size, data, mask, null_count, offset, children):
            self.type, self.size, self.data, self.mask = data_type, size, data, mask
            self.null_count, self.offset, self.children = null_count, offset, children

    plc.DataType, plc.gpumemoryview, plc.Column = DataType, gpumemoryview, Column
    return plc


@pytest.fixture
def fake(monkeypatch):
    state = FakeCudf()
    cudf = make_module(state)
    monkeypatch.setitem(sys.modules, "cudf", cudf)
    monkeypatch.setitem(sys.modules, "pylibcudf", make_pylibcudf())
    monkeypatch.setitem(sys.modules, "dask_cudf", types.ModuleType("dask_cudf"))
    return cudf


# ---------------------------------------------------------------------------- records
TICK = np.dtype(
    [
        ("ts", "<M8[ns]"),
        ("px", ">f8"),
        ("qty", "<i4"),
        ("flag", "?"),
        ("pos", "<f4", (3,)),
        ("sym", "S6"),
        ("side", "u1"),
    ],
    align=True,
)


def tick_records(n=ROWS, seed=0):
    rng = np.random.default_rng(seed)
    a = np.zeros(n, TICK)
    a["ts"] = (np.arange(n) * 1_000_000 + 1_700_000_000_000_000_000).astype("M8[ns]")
    a["ts"][3] = np.datetime64("NaT")
    a["px"] = rng.normal(100, 5, n)
    a["qty"] = rng.integers(-1, 500, n)
    a["qty"][[0, 9, 17]] = -1
    a["flag"] = rng.random(n) < 0.4
    a["pos"] = rng.normal(size=(n, 3)).astype(np.float32)
    a["sym"] = rng.choice([b"AAPL", b"MSFT", b"GOOGLE", b""], n)
    a["side"] = rng.integers(0, 3, n)
    return a


def records_bytes(aos):
    return aos.to_device("cpu").array.view(np.uint8).reshape(-1).tobytes()


def frame_from_table(cudf, table, names=None):
    """A stand-in cuDF frame holding an Arrow table's columns on the device (setup)."""
    import pandas as pd

    data = {}
    for name in names or table.column_names:
        col = table.column(name).combine_chunks()
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            data[name] = cudf.Series.strings(col.to_pylist(), large=pa.types.is_large_string(col.type))
        elif pa.types.is_dictionary(col.type):
            categorical = pd.Categorical.from_codes(
                np.asarray(col.indices.fill_null(-1)), categories=col.dictionary.to_pylist()
            )
            data[name] = cudf.Series.from_categorical(categorical)
        else:
            values = col.to_numpy(zero_copy_only=False)
            valid = None if col.null_count == 0 else np.asarray(col.is_valid())
            if valid is not None:
                values = np.asarray(
                    col.fill_null(
                        pa.scalar(0, col.type)
                        if not pa.types.is_timestamp(col.type)
                        else pa.scalar(0, pa.int64()).cast(col.type)
                    ).to_numpy()
                )
            data[name] = cudf.Series(values, mask=valid)
    return cudf.DataFrame(data)


# ---------------------------------------------------------------------- from_cudf
def test_from_cudf_takes_device_buffers_and_matches_the_cpu_path(fake, monkeypatch):
    layout = lo.Layout.from_dtype(TICK, bytes_as="string")
    a = tick_records()
    cpu = lo.AoS(a, layout).to_soa(nulls={"qty": -1})
    table = cpu.to_arrow()
    flat = {n: table.column(n) for n in table.column_names if n != "pos"}
    for k in range(3):  # a sub-array as to_cudf names it: one column per element
        flat[f"pos.{k}"] = pa.array(a["pos"][:, k])
    df = frame_from_table(fake, pa.table(flat))
    before = _PlcColumn.released
    moves, arenas, to_host, empty = [], [], _device.to_host, _device.empty
    with monkeypatch.context() as m:  # the conversion alone: what crosses between host and device
        m.setattr(_device, "to_device", lambda host: pytest.fail("a host-to-device copy of column data"))
        m.setattr(
            _device, "to_host", lambda dev, nbytes=None, out=None: moves.append(nbytes) or to_host(dev, nbytes, out)
        )
        m.setattr(_device, "empty", lambda nbytes: arenas.append(nbytes) or empty(nbytes))
        got = lo.SoA.from_cudf(df, layout, fill={"qty": -1})
    assert got.device == "cuda" and fake.state.host_calls == []  # no host round trip
    assert moves == [4, 4]  # only the first and last string offsets come to the host (to size the bytes)
    assert arenas[0] == got.arena.shape[0]  # one arena; the rest are the booleans' staging bytes
    assert _PlcColumn.released == before + 1  # the strings' C device export was released after the copy
    expect = lo.SoA.from_arrow(table, layout, fill={"qty": -1}).to_aos()
    assert records_bytes(got.to_aos()) == records_bytes(expect) == records_bytes(lo.AoS(a, layout))
    back = got.to_device("cpu").to_arrow()
    assert back.equals(table)  # values, nulls (qty, NaT) and types, as the CPU made them
    assert back.column("qty").null_count == 3 and back.column("ts").null_count == 1


@pytest.mark.slow
def test_from_cudf_round_trips_to_cudf_without_the_host(fake):
    """SoA -> cuDF (wrapping the arena) -> SoA (device copies) -> records: bit-exact."""
    layout = lo.Layout.from_dtype(TICK, bytes_as="string")
    a = tick_records(seed=4)
    gpu = lo.AoS(a, layout).to_soa(device="cuda", nulls={"qty": -1})
    df = gpu.to_cudf()
    assert df.columns == ["ts", "px", "qty", "flag", "pos.0", "pos.1", "pos.2", "sym", "side"]
    assert df["px"].__cuda_array_interface__["data"][0] == gpu["px"].__cuda_array_interface__["data"][0]
    assert df["qty"].null_count == 3 and df["ts"].null_count == 1
    assert df["flag"].dtype == np.dtype(bool) and df["flag"].values().tolist() == a["flag"].tolist()
    assert df["pos.1"].values().tolist() == a["pos"][:, 1].tolist()
    back = lo.SoA.from_cudf(df, layout, fill={"qty": -1})
    assert fake.state.host_calls == []
    assert records_bytes(back.to_aos()) == records_bytes(lo.AoS(a, layout))


def test_validity_realigned_for_slices_and_sub_array_elements(fake):
    """A device SoA whose columns start mid-byte (a slice packed for the device) and a
    nullable sub-array: to_cudf realigns the bitmaps, on the device."""
    dtype = np.dtype([("q", "<i4"), ("b", "?"), ("v", "<f8", (2,)), ("s", "S3")])
    n = 50
    rng = np.random.default_rng(2)
    q_valid = rng.random(n) < 0.7
    table = pa.table(
        {
            "q": pa.array(rng.integers(0, 9, n), pa.int32(), mask=~q_valid),
            "b": pa.array(rng.random(n) < 0.5),
            "s": pa.array([f"s{i}" for i in range(n)]),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=2 * n), mask=rng.random(2 * n) < 0.3), 2),
        }
    )
    part = table.slice(13, 21)
    layout = lo.Layout.from_dtype(dtype, bytes_as="string")
    soa = lo.SoA.from_arrow(part, layout, fill={"q": -1, "v": 0.0}).to_device("cuda")
    assert soa._columns[0].offset % 8 != 0 and soa._columns[3].offset % 8 != 0
    df = soa.to_cudf()
    assert df["q"].valid().tolist() == part.column("q").is_valid().to_pylist()
    assert df["b"].values().tolist() == part.column("b").to_pylist()
    v = part.column("v").combine_chunks().flatten()
    assert df["v.1"].valid().tolist() == v.is_valid().to_pylist()[1::2]
    assert df["s"].arrow().to_pylist() == part.column("s").to_pylist()


def test_enums_become_categoricals_over_the_codes(fake):
    layout = lo.Layout.from_c("enum side { BUY = 1, SELL = 2 };\nstruct r { int id; enum side side; };", "struct r")
    a = np.zeros(12, layout.dtype)
    a["id"], a["side"] = np.arange(12), [1, 2, 2, 7, 1, 2, 1, 1, 2, 2, 1, 2]
    df = lo.AoS(a, layout).to_soa(device="cuda").to_cudf()
    assert str(df["side"].dtype) == "category" and df["side"]._categories == ["BUY", "SELL", "7"]
    assert df["side"].values().tolist() == [0, 1, 1, 2, 0, 1, 0, 0, 1, 1, 0, 1]
    fake.state.allow_host.add("side")  # enum names are a dictionary, checked on the host
    back = lo.SoA.from_cudf(df, layout)
    assert fake.state.host_calls == [("to_arrow", "side")]  # that column only
    assert records_bytes(back.to_aos()) == records_bytes(lo.AoS(a, layout))
    # nulls: cuDF codes them -1, so the codes are copied with -1 under them (on the device)
    table = pa.table(
        {
            "id": pa.array(np.arange(4, dtype=np.int32)),
            "side": pa.array(["SELL", None, "BUY", "SELL"]).dictionary_encode(),
        }
    )
    df = lo.SoA.from_arrow(table, layout, fill={"side": "BUY"}).to_device("cuda").to_cudf()
    assert df["side"].values().tolist() == [0, -1, 1, 0] and df["side"]._categories == ["SELL", "BUY"]
    assert df["side"].null_count == 1


def test_columns_of_another_width_or_unit_go_through_the_host_one_by_one(fake):
    layout = lo.Layout.from_dtype(np.dtype([("qty", "<i4"), ("ts", "<M8[us]"), ("day", "<M8[D]"), ("px", "<f8")]))
    n = 9
    df = fake.DataFrame(
        {
            "qty": fake.Series(np.arange(n, dtype=np.int64)),  # int64 for int32: cast, checked
            "ts": fake.Series((np.arange(n) * 1000).astype("M8[ns]")),  # ns for us
            "day": fake.Series((np.arange(n) * 86400).astype("M8[s]")),  # date32: no cuDF type
            "px": fake.Series(np.linspace(0, 1, n)),
        }
    )
    fake.state.allow_host.update({"qty", "ts", "day"})
    got = lo.SoA.from_cudf(df, layout).to_aos().to_device("cpu").to_numpy()
    assert sorted(name for _, name in fake.state.host_calls) == ["day", "qty", "ts"]  # px stayed on the device
    assert got["qty"].tolist() == list(range(n)) and got["px"].tolist() == np.linspace(0, 1, n).tolist()
    assert (got["ts"] == np.arange(n).astype("M8[us]")).all() and (got["day"] == np.arange(n).astype("M8[D]")).all()
    df2 = fake.DataFrame(
        {
            "qty": fake.Series(np.array([1, 2**40], dtype=np.int64)),
            "ts": fake.Series(np.zeros(2, "M8[us]")),
            "day": fake.Series(np.zeros(2, "M8[s]")),
            "px": fake.Series(np.zeros(2)),
        }
    )
    with pytest.raises(
        lo.ConversionError,
        match=r"column 'qty' has Arrow type int64; field 'qty' \(<i4\) needs int32, "
        r"and row 1 holds 1099511627776, which does not fit it",
    ):
        lo.SoA.from_cudf(df2, layout)


def test_unsupported_and_mismatched_columns_are_library_errors_before_any_copy(fake):
    layout = lo.Layout.from_dtype(np.dtype([("qty", "<i4"), ("ts", "<M8[ns]"), ("ok", "?"), ("name", "S4")]))
    n = 4
    good = {
        "qty": fake.Series(np.arange(n, dtype=np.int32)),
        "ts": fake.Series(np.zeros(n, "M8[ns]")),
        "ok": fake.Series(np.ones(n, bool)),
        "name": fake.Series.strings(["a", "b", "c", "d"]),
    }
    lo.SoA.from_cudf(fake.DataFrame(good), lo.Layout.from_dtype(layout.dtype, bytes_as="string"))
    cases = [
        (
            {"qty": fake.Series.strings(["1", "2", "3", "4"])},
            r"column 'qty' has cuDF dtype object \(text\); field 'qty' \(<i4\) needs int32 \(number\), and text "
            r"values are not converted to number by from_cudf: convert the column first, e.g\. "
            r"df\['qty'\] = df\['qty'\]\.astype\('int32'\)",
        ),
        (
            {"ts": fake.Series(np.arange(n, dtype=np.int64))},
            r"column 'ts' has cuDF dtype int64 \(number\); field 'ts' \(<M8\[ns\]\) needs timestamp\[ns\] \(time\).*"
            r"astype\('datetime64\[ns\]'\)",
        ),
        (
            {"ok": fake.Series(np.arange(n, dtype=np.int8))},
            r"column 'ok' has cuDF dtype int8 \(number\); field 'ok' \(\|b1\) needs bool \(boolean\).*astype\('bool'\)",
        ),
        (
            {"name": fake.Series(np.arange(n, dtype=np.int32))},
            r"column 'name' has cuDF dtype int32 \(number\); field 'name' \(\|S4\) needs .* \(text\).*astype\('str'\)",
        ),
    ]
    for change, message in cases:
        with pytest.raises(lo.ConversionError, match=message):
            lo.SoA.from_cudf(fake.DataFrame({**good, **change}), layout)
    odd = fake.Series(np.arange(n, dtype=np.int32))
    odd._dtype = _ListDtype()
    with pytest.raises(
        lo.ConversionError,
        match=r"column 'qty' is list<item: int32> in cuDF; field 'qty' \(<i4\) "
        r"needs int32 \(number\), which a cuDF list<item: int32> column "
        r"cannot give: convert the column first",
    ):
        lo.SoA.from_cudf(fake.DataFrame({**good, "qty": odd}), layout)
    with pytest.raises(
        lo.ConversionError,
        match=r"the cuDF frame has no column 'ts' \(nor \['ts'\]\); it has "
        r"\['qty', 'ok', 'name'\]",
    ):
        lo.SoA.from_cudf(fake.DataFrame({k: v for k, v in good.items() if k != "ts"}), layout)
    with pytest.raises(lo.LayoutError, match=r"fill names \['nope'\], which are not leaf fields"):
        lo.SoA.from_cudf(fake.DataFrame(good), layout, fill={"nope": 1})
    assert fake.state.host_calls == []  # every refusal came before a host copy


class _ListDtype:
    def __str__(self):
        return "list<item: int32>"

    def __eq__(self, other):
        return isinstance(other, _ListDtype)

    __hash__ = object.__hash__


def test_nulls_without_a_fill_name_the_first_row(fake):
    layout = lo.Layout.from_dtype(np.dtype([("qty", "<i4"), ("ok", "?")]))
    valid = np.ones(20, bool)
    valid[[11, 15]] = False
    df = fake.DataFrame(
        {"qty": fake.Series(np.arange(20, dtype=np.int32), mask=valid), "ok": fake.Series(np.ones(20, bool))}
    )
    with pytest.raises(
        lo.ConversionError,
        match=r"column 'qty' has 2 nulls \(first at row 11\), but field "
        r"'qty' \(<i4 at offset 0\) cannot hold a null; pass "
        r"fill=\{'qty': value\}",
    ):
        lo.SoA.from_cudf(df, layout)
    got = lo.SoA.from_cudf(df, layout, fill={"qty": -5}).to_aos().to_device("cpu").to_numpy()
    assert got["qty"].tolist() == [i if valid[i] else -5 for i in range(20)]
    assert fake.state.host_calls == []
    df = fake.DataFrame(
        {"qty": fake.Series(np.arange(20, dtype=np.int32)), "ok": fake.Series(np.ones(20, bool), mask=valid)}
    )
    fake.state.allow_host.add("ok")  # a boolean fill is written by pyarrow's fill_null, on the host
    got = lo.SoA.from_cudf(df, layout, fill={"ok": False}).to_aos().to_device("cpu").to_numpy()
    assert got["ok"].tolist() == valid.tolist() and fake.state.host_calls == [("to_arrow", "ok")]


def test_damaged_string_offsets_are_refused_on_the_device(fake):
    layout = lo.Layout.from_dtype(np.dtype([("name", "S4")]), bytes_as="string")
    s = fake.Series.strings(["ab", "cd", "ef"])
    s._offsets = _dev(np.array([0, 4, 2, 6], "<i4"))  # goes down at row 1
    with pytest.raises(lo.ConversionError, match=r"column 'name' \(cuDF strings\) row 1: its offsets go down"):
        lo.SoA.from_cudf(fake.DataFrame({"name": s}), layout)
    s._offsets = _dev(np.array([2, 2, 4, 6], "<i4"))  # a column whose bytes start later: rebased
    got = lo.SoA.from_cudf(fake.DataFrame({"name": s}), layout).to_device("cpu").to_arrow()
    assert got.column("name").to_pylist() == ["", "cd", "ef"]


def test_empty_frames(fake):
    layout = lo.Layout.from_dtype(np.dtype([("qty", "<i4"), ("ok", "?"), ("name", "S3")]), bytes_as="string")
    df = fake.DataFrame(
        {
            "qty": fake.Series(np.zeros(0, np.int32)),
            "ok": fake.Series(np.zeros(0, bool)),
            "name": fake.Series.strings([]),
        }
    )
    soa = lo.SoA.from_cudf(df, layout)
    assert len(soa) == 0 and len(soa.to_aos()) == 0 and fake.state.host_calls == []


# --------------------------------------------------------------------------- dask
def test_dask_partitions_convert_on_the_device(fake, monkeypatch, tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    import layouts.dask as ld
    from layouts.kernels import cpu

    layout = lo.Layout.from_dtype(np.dtype([("ts", "<i8"), ("px", ">f8"), ("qty", "<i4"), ("flag", "?")]))
    a = np.zeros(50, layout.dtype)
    a["ts"], a["px"], a["qty"] = np.arange(50), np.arange(50) / 4, np.arange(50) % 7 - 1
    a["flag"] = np.arange(50) % 3 == 0
    path = tmp_path / "ticks.bin"
    path.write_bytes(b"HEAD" + a.tobytes())
    cpu_frames = ld.read_records(
        str(path), layout, offset=4, blocksize=16 * layout.itemsize, nulls={"qty": -1}
    ).compute(scheduler="sync")

    built = {}

    def from_map(func, parts, meta=None, divisions=None, **kwargs):  # dask-cudf's collection is not faked
        built.update(func=func, parts=list(parts), meta=meta, divisions=divisions)
        return built

    monkeypatch.setattr(dd, "from_map", from_map)
    copies = []
    to_device = _device.to_device
    monkeypatch.setattr(_device, "to_device", lambda host: copies.append(np.asarray(host).nbytes) or to_device(host))
    monkeypatch.setattr(cpu, "aos_to_soa", lambda *a, **k: pytest.fail("a partition was converted on the CPU"))
    ld.read_records(str(path), layout, offset=4, blocksize=16 * layout.itemsize, nulls={"qty": -1}, device="cuda")
    assert isinstance(built["meta"], fake.DataFrame) and built["meta"].columns == layout.names
    assert built["divisions"] == (0, 16, 32, 48, 49)
    frames = [built["func"](part) for part in built["parts"]]
    assert copies[1:] == [16 * layout.itemsize] * 3 + [2 * layout.itemsize]  # one copy of each range's bytes
    assert fake.state.host_calls == []
    for frame, part in zip(frames, built["parts"]):
        first = part[3]
        assert (frame.index.start, frame.index.stop) == (first, first + len(frame))
        rows = cpu_frames.iloc[first : first + len(frame)]
        for name in layout.names:
            series = frame[name]
            expect = rows[name]
            valid = series.valid()
            assert valid.tolist() == expect.notna().tolist(), name
            assert series.values()[valid].tolist() == expect[valid].astype(series.dtype).tolist(), name
