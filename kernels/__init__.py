"""The transpose kernels of ``layouts``: one pass over the records, driven by a copy plan.

``kernels.plan`` defines the copy plan, the one contract between the ``layouts``
package (which derives plans from a Layout) and the backends. ``kernels.cpu`` runs
plans with Numba on the CPU, ``kernels.cuda`` with Numba CUDA on a GPU, both compiling
the value transforms of ``kernels.values``; ``kernels.threads`` runs CPU kernels in threads. Every backend exposes the same host functions:
``aos_to_soa`` and ``soa_to_aos``.
"""

__all__ = ["plan"]
