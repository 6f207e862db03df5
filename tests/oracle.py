"""Hypothesis strategies for structured dtypes, and an oracle that uses NumPy only.

The oracle says, for one leaf field, which values and nulls the Arrow column must
hold, computed from NumPy field access and NumPy casts, not from layouts' kernels.
"""

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

ORDERS = st.sampled_from(["<", ">", "="])
TIME_UNITS = ["s", "ms", "us", "ns", "m", "h", "D", "W", "M", "Y", "ps", "10s"]


def scalar_dtypes():
    return st.one_of(
        st.builds(lambda o, k, w: np.dtype(f"{o}{k}{w}"), ORDERS, st.sampled_from("iu"), st.sampled_from([1, 2, 4, 8])),
        st.builds(lambda o, w: np.dtype(f"{o}f{w}"), ORDERS, st.sampled_from([2, 4, 8])),
        st.just(np.dtype("?")),
        st.builds(
            lambda o, k, u: np.dtype(f"{o}{k}8[{u}]"), ORDERS, st.sampled_from("mM"), st.sampled_from(TIME_UNITS)
        ),
        st.builds(lambda n: np.dtype(f"S{n}"), st.integers(1, 12)),
        st.builds(lambda o, n: np.dtype(f"{o}U{n}"), ORDERS, st.integers(1, 4)),
        st.builds(lambda o, w: np.dtype(f"{o}c{w}"), ORDERS, st.sampled_from([8, 16])),
    )


SHAPES = st.one_of(st.just(()), st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple))


@st.composite
def struct_dtypes(draw, depth=2):
    n = draw(st.integers(1, 4))
    names = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=n, max_size=n, unique=True))
    elem = scalar_dtypes() if depth == 0 else st.one_of(scalar_dtypes(), scalar_dtypes(), struct_dtypes(depth - 1))
    formats = [(draw(elem), draw(SHAPES)) for _ in names]
    formats = [f if s == () else (f, s) for f, s in formats]
    style = draw(st.sampled_from(["packed", "aligned", "gaps"]))
    if style != "gaps":
        return np.dtype(list(zip(names, formats)), align=style == "aligned")
    sizes = [np.dtype(f).itemsize for f in formats]
    offsets, pos = [], 0
    for size in sizes:
        pos += draw(st.integers(0, 5))
        offsets.append(pos)
        pos += size
    itemsize = pos + draw(st.integers(0, 7))
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize})


def leaf_values(arr, field):
    """The leaf's values as NumPy sees them, flattened to one element per Arrow slot."""
    v = arr
    for name in field.path:
        v = (v.real if name == "re" else v.imag) if v.dtype.kind == "c" else v[name]
    return v.reshape(-1)


def make_valid(arr, layout, rng):
    """Overwrite leaves whose random bytes are not valid values with valid ones."""
    for f in layout.fields:
        v = arr
        for name in f.path[:-1]:
            v = v[name]
        if v.dtype.kind == "c":
            continue
        last = f.path[-1]
        shape = v[last].shape
        if f.dtype.kind == "b":
            v[last] = rng.integers(0, 2, shape).astype(bool)
        elif f.dtype.kind in "mM":
            vals = rng.integers(-(10**6), 10**6, shape)
            vals[rng.random(shape) < 0.2] = np.iinfo(np.int64).min  # NaT
            v[last] = vals.astype(np.int64).view(f.dtype.newbyteorder("="))
        elif f.dtype.kind == "U":
            n = f.dtype.itemsize // 4
            # code points drawn per slot, cut at a random length (NUL-padded, as NumPy keeps U)
            alphabet = np.array([ord(c) for c in "ab\u00e9\u4e2d\U0001f600"], dtype=np.uint32)
            count = int(np.prod(shape))
            points = alphabet[rng.integers(0, len(alphabet), (count, n))]
            points[np.arange(n) >= rng.integers(0, n + 1, (count, 1))] = 0
            v[last] = points.view(f"U{n}").reshape(shape)


def expected(arr, field):
    """(values, nulls) that the Arrow leaf column must hold, from NumPy alone."""
    v = leaf_values(arr, field)
    k = field.dtype.kind
    if k in "mM":
        nat = np.isnat(v)
        t = field.arrow_type
        if pa.types.is_date32(t):
            days = v.astype("M8[D]").view("i8")
            return np.where(nat, 0, days).astype("<i4").view("<u4"), nat
        if pa.types.is_timestamp(t) or pa.types.is_duration(t):
            target = np.dtype(f"{k}8[{t.unit}]")
            return np.where(nat, 0, v.astype(target).view("i8")).view("<u8"), nat
        return np.where(nat, 0, v.astype(v.dtype.newbyteorder("=")).view("i8")).view("<u8"), nat
    nulls = np.zeros(len(v), bool)
    if k == "b":
        return v.astype(bool), nulls
    if k in "iuf":
        w = field.width
        return v.astype(v.dtype.newbyteorder("=")).view(f"u{w}"), nulls
    if k == "S":
        n = field.width
        raw = np.ascontiguousarray(v).view(np.uint8).tobytes()
        items = [raw[i * n : (i + 1) * n] for i in range(len(v))]
        if field.kind == "bytes":
            return items, nulls
        items = [x.split(b"\0")[0] for x in items]
        return ([x.decode() for x in items] if field.arrow_type == pa.string() else items), nulls
    if k == "U":
        return [str(x) for x in v], nulls
    raise AssertionError(f"no oracle for {field.dtype}")


def actual(column, field):
    """(values, nulls) of a leaf Arrow array, in the oracle's representation."""
    while pa.types.is_fixed_size_list(column.type):
        column = column.flatten()
    nulls = column.is_null().to_numpy(zero_copy_only=False)
    t = column.type
    if pa.types.is_boolean(t):
        return column.to_numpy(zero_copy_only=False).astype(bool), nulls
    if (
        pa.types.is_fixed_size_binary(t)
        or pa.types.is_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    ):
        return column.to_pylist(), nulls
    w = t.bit_width // 8
    bits = np.frombuffer(column.buffers()[1], dtype=f"<u{w}", count=len(column), offset=column.offset * w)
    return np.where(nulls, 0, bits).astype(f"<u{w}"), nulls
