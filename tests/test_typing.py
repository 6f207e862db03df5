"""A user's script over the public API passes ``mypy --strict`` (issue 25): every public
function and method a user calls is annotated, so strict checking of user code does not
stop at ``Call to untyped function``."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import layouts

pytest.importorskip("mypy")

USER_SCRIPT = textwrap.dedent('''
    """The README's round trip and its neighbours, as a user writes them."""
    import pickle

    import numpy as np

    import layouts as lo
    import layouts.dask as ld

    tick = np.dtype([("ts", "<M8[ns]"), ("px", ">f8"), ("qty", "<i4"), ("sym", "S8")], align=True)
    records = np.zeros(4, tick)
    layout: lo.Layout = lo.Layout.from_dtype(tick, bytes_as="string")
    c_layout: lo.Layout = lo.Layout.from_c("struct t { int a; double b; };", "t")
    aos = lo.AoS(records, layout=layout)
    soa: lo.SoA = aos.to_soa(nulls={"qty": -1}, threads=2, device="cpu")
    soa = aos.to_soa(nulls={"qty": -1}, out=soa)
    table = soa.to_arrow()
    frame = soa.to_pandas()
    back: lo.SoA = lo.SoA.from_arrow(table, layout, fill={"qty": -1}, truncate=False, cast="strict")
    again: lo.AoS = back.to_aos(out=np.empty(4, layout.dtype), threads=1)
    array: np.ndarray = again.to_numpy()
    column: lo.Column = soa["px"]
    px: np.ndarray = column.to_numpy()
    nulls: int = column.null_count
    names: list[str] = soa.columns
    size: int = soa.nbytes + len(soa) + aos.nbytes + len(aos) + layout.itemsize
    field: lo.Field = layout["px"]
    moved: lo.SoA = soa.to_device("cpu")
    empty = lo.SoA(layout, 0, [])
    mapped: lo.AoS = lo.read_records("ticks.bin", layout, offset=0, count=None)
    result: lo.ConvertResult = lo.convert("ticks.bin", layout, "ticks.parquet", nulls={"qty": -1})
    copy: lo.SoA = pickle.loads(pickle.dumps(soa))
    arenas: int = lo.memory_stats()["arenas"]
    lazy = ld.read_records("ticks.bin", layout, blocksize="1MiB")
    try:
        lo.SoA.from_arrow(table, c_layout)
    except (lo.LayoutError, lo.ConversionError) as err:
        print(err)
    print(frame, array, px, nulls, names, size, field, moved, empty, mapped, result, copy, arenas, lazy,
          np.asarray(column), column.to_arrow(), soa.schema, soa.to_record_batch(), lo.__version__)
''')


@pytest.mark.slow
def test_a_user_script_over_the_public_api_passes_mypy_strict(tmp_path):
    (tmp_path / "user.py").write_text(USER_SCRIPT)
    (tmp_path / "mypy.ini").write_text("[mypy]\n")  # only --strict: no configuration of the user's or ours
    root = Path(layouts.__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "MYPYPATH"}
    env["PYTHONPATH"] = str(root)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            str(tmp_path / "mypy.ini"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-error-summary",
            "user.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == ""
