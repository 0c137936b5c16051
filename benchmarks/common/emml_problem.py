"""The Corel5k problem of the exact EMML solver's benchmarks
(``benchmarks.scale.emml_exact_blocks``, ``benchmarks.scale.emml_exact_solver``)."""

from __future__ import annotations

import jax

from jaxannot.methods.emml.structured_output import (
    StructuredData,
    default_gamma,
    kernel_matrix,
    random_vreps,
)


def corel5k_problem(num_vreps: int, gamma_scale: float, data_dir: str | None):
    """The annotator's kernel and VRep words on Corel5k's training images."""
    from jaxannot.data.datasets import load_dataset

    train, _ = load_dataset("corel5k", data_dir=data_dir)
    x = train.features(train.primary_view)
    vreps = random_vreps(jax.random.key(0), x, train.words, num_vreps)
    gamma = gamma_scale * default_gamma(x)
    kernel = kernel_matrix(vreps.features, vreps.features, "rbf", gamma)
    return StructuredData(kernel, vreps.words)
