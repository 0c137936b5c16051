"""What every long fit runs on, independent of any model.

- :mod:`~jaxannot.runtime.progress` — compiled step loops with a progress bar and
  interrupt/checkpoint handling.
- :mod:`~jaxannot.runtime.checkpoint` — atomic checkpoints of a fit's state.
- :mod:`~jaxannot.runtime.sharding` — spreading per-image arrays over devices.
- :mod:`~jaxannot.runtime.memory` — device-memory budgets for chunked work.
- :mod:`~jaxannot.runtime.compilation_cache` — JAX's persistent compilation cache.
- :mod:`~jaxannot.runtime.compile_options` — XLA's cheaper compile for small fits,
  chosen per program.
- :mod:`~jaxannot.runtime.programs` — the bound on compiled programs a long session
  keeps alive (released between fits past a budget).
- :mod:`~jaxannot.runtime.draws` — ``jax.random``'s uniform and exponential draws,
  value for value, in one fused pass.
- :mod:`~jaxannot.runtime.row_buckets` — rows padded to a bucket with a mask, so that
  fits of nearby row counts run one compiled program.
"""
