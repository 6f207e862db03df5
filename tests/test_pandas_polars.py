"""SoA.to_pandas and SoA.to_polars."""

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo

pd = pytest.importorskip("pandas")

DTYPE = np.dtype([("qty", "<i4"), ("px", ">f8"), ("sym", "S4"), ("pos", "<f4", (2,)), ("flag", "?"), ("ts", "<M8[ns]")])


@pytest.fixture
def soa():
    a = np.zeros(3, DTYPE)
    a["qty"] = [1, -1, 3]
    a["px"] = [1.5, 2.5, 3.5]
    a["sym"] = [b"AB", b"CDEF", b""]
    a["pos"] = [[1, 2], [3, 4], [5, 6]]
    a["flag"] = [True, False, True]
    a["ts"] = np.array(["2025-01-01", "NaT", "2025-01-03"], dtype="M8[ns]")
    return lo.AoS(a, lo.Layout.from_dtype(DTYPE, bytes_as="string")).to_soa(nulls={"qty": -1})


def test_to_pandas_arrow_dtypes_without_a_copy(soa):
    df = soa.to_pandas()
    assert list(df.columns) == ["qty", "px", "sym", "pos", "flag", "ts"]
    assert all(isinstance(t, pd.ArrowDtype) for t in df.dtypes)
    assert df["qty"].isna().tolist() == [False, True, False] and df["sym"].tolist() == ["AB", "CDEF", ""]
    assert df["pos"].dtype.pyarrow_dtype == pa.list_(pa.float32(), 2) and df["ts"].isna().sum() == 1
    column = df["px"].array.__arrow_array__()  # the Arrow data under the column
    column = column.chunk(0) if isinstance(column, pa.ChunkedArray) else column
    assert column.buffers()[1].address == soa.to_arrow().column("px").chunk(0).buffers()[1].address


def test_to_pandas_numpy_types_on_request(soa):
    df = soa.to_pandas(dtype_backend="numpy")
    assert df["qty"].dtype == np.float64 and np.isnan(df["qty"][1]) and df["px"].dtype == np.float64
    assert df["flag"].dtype == np.bool_ and df["ts"].dtype == "datetime64[ns]" and df["sym"].tolist()[1] == "CDEF"
    nullable = soa.to_pandas(dtype_backend="numpy_nullable")
    assert str(nullable["qty"].dtype) == "Int32" and nullable["qty"].isna().tolist() == [False, True, False]
    assert str(nullable["flag"].dtype) == "boolean"
    mapped = soa.to_pandas(types_mapper={pa.int32(): pd.Int64Dtype()}.get)
    assert str(mapped["qty"].dtype) == "Int64"
    with pytest.raises(lo.LayoutError, match="dtype_backend must be 'pyarrow', 'numpy' or 'numpy_nullable', got 'x'"):
        soa.to_pandas(dtype_backend="x")


def test_to_polars(soa):
    pl = pytest.importorskip("polars")
    df = soa.to_polars()
    assert df.schema == pl.Schema(
        {
            "qty": pl.Int32,
            "px": pl.Float64,
            "sym": pl.String,
            "pos": pl.Array(pl.Float32, 2),
            "flag": pl.Boolean,
            "ts": pl.Datetime("ns"),
        }
    )
    assert df["qty"].to_list() == [1, None, 3] and df["sym"].to_list() == ["AB", "CDEF", ""]
    assert df["ts"].null_count() == 1
