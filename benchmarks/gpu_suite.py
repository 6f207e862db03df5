"""Every GPU figure in one command, for a session lent a GPU: ``python -m benchmarks.gpu_suite``.

Runs, each step in its own process with its own time limit (a failing step is recorded,
the others still run):

1. the ``cuda``-marked tests (``pytest -m cuda``) and the kernels' static resources
   (``python -m layouts.kernels.ptx --json``);
2. AoS <-> SoA on 16-, 48- and 128-byte records against a device-to-device copy of the
   same bytes and CuPy per-field copies, CUDA events, medians (``benchmarks.convert_gpu``);
3. ``convert(device="cuda")`` of a file, overlapped and serial (``benchmarks.convert_files``);
4. the reductions on the GPU (``python -m benchmarks``, the GPU half);
5. record streams: the CPU scan of an ITCH day against its copy to the GPU and the
   whole ``read_stream(device="cuda")`` (``benchmarks.streams_gpu``).

It writes one JSON (device name, driver, versions, date, and every step's result) into
``$OUT`` when set, else ``benchmarks/results/``. The default sizes finish in under 8
minutes on an H100; ``--small`` runs tiny sizes (CI runs that under Numba's simulator).
"""

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from .convert_cpu import machine

ROOT = Path(__file__).resolve().parent.parent


def gpu_facts():
    """Device name, driver and runtime versions, or why there are none."""
    facts = {}
    try:
        import cupy as cp

        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        name = props["name"]
        facts.update(
            gpu=name.decode() if isinstance(name, bytes) else name,
            cupy=cp.__version__,
            driver=cp.cuda.runtime.driverGetVersion(),
            runtime=cp.cuda.runtime.runtimeGetVersion(),
            memory_bytes=props["totalGlobalMem"],
            cc=f"{props['major']}.{props['minor']}",
        )
    except Exception as err:  # noqa: BLE001 - no CuPy or no GPU: say which
        facts["gpu"] = None
        facts["why_no_gpu"] = f"{type(err).__name__}: {err}"
    try:
        import numba_cuda  # type: ignore[import-not-found]

        facts["numba_cuda"] = numba_cuda.__version__
    except Exception:  # noqa: BLE001
        facts["numba_cuda"] = None
    return facts


def step(name, argv, limit, json_out=None, env=None, skip=()):
    """Run one step in a child process; its JSON output (if any) and the tail of its text.
    A step whose name starts with one of ``skip`` is recorded as skipped, not run."""
    if any(name.startswith(s) for s in skip):
        print(f"{name}: skipped", flush=True)
        return {"name": name, "argv": argv, "exit": "skipped", "seconds": 0.0, "output_tail": ""}
    t0 = time.perf_counter()
    try:
        run = subprocess.run(
            [sys.executable, *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=limit,
            env=dict(os.environ, **(env or {})),
        )
        code, text = run.returncode, run.stdout + run.stderr
    except subprocess.TimeoutExpired as err:
        code, text = "timeout", f"stopped after {limit} s\n{(err.stdout or b'')[-2000:]!r}"
    result = {
        "name": name,
        "argv": argv,
        "exit": code,
        "seconds": round(time.perf_counter() - t0, 1),
        "output_tail": text[-3000:],
    }
    if json_out is not None and Path(json_out).exists():
        result["result"] = json.loads(Path(json_out).read_text())
    elif code == 0 and "--json" in argv:
        result["result"] = json.loads(text[text.index("{") :])
    print(f"{name}: exit {code} in {result['seconds']} s", flush=True)
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="tiny sizes: a smoke run (CI, the simulator)")
    p.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="STEP",
        help="leave out the steps whose name starts with STEP (repeatable; the test suite runs "
        "'cuda tests' and 'kernel resources' on their own)",
    )
    p.add_argument("--out", help="folder for the JSON (default: $OUT, else benchmarks/results)")
    args = p.parse_args(argv)
    out_dir = Path(args.out or os.environ.get("OUT") or ROOT / "benchmarks" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    facts = gpu_facts()
    small = args.small
    records = {
        "convert_gpu": "20000" if small else "10000000",
        "files": "96" if small else "20000000",  # the simulator: 96 records, 3 chunks
        "bench": "3000" if small else "10000000",
    }
    steps = []
    run_step = functools.partial(step, skip=tuple(args.skip))
    with tempfile.TemporaryDirectory(prefix="layouts-gpu-suite-") as tmp:
        steps.append(
            run_step(
                "cuda tests", ["-m", "pytest", "-q", "-n", "0", "-m", "cuda", "-p", "no:cacheprovider", "tests"], 300
            )
        )
        steps.append(
            run_step(
                "kernel resources (sm_90)",
                [
                    "-m",
                    "layouts.kernels.ptx",
                    "--cc",
                    "9.0",
                    "--also",
                    "layouts.benchmarks.reduce_cuda",
                    "--also",
                    "layouts.kernels.cuda.gather",
                    "--json",
                ],
                300,
                env={"NUMBA_ENABLE_CUDASIM": "0"},
            )
        )  # compiled for the real target
        if facts["gpu"] is not None:
            j = f"{tmp}/convert_gpu.json"
            steps.append(
                run_step(
                    "AoS <-> SoA on the GPU",
                    [
                        "-m",
                        "benchmarks.convert_gpu",
                        "--records",
                        records["convert_gpu"],
                        "--repeat",
                        "3" if small else "20",
                        "--json",
                        j,
                    ],
                    300,
                    j,
                )
            )
        j = f"{tmp}/files.json"
        steps.append(
            run_step(
                "convert --device cuda, overlapped and serial",
                [
                    "-m",
                    "benchmarks.convert_files",
                    "--device",
                    "cuda",
                    "--records",
                    records["files"],
                    "--repeat",
                    "1" if small else "3",
                    "--dir",
                    tmp,
                    "--json",
                    j,
                ]
                + (["--chunk", "1920"] if small else []),
                300,
                j,
            )
        )
        j = f"{tmp}/streams_gpu.json"
        steps.append(
            run_step(
                "record streams: CPU scan vs copy to the GPU",
                ["-m", "benchmarks.streams_gpu", "--json", j]
                + (["--small"] if small else ["--itch-mb", "200", "2000", "--repeat", "5"]),
                300,
                j,
            )
        )
        j = f"{tmp}/bench.json"
        steps.append(
            run_step(
                "reductions (CPU and GPU)",
                [
                    "-m",
                    "benchmarks",
                    "--records",
                    records["bench"],
                    "--repeat",
                    "1" if small else "5",
                    "--json",
                    j,
                    "--plot",
                    "",
                ],
                240,
                j,
            )
        )
    stamp = datetime.now(timezone.utc)
    name = (facts["gpu"] or "no-gpu").lower().replace(" ", "-")
    path = out_dir / f"gpu-suite-{name}-{stamp:%Y-%m-%d-%H%M}.json"
    path.write_text(
        json.dumps(
            {
                "date": stamp.isoformat(timespec="seconds"),
                "machine": dict(machine(), **facts),
                "small": small,
                "steps": steps,
            },
            indent=1,
            default=str,
        )
    )
    print(f"wrote {path}")
    return 0 if all(s["exit"] in (0, "skipped") for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
