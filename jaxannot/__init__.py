"""jaxannot: automatic image annotation and multimodal latent models on JAX.

See README.md for the quick start and the list of methods.
"""

__version__ = "0.1.0"
