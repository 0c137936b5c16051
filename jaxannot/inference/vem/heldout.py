r"""The graph penalty's weight chosen, or checked, on the model's own held-out evidence.

A graph E-step (:class:`~jaxannot.inference.LapVar1`,
:class:`~jaxannot.inference.LapVar2`) helps when the graph's neighbours say what an
image's local value is, and hurts otherwise; no :math:`\lambda` transfers between
models (issue 43: λ = 1 lowers the ARI of a weak Bernoulli mixture from 0.35 to
0.15 where λ = 0.3 raises it). :func:`select_lam` chooses it per fit:

1. Split the images at random into ``FOLDS`` folds and hold out one fold at a
   time: the observed sites inside the image plate are masked
   (``numpyro.handlers.mask``) for its images, so their log joint is the prior part
   :math:`b_{ik} = \log p(z_i = k \mid \theta)` only, and their posteriors come from
   the prior and their neighbours alone; the M-step never sees their observations.
2. For each fold, fit this masked model along the path
   :math:`\lambda_0 = 0 < \lambda_1 < \dots` (the first from the run's default
   start, each next one warm-started from the previous one's global values; with
   an E-step that keeps its best EM iteration, ``keep_best`` (LapVar2), every one
   from the default start: such a fit stops at the first iteration that fails to
   improve, so warm-started it returned the previous weight's fit almost
   unchanged, and the path scored copies of the fit at 0 (within 0.0015 nats an
   image on issue 43's weak Bernoulli mixture), not what the weight does from the
   start the final fit uses: there λ = 1 lowers the ARI from 0.35 to 0.19 to 0.21
   and, from the default start, the held-out score by 0.22 nats an image).
   Each masked fit stops at the first EM iteration that raises its objective
   by less than ``TOLERANCE`` (relative, 1e-7: about one float32 rounding step
   of it) or at the run's ``num_steps``: warm-started, the fits at 0.1 to 0.5
   converge in 5 to 25 iterations and those at 0 and 1 in 50 to 125. Against
   fits run to the end, on issue 43's weak Bernoulli mixture below, the held-out
   means moved by at most 0.004 nats an image at 60 EM iterations (seeds 0 to 5,
   both graphs) and 0.027 at 500 (seeds 0 to 2), and no choice changed (LapVar2's
   on seeds 0 to 2 neither); a relative 1e-5 changed two of the twelve at 60.
3. Score every image, in the fold that holds it out, by the held-out
   log-likelihood of its observations under the graph's guess of its local value,

   .. math::
       s_i(\lambda) = \log \sum_k g_{ik}(\lambda)\, p(x_i \mid z_i = k,
       \theta_\lambda) = \operatorname{lse}_k\big(\log g_{ik} + a_{ik} -
       b_{ik}\big),\qquad
       g_i \propto \sum_{j \notin M} S_{ij}\,\phi_j(\lambda),\quad i \in M,

   with :math:`a_{ik}` the unmasked log joint and :math:`g_i` the weighted vote of
   the image's observed neighbours (mixed with :math:`10^{-3}` of the prior
   :math:`\mathrm{softmax}(b_i)`), and by the same likelihood under its prior
   alone, :math:`t_i(\lambda) = \operatorname{lse}_k a_{ik} -
   \operatorname{lse}_k b_{ik}`. The rule that turns neighbours into a guess is
   the same at every :math:`\lambda`: what changes is the fit, its globals
   :math:`\theta_\lambda` and the observed images' posteriors
   :math:`\phi_j(\lambda)`. (Scoring the masked images' own E-step posteriors
   instead favours large weights, which alone carry the neighbours' information
   to an image without data: on issue 43's weak Bernoulli mixture it chose
   λ = 1, whose ARI is 0.13 to 0.19 against plain VEM's 0.35.)
4. **Does the graph tell?** At :math:`\lambda = 0` (no graph in the fit), the
   neighbours' guess must beat the prior: the mean of :math:`s_i(0) - t_i(0)`
   must exceed ``GATE`` (2) of its standard errors. If not, the choice is 0. This
   gate is what tells a graph that carries the classes from noise: :math:`\bar
   s(\lambda)` alone rises with :math:`\lambda` up to about 0.5 on both (by
   0.02 to 0.07 nats an image on the mixture below, with the random graph as
   with the one that carries the classes), so it cannot.
5. If it does, keep the smallest :math:`\lambda` whose mean score
   :math:`\bar s(\lambda)` is within one standard error (of the paired
   differences :math:`s_i(\lambda) - s_i(\lambda^*)`) of the best one's,
   :math:`\lambda^*`: the one-standard-error rule, toward 0.

The fit itself then runs on all the data at the chosen weight from the run's
default start (the path's global values, fitted on four fifths of the data and
warm-started along the path, gave worse fits: ARI 0.30 where the default start
reaches 0.42 on seed 1 of the mixture below).

**What to expect** on issue 43's weak Bernoulli mixture (600 images,
``tests/inference/_graph_toy.py``, contrast 0.15, view separation 0.8, 60 EM
iterations, seeds 0 to 2; ``tests/inference/test_lapvar_auto.py``): with the
10-NN graph that carries the classes the gate's gain is +0.13 to +0.20 nats an
image (s.e. 0.017), the choice 0.5 on all three seeds, the ARI +0.036, +0.085,
+0.018 over plain VEM (0.35, 0.33, 0.37); with a random graph of the same
degree the gain is -0.02 to -0.04 (s.e. 0.014), the choice 0, the ARI plain VEM's.
Seeds 3 to 5 (not in the tests): 0.5, 0.3, 0.5 chosen, ARI +0.048, +0.042,
+0.040; with the random graph 0 on all three.
On this graph no weight of the path gains +0.05 on seeds 0 and 2 (their best, 0.5 and
0.3, +0.036 and +0.031; at 500 EM iterations +0.037 and +0.041, 0.4 to 0.8 no better):
it carries the classes less than the issue's did. At view separation 0.9, whose fixed
weights give the figures closest to the issue's (docs/modelling.md, *Graph
regularization: what to expect*), ``"auto"`` gains +0.063 ARI on average over seeds 0 to
9 at 500 EM iterations, every seed above plain VEM (the least +0.042; 8 of 10 at +0.05
or more), and +0.059 at 60 (seed 8 -0.003); at 1.0, +0.067 at 500 (seed 4 -0.006: its
held-out score rises to 0.5 while its ARI peaks at 0.2 to 0.3) and +0.070 at 60.
LapVar2 gains nothing on this mixture at any weight of the path (its ARI within 0.007 of
plain VEM's up to 0.5); scored from the default start (step 2) its choice keeps it
there.
The cost: ``FOLDS`` times ``len(lam_path)`` masked
fits (30 at the defaults), each stopped at convergence (step 2), sharing one
masked model, each fold's set-up (an auto fit sets up its arguments 7 times and
traces the model 20 times) and their compiled programs (22 compiles for the first
auto fit in a process, none for a second). Seed 0 of this mixture, one auto
fit with its final fit, before and after the stop, side by side on two CPU cores
at load 4.5 to 6.8: at 60 EM iterations 4.4 s before, 2.7 s after (15.4 and 9.0 s
for the first, compiling); at 500, 34.3 s before, 3.9 s after (48.5 and 9.6 s),
the same weight and ARI.

A given :math:`\lambda > 0` is checked the same way, at two points of the path,
:math:`0` and the given one, on one fold of a ``HELD_OUT`` fraction of the images
(0.1; two fits of the masked model, about twice a fit's cost) where that fold
holds at least ``CHECK_IMAGES`` images, else on ``FOLDS`` folds that hold out
every image once (:func:`check_masks`; on issue 43's 600-image weak Bernoulli
mixture one fold of 60 images could not see ``LapVar2(lam=1)`` lower the evidence
on seed 2: 0.067 nats an image against a standard error of 0.11):
:func:`check_lam` warns when the neighbours' guess is worse than the prior by
more than one standard error at 0 (step 4, the other way round) or when the given
:math:`\lambda` lowers :math:`\bar s` below :math:`\lambda = 0`'s by more than one
standard error.

:func:`~jaxannot.inference.laplacian_elbo_lam.choose_lam` applies the same rule
(:func:`neighbour_scores`, :func:`choose`, :func:`warn_against`) to
:class:`~jaxannot.inference.LaplacianELBO` with SVI fits of the masked model.

References
----------
Seed 000: graph-regularized variational inference (the penalty and its weight).
T. Hastie, R. Tibshirani, J. Friedman. The Elements of Statistical Learning, 2nd ed.,
2009, section 7.10 (cross-validation and the one-standard-error rule).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
from numpyro.primitives import Messenger

from jaxannot.inference.vem.checks import model_errors
from jaxannot.inference.vem.declared import reusing_setups

if TYPE_CHECKING:
    from jaxannot.graph.laplacian import Graph
    from jaxannot.inference.vem.steps import VEMResult

__all__ = [
    "FOLDS",
    "GATE",
    "HELD_OUT",
    "HeldOutFits",
    "LamPath",
    "TOLERANCE",
    "check_lam",
    "check_masks",
    "choose",
    "heldout_folds",
    "heldout_scores",
    "mask_observations",
    "neighbour_scores",
    "select_lam",
    "warn_against",
]

#: The fraction of the images :func:`check_lam` holds out (:func:`check_masks`).
HELD_OUT = 0.1
#: How many folds :func:`select_lam` holds out in turn (every image once).
FOLDS = 5
#: :func:`check_lam` holds out every image once (``FOLDS`` folds) where one fold
#: of a ``HELD_OUT`` fraction would hold fewer images than this.
CHECK_IMAGES = 200
#: The graph tells (weights > 0 are tried) when its neighbours' guess beats the
#: prior's by more than this many standard errors at weight 0.
GATE = 2.0
#: The masked fits stop at the first EM iteration that improves their objective by
#: less than this (relative; the run's own ``tolerance`` where larger): the path's
#: fits are scored, not kept (module docstring, the cost).
TOLERANCE = 1e-7
#: The prior's share in a held-out image's guess (no zero probability; the prior
#: alone for an image without an observed neighbour).
_PRIOR_MIX = 1e-3


class LamPath(NamedTuple):
    """The penalty weights tried and their held-out evidence.

    Attributes
    ----------
    lams : tuple of float
        The weights, the first 0.
    heldout : tuple of float
        Mean held-out log-likelihood of the masked images' observations, nats an
        image, at each weight (module docstring).
    stderr : tuple of float
        Standard error of the mean paired difference of each weight's scores with
        the best weight's (:func:`select_lam`) or with 0's (:func:`check_lam`).
    chosen : float
        The weight kept.
    held_out_images : int
        How many images' observations were held out (all of them, one fold at a
        time).
    graph_gain, graph_gain_se : float
        At weight 0: the mean, over the held-out images, of the neighbours' guess's
        held-out log-likelihood minus the image's own prior's (nats an image), and
        its standard error. The graph tells when it exceeds ``GATE`` standard
        errors (module docstring).
    """

    lams: tuple
    heldout: tuple
    stderr: tuple
    chosen: float
    held_out_images: int
    graph_gain: float = float("nan")
    graph_gain_se: float = float("nan")


class HeldOutFits(NamedTuple):
    """The fits a held-out choice or check of the weight runs: the run's own, on
    the masked model.

    Attributes
    ----------
    vem : Any
        The :class:`~jaxannot.inference.vem.algorithm.VEM` being run, with a graph
        E-step (``Any``: importing the class here would make an import cycle).
    fit_one : Callable
        ``fit_one(vem, rng_key, num_steps, args, kwargs, init_params, opts)``,
        one fit returning a ``VEMResult`` (``vem.run.run_one``; passed in, as
        ``run`` calls this module).
    num_steps : int
        EM iterations of each fit.
    args : tuple
        The model's positional arguments.
    kwargs : dict
        Its keyword arguments.
    opts : dict
        The fits' options (``progress_bar``, ``tolerance``).
    """

    vem: Any
    fit_one: Callable
    num_steps: int
    args: tuple
    kwargs: dict
    opts: dict


class _MaskObserved(Messenger):
    """Masks the observed sites inside ``plate`` where ``keep`` (one bool an image,
    indexed by the plate's subsample indices) is False."""

    def __init__(self, fn, keep, plate: str):
        self.keep, self.plate, self.index = keep, plate, None
        super().__init__(fn)

    def postprocess_message(self, msg):
        if msg["type"] == "plate" and msg["name"] == self.plate:
            self.index = msg["value"]

    def process_message(self, msg):
        if msg["type"] != "sample" or not msg.get("is_observed"):
            return
        frame = next((f for f in msg["cond_indep_stack"] if f.name == self.plate), None)
        if frame is None:
            return
        keep = self.keep if self.index is None else self.keep[self.index]
        keep = keep.reshape(keep.shape + (1,) * (-frame.dim - 1))
        old = msg.get("mask")
        msg["mask"] = keep if old is None else old & keep


def mask_observations(model: Callable, plate: str) -> Callable:
    """``model`` with one more keyword, ``heldout_keep`` (bool [N]): the observed
    sites inside ``plate`` of the images where it is False are masked.

    Parameters
    ----------
    model : Callable
        The numpyro model.
    plate : str
        The name of its image plate.

    Returns
    -------
    Callable
        The masked model: ``model``'s arguments plus the keyword-only
        ``heldout_keep`` (bool [N], False: the image's observations masked).
    """

    def masked_model(*args, heldout_keep, **kwargs):
        return _MaskObserved(
            lambda: model(*args, **kwargs), jnp.asarray(heldout_keep), plate
        )()

    return masked_model


def check_masks(rng_key: jax.Array, num_images: int) -> list[np.ndarray]:
    """The masks ``keep`` [N] a given weight is checked on: one that holds out
    ``round(HELD_OUT * N)`` random images where that is at least ``CHECK_IMAGES``,
    else ``FOLDS`` that hold out every image once (:func:`heldout_folds`).

    Parameters
    ----------
    rng_key : jax.Array
        The key of the random choice.
    num_images : int
        N, the number of images.

    Returns
    -------
    list of np.ndarray
        The masks ``keep``, bool [N] each: False for the held-out images.
    """
    held = round(HELD_OUT * num_images)
    if held < CHECK_IMAGES:
        return heldout_folds(rng_key, num_images, min(FOLDS, num_images))
    chosen = np.asarray(jax.random.permutation(rng_key, num_images))[:held]
    keep = np.ones(num_images, bool)
    keep[chosen] = False
    return [keep]


def heldout_folds(rng_key: jax.Array, num_images: int, folds: int) -> list[np.ndarray]:
    """``folds`` masks ``keep`` [N] (:func:`check_masks`'s form) that hold out every
    image exactly once: a random partition of the images into ``folds`` parts of
    sizes differing by at most one (``folds`` at most ``num_images``).

    Parameters
    ----------
    rng_key, num_images
        As :func:`check_masks` takes them (the key of the partition).
    folds : int
        How many folds; clipped to ``[1, num_images]``.

    Returns
    -------
    list of np.ndarray
        One ``keep``, bool [N], per fold: False for the fold's held-out images.
    """
    folds = max(1, min(int(folds), num_images))
    order = np.asarray(jax.random.permutation(rng_key, num_images))
    masks = []
    for part in np.array_split(order, folds):
        keep = np.ones(num_images, bool)
        keep[part] = False
        masks.append(keep)
    return masks


def heldout_scores(
    full: Any,
    masked: Any,
    result: VEMResult,
    keep: np.ndarray | jax.Array,
    args: tuple,
    kwargs: dict,
) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`s_i` (module docstring) of the held-out images of a fit ``result`` of
    the masked VEM ``masked`` on ``args, kwargs`` (without ``heldout_keep``);
    ``full`` is the unmasked VEM (for :math:`a`), whose E-step has the graph.

    Parameters
    ----------
    full : VEM
        The unmasked fit, with a graph E-step.
    masked : VEM
        Its copy on the masked model (:func:`mask_observations`).
    result : VEMResult
        A fit of ``masked`` with ``heldout_keep=keep``.
    keep : np.ndarray or jax.Array
        Bool [N]: False for the held-out images.
    args : tuple
        The model's positional arguments.
    kwargs : dict
        Its keyword arguments, without ``heldout_keep``.

    Returns
    -------
    s, t : np.ndarray
        Float64 [held-out images] each: :math:`s_i` and :math:`t_i`
        (:func:`neighbour_scores`).
    """
    params = {k: v for k, v in result.params.items() if k != "terms"}
    a = full.local_log_joint(params, *args, **kwargs)
    b = masked.local_log_joint(params, *args, heldout_keep=keep, **kwargs)
    keep = np.asarray(keep)
    return neighbour_scores(a, b, result.posteriors, full.estep.graph, keep)


def neighbour_scores(
    a: jax.Array,
    b: jax.Array,
    posteriors: jax.Array,
    graph: Graph,
    keep: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    r"""The held-out images' :math:`s_i` and :math:`t_i` (module docstring, step 3)
    from the unmasked and masked log joints ``a``, ``b`` [N, K], the fit's
    posteriors [N, K] (of the observed images: the votes), the graph and ``keep``
    [N] (False: held out); two float64 arrays over the held-out images.

    Parameters
    ----------
    a : jax.Array
        [N, K]: the unmasked model's local log joint :math:`a_{ik}`.
    b : jax.Array
        [N, K]: the masked model's, :math:`b_{ik}` (the prior part for the
        held-out images).
    posteriors : jax.Array
        [N, K]: the fit's posteriors :math:`\phi_j`; the observed images' are
        the votes.
    graph : Graph
        The graph over the N images (:class:`~jaxannot.graph.Graph`).
    keep : np.ndarray
        Bool [N]: False for the held-out images.

    Returns
    -------
    s, t : np.ndarray
        Float64 [held-out images] each: the log-likelihood of each held-out image's
        observations under its neighbours' guess (:math:`s_i`) and under its prior
        alone (:math:`t_i`), in nats.
    """
    edges = (graph.senders, graph.receivers, graph.weights)
    s, alone = _all_scores(a, b, posteriors, edges, keep)
    return np.asarray(s, np.float64)[~keep], np.asarray(alone, np.float64)[~keep]


@jax.jit
def _all_scores(a, b, posteriors, edges, keep):
    """:func:`neighbour_scores`' :math:`s_i`, :math:`t_i` of every image, compiled
    once per shape (op by op, some 40 compiles per new shape)."""
    senders, receivers, weights = edges
    weights = weights * keep.astype(posteriors.dtype)[receivers]
    votes = jax.ops.segment_sum(
        weights[:, None] * posteriors[receivers], senders, a.shape[0]
    )
    prior = jax.nn.softmax(b, axis=-1)
    guess = votes + _PRIOR_MIX * prior * jnp.maximum(votes.sum(-1, keepdims=True), 1)
    guess = guess / guess.sum(-1, keepdims=True)
    s = jax.nn.logsumexp(jnp.log(guess) + a - b, axis=-1)
    alone = jax.nn.logsumexp(a, axis=-1) - jax.nn.logsumexp(b, axis=-1)
    return s, alone


def _masked_vem(vem, estep):
    """A copy of ``vem`` on the masked model with E-step ``estep`` (one device)."""
    return type(vem)(
        mask_observations(vem.model, vem.plate),
        vem.local_site,
        estep,
        vem.optimizer,
        m_step=_masked_m_step(vem.closed_form),
        m_steps=vem.m_steps,
        conjugate=vem.conjugate,
        init_steps=vem.init_steps,
        warn_empty=False,
        terms=vem.terms,
        term_steps=vem.term_steps,
        plate=vem.plate,
        chunk_size=vem.chunk_size,
    )


def _masked_m_step(m_step):
    """A closed-form M-step of the masked model: the held-out images' posteriors
    are given weight 0 (their observations are masked; the prior part is theirs
    too, a small loss for a closed form that cannot split them)."""
    if m_step is None:
        return None

    def masked(phi, *args, heldout_keep, **kwargs):
        return m_step(phi * heldout_keep[:, None], *args, **kwargs)

    return masked


def _path(fits: HeldOutFits, rng_key, lams, folds=None):
    """Fits of the masked model along ``lams`` on each of ``folds`` folds (None:
    :func:`check_masks`), and the held-out scores of every image
    held out (once): the neighbours' guess's
    :math:`s_i` [L, N], the prior's (``alone``, [L, N]; module docstring) and the
    number of images scored. One masked model serves every fit, and each fold's
    arguments are set up (and the model traced for them) once, not at every fit
    (:func:`~jaxannot.inference.vem.declared.reusing_setups`)."""
    vem, fit_one, num_steps, args, kwargs, opts = fits
    with reusing_setups():
        with model_errors(vem.plate, args, kwargs):
            n = vem.declared.setup(args, kwargs)[0].structure.num_images
        tolerance = max(float(opts["tolerance"]), TOLERANCE)
        opts = dict(opts, progress_bar=False, tolerance=tolerance)
        scores = np.zeros((len(lams), n))
        alone = np.zeros((len(lams), n))
        held = np.zeros(n, bool)
        fold_key = jax.random.fold_in(rng_key, 43)
        if folds is None:
            masks = check_masks(fold_key, n)
        else:
            masks = heldout_folds(fold_key, n, folds)
        masked = _masked_vem(vem, vem.estep.with_lam(lams[0]))
        for keep in masks:
            kw = dict(kwargs, heldout_keep=jnp.asarray(keep))
            start = None
            for row, lam in enumerate(lams):
                masked = copy.copy(masked)
                masked.estep = vem.estep.with_lam(lam)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fit = fit_one(masked, rng_key, num_steps, args, kw, start, opts)
                if not vem.estep.keep_best:  # module docstring, step 2
                    start = {k: v for k, v in fit.params.items() if k != "terms"}
                scores[row, ~keep], alone[row, ~keep] = heldout_scores(
                    vem, masked, fit, kw["heldout_keep"], args, kwargs
                )
            held |= ~keep
    return scores[:, held], alone[:, held], int(held.sum())


def _stderr(scores: np.ndarray, ref: int) -> tuple:
    """Standard error of the mean paired difference of each row with row ``ref``."""
    d = scores - scores[ref]
    if d.shape[1] < 2:
        return tuple(0.0 for _ in d)
    return tuple(float(x) for x in d.std(axis=1, ddof=1) / np.sqrt(d.shape[1]))


def _graph_gain(scores: np.ndarray, alone: np.ndarray) -> tuple:
    """``(mean, standard error)`` of the neighbours' guess's gain over the prior's
    at weight 0 (row 0)."""
    gain = scores[0] - alone[0]
    se = gain.std(ddof=1) / np.sqrt(gain.size) if gain.size > 1 else 0.0
    return float(gain.mean()), float(se)


def select_lam(fits: HeldOutFits, rng_key: jax.Array) -> LamPath:
    """Choose the E-step's weight on the held-out evidence (module docstring).

    Parameters
    ----------
    fits : HeldOutFits
        The run whose weight is chosen, with a graph E-step.
    rng_key : jax.Array
        The run's key (folds and fits).

    Returns
    -------
    LamPath
        The E-step's ``lam_path``, its scores over ``FOLDS`` folds and the weight
        chosen.
    """
    lams = tuple(float(x) for x in fits.vem.estep.lam_path)
    scores, alone, held = _path(fits, rng_key, lams, FOLDS)
    return choose(lams, scores, alone, held)


def choose(lams: tuple, scores: np.ndarray, alone: np.ndarray, held: int) -> LamPath:
    """Steps 4 and 5 of the module docstring on the held-out scores ``scores``
    (:math:`s`) and ``alone`` (:math:`t`), [len(lams), images].

    Parameters
    ----------
    lams : tuple of float
        The weights tried, the first 0.
    scores : np.ndarray
        [len(lams), held-out images]: :math:`s_i` at each weight.
    alone : np.ndarray
        [len(lams), held-out images]: :math:`t_i` at each weight.
    held : int
        How many images were held out.

    Returns
    -------
    LamPath
        The path, with the chosen weight (0 unless the graph tells).
    """
    means = scores.mean(axis=1)
    gain, gain_se = _graph_gain(scores, alone)
    best = int(np.argmax(means))
    ses = _stderr(scores, best)
    if gain > GATE * gain_se:
        chosen = next(i for i in range(best + 1) if means[i] >= means[best] - ses[i])
    else:
        chosen = 0
    means = tuple(float(m) for m in means)
    return LamPath(lams, means, ses, lams[chosen], held, gain, gain_se)


def check_lam(fits: HeldOutFits, rng_key: jax.Array) -> LamPath:
    """Warn (``UserWarning``) when the evidence is against the E-step's given
    weight: at weight 0 the graph's neighbours' guess is worse than the prior's by
    more than a standard error, or the weight lowers the held-out evidence below
    weight 0's by more than a standard error (module docstring). (Where
    :func:`select_lam` asks the graph to prove it tells, a given weight is
    trusted unless the held-out images say otherwise: a fit of a few dozen
    images holds out a few, too few to prove anything.)

    Parameters
    ----------
    fits, rng_key
        As :func:`select_lam` takes them: the run whose weight is checked.

    Returns
    -------
    LamPath
        Weights 0 and the E-step's ``lam``, their scores on the folds of
        :func:`check_masks`; ``chosen`` is the given weight.
    """
    lam = float(fits.vem.estep.lam)
    scores, alone, held = _path(fits, rng_key, (0.0, lam))
    name = f"{type(fits.vem.estep).__name__}(lam={lam:g})"
    return warn_against(name, lam, scores, alone, held, stacklevel=5)


def warn_against(
    name: str,
    lam: float,
    scores: np.ndarray,
    alone: np.ndarray,
    held: int,
    stacklevel: int,
) -> LamPath:
    """:func:`check_lam`'s warnings from the held-out scores at weights 0 and
    ``lam`` (rows of ``scores`` and ``alone``); ``name`` names the fit.

    Parameters
    ----------
    name : str
        The fit's name, at the head of the warnings.
    lam : float
        The given weight.
    scores : np.ndarray
        [2, held-out images]: :math:`s_i` at weights 0 and ``lam``.
    alone : np.ndarray
        [2, held-out images]: :math:`t_i` at the same weights.
    held : int
        How many images were held out.
    stacklevel : int
        ``warnings.warn``'s stacklevel, pointing at the user's call.

    Returns
    -------
    LamPath
        Weights 0 and ``lam`` and their scores; ``chosen`` is ``lam``.

    Warns
    -----
    UserWarning
        When the neighbours' guess is worse than the prior at weight 0 by more
        than a standard error, or ``lam`` lowers the mean score below weight 0's
        by more than a standard error.
    """
    lams = (0.0, lam)
    means = tuple(float(m) for m in scores.mean(axis=1))
    ses = _stderr(scores, 0)
    gain, gain_se = _graph_gain(scores, alone)
    if gain < -gain_se:
        warnings.warn(
            f"{name}: the graph's neighbours predict held-out images' observations "
            f"worse than their prior ({gain:+.3g} nats an image, s.e. "
            f"{gain_se:.2g}): the graph says nothing of this model; use lam=0 or "
            "lam='auto'",
            UserWarning,
            stacklevel=stacklevel,
        )
    elif means[1] < means[0] - ses[1]:
        warnings.warn(
            f"{name} lowers the held-out log-likelihood of masked images' "
            f"observations below lam=0's ({means[1]:.4g} vs {means[0]:.4g} nats an "
            "image): the graph hurts this fit; use lam='auto' or a smaller lam",
            UserWarning,
            stacklevel=stacklevel,
        )
    return LamPath(lams, means, ses, lam, held, gain, gain_se)
