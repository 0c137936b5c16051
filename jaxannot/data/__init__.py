"""Corpora, loaders of real datasets, protocols and synthetic corpora."""

from jaxannot.data.corpus import VIEW_KINDS, Corpus
from jaxannot.data.datasets import DATASETS, data_root, list_datasets, load_dataset
from jaxannot.data.errors import DataFormatError
from jaxannot.data.protocols import PROTOCOLS, Task, concatenate, make_task
from jaxannot.data.synthetic import SyntheticTruth, make_synthetic

__all__ = [
    "Corpus",
    "VIEW_KINDS",
    "PROTOCOLS",
    "Task",
    "concatenate",
    "make_task",
    "DATASETS",
    "DataFormatError",
    "SyntheticTruth",
    "data_root",
    "list_datasets",
    "load_dataset",
    "make_synthetic",
]
