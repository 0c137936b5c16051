"""Hostile inputs, interrupts and kills: how jaxannot fails.

Run one as ``python -m benchmarks.reliability.NAME --help`` from the repository root.
"""
