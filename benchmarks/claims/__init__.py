"""Reproductions of a paper's or an issue's claim.

Run one as ``python -m benchmarks.claims.NAME --help`` from the repository root.
"""
