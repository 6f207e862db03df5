"""First use: how long a new process waits before it converts, in fresh processes.

    python -m benchmarks.first_use                   # demo of 1,000 records, medians of 5
    python -m benchmarks.first_use --no-cold         # without the compile from nothing (~30 s; in a
                                                     # source checkout, which ships no kernels, the
                                                     # first demo starts from this machine's cache)
    python -m benchmarks.first_use --json first-use.json

Each case is its own Python process, run with the interpreter and the ``layouts`` this
one imports (an installed package, or a checkout on ``PYTHONPATH``); times are wall
clock and CPU (user + system) of that process:

* ``import layouts``: the process, and the import's own share (``-X importtime``);
* ``layouts --help`` and ``layouts --version``, and whether they imported Numba;
* ``layouts demo --records N`` (C header, records written, converted to Parquet and back)
  as installed: the kernels the package ships, an empty per-machine cache;
* the same with no compiled kernel anywhere (``LAYOUTS_SHIPPED_KERNELS=0``, an empty
  per-machine cache): a machine the shipped kernels do not fit, or a source checkout,
  the first time; every process after it is the warm case;
* warm: the per-machine cache filled by the run before.

Kernels compiled and loaded are counted from Numba's cache log (``NUMBA_DEBUG_CACHE``).
The per-machine cache of these runs is a temporary folder (``LAYOUTS_CACHE_DIR``), so
the user's own cache is neither used nor changed.
"""

import argparse
import json
import os
import resource
import shutil
import site
import statistics
import subprocess
import sys
import tempfile
import time


def run(argv, env, cwd):
    """(wall seconds, CPU seconds, stdout, stderr) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout, done.stderr


def imported(importtime_log, top):
    """Modules named ``top`` or ``top.*`` in a ``-X importtime`` log."""
    names = [line.rsplit("|", 1)[-1].strip() for line in importtime_log.splitlines() if line.startswith("import time:")]
    return [n for n in names if n == top or n.startswith(top + ".")]


def import_share(importtime_log, module="layouts"):
    """Cumulative seconds of ``import module`` in a ``-X importtime`` log."""
    for line in importtime_log.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if line.startswith("import time:") and parts[-1] == module:
            return int(parts[1]) / 1e6
    return None


def kernel_log(stdout):
    """(kernels compiled and saved, kernels loaded) from Numba's cache log."""
    return stdout.count("[cache] data saved"), stdout.count("[cache] data loaded")


def measure(records, repeat, cold):
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NUMBA_CACHE_DIR", "LAYOUTS_SHIPPED_KERNELS", "LAYOUTS_CACHE_DIR", "NUMBA_DEBUG_CACHE")
    }
    py = sys.executable
    import layouts

    root = os.path.dirname(os.path.dirname(os.path.abspath(layouts.__file__)))
    if root not in site.getsitepackages():  # a checkout: the children import the same layouts
        base["PYTHONPATH"] = os.pathsep.join([root] + [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p])
    rows = []
    with tempfile.TemporaryDirectory(prefix="layouts-first-use-") as tmp:
        env = dict(base, LAYOUTS_CACHE_DIR=os.path.join(tmp, "cache"))

        def median_case(name, argv, env, note=""):
            walls, cpus, out = [], [], None
            for _ in range(repeat):
                wall, cpu, stdout, stderr = run(argv, env, tmp)
                walls.append(wall)
                cpus.append(cpu)
                out = (stdout, stderr)
            row = {
                "case": name,
                "wall_s": statistics.median(walls),
                "cpu_s": statistics.median(cpus),
                "runs": repeat,
                "note": note,
            }
            rows.append(row)
            return row, out

        row, (_, err) = median_case("python -c pass (the interpreter alone)", [py, "-c", "pass"], env)
        row, (_, err) = median_case("import layouts", [py, "-X", "importtime", "-c", "import layouts"], env)
        row["import_s"] = import_share(err)
        row["numba_imported"] = bool(imported(err, "numba"))
        row["note"] = f"the import itself {row['import_s']:.3f} s; numba imported: {row['numba_imported']}"
        for flag in ("--help", "--version"):
            row, (_, err) = median_case(f"layouts {flag}", [py, "-X", "importtime", "-m", "layouts", flag], env)
            row["numba_imported"] = bool(imported(err, "numba"))
            row["note"] = f"numba imported: {row['numba_imported']}"

        demo = [py, "-m", "layouts", "demo", "--records", str(records)]
        logged = dict(env, NUMBA_DEBUG_CACHE="1")
        from layouts.kernels import _cache

        shipped = _cache.shipped_dir()
        has_shipped = shipped is not None and os.path.isdir(shipped)
        seeded = ""
        mine = None if has_shipped or cold else _cache.machine_dir()
        if mine and os.path.isdir(mine):  # a checkout, --no-cold: no compile from nothing, as it said
            shutil.copytree(mine, os.path.join(env["LAYOUTS_CACHE_DIR"], os.path.basename(mine)))
            seeded = " (a source checkout with --no-cold: started from a copy of this machine's cache)"
        wall, cpu, out, _ = run(demo, logged, tmp)
        compiled, loaded = kernel_log(out)
        rows.append(
            {
                "case": "first demo, as installed",
                "wall_s": wall,
                "cpu_s": cpu,
                "runs": 1,
                "compiled": compiled,
                "loaded": loaded,
                "note": f"shipped kernels {'present' if has_shipped else 'ABSENT'}{seeded}; "
                f"{compiled} functions compiled, {loaded} loaded",
            }
        )
        if cold:
            shutil.rmtree(env["LAYOUTS_CACHE_DIR"], ignore_errors=True)
            nothing = dict(logged, LAYOUTS_SHIPPED_KERNELS="0")
            wall, cpu, out, _ = run(demo, nothing, tmp)
            compiled, loaded = kernel_log(out)
            rows.append(
                {
                    "case": "first demo, no compiled kernel anywhere",
                    "wall_s": wall,
                    "cpu_s": cpu,
                    "runs": 1,
                    "compiled": compiled,
                    "loaded": loaded,
                    "note": f"{compiled} functions compiled, {loaded} loaded; once per machine",
                }
            )
            row, (out, _) = median_case("demo after it (per-machine cache)", demo, nothing)
            row["note"] = "warm"
        row, _ = median_case("demo, as installed, again", demo, env)
        row["note"] = "warm"
    return rows


def table(rows):
    lines = ["| case | wall s | CPU s | runs | note |", "| --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['runs']} | {r['note']} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1000, help="records of the demo (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=5, help="runs of each warm case, median shown (default: %(default)s)")
    p.add_argument("--no-cold", action="store_true", help="skip the demo with no compiled kernel anywhere")
    p.add_argument("--json", help="also write the results to this JSON file")
    args = p.parse_args(argv)
    rows = measure(args.records, args.repeat, not args.no_cold)
    from .convert_cpu import machine

    info = machine()
    print(f"{args.records:,}-record demo, {os.cpu_count()} cores, {info['cpu']}; wall and CPU of each process")
    print(table(rows))
    if args.json:
        from datetime import datetime, timezone

        with open(args.json, "w") as f:
            json.dump(
                {
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "machine": info,
                    "records": args.records,
                    "repeat": args.repeat,
                    "rows": rows,
                },
                f,
                indent=1,
            )
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
