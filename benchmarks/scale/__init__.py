"""Speed, memory and size.

Run one as ``python -m benchmarks.scale.NAME --help`` from the repository root.
"""
