r"""Posterior diagnostics with arviz: draws as InferenceData, restarts as chains.

Topic models are identifiable only up to a permutation of the topics (label
switching): two restarts, or two NUTS chains, that find the same topics in a different
order make raw R-hat meaningless. :func:`align_topics` matches every chain's topics to
a reference chain's by the Hungarian algorithm on the L1 distance between mean
topic-word distributions (``scipy.optimize.linear_sum_assignment``), and permutes every
topic-indexed site accordingly, *before* :func:`summary` computes R-hat and ESS.

- :func:`nuts_draws` runs numpyro's NUTS on a model declaration (small corpora);
- :func:`guide_draws` samples a fitted SVI guide;
- :func:`svi_restarts` runs one SVI from several keys, for R-hat across restarts;
- :func:`restarts_to_inference_data` stacks per-restart draws as chains, aligned;
- :func:`objective_traces` puts per-restart objective traces in ``sample_stats``;
- :func:`topic_posteriors` labels per-image topic posteriors (image, topic);
- :func:`diagnose_restarts` fits a registered topic model from several starts and
  compares their aligned topics (``jaxannot diagnose METHOD --dataset ...``);
- :func:`to_inference_data` turns any fit into InferenceData: VEM restarts (chains
  aligned on their local posteriors; one draw each, or the Laplace draws of
  ``VEM.run_restarts(..., num_draws=M)``, which give R-hat and ESS a meaning for EM)
  or SVI restarts (one chain of guide draws each, so R-hat is finite and compares
  the restarts' optima, :mod:`jaxannot.diagnostics.svi`), with the loss traces in
  ``sample_stats``.

All InferenceData posteriors have dims ``("chain", "draw", ...)``.

References
----------
A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner. Rank-normalization,
folding, and localization: an improved R-hat. Bayesian Analysis, 2021.
M. Stephens. Dealing with label switching in mixture models. JRSS-B 62, 2000.
H. W. Kuhn. The Hungarian method for the assignment problem. 1955.
"""

from jaxannot.diagnostics import restarts
from jaxannot.diagnostics.fits import to_inference_data
from jaxannot.diagnostics.restarts import *  # noqa: F403 (its __all__, below)
from jaxannot.diagnostics.svi import svi_restarts

__all__ = [*restarts.__all__, "svi_restarts", "to_inference_data"]
