"""jaxannot against other libraries.

Run one as ``python -m benchmarks.peers.NAME --help`` from the repository root.
"""
