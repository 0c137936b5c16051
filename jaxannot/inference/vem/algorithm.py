r"""Variational EM for any numpyro model with one discrete per-image local site.

The model declares *global* latent sites (outside the image plate) and, inside
``numpyro.plate("image", N)``, one ``Categorical`` site :math:`z_i` (``local_site``)
plus observed sites. :class:`VEM` maximizes

.. math::
    \mathcal{L}(\theta, \Phi) = \sum_i \Big[\sum_k \phi_{ik}\, a_{ik}(\theta)
        - \sum_k \phi_{ik}\log\phi_{ik}\Big] + \log p(\theta)
        - \sum_t \Omega_t(\Phi, \eta_t),
    \qquad a_{ik}(\theta) = \log p(x_i, z_i = k \mid \theta),

over the global values :math:`\theta` (MAP) and the local posteriors
:math:`q(z_i = k) = \phi_{ik}`, where :math:`\Omega_t` are optional extra terms
(:class:`~jaxannot.inference.MaxMargin`).

E-step
    :math:`a_{ik}` is computed from the declaration itself: the model is run with the
    global values substituted and :math:`z_i` conditioned on each of its :math:`K`
    values (``vmap`` over the values), and the log densities of the sites inside the
    image plate are summed per image. No funsor, no ``TraceEnum_ELBO`` compile. The
    exact posterior is :math:`\phi_i = \operatorname{softmax}(a_i)`; an *E-step
    transform* may replace it (:class:`~jaxannot.inference.LapVar1`,
    :class:`~jaxannot.inference.LapVar2`: seed 000's graph-regularized E-steps).
    Images are processed in chunks of ``chunk_size`` through the image plate's
    subsample indices, so memory is O(N K) plus one chunk's work (a small fit, by
    default, in one chunk).
M-step
    MAP of the global sites by ``m_steps`` optax steps on the expected complete log
    joint :math:`\sum_{ik}\phi_{ik}a_{ik}(\theta) + \log p(\theta)`, in unconstrained
    coordinates (each site's support bijection, no Jacobian: the MAP of the declared
    density). Sites declared with ``numpyro.param`` are globals without a prior
    (flat: their maximum likelihood value), in their ``constraint``'s coordinates.
    Sites with a Dirichlet or Beta prior get their closed-form update first, then
    those with a Normal prior Newton steps (the maximizer where the objective is
    quadratic in them, a Normal location; :mod:`~jaxannot.inference.vem.conjugate`,
    :mod:`~jaxannot.inference.vem.newton`; each kept where it does not lower the
    expected complete log joint). A closed-form M-step for the whole model is
    passed as ``m_step=`` (tests check it equals the generic one). With a closed
    form (given, or every site's conjugate one) and the exact or LapVar1 E-step,
    :math:`\mathcal{L}` never decreases.

Start
    Posteriors read from the data (:mod:`~jaxannot.inference.vem.start`: a majority
    vote, or k-means on the items' observations), then L-BFGS on the expected
    complete log joint (the conjugate sites' closed form where every global site
    is conjugate and it is kept); with ``m_step=``, random soft assignments
    (Dirichlet(1) rows) and the closed form's answer (:meth:`VEM.init_params`);
    ``run(..., restarts=n)`` keeps the best of ``n`` starts. A non-finite log joint,
    posterior, objective or global value stops the fit with an error naming the EM
    iteration and the step.

A model that is to be chunked reads its per-image data through the plate, e.g.
``numpyro.subsample(x, event_dim=1)`` or ``x[idx]`` with ``idx`` the plate's indices.

References
----------
A. P. Dempster, N. M. Laird, D. B. Rubin. Maximum likelihood from incomplete data via
the EM algorithm. JRSS-B, 1977. R. M. Neal, G. E. Hinton. A view of the EM algorithm
that justifies incremental, sparse, and other variants. 1999.
Seed 000: graph-regularized variational inference for image annotation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import optax

from jaxannot.inference.vem import fold_in
from jaxannot.inference.vem import run as runs
from jaxannot.inference.vem.checks import (
    check_key,
    check_optimizer,
    model_errors,
)
from jaxannot.inference.vem.declared import DeclaredModel
from jaxannot.inference.vem.fit_warnings import EmptyComponentWarning
from jaxannot.inference.vem.initial import start_values_jit
from jaxannot.inference.vem.layout import Whole, plan
from jaxannot.inference.vem.steps import EStep, ExactEStep, Term, VEMResult, VEMState
from jaxannot.runtime.compile_options import check_compile
from jaxannot.runtime.progress import check_count
from jaxannot.runtime.static_key import value_key

if TYPE_CHECKING:
    import numpy as np

    from jaxannot.types import Array, PRNGKey

__all__ = [
    "VEM",
    "VEMResult",
    "VEMState",
    "EStep",
    "Term",
    "ExactEStep",
    "EmptyComponentWarning",
]

#: The generic M-step's optimizer when none is given.
DEFAULT_OPTIMIZER = optax.adam(0.05)


def _checked_parts(estep: EStep | None, terms: Sequence[Term]) -> EStep:
    """The E-step (:class:`ExactEStep` for None) and the terms of a :class:`VEM`,
    checked to follow their protocols (``TypeError``)."""
    estep = estep if estep is not None else ExactEStep()
    if not isinstance(estep, EStep):
        raise TypeError(
            f"estep {type(estep).__name__} lacks the E-step protocol (arrays, "
            "static_key, keep_best, apply, objective): see "
            "jaxannot.inference.vem.steps.EStep"
        )
    for i, term in enumerate(terms):
        if not isinstance(term, Term):
            raise TypeError(
                f"terms[{i}] ({type(term).__name__}) lacks the term protocol "
                "(init, regularizer, penalty, predict): see "
                "jaxannot.inference.vem.steps.Term"
            )
    return estep


class VEM:
    """Variational EM for a numpyro model with a discrete per-image local site.

    Shaped like ``numpyro.infer.SVI``: :meth:`init` gives a :class:`VEMState`,
    :meth:`update` advances it by one EM iteration, :meth:`run` is a compiled loop
    over :meth:`update` whose result's ``state`` resumes the fit. One class, no
    base classes: its methods hand the work to public functions that take the VEM
    as their first argument and read only its public attributes (the
    configuration below; ``declared``, the model's declaration; ``closed_form``,
    the ``m_step``) and public methods. :meth:`run` and :meth:`run_restarts` go to
    :mod:`~jaxannot.inference.vem.run` (one fit:
    :func:`~jaxannot.inference.vem.run.run_one`, the compiled step run by
    :func:`~jaxannot.runtime.progress.run_steps`); fold-in, predictions and
    Laplace draws to :mod:`~jaxannot.inference.vem.fold_in`; the start
    (:func:`~jaxannot.inference.vem.run.start_state`,
    :mod:`~jaxannot.inference.vem.initial`) and the compiled step to
    :mod:`~jaxannot.inference.vem.fit`. A second run on
    data of the same shapes compiles nothing, and neither does a run of another
    length, nor a new ``VEM`` equal to this one: build one per fit freely. Equal
    means the same configuration compared by value, not identity
    (:func:`~jaxannot.runtime.static_key.value_key`): a model, closed-form M-step or
    optax optimizer built anew with the same code and equal bound values (a model
    defined inside a function, a ``functools.partial``, ``optax.adam(0.05)`` called
    for every fit), terms that compare equal (:class:`~jaxannot.inference.MaxMargin`:
    equal labels and costs) and an E-step of the same static configuration.

    Parameters
    ----------
    model : callable
        A numpyro model: global sites (``sample`` sites with a prior, or
        ``numpyro.param`` sites: fitted without one), and inside ``plate`` one
        ``Categorical`` site ``local_site`` plus observed sites. Other discrete
        sites in ``plate`` (and in plates nested in it, as MACE's ``s`` per
        annotation) are enumerated exactly with it and summed out of
        :math:`a_{ik}` (:mod:`~jaxannot.inference.vem.enumeration`); their
        posteriors come from :meth:`marginals`. Real-valued sites in ``plate``
        only (item difficulty's ``theta``, or ``theta_decentered`` under
        ``LocScaleReparam``) get a Laplace local factor per item and value of
        ``local_site`` instead (:mod:`~jaxannot.inference.vem.local_map`).
    local_site : str
        Name of the discrete per-image site whose posteriors the fit keeps.
    estep : EStep, optional
        :class:`~jaxannot.inference.LapVar1` / :class:`~jaxannot.inference.LapVar2`
        or any object with the :class:`~jaxannot.inference.vem.steps.EStep`
        protocol (default :class:`ExactEStep`, the exact posterior).
    optimizer : optax.GradientTransformation
        Updates the global sites in the generic M-step and the extra terms' optax
        parameters (default :data:`DEFAULT_OPTIMIZER`, ``optax.adam(0.05)``).
    m_step : callable, optional
        A closed-form M-step ``m_step(posteriors, *args, **kwargs) -> dict``: the
        constrained values of the global sites that maximize the expected complete
        log joint :math:`\\sum_{ik}\\phi_{ik}a_{ik} + \\log p(\theta)` given the
        posteriors ``[images, K]`` (e.g.
        :func:`jaxannot.methods.topic_models.mixture_of_unigrams.closed_form_m_step`).
        Default:
        the generic M-step, ``m_steps`` optax steps, after the closed-form
        updates of the conjugate sites (``conjugate``).
    conjugate : bool
        Give the global sites with a Dirichlet or Beta prior their closed-form
        update in the generic M-step (:mod:`~jaxannot.inference.vem.conjugate`:
        read off the gradient of the expected complete log joint, kept only where
        it does not lower it, so a site used otherwise than as a Categorical's or
        Bernoulli's probabilities falls back to the optax steps), and those with
        a Normal prior Newton steps (:mod:`~jaxannot.inference.vem.newton`,
        at most 16 coordinates in all, kept on the same test). False: every
        site takes the optax steps.
    m_steps : int
        Optax steps per M-step (generic path and extra terms). The default 5 came
        within 10 nats of a Gaussian mixture's optimum in 24 EM iterations where
        1 step needed 111 (``docs/modelling.md``, *What to expect*).
    init_steps : int
        L-BFGS steps of the default start's M-step without a closed form
        (:meth:`init_params`; where every global site is conjugate, only if their
        closed form is not kept).
    warn_empty : bool
        Warn (:class:`EmptyComponentWarning`) when a fit leaves a value of the
        local site with less than half an image of posterior mass; False where
        empty components are expected (more components than the data support).
    terms : sequence of Term
        Extra objective terms, e.g. ``[MaxMargin(labels, c)]``.
    term_steps : int
        Mirror-ascent steps of the E-step refinement the terms induce.
    plate : str
        Name of the image plate.
    chunk_size : int, optional
        Images per chunk of the log joint. None (the default): every image in one
        chunk where the model's array arguments hold at most 2**20 elements times
        K (a small fit, whose time is mostly compiling: one chunk compiles no loop
        over chunks), else 1024
        (:func:`~jaxannot.inference.vem.declared.chunk_for`).
    devices : sequence of jax.Device, optional
        Devices to split the fit's images over, e.g. ``jax.devices()`` (default
        None: the default device, as given). With several, the image axis of every
        array argument whose leading axis has the plate's size, and of the
        posteriors, is padded to a multiple of the device count and split over
        them (:mod:`jaxannot.runtime.sharding`); the globals are replicated and
        the sums over images reduced across devices. Padded images have weight 0
        and change no result. It needs a model whose plate takes its size from
        those arrays, and no extra terms; otherwise the fit runs on one device.
        Graph E-steps (:class:`~jaxannot.inference.LapVar1` / ``LapVar2``) run on
        the real images with the posteriors gathered on every device (the graph
        replicated); the log joint and the M-step stay split. Only :meth:`run` is
        split; fold-in (:meth:`posteriors_for`) runs on one device.
    compile : {"auto", "fast", "optimized"}
        How XLA compiles the fit's start and EM loop
        (:mod:`~jaxannot.runtime.compile_options`): ``"fast"`` with its cheaper
        options on CPU (about half the compile, programs that may run slower),
        ``"optimized"`` with its defaults, ``"auto"`` fast where the model's
        arrays and the posteriors hold at most
        :data:`~jaxannot.runtime.compile_options.FAST_SIZE` elements (a small
        fit is mostly compiling). Read from shapes: a second fit of the same
        shapes compiles nothing.

    Examples
    --------
    >>> vem = VEM(mixture_of_unigrams, "z", m_step=closed_form_m_step)
    ... # doctest: +SKIP
    >>> result = vem.run(jax.random.key(0), 100, counts, num_topics=10)
    ... # doctest: +SKIP
    >>> more = vem.run(jax.random.key(1), 50, counts, num_topics=10,
    ...                init_state=result.state)  # doctest: +SKIP
    >>> state = vem.init(jax.random.key(0), counts, num_topics=10)  # doctest: +SKIP
    >>> state, loss = vem.update(state, counts, num_topics=10)  # doctest: +SKIP
    """

    def __init__(
        self,
        model: Callable,
        local_site: str = "z",
        estep: EStep | None = None,
        optimizer: optax.GradientTransformation | None = None,
        *,
        m_step: Callable | None = None,
        m_steps: int = 5,
        conjugate: bool = True,
        init_steps: int = 50,
        warn_empty: bool = True,
        terms: Sequence[Term] = (),
        term_steps: int = 5,
        plate: str = "image",
        chunk_size: int | None = None,
        devices: Sequence[jax.Device] | None = None,
        compile: str = "auto",
    ):
        if m_step is not None and not callable(m_step):
            raise TypeError(
                f"m_step must be a callable closed-form M-step or None (the generic "
                f"optax M-step), got {m_step!r}"
            )
        self.m_steps = check_count("m_steps", m_steps, 1, "optax steps per M-step")
        self.init_steps = check_count("init_steps", init_steps, 1)
        if chunk_size is not None:
            chunk_size = check_count("chunk_size", chunk_size, 1)
        self.chunk_size = chunk_size
        self.term_steps = check_count("term_steps", term_steps, 0)
        estep = _checked_parts(estep, terms)
        if optimizer is not None:
            check_optimizer(optimizer)
        self.model, self.local_site, self.plate = model, local_site, plate
        self.declared = DeclaredModel(model, local_site, plate, self.chunk_size)
        self.estep = estep
        self.optimizer = optimizer if optimizer is not None else DEFAULT_OPTIMIZER
        self.closed_form = m_step
        if not isinstance(conjugate, bool):
            raise TypeError(
                "conjugate must be True (closed-form updates of Dirichlet, Beta and "
                "Normal sites) or False (optax steps for every site), got "
                f"{conjugate!r}"
            )
        self.conjugate = conjugate
        self.warn_empty = bool(warn_empty)
        self.terms = tuple(terms)
        self.devices = None if devices is None else tuple(devices)
        self.compile = check_compile(compile)

    def _key(self) -> tuple:
        """What the compiled code depends on (the E-step's arrays are data)."""
        return (
            self.declared,
            value_key(self.closed_form),
            self.m_steps,
            self.conjugate,
            self.term_steps,
            self.init_steps,
            value_key(self.optimizer),
            self.terms,
            self.devices,
            self.compile,
            tuple(self.estep.static_key),
            bool(self.estep.keep_best),
        )

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    # ---------------------------------------------------------------- API
    def prepare_call(self, args: tuple, kwargs: dict) -> tuple:
        """The set-up, layout and placed data of a call on ``args``, checked.

        Shared by :meth:`init`, :meth:`update` and :meth:`run`: each call on the
        model's data goes through it once.

        Parameters
        ----------
        args : tuple
            The model's positional arguments.
        kwargs : dict
            Its keyword arguments.

        Returns
        -------
        tuple of (Setup, tuple, Whole or Shards, tuple)
            ``(setup, dynamic, layout, placed)``: the static set-up, the model's
            array arguments, the fit's layout and those arrays placed for it.

        Raises
        ------
        ValueError
            The E-step's weight is ``'auto'`` (only :meth:`run` chooses it), or its
            graph's node count is not the plate's image count.
        """
        if getattr(self.estep, "lam", None) == "auto":
            raise ValueError(
                f"{type(self.estep).__name__}(lam='auto') has its weight chosen by "
                "run(); for init, update or run_restarts pass a number: "
                "estep.with_lam(result.lam) or lam=..."
            )
        with model_errors(self.plate, args, kwargs):
            setup, dynamic = self.declared.setup(args, kwargs)
        nodes = getattr(self.estep, "num_nodes", setup.structure.num_images)
        if nodes != setup.structure.num_images:
            raise ValueError(
                f"the E-step's graph has {nodes} nodes but plate {self.plate!r} has "
                f"{setup.structure.num_images} images: build the graph over the "
                "images of this fit"
            )
        layout, placed = plan(self, setup, args, kwargs, dynamic)
        return setup, dynamic, layout, placed

    def init_params(self, rng_key: PRNGKey, *args: Any, **kwargs: Any) -> dict:
        """The default start: posteriors, then an M-step.

        With a closed form (``m_step=``) the posteriors are Dirichlet(1) rows
        (uniformly random on the simplex) and the globals the closed form's answer
        to them. Otherwise the posteriors are read from the data
        (:func:`~jaxannot.inference.vem.start.start_posteriors`: the majority vote
        of Categorical annotations of the item's class, or k-means on the items'
        observations, mixed with Dirichlet(1) rows) and the globals are
        ``init_steps`` L-BFGS steps on the expected complete log joint from a
        random point of the unconstrained space (numpyro's ``init_to_uniform``:
        improper priors need no draw; a ``param`` site starts at its declared
        value); where every global site has a Dirichlet, Beta or Normal prior, the
        closed-form update (:mod:`~jaxannot.inference.vem.conjugate`) from that
        point instead, L-BFGS only where it is not kept. Every component then
        starts where some items are, instead of at a prior draw far from the data,
        which no image may ever choose.

        Parameters
        ----------
        rng_key : PRNGKey
            The start's key.
        *args, **kwargs
            The model's data.

        Returns
        -------
        dict
            Site -> start value of every global site.
        """
        check_key(rng_key)
        with model_errors(self.plate, args, kwargs):
            setup, dynamic = self.declared.setup(args, kwargs)
            return start_values_jit(self, Whole(setup), rng_key, dynamic)

    def init(
        self,
        rng_key: PRNGKey,
        *args: Any,
        init_params: dict | None = None,
        **kwargs: Any,
    ) -> VEMState:
        """The :class:`VEMState` a fit starts from (``numpyro.infer.SVI.init``).

        Parameters
        ----------
        rng_key : PRNGKey
            Split into an initialization key and the loop key.
        *args, **kwargs
            The model's arguments. Arrays are traced; other values are static.
        init_params : dict, optional
            Constrained starting values of the global sites, checked by name, shape
            and support (default: :meth:`init_params`).

        Returns
        -------
        VEMState
        """
        check_key(rng_key)
        setup, dynamic, layout, placed = self.prepare_call(args, kwargs)
        args_kw = (args, kwargs)
        return self.init_prepared(
            setup, layout, rng_key, init_params, dynamic, placed, args_kw
        )

    def init_prepared(
        self,
        setup: Any,
        layout: Any,
        rng_key: PRNGKey,
        init_params: dict | None,
        dynamic: tuple,
        placed: tuple,
        args_kw: tuple[tuple, dict],
    ) -> VEMState:
        """The :class:`VEMState` a fit starts from, on a call already prepared.

        :meth:`init` once :meth:`prepare_call` has run
        (:func:`~jaxannot.inference.vem.run.start_state`, which :meth:`run` calls
        with the preparation it reuses for the loop).

        Parameters
        ----------
        setup : Setup
            The call's static set-up.
        layout : Whole or Shards
            The fit's layout.
        rng_key : PRNGKey
            Split into an initialization key and the loop key.
        init_params : dict or None
            Constrained starting values of the global sites (checked), or None for
            the default start (:meth:`init_params`).
        dynamic : tuple
            The model's array arguments.
        placed : tuple
            Those arrays placed for the layout.
        args_kw : tuple of (tuple, dict)
            The model's positional and keyword arguments, for the error messages.

        Returns
        -------
        VEMState
            The start, placed for the layout.
        """
        return runs.start_state(
            self, setup, layout, rng_key, init_params, dynamic, placed, args_kw
        )

    def update(
        self, state: VEMState, *args: Any, **kwargs: Any
    ) -> tuple[VEMState, np.float32]:
        r"""One EM iteration from ``state``: ``(state, loss)`` with ``loss`` the
        negative objective :math:`-\mathcal{L}` of its E-step (NaN once the fit
        has stopped), as ``numpyro.infer.SVI.update``.

        The iteration is :meth:`run`'s, in its compiled loop
        (:func:`~jaxannot.inference.vem.run.update`): ``n`` updates from
        :meth:`init` give the state of ``run`` for ``n`` steps at
        ``tolerance=0``, and an update after such a run (or a run after updates)
        on arrays of the same shapes compiles nothing.

        Parameters
        ----------
        state : VEMState
            The state to go on from.
        *args, **kwargs
            The model's data.

        Returns
        -------
        tuple of (VEMState, np.float32)
            The new state and the scalar loss.

        Raises
        ------
        FloatingPointError, ValueError
            The iteration met a non-finite quantity (as :meth:`run`).
        """
        return runs.update(self, state, args, kwargs)

    # ------------------------------------------- fits (inference/vem/run.py)
    def run(
        self,
        rng_key: jax.Array,
        num_steps: int,
        *args: Any,
        init_params: dict | None = None,
        init_state: VEMState | None = None,
        progress_bar: bool = True,
        tolerance: float = 0.0,
        restarts: int = 1,
        **kwargs: Any,
    ) -> VEMResult:
        """Run ``num_steps`` EM iterations (from ``restarts`` starts).

        Parameters
        ----------
        rng_key : PRNGKey
            Split into an initialization key and the loop key (E-step transforms
            that sweep in random order draw from the loop key).
        num_steps : int
            EM iterations (the maximum when ``tolerance > 0``), an int >= 1. Not a
            compiled shape: runs of any length share one compiled loop.
        *args, **kwargs
            The model's arguments. Arrays are traced (a new corpus of the same shape
            reuses the compiled fit); other values are static, and so are arrays
            the model reads by value (``int(np.max(x)) + 1``): given as NumPy
            arrays, keyed on their content (new values compile again).
        init_params : dict, optional
            Constrained starting values of the global sites, checked by name, shape
            and support (default: :meth:`init_params`, random soft assignments then
            an M-step).
        init_state : VEMState, optional
            Go on from this state (a previous result's ``state``) instead of
            starting anew; ``rng_key`` is then unused.
        progress_bar : bool
            A tqdm bar with the loss when the run lasts over ~2 s.
        tolerance : float
            Stop when the objective fails to improve by this relative amount
            (E-steps that keep their best iterate, as LapVar2, always stop then).
        restarts : int
            Fits from this many default starts (keys split from ``rng_key``, one
            compiled fit); the one with the highest final objective (the last
            finite ``-losses``) is returned. :meth:`run_restarts` returns them all.

        Returns
        -------
        VEMResult
            With ``state``, the final :class:`VEMState`.

        Raises
        ------
        TypeError
            ``num_steps`` or ``restarts`` not an int, ``rng_key`` not a PRNG key,
            ``tolerance`` not a number, a 0-d integer array where the model needs
            a static value (a shape or a plate size: pass a Python int).
        ValueError
            ``num_steps < 1``, ``tolerance`` negative or not finite, a plate of
            size 0 (no images, ``num_topics=0``), ``init_params`` with an unknown
            or missing site, of the wrong shape or off its support, a term with one
            label per image of another plate size, NaN in the data reaching the
            log joint, an observation outside its distribution's support (the
            images and sites are named).
        FloatingPointError
            A non-finite log joint, posterior, objective or global value arose
            mid-fit; the message names the EM iteration and the step.

        Warns
        -----
        EmptyComponentWarning
            The returned fit leaves a value of the local site with less than half
            an image of posterior mass (unless ``warn_empty=False``).
        """
        return runs.run(
            self,
            rng_key,
            num_steps,
            args,
            kwargs,
            init_params=init_params,
            init_state=init_state,
            progress_bar=progress_bar,
            tolerance=tolerance,
            restarts=restarts,
        )

    def run_restarts(
        self,
        rng_key: jax.Array,
        restarts: int,
        num_steps: int,
        *args: Any,
        num_draws: int = 0,
        progress_bar: bool = True,
        tolerance: float = 0.0,
        **kwargs: Any,
    ) -> list[VEMResult]:
        """Every fit of :meth:`run` with ``restarts`` starts, e.g. as arviz chains.

        Parameters
        ----------
        rng_key : PRNGKey
            Split into one key per restart (as ``run(..., restarts=...)``) and, with
            ``num_draws``, the draws' key.
        restarts, num_steps : int
        *args, **kwargs, progress_bar, tolerance
            As :meth:`run`.
        num_draws : int
            With ``num_draws > 0``, each fit carries that many draws of the global
            posterior its local posteriors imply (:meth:`laplace_draws`), which
            :func:`~jaxannot.diagnostics.to_inference_data` turns into draws of
            each chain.

        Returns
        -------
        list of VEMResult
            One per restart, in key order; each warns
            (:class:`EmptyComponentWarning`) if it left a component empty.
        """
        return runs.run_restarts(
            self,
            rng_key,
            restarts,
            num_steps,
            args,
            kwargs,
            num_draws=num_draws,
            progress_bar=progress_bar,
            tolerance=tolerance,
        )

    # -------------------------------------- fold-in (inference/vem/fold_in.py)
    def laplace_draws(
        self,
        rng_key: jax.Array,
        result: VEMResult,
        num_draws: int,
        *args: Any,
        **kwargs: Any,
    ) -> VEMResult:
        r"""``result`` with draws of the global posterior its posteriors imply.

        The draws come from the Laplace approximation of
        :math:`q(\theta) \propto \exp(\sum_{ik}\phi_{ik} a_{ik}(\theta) + \log
        p(\theta))` at ``result.params``, in the sites' unconstrained coordinates
        (the factor of :math:`\theta` that mean-field variational Bayes pairs with
        the posteriors :math:`\phi`; :mod:`~jaxannot.inference.vem.global_sites`). Each
        draw's own fold-in posteriors come along. The Hessian is dense: at most
        ``MAX_LAPLACE_DIM`` (4096) coordinates.

        Parameters
        ----------
        rng_key : PRNGKey
        result : VEMResult
            A fit of this VEM on ``args``.
        num_draws : int
        *args, **kwargs
            The model's arguments, as given to :meth:`run`.

        Returns
        -------
        VEMResult
            ``result`` with ``draws`` ``{site: [num_draws, ...]}`` and
            ``draw_posteriors`` ``[num_draws, images, K]``.

        Warns
        -----
        UserWarning
            ``result.params`` is not a maximum of the expected complete log joint
            (a direction of non-positive curvature, drawn with unit precision).
        """
        return fold_in.with_laplace_draws(
            self, rng_key, result, num_draws, args, kwargs
        )

    def local_log_joint(self, params: dict, *args: Any, **kwargs: Any) -> jax.Array:
        """:math:`a_{ik} = \\log p(x_i, z_i = k \\mid \\theta)` for every image of
        ``args`` and value ``k`` under the global values ``params``, [N, K].

        Parameters
        ----------
        params : dict
            Site -> global value.
        *args, **kwargs
            The images' data, as the model takes it.

        Returns
        -------
        jax.Array [N, K]
            The log joints.
        """
        return fold_in.under(self, params, args, kwargs, fold_in.local_values)

    def posteriors_for(self, params: dict, *args: Any, **kwargs: Any) -> jax.Array:
        """Exact local posteriors :math:`\\phi_i = \\operatorname{softmax}(a_i)` of
        the images in ``args`` under ``params`` (fold-in of new images), [N, K].

        ``params`` is checked as ``init_params`` is (names, shapes, supports);
        data whose shapes do not fit the globals' (another feature count) get an
        error naming the arguments and their shapes.

        Parameters
        ----------
        params, *args, **kwargs
            As :meth:`local_log_joint` takes them.

        Returns
        -------
        jax.Array [N, K]
            The posteriors.
        """
        posteriors = functools.partial(fold_in.local_values, posteriors=True)
        return fold_in.under(self, params, args, kwargs, posteriors)

    def marginals(self, params: dict, *args: Any, **kwargs: Any) -> dict:
        """Exact posterior marginals of every discrete site VEM enumerates, for the
        items in ``args`` under the global values ``params`` (as numpyro's
        ``TraceEnum_ELBO.compute_marginals``, as probabilities).

        Parameters
        ----------
        params : dict
            Constrained global values (``result.params``), checked as
            ``init_params`` is.
        *args, **kwargs
            The model's arguments.

        Returns
        -------
        dict
            ``{site: probabilities}``: the local site's ``[N, K]`` (equal to
            :meth:`posteriors_for`), another item-level site's ``[N, K_d]``, their
            joint under the key ``"c,d"`` (the names joined by commas)
            ``[N, K, K_d]``, and a nested site's ``[N, *its plates' sizes, K_s]``
            (MACE's ``s``: ``[items, positions, 2]``). With real-valued sites in
            the item plate: the local site's ``[N, K]`` and each real-valued
            site's local MAP per value of the local site, ``[N, K, *its shape
            per item]`` (:mod:`~jaxannot.inference.vem.local_map`).
        """
        return fold_in.under(self, params, args, kwargs, fold_in.marginals)

    def predict(
        self, result: VEMResult, *args: Any, term: int = 0, **kwargs: Any
    ) -> Array:
        """Predictions of extra term ``term`` (e.g. :class:`MaxMargin`) for the images
        in ``args``, from their fold-in posteriors.

        Parameters
        ----------
        result : VEMResult
            A fit with extra terms.
        *args, **kwargs
            The images' data, as the model takes it.
        term : int
            Which extra term predicts.

        Returns
        -------
        jax.Array [N]
            The predictions.
        """
        return fold_in.predict(self, result, args, kwargs, term)
