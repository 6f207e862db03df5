"""The GPU plumbing: device memory and its pool (:mod:`.device`), the device arena
(:mod:`.arena`), the converter's stream slots (:mod:`.transpose`), the Arrow C Device
Data Interface (:mod:`.c_device`) and cuDF (:mod:`.cudf`). The CUDA backend
(:mod:`layouts._backends.cuda`) is made of these. Nothing here is imported until device
data or ``device="cuda"`` asks for it; CuPy, Numba CUDA and cuDF are imported lazily inside.
"""
