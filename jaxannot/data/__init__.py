"""Corpora, loaders of real datasets, protocols and synthetic corpora."""

from jaxannot.data.corpus import VIEW_KINDS, Corpus
from jaxannot.data.protocols import PROTOCOLS, Task, concatenate, make_task

__all__ = ["Corpus", "VIEW_KINDS", "PROTOCOLS", "Task", "concatenate", "make_task"]
