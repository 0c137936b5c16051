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
    subsample indices, so memory is O(N K) plus one chunk's work.
M-step
    MAP of the global sites by ``m_steps`` optax steps on the expected complete log
    joint :math:`\sum_{ik}\phi_{ik}a_{ik}(\theta) + \log p(\theta)`, in unconstrained
    coordinates (each site's support bijection, no Jacobian: the MAP of the declared
    density). Sites declared with ``numpyro.param`` are globals without a prior
    (flat: their maximum likelihood value), in their ``constraint``'s coordinates.
    A closed-form M-step for conjugate sites is passed as ``m_step=`` (the fast
    path; tests check it equals the generic one). With the closed form and the
    exact or LapVar1 E-step, :math:`\mathcal{L}` never decreases.

Start
    Random soft assignments (Dirichlet(1) rows), then an M-step: the closed form,
    or L-BFGS on the expected complete log joint (:meth:`VEM.init_params`);
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

import warnings
from collections.abc import Callable, Sequence

import numpy as np

import jax
import jax.numpy as jnp
import optax
from jax import lax

from jaxannot.inference.vem.checks import (
    EmptyComponentWarning,
    check_inputs,
    check_state,
    checked_start,
    missing_globals,
    model_errors,
    raise_fault,
    warn_empty,
)
from jaxannot.inference.vem.declared import DeclaredModel
from jaxannot.inference.vem.fit import (
    initial_state,
    one_update,
    start_values_jit,
    step_for,
)
from jaxannot.inference.vem.global_sites import MAX_LAPLACE_DIM, laplace_draws
from jaxannot.inference.vem.layout import (
    _Whole,
    fold_in,
    fold_in_all,
    log_joint_all,
    plan,
)
from jaxannot.inference.vem.steps import (
    EStep,
    ExactEStep,
    Term,
    VEMResult,
    VEMState,
    terms_value,
)
from jaxannot.runtime import sharding
from jaxannot.runtime.progress import check_count, run_steps

__all__ = [
    "VEM",
    "VEMResult",
    "VEMState",
    "EStep",
    "Term",
    "ExactEStep",
    "EmptyComponentWarning",
]

#: The generic M-step's optimizer when none is given (one object, so that VEMs
#: built with the default share their compiled code).
DEFAULT_OPTIMIZER = optax.adam(0.05)


class VEM:
    """Variational EM for a numpyro model with a discrete per-image local site.

    Shaped like ``numpyro.infer.SVI``: :meth:`init` gives a :class:`VEMState`,
    :meth:`update` advances it by one EM iteration, :meth:`run` is a compiled loop
    over :meth:`update` whose result's ``state`` resumes the fit. A second run on
    data of the same shapes compiles nothing, and neither does a run of another
    length, nor a new ``VEM`` equal to this one (same model, E-step configuration,
    optimizer object, M-step and terms): build one per fit freely.

    Parameters
    ----------
    model : callable
        A numpyro model: global sites (``sample`` sites with a prior, or
        ``numpyro.param`` sites: fitted without one), and inside ``plate`` one
        ``Categorical`` site ``local_site`` plus observed sites.
    local_site : str
        Name of the discrete per-image site.
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
        the generic M-step, ``m_steps`` optax steps.
    m_steps : int
        Optax steps per M-step (generic path and extra terms). The default 5 came
        within 10 nats of a Gaussian mixture's optimum in 24 EM iterations where
        1 step needed 111 (``docs/modelling.md``, *What to expect*).
    init_steps : int
        L-BFGS steps of the default start's M-step without a closed form
        (:meth:`init_params`).
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
    chunk_size : int
        Images per E-step chunk.
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
        init_steps: int = 50,
        warn_empty: bool = True,
        terms: Sequence[Term] = (),
        term_steps: int = 5,
        plate: str = "image",
        chunk_size: int = 1024,
        devices: Sequence[jax.Device] | None = None,
    ):
        if m_step is not None and not callable(m_step):
            raise TypeError(
                f"m_step must be a callable closed-form M-step or None (the generic "
                f"optax M-step), got {m_step!r}"
            )
        self.m_steps = check_count("m_steps", m_steps, 1, "optax steps per M-step")
        self.init_steps = check_count("init_steps", init_steps, 1)
        self.chunk_size = check_count("chunk_size", chunk_size, 1)
        self.term_steps = check_count("term_steps", term_steps, 0)
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
        self.model, self.local_site, self.plate = model, local_site, plate
        self.declared = DeclaredModel(model, local_site, plate, self.chunk_size)
        self.estep = estep
        self.optimizer = optimizer if optimizer is not None else DEFAULT_OPTIMIZER
        self.closed_form = m_step
        self.warn_empty = bool(warn_empty)
        self.terms = tuple(terms)
        self.devices = None if devices is None else tuple(devices)

    def _key(self) -> tuple:
        """What the compiled code depends on (the E-step's arrays are data)."""
        return (
            self.declared,
            self.closed_form,
            self.m_steps,
            self.term_steps,
            self.init_steps,
            self.optimizer,
            self.terms,
            self.devices,
            tuple(self.estep.static_key),
            bool(self.estep.keep_best),
        )

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    # ----------------------------------------------------------- M-steps
    def _m_step(self, layout, transforms, values, opt_state, term_params, phi, dynamic):
        if self.closed_form is not None:
            args, kw = layout.join(dynamic)
            stats = layout.statistics(phi)
            values = {
                k: jnp.asarray(v)
                for k, v in self.closed_form(stats, *args, **kw).items()
            }
            if self.terms:
                term_params, opt_state = self._optax_steps(
                    lambda tp: terms_value(self.terms, tp, phi), term_params, opt_state
                )
            return values, opt_state, term_params
        unconstrained = {k: transforms[k].inv(v) for k, v in values.items()}

        def loss(u_and_t):
            u, tp = u_and_t
            vals = {k: transforms[k](x) for k, x in u.items()}
            value = -layout.expected(self.declared, vals, phi, dynamic)
            return value + (terms_value(self.terms, tp, phi) if self.terms else 0.0)

        (unconstrained, term_params), opt_state = self._optax_steps(
            loss, (unconstrained, term_params), opt_state
        )
        values = {k: transforms[k](x) for k, x in unconstrained.items()}
        return values, opt_state, term_params

    def _optax_steps(self, loss, params, opt_state):
        extra = isinstance(self.optimizer, optax.GradientTransformationExtraArgs)

        def body(_, carry):
            params, opt_state = carry
            value, grads = jax.value_and_grad(loss)(params)
            kw = dict(value=value, grad=grads, value_fn=loss) if extra else {}
            updates, opt_state = self.optimizer.update(grads, opt_state, params, **kw)
            return optax.apply_updates(params, updates), opt_state

        return lax.fori_loop(0, self.m_steps, body, (params, opt_state))

    # ---------------------------------------------------------------- API
    def _prepare(self, args, kwargs):
        """Set-up, layout and placed data of a call on ``args``."""
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

    def init_params(self, rng_key, *args, **kwargs) -> dict:
        """The default start: random soft assignments, then an M-step.

        The posteriors start as Dirichlet(1) rows (uniformly random on the simplex);
        the globals are the M-step's answer to them: the closed form, or else
        ``init_steps`` L-BFGS steps on the expected complete log joint from a
        random point of the unconstrained space (numpyro's ``init_to_uniform``:
        improper priors need no draw; a ``param`` site starts at its declared
        value). Every component then starts near the whole data's fit, where the
        first E-steps separate them, instead of at a prior draw far from the data,
        which no image may ever choose.
        """
        with model_errors(self.plate, args, kwargs):
            setup, dynamic = self.declared.setup(args, kwargs)
            return start_values_jit(self, _Whole(setup), rng_key, dynamic)

    def init(self, rng_key, *args, init_params: dict | None = None, **kwargs):
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
        setup, dynamic, layout, placed = self._prepare(args, kwargs)
        args_kw = (args, kwargs)
        return self._init(setup, layout, rng_key, init_params, dynamic, placed, args_kw)

    def _init(self, setup, layout, rng_key, init_params, dynamic, placed, args_kw):
        values = None
        if init_params is not None:
            values = checked_start(self, setup, init_params, args_kw)
        check_inputs(setup.structure, self.plate, values, self.terms)
        with model_errors(self.plate, *args_kw):
            state = initial_state(
                self, _Whole(setup), layout, rng_key, values, dynamic, placed
            )
        return layout.place(state, self.estep.arrays)[0]

    def update(self, state, *args, **kwargs):
        r"""One EM iteration from ``state``: ``(state, loss)`` with ``loss`` the
        negative objective :math:`-\mathcal{L}` of its E-step (NaN once the fit
        has stopped). Compiled once per shapes (``numpyro.infer.SVI.update``).

        Raises
        ------
        FloatingPointError, ValueError
            The iteration met a non-finite quantity (as :meth:`run`).
        """
        setup, _, layout, placed = self._prepare(args, kwargs)
        check_state(setup.structure, state)
        state, e_arrays = layout.place(state, self.estep.arrays)
        step = step_for(self, layout, 0.0)
        state, loss = one_update(step, state, (placed, e_arrays))
        fault = jax.device_get(state.fault)
        if fault[0]:
            raise_fault(fault, state.params, args, kwargs, -float(loss))
        return state, loss

    def run(
        self,
        rng_key: jax.Array,
        num_steps: int,
        *args,
        init_params: dict | None = None,
        init_state: VEMState | None = None,
        progress_bar: bool = True,
        tolerance: float = 0.0,
        restarts: int = 1,
        **kwargs,
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
            reuses the compiled fit); other values are static.
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
            ``num_steps`` or ``restarts`` not an int.
        ValueError
            ``num_steps < 1``, ``init_params`` with an unknown or missing site, of
            the wrong shape or off its support, a term with one label per image of
            another plate size, NaN in the data reaching the log joint, an
            observation outside its distribution's support (the images and sites
            are named).
        FloatingPointError
            A non-finite log joint, posterior, objective or global value arose
            mid-fit; the message names the EM iteration and the step.

        Warns
        -----
        EmptyComponentWarning
            The returned fit leaves a value of the local site with less than half
            an image of posterior mass (unless ``warn_empty=False``).
        """
        num_steps = check_count("num_steps", num_steps, 1, "EM iterations")
        restarts = check_count("restarts", restarts)
        if restarts > 1 and (init_params is not None or init_state is not None):
            raise ValueError(
                "restarts > 1 draws its own starts; pass init_params or init_state, "
                "or restarts"
            )
        if init_params is not None and init_state is not None:
            raise ValueError("pass init_params (a new fit) or init_state, not both")
        opts = dict(progress_bar=progress_bar, tolerance=float(tolerance))
        if restarts == 1:
            result = self._run_one(
                rng_key, num_steps, args, kwargs, init_params, opts, init_state
            )
        else:
            fits = [
                self._run_one(key, num_steps, args, kwargs, None, opts)
                for key in jax.random.split(rng_key, restarts)
            ]
            result = max(fits, key=_final_objective)
        if self.warn_empty:
            warn_empty(result.posteriors)
        return result

    def run_restarts(
        self,
        rng_key: jax.Array,
        restarts: int,
        num_steps: int,
        *args,
        num_draws: int = 0,
        progress_bar: bool = True,
        tolerance: float = 0.0,
        **kwargs,
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
        restarts = check_count("restarts", restarts)
        num_steps = check_count("num_steps", num_steps, 1, "EM iterations")
        num_draws = check_count("num_draws", num_draws, 0)
        keys = jax.random.split(rng_key, restarts)
        opts = dict(progress_bar=progress_bar, tolerance=float(tolerance))
        fits = []
        for r, key in enumerate(keys):
            fit = self._run_one(key, num_steps, args, kwargs, None, opts)
            if self.warn_empty:
                warn_empty(fit.posteriors, f"restart {r}")
            if num_draws:  # a key apart from the two the fit split its key into
                key = jax.random.fold_in(key, 1)
                fit = self.laplace_draws(key, fit, num_draws, *args, **kwargs)
            fits.append(fit)
        return fits

    def _run_one(
        self, rng_key, num_steps, args, kwargs, init_params, opts, init_state=None
    ):
        setup, dynamic, layout, placed = self._prepare(args, kwargs)
        if init_state is None:
            state = self._init(
                setup, layout, rng_key, init_params, dynamic, placed, (args, kwargs)
            )
        else:
            check_state(setup.structure, init_state)
            state = layout.place(init_state, self.estep.arrays)[0]
        step = step_for(self, layout, opts["tolerance"])
        with model_errors(self.plate, args, kwargs):
            state, losses = run_steps(
                step,
                state,
                num_steps,
                data=(placed, self.estep.arrays),
                progress_bar=opts["progress_bar"],
                desc="VEM",
            )
        fault = jax.device_get(state.fault)
        if fault[0]:
            at = int(fault[1]) - (int(state.iteration) - num_steps)
            objective = -losses[at] if 0 <= at < num_steps else None
            raise_fault(fault, state.params, args, kwargs, objective, self)
        if self.estep.keep_best:
            values, phi, term_params = state.best
        else:
            values, phi, term_params = state.params, state.posteriors, state.term_params
        params = jax.tree.map(sharding.gather, dict(values))  # whole on every process
        params["terms"] = term_params
        return VEMResult(params, layout.real(phi), losses, state=state)

    def laplace_draws(
        self, rng_key: jax.Array, result: VEMResult, num_draws: int, *args, **kwargs
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
        setup, dynamic = self.declared.setup(args, kwargs)
        s = setup.structure
        missing_globals(s, result.params, "result.params")
        if int(num_draws) < 1:
            raise ValueError(f"num_draws must be >= 1, got {num_draws}")
        dim = sum(int(np.prod(shape)) for shape in s.global_shapes)
        if dim > MAX_LAPLACE_DIM:
            raise ValueError(
                f"the global sites have {dim} coordinates; Laplace draws need a dense "
                f"Hessian, at most {MAX_LAPLACE_DIM} coordinates"
            )
        values = {k: jnp.asarray(result.params[k]) for k in s.globals_}
        layout = _Whole(setup)
        draws, smallest = laplace_draws(
            self.declared,
            layout,
            int(num_draws),
            rng_key,
            values,
            result.posteriors,
            dynamic,
        )
        if float(smallest) <= 0:
            warnings.warn(
                "the fit's global values are not a maximum of the expected complete "
                f"log joint (Hessian eigenvalue {float(smallest):.3g}); draws along "
                "such directions use unit precision: fit longer (num_steps, m_steps)",
                UserWarning,
                stacklevel=2,
            )
        phis = fold_in_all(self.declared, layout, draws, dynamic)
        return result._replace(draws=draws, draw_posteriors=phis)

    def local_log_joint(self, params: dict, *args, **kwargs) -> jax.Array:
        """:math:`a_{ik} = \\log p(x_i, z_i = k \\mid \\theta)` for every image of
        ``args`` and value ``k`` under the global values ``params``, [N, K]."""
        with model_errors(self.plate, args, kwargs):
            setup, dynamic = self.declared.setup(args, kwargs)
        values = checked_start(self, setup, params, (args, kwargs), what="params")
        with model_errors(self.plate, args, kwargs):
            return log_joint_all(self.declared, _Whole(setup), values, dynamic)

    def posteriors_for(self, params: dict, *args, **kwargs) -> jax.Array:
        """Exact local posteriors :math:`\\phi_i = \\operatorname{softmax}(a_i)` of
        the images in ``args`` under ``params`` (fold-in of new images), [N, K].

        ``params`` is checked as ``init_params`` is (names, shapes, supports);
        data whose shapes do not fit the globals' (another feature count) get an
        error naming the arguments and their shapes."""
        with model_errors(self.plate, args, kwargs):
            setup, dynamic = self.declared.setup(args, kwargs)
        values = checked_start(self, setup, params, (args, kwargs), what="params")
        with model_errors(self.plate, args, kwargs):
            return fold_in(self.declared, _Whole(setup), values, dynamic)

    def predict(self, result: VEMResult, *args, term: int = 0, **kwargs):
        """Predictions of extra term ``term`` (e.g. :class:`MaxMargin`) for the images
        in ``args``, from their fold-in posteriors."""
        if not self.terms:
            raise ValueError("this VEM has no extra terms to predict with")
        if not 0 <= int(term) < len(self.terms):
            raise ValueError(f"term must be in [0, {len(self.terms)}), got {term}")
        phi = self.posteriors_for(result.params, *args, **kwargs)
        return self.terms[term].predict(result.params["terms"][term], phi)


def _final_objective(result: VEMResult) -> float:
    """The last finite objective of a fit (``-inf`` if none)."""
    objective = -np.asarray(result.losses, np.float64)
    finite = objective[np.isfinite(objective)]
    return float(finite[-1]) if finite.size else -np.inf
