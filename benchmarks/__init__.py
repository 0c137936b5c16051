"""The benchmark scripts of jaxannot, by purpose, run from the repository root as
modules: ``python -m benchmarks.PURPOSE.NAME --help``.

- :mod:`benchmarks.claims`: reproductions of a paper's or an issue's claim;
- :mod:`benchmarks.peers`: jaxannot against other libraries;
- :mod:`benchmarks.scale`: speed, memory and size;
- :mod:`benchmarks.reliability`: hostile inputs, interrupts and kills;
- :mod:`benchmarks.common`: what the scripts share (arguments, ``--device``, the
  record's machine block, atomic JSON, shared cases); no script imports another.

The records they write are in ``benchmarks/results``.
"""
