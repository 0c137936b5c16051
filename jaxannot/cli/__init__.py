"""The ``jaxannot`` command line: :mod:`.app` (``main``: runs a command, user errors
as one line), :mod:`.parser` (the arguments), :mod:`.commands_fit` (``evaluate``,
``tune``, ``diagnose``; :mod:`.tune_output` prints ``tune``'s results),
:mod:`.commands_info` (``datasets``, ``methods``,
``demo``), :mod:`.query` (queries on a saved model), :mod:`.photos` (photo folders),
:mod:`.files` (output paths), :mod:`.logs` (logging set-up). ``python -m
jaxannot.cli`` runs it.
"""
