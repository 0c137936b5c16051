"""Shared type aliases."""

from typing import Any

import jax

__all__ = ["Array", "ArrayLike", "ArrayTree", "PRNGKey"]

Array = jax.Array
ArrayLike = jax.typing.ArrayLike
ArrayTree = Any  # a pytree whose leaves are arrays
PRNGKey = jax.Array  # a key from jax.random.key / jax.random.PRNGKey
