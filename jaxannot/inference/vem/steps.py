"""The pieces :class:`~jaxannot.inference.vem.algorithm.VEM` plugs together.

- :class:`VEMResult`, what :meth:`VEM.run` returns.
- E-step transforms: the protocol and :class:`ExactEStep` (the exact local posterior);
  :class:`~jaxannot.inference.lapvar.LapVar1` / ``LapVar2`` implement the same one.
- :class:`VEMState`, the state between EM iterations, and :class:`VEMInfo`, what
  each iteration reports (its loss and fault code).
- The protocols of E-steps (:class:`EStep`) and extra terms (:class:`Term`).
- The extra terms of the objective (e.g. :class:`~jaxannot.inference.MaxMargin`):
  their value, the MedLDA-style E-step refinement they induce, and their dual updates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import xlogy

if TYPE_CHECKING:
    from jaxannot.types import Array, ArrayTree, PRNGKey

__all__ = [
    "VEMResult",
    "ExactEStep",
    "VEMState",
    "VEMInfo",
    "EStep",
    "Term",
    "terms_value",
    "refine_for_terms",
    "dual_updates",
]


class VEMState(NamedTuple):
    """The state of a :class:`~jaxannot.inference.vem.algorithm.VEM` fit between EM
    iterations.

    What :meth:`VEM.init` returns and :meth:`VEM.update` advances (as
    ``numpyro.infer.SVI``'s ``SVIState``); a result's ``state`` resumes a fit
    (``vem.run(key, n, *args, init_state=result.state)``).

    Attributes
    ----------
    rng_key : PRNGKey
        The loop's key (E-steps that sweep in random order draw from it), split at
        every EM iteration; unchanged under an E-step that draws nothing
        (``draws = False``, as :class:`ExactEStep`).
    params : dict
        Constrained values of the global sites.
    posteriors : Float[Array, "images K"]
        The local posteriors :math:`q(z_i)` of the last E-step.
    opt_state : optax state
        Of the generic M-step's optimizer (and the terms' parameters).
    term_params : tuple
        Each extra term's parameters.
    best : tuple
        ``(params, posteriors, term_params)`` of the best iterate, for E-steps that
        keep it (``keep_best``); empty otherwise.
    best_objective : float32
        The highest objective so far.
    stopped : bool
        The fit has stopped (converged at ``tolerance``, or a fault): further
        updates change nothing. The fault itself is in the iteration's
        :class:`VEMInfo`.
    iteration : int32
        EM iterations run so far.
    """

    rng_key: jax.Array
    params: dict
    posteriors: jax.Array
    opt_state: Any
    term_params: tuple
    best: tuple
    best_objective: jax.Array
    stopped: jax.Array
    iteration: jax.Array


class VEMInfo(NamedTuple):
    r"""What one EM iteration of a :class:`~jaxannot.inference.vem.algorithm.VEM` fit
    reports (blackjax's ``info``): the step returns ``(VEMState, VEMInfo)`` and
    :func:`~jaxannot.runtime.progress.run_steps` records it at every iteration.

    Attributes
    ----------
    loss : float32
        The negative objective :math:`-\mathcal{L}` of the iteration's E-step (NaN
        for an iteration skipped after the fit stopped).
    fault : int32
        The code of the iteration's first non-finite quantity
        (:mod:`~jaxannot.inference.vem.faults`; 0: none), which stops the fit.
    """

    loss: jax.Array
    fault: jax.Array


class VEMResult(NamedTuple):
    """What :meth:`VEM.run` returns.

    Attributes
    ----------
    params : dict
        Constrained values of the global sites (plus ``"terms"``: a tuple of each
        extra term's parameters, empty without terms).
    posteriors : Float[Array, "images K"]
        The local posteriors the final parameters were fitted to.
    losses : np.ndarray [num_steps]
        Negative objective :math:`-\\mathcal{L}` after each E-step (NaN for steps
        skipped after convergence).
    draws : dict or None
        Draws ``{site: [draws, ...]}`` of the global posterior the posteriors
        imply (:meth:`VEM.laplace_draws`); None without.
    draw_posteriors : Float[Array, "draws images K"] or None
        The fold-in posteriors under each draw; None without draws.
    state : VEMState or None
        The fit's final state: ``vem.run(key, n, *args, init_state=result.state)``
        goes on from it.
    lam : float or None
        A graph E-step's weight in this fit (the chosen one with ``lam="auto"``);
        None without a weight.
    lam_path : LamPath or None
        The weights tried on held-out evidence and their scores
        (:class:`~jaxannot.inference.vem.heldout.LamPath`): the whole path with
        ``lam="auto"``, 0 and the given weight with the held-out check; None
        without either.
    """

    params: dict
    posteriors: jax.Array
    losses: np.ndarray
    draws: dict | None = None
    draw_posteriors: jax.Array | None = None
    state: VEMState | None = None
    lam: float | None = None
    lam_path: Any = None


@runtime_checkable
class EStep(Protocol):
    """What :class:`~jaxannot.inference.vem.algorithm.VEM` asks of an E-step transform.

    :class:`ExactEStep`, :class:`~jaxannot.inference.lapvar.LapVar1` and
    :class:`~jaxannot.inference.lapvar.LapVar2` implement it.

    Attributes
    ----------
    arrays : pytree
        The transform's arrays (a graph's tables, its weight), passed to the
        compiled fit as data: a new graph of the same shapes compiles nothing.
    static_key : tuple
        Its hashable static configuration: two transforms with the same key share
        compiled code.
    keep_best : bool
        Keep the best iterate and stop once the objective stops improving.

    Optionally ``draws`` (a bool, True where absent): whether ``apply`` reads its
    key; the fit's step splits a key per EM iteration only for one that does.
    """

    arrays: Any
    static_key: tuple
    keep_best: bool

    def apply(
        self, arrays: ArrayTree, rng_key: PRNGKey, phi: Array, a: Array
    ) -> tuple[jax.Array, jax.Array]:
        """New posteriors from the previous ones and the log joint ``a``
        ``[images, K]``, and the E-step objective at them.

        Parameters
        ----------
        arrays : pytree
            The transform's arrays.
        rng_key : PRNGKey
            The step's key.
        phi : jax.Array [images, K]
            Previous posteriors.
        a : jax.Array [images, K]
            Log joints.

        Returns
        -------
        tuple of (jax.Array, jax.Array)
            The new posteriors [images, K] and the scalar objective.
        """

    def objective(self, arrays: ArrayTree, phi: Array, a: Array) -> jax.Array:
        """The E-step objective at posteriors ``phi``.

        Parameters
        ----------
        arrays : pytree
            The transform's arrays.
        phi, a : jax.Array [images, K]
            Posteriors and log joints.

        Returns
        -------
        jax.Array
            The scalar objective.
        """


@runtime_checkable
class Term(Protocol):
    r"""What :class:`~jaxannot.inference.vem.algorithm.VEM` asks of an extra objective
    term
    :math:`\Omega(\Phi, \eta)` (e.g. :class:`~jaxannot.inference.MaxMargin`).

    Its parameters :math:`\eta` are a pytree from ``init``; ``regularizer(eta) +
    penalty(eta, phi, index)`` is subtracted from the objective; ``predict(eta,
    phi)`` maps posteriors to predictions. A term with ``solver = "dual"`` also has
    ``dual_update(phi, eta) -> eta``, its exact solve after each M-step.
    """

    def init(self, rng_key: PRNGKey, dim: int) -> Any:
        """The term's initial parameters :math:`\\eta`.

        Parameters
        ----------
        rng_key : PRNGKey
            Their key.
        dim : int
            Feature dimension (the local site's number of values ``K``).

        Returns
        -------
        pytree
            The parameters.
        """

    def regularizer(self, params: ArrayTree) -> jax.Array:
        """The term's regularizer, counted once per objective.

        Parameters
        ----------
        params : pytree
            The term's parameters.

        Returns
        -------
        jax.Array
            A scalar.
        """

    def penalty(self, params: ArrayTree, features: Array, index: Array) -> jax.Array:
        """The term's penalty on the images ``index``.

        Parameters
        ----------
        params : pytree
            The term's parameters.
        features : jax.Array [B, K]
            The images' posteriors.
        index : jax.Array [B]
            Their rows among the fit's images.

        Returns
        -------
        jax.Array
            A scalar.
        """

    def predict(self, params: ArrayTree, features: Array) -> jax.Array:
        """Predictions from posteriors.

        Parameters
        ----------
        params, features
            As :meth:`penalty` takes them.

        Returns
        -------
        jax.Array [B]
            The predictions.
        """


class ExactEStep:
    """The plain E-step: :math:`\\phi_i = \\operatorname{softmax}(a_i)` (the exact
    local posterior), with objective :math:`\\sum_i \\operatorname{logsumexp}(a_i)`.

    The protocol of every E-step transform: ``arrays`` (a pytree of the transform's
    arrays, passed to the compiled fit as data, so a new graph of the same shape
    compiles nothing), ``static_key`` (its hashable static configuration),
    ``keep_best`` (keep the best iterate and stop when the objective stops
    improving), ``apply(arrays, rng_key, phi, a) -> (phi, objective)`` and
    ``objective(arrays, phi, a)``; optionally ``draws`` (default True): False
    where ``apply`` never reads its key, so the fit's step splits none (a key
    split is a threefry loop compiled into the step: about a tenth of a second
    for every shape of data on 2 CPU cores) and the state's ``rng_key`` stays the
    loop's key.
    """

    keep_best = False
    draws = False
    arrays: tuple = ()
    static_key = ("exact",)

    def apply(
        self, arrays: tuple, rng_key: PRNGKey, phi: Array, a: Array
    ) -> tuple[Array, Array]:
        """The exact posteriors and their objective (``phi`` and ``rng_key`` unused).

        Parameters
        ----------
        arrays : tuple
            Empty.
        rng_key, phi
            Not used: the exact posteriors depend on ``a`` alone.
        a : jax.Array [images, K]
            Log joints.

        Returns
        -------
        tuple of (jax.Array, jax.Array)
            The posteriors [images, K] and the scalar objective.
        """
        del arrays, rng_key, phi
        return jax.nn.softmax(a, axis=-1), jax.scipy.special.logsumexp(a, -1).sum()

    def objective(self, arrays: tuple, phi: Array, a: Array) -> Array:
        """:math:`\\sum_{ik}\\phi_{ik}a_{ik} - \\phi_{ik}\\log\\phi_{ik}`.

        Parameters
        ----------
        arrays : tuple
            Empty.
        phi, a : jax.Array [images, K]
            Posteriors and log joints.

        Returns
        -------
        jax.Array
            The scalar :math:`\\sum_{ik}\\phi_{ik}(a_{ik} - \\log\\phi_{ik})`.
        """
        del arrays
        return (phi * a).sum() - xlogy(phi, phi).sum()


# ------------------------------------------------------------- extra terms
def terms_value(
    terms: Sequence[Term], term_params: Sequence[ArrayTree], phi: Array
) -> Array:
    """Sum of the extra terms' regularizers and penalties on the posteriors.

    Parameters
    ----------
    terms : sequence of Term
        The extra terms.
    term_params : sequence of pytree
        Their parameters.
    phi : jax.Array [images, K]
        Posteriors.

    Returns
    -------
    jax.Array
        The scalar sum.
    """
    idx = jnp.arange(phi.shape[0])
    return sum(
        (t.regularizer(p) + t.penalty(p, phi, idx))
        for t, p in zip(terms, term_params, strict=True)
    )


def refine_for_terms(
    terms: Sequence[Term],
    term_params: Sequence[ArrayTree],
    phi: Array,
    a: Array,
    steps: int,
) -> Array:
    """Raise the E-step objective minus the terms' penalty in ``phi`` by damped
    entropic mirror-ascent steps, accepted image by image only where they help
    (MedLDA's E-step with the margin term).

    Parameters
    ----------
    terms, term_params, phi
        As :func:`terms_value` takes them.
    a : jax.Array [images, K]
        Log joints.
    steps : int
        Mirror-ascent steps.

    Returns
    -------
    jax.Array [images, K]
        The refined posteriors.
    """
    if not terms or steps == 0:
        return phi

    def per_image(ph):
        idx = jnp.arange(ph.shape[0])
        own = ((ph * a) - xlogy(ph, ph)).sum(-1)
        pen = sum(
            jax.vmap(lambda f, i, t=t, p=p: t.penalty(p, f[None], i[None]))(ph, idx)
            for t, p in zip(terms, term_params, strict=True)
        )
        return own - pen

    def grad_pen(ph):
        return jax.grad(
            lambda q: sum(
                t.penalty(p, q, jnp.arange(q.shape[0]))
                for t, p in zip(terms, term_params, strict=True)
            )
        )(ph)

    def body(_, ph):
        target = jax.nn.log_softmax(a - grad_pen(ph), axis=-1)
        cand = jax.nn.softmax(0.5 * jnp.log(jnp.maximum(ph, 1e-30)) + 0.5 * target)
        better = per_image(cand) > per_image(ph)
        return jnp.where(better[:, None], cand, ph)

    return lax.fori_loop(0, steps, body, phi)


def dual_updates(
    terms: Sequence[Term], term_params: Sequence[ArrayTree], phi: Array
) -> tuple:
    """The terms solved exactly by their dual solvers (``solver="dual"``).

    Parameters
    ----------
    terms, term_params, phi
        As :func:`terms_value` takes them.

    Returns
    -------
    tuple
        The terms' new parameters.
    """
    return tuple(
        t.dual_update(phi, p) if getattr(t, "solver", "optax") == "dual" else p
        for t, p in zip(terms, term_params, strict=True)
    )
