"""The ``jaxannot`` command line: :mod:`.app` (parser and commands), :mod:`.files`
(output paths), :mod:`.photos` (photo folders), :mod:`.query` (queries on a saved
model), :mod:`.logs` (logging set-up). ``python -m jaxannot.cli`` runs it.
"""
