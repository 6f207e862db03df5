"""The tests' faster CUDA simulator (tests/fast_simulator.py) in a subprocess they start:
put this folder first on PYTHONPATH (tests/test_benchmarks_smoke.py does, for the GPU
benchmarks it runs in the simulator). Does nothing without NUMBA_ENABLE_CUDASIM."""

import os
import sys

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import fast_simulator

    fast_simulator.install()
