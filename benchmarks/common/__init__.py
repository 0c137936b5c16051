"""What the benchmark scripts share; modules, never scripts.

- :mod:`~benchmarks.common.cli`: every script's parser (``script_parser``);
- :mod:`~benchmarks.common.device`: ``--device``, the record's machine block;
- :mod:`~benchmarks.common.records`: where records live, atomic JSON, child
  processes of a script;
- the shared cases: :mod:`~benchmarks.common.toys` (the numpyro toys of the VEM
  benchmarks and tests), :mod:`~benchmarks.common.hostile_cases`,
  :mod:`~benchmarks.common.weak_bernoulli` and the corpora and runners that more than
  one script measures.
"""
