"""The GPU side: device memory and its pool (:mod:`.device`), the transpose on the device
with its stream slots (:mod:`.transpose`), the Arrow C Device Data Interface
(:mod:`.c_device`) and cuDF (:mod:`.cudf`). Nothing here is imported until device data
or ``device="cuda"`` asks for it; CuPy, Numba CUDA and cuDF are imported lazily inside.
"""
