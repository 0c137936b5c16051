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
    density). A model may register a closed-form M-step for its conjugate sites with
    :func:`register_closed_form` (the fast path; tests check it equals the generic
    one). With the closed form and the exact or LapVar1 E-step, :math:`\mathcal{L}`
    never decreases.

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
from operator import itemgetter
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp
import numpyro
import optax
from jax import lax
from numpyro import handlers
from numpyro.distributions.transforms import biject_to
from numpyro.infer import init_to_uniform

from jaxannot.inference import sharding
from jaxannot.inference._declaration import (
    _inspect,
    _out_of_plate,
    _per_image,
    _Setup,
    _split_leaves,
    _subsamples,
    _trace,
)
from jaxannot.inference._vem_checks import (
    EmptyComponentWarning,
    check_inputs,
    fault_code,
    missing_globals,
    no_fault,
    raise_fault,
    record_fault,
    warn_empty,
)
from jaxannot.inference._vem_globals import (
    MAX_LAPLACE_DIM,
    closed_form_start,
    laplace_draws,
    maximize_expected,
    random_posteriors,
)
from jaxannot.inference._vem_layout import (
    _Whole,
    fold_in,
    fold_in_all,
    log_joint_all,
    plan,
)
from jaxannot.inference.progress import run_steps
from jaxannot.inference.vem_steps import (
    ExactEStep,
    VEMResult,
    closed_form_for,
    dual_updates,
    refine_for_terms,
    register_closed_form,
    terms_value,
)

__all__ = [
    "VEM",
    "VEMResult",
    "ExactEStep",
    "EmptyComponentWarning",
    "register_closed_form",
    "closed_form_for",
]


class VEM:
    """Variational EM for a numpyro model with a discrete per-image local site.

    Shaped like ``numpyro.infer.SVI``: build once, ``run`` many times (a second run
    on data of the same shapes compiles nothing).

    Parameters
    ----------
    model : callable
        A numpyro model: global latent sites, and inside ``plate`` one
        ``Categorical`` site ``local_site`` plus observed sites.
    local_site : str
        Name of the discrete per-image site.
    estep : E-step transform, optional
        :class:`~jaxannot.inference.LapVar1` / :class:`~jaxannot.inference.LapVar2`
        or any object with the protocol of :class:`ExactEStep` (the default: the
        exact posterior). It may be replaced between runs (``vem.estep = ...``);
        one with the same ``static_key`` reuses the compiled fit.
    optimizer : optax.GradientTransformation
        Updates the global sites in the generic M-step and the extra terms' optax
        parameters (default ``optax.adam(0.05)``).
    m_step : {"auto", "generic"} or callable
        ``"auto"``: the closed form registered for ``model`` if any, else generic;
        a callable is used as the closed form.
    m_steps : int
        Optax steps per M-step (generic path and extra terms).
    init_steps : int
        L-BFGS steps of the default start's M-step when no closed form is
        registered (:meth:`init_params`).
    warn_empty : bool
        Warn (:class:`EmptyComponentWarning`) when a fit leaves a value of the
        local site with less than half an image of posterior mass; False where
        empty components are expected (more components than the data support).
    terms : sequence
        Extra objective terms, e.g. ``[MaxMargin(labels, c)]``.
    plate : str
        Name of the image plate.
    chunk_size : int
        Images per E-step chunk.
    devices : sequence of jax.Device, optional
        Devices to split the fit's images over, e.g. ``jax.devices()`` (default
        None: the default device, as given). With several, the image axis of every
        array argument whose leading axis has the plate's size, and of the
        posteriors, is padded to a multiple of the device count and split over
        them (:mod:`jaxannot.inference.sharding`); the globals are replicated and
        the sums over images reduced across devices. Padded images have weight 0
        and change no result. It needs a model whose plate takes its size from
        those arrays, and no extra terms; otherwise the fit runs on one device.
        Graph E-steps (:class:`~jaxannot.inference.LapVar1` / ``LapVar2``) run on
        the real images with the posteriors gathered on every device (the graph
        replicated); the log joint and the M-step stay split. Only :meth:`run` is
        split; fold-in (:meth:`posteriors_for`) runs on one device.

    Examples
    --------
    >>> vem = VEM(mixture_of_unigrams, local_site="z")  # doctest: +SKIP
    >>> result = vem.run(jax.random.key(0), 100, counts, num_topics=10)
    ... # doctest: +SKIP
    >>> result.params["pi"], result.posteriors.shape  # doctest: +SKIP
    """

    def __init__(
        self,
        model: Callable,
        local_site: str = "z",
        estep: Callable | None = None,
        optimizer: optax.GradientTransformation | None = None,
        *,
        m_step: str | Callable = "auto",
        m_steps: int = 1,
        init_steps: int = 50,
        warn_empty: bool = True,
        terms: Sequence[Any] = (),
        term_steps: int = 5,
        plate: str = "image",
        chunk_size: int = 1024,
        devices: Sequence[jax.Device] | None = None,
    ):
        if isinstance(m_step, str) and m_step not in ("auto", "generic"):
            raise ValueError(
                f"unknown m_step {m_step!r}; valid: 'auto', 'generic' or a callable"
            )
        if min(int(m_steps), int(chunk_size), int(init_steps)) < 1 or term_steps < 0:
            raise ValueError(
                "m_steps, init_steps and chunk_size must be >= 1, term_steps >= 0; "
                f"got {m_steps}, {init_steps}, {chunk_size}, {term_steps}"
            )
        self.model, self.local_site, self.plate = model, local_site, plate
        self.estep = estep if estep is not None else ExactEStep()
        self.optimizer = optimizer if optimizer is not None else optax.adam(0.05)
        if callable(m_step):
            self.closed_form = m_step
        elif m_step == "auto":
            self.closed_form = closed_form_for(model)
        else:
            self.closed_form = None
        self.m_steps, self.term_steps = int(m_steps), int(term_steps)
        self.init_steps, self.warn_empty = int(init_steps), bool(warn_empty)
        self.terms = tuple(terms)
        self.chunk_size = int(chunk_size)
        self.devices = None if devices is None else tuple(devices)
        self._steps: dict = {}

    # ------------------------------------------------------------ setup
    def _setup(self, args, kwargs) -> tuple[_Setup, tuple]:
        structure = _inspect(self.model, self.local_site, self.plate, args, kwargs)
        treedef, static, is_dynamic, dynamic = _split_leaves(args, kwargs)
        n = structure.num_images
        chunk = min(self.chunk_size, n)
        subsamples, error = _subsamples(
            self.model, self.plate, self.local_site, structure, args, kwargs
        )
        if chunk < n and not subsamples:
            raised = (
                ""
                if error is None
                else f" (on two images' indices the model raised "
                f"{type(error).__name__}: {error})"
            )
            raise ValueError(
                f"the model does not read its data through plate {self.plate!r}'s "
                f"indices{raised}, so VEM cannot process its {n} images in chunks "
                f"of {chunk}: use numpyro.subsample(x, event_dim=...) inside the "
                f"plate, or pass chunk_size >= {n}"
            ) from error
        setup = _Setup(
            structure, subsamples, chunk, -(-n // chunk), treedef, static, is_dynamic
        )
        return setup, dynamic

    def _small_substitutions(self, setup: _Setup) -> dict:
        """Plate indices for traces that need only the out-of-plate sites."""
        s = setup.structure
        n = 1 if setup.subsamples else s.num_images
        return {self.plate: jnp.arange(n), self.local_site: s.local_value(n)}

    # ------------------------------------------------- pieces of the objective
    def _chunk_indices(self, setup: _Setup):
        n, chunk = setup.structure.num_images, setup.chunk
        idx = np.arange(setup.num_chunks * chunk)
        valid = idx < n
        return jnp.asarray(np.where(valid, idx, 0).reshape(-1, chunk)), jnp.asarray(
            valid.reshape(-1, chunk)
        )

    def _log_joint_chunk(self, setup, values, idx, args, kwargs):
        """:math:`a_{ik}` for the images ``idx`` [chunk] -> [chunk, K]."""
        s = setup.structure
        rescale = idx.shape[0] / s.num_images

        def at(k):
            subs = dict(values)
            subs[self.plate] = idx
            subs[self.local_site] = k  # a scalar: broadcast over the plate
            trace = _trace(self.model, subs, args, kwargs)
            return _per_image(trace, self.plate, s.image_dim, rescale, idx.shape[0])

        return jax.vmap(at, out_axes=1)(jnp.arange(s.num_values))

    def _log_joint(self, setup, values, args, kwargs):
        """:math:`a` for every image, [N, K] (chunked with ``lax.map``)."""
        chunks, _ = self._chunk_indices(setup)
        out = lax.map(
            lambda idx: self._log_joint_chunk(setup, values, idx, args, kwargs), chunks
        )
        return out.reshape(-1, out.shape[-1])[: setup.structure.num_images]

    def _log_prior(self, setup, values, args, kwargs):
        """:math:`\\log p(\\theta)`, the declared densities at the global values.

        Evaluated without numpyro's support check: an M-step's values lie on their
        supports up to float32 rounding (a simplex row of a few hundred entries
        may sum to 1 + 2e-6, past the check's 1e-6), which the check would turn
        into an objective of -inf."""
        subs = dict(values)
        subs.update(self._small_substitutions(setup))
        with numpyro.validation_enabled(False):
            trace = _trace(self.model, subs, args, kwargs)
            return _out_of_plate(trace, self.plate)

    def _transforms(self, setup, args, kwargs):
        trace = _trace(self.model, self._small_substitutions(setup), args, kwargs)
        return {k: biject_to(trace[k]["fn"].support) for k in setup.structure.globals_}

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
            value = -layout.expected(self, vals, phi, dynamic)
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

    # ------------------------------------------------------------- the step
    def _build_step(self, layout, tolerance: float):
        """One EM iteration as a pure ``step(t, state, data)``; cached per static
        layout and E-step configuration. ``data`` (the model's arrays and the
        E-step's) is read, never returned: a loop that carried it would copy the
        whole corpus into its output."""
        estep = self.estep
        setup = layout.setup
        keep_best = bool(estep.keep_best)
        key = (layout, tolerance, estep.static_key, keep_best)
        if key in self._steps:
            return self._steps[key]

        def step(t, state, data):
            dynamic, e_arrays = data
            args, kwargs = layout.join(dynamic)
            transforms = self._transforms(setup, args, kwargs)
            (rng, values, phi, opt_state, term_params, best, best_obj, stop, fault) = (
                state
            )

            def iterate(_):
                rng2, sub = jax.random.split(rng)
                a = layout.log_joint(self, values, dynamic)
                new_phi, q = layout.estep(estep, e_arrays, sub, phi, a)
                new_phi = refine_for_terms(
                    self.terms, term_params, new_phi, a, self.term_steps
                )
                if self.terms:  # the refinement moved phi: re-evaluate
                    q = estep.objective(e_arrays, new_phi, a)
                    q = q - terms_value(self.terms, term_params, new_phi)
                objective = q + self._log_prior(setup, values, args, kwargs)
                new_values, new_opt, new_tp = self._m_step(
                    layout, transforms, values, opt_state, term_params, new_phi, dynamic
                )
                new_tp = dual_updates(self.terms, new_tp, new_phi)
                code = fault_code(a, new_phi, objective, new_values)
                ok = code == 0
                improved = ok & (
                    (t == 0) | (objective > best_obj + tolerance * jnp.abs(best_obj))
                )
                if keep_best:
                    halt = ~improved
                    new_best = jax.tree_util.tree_map(
                        lambda n, o: jnp.where(improved, n, o),
                        (new_values, new_phi, new_tp),
                        best,
                    )
                else:  # the fit is the last iterate (a fault raises after the loop)
                    late = (t > 0) & ~improved if tolerance > 0 else False
                    halt = late | ~ok
                    new_best = ()
                new_best_obj = jnp.where(improved, objective, best_obj)
                state = (
                    rng2,
                    new_values,
                    new_phi,
                    new_opt,
                    new_tp,
                    new_best,
                    new_best_obj,
                    halt,
                    record_fault(fault, code, t),
                )
                return state, -objective

            def skip(_):
                return state, jnp.float32(jnp.nan)

            return lax.cond(stop, skip, iterate, None)

        self._steps[key] = step
        return step

    # ---------------------------------------------------------------- API
    def init_params(self, rng_key, *args, **kwargs) -> dict:
        """The default start: random soft assignments, then an M-step.

        The posteriors start as Dirichlet(1) rows (uniformly random on the simplex);
        the globals are the M-step's answer to them: the registered closed form, or
        else ``init_steps`` L-BFGS steps on the expected complete log joint from a
        random point of the unconstrained space (numpyro's ``init_to_uniform``:
        improper priors need no draw). Every component then starts near the whole
        data's fit, where the first E-steps separate them, instead of at a prior
        draw far from the data, which no image may ever choose.
        """
        setup, dynamic = self._setup(args, kwargs)
        s = setup.structure
        if self.closed_form is not None:
            return closed_form_start(self, _Whole(setup), rng_key, dynamic)
        phi_key, start_key = jax.random.split(rng_key)
        phi = random_posteriors(phi_key, s.num_images, s.num_values)
        seeded = handlers.substitute(
            handlers.seed(self.model, start_key), data=self._small_substitutions(setup)
        )
        uniform = handlers.substitute(seeded, substitute_fn=init_to_uniform)
        trace = handlers.trace(uniform).get_trace(*args, **kwargs)
        start = {k: trace[k]["value"] for k in s.globals_}
        return maximize_expected(
            self, _Whole(setup), self.init_steps, start, phi, dynamic
        )

    def run(
        self,
        rng_key: jax.Array,
        num_steps: int,
        *args,
        init_params: dict | None = None,
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
            EM iterations (the maximum when ``tolerance > 0``), >= 1.
        *args, **kwargs
            The model's arguments. Arrays are traced (a new corpus of the same shape
            reuses the compiled fit); other values are static.
        init_params : dict, optional
            Constrained starting values of the global sites (default:
            :meth:`init_params`, random soft assignments then an M-step).
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

        Raises
        ------
        ValueError
            ``num_steps < 1``, ``init_params`` lacking a site or of the wrong
            shape, a term with one label per image of another plate size, NaN in
            the data reaching the log joint.
        FloatingPointError
            A non-finite log joint, posterior, objective or global value arose
            mid-fit; the message names the EM iteration and the step.

        Warns
        -----
        EmptyComponentWarning
            The returned fit leaves a value of the local site with less than half
            an image of posterior mass (unless ``warn_empty=False``).
        """
        restarts = int(restarts)
        if restarts < 1:
            raise ValueError(f"restarts must be >= 1, got {restarts}")
        if restarts > 1 and init_params is not None:
            raise ValueError(
                "restarts > 1 draws its own starts; pass init_params or restarts"
            )
        opts = dict(progress_bar=progress_bar, tolerance=tolerance)
        if restarts == 1:
            result = self._run_one(rng_key, num_steps, args, kwargs, init_params, opts)
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
        if int(restarts) < 1:
            raise ValueError(f"restarts must be >= 1, got {restarts}")
        keys = jax.random.split(rng_key, int(restarts))
        opts = dict(progress_bar=progress_bar, tolerance=tolerance)
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

    def _run_one(self, rng_key, num_steps, args, kwargs, init_params, opts):
        setup, dynamic = self._setup(args, kwargs)
        s = setup.structure
        init_key, loop_key = jax.random.split(rng_key)
        if int(num_steps) < 1:  # before the start's M-step is compiled
            raise ValueError(f"num_steps must be >= 1 (EM iterations), got {num_steps}")
        if init_params is None:
            init_params = self.init_params(init_key, *args, **kwargs)
        missing_globals(s, init_params, "init_params")
        values = {k: jnp.asarray(init_params[k]) for k in s.globals_}
        check_inputs(s, self.plate, values, self.terms)
        nodes = getattr(self.estep, "num_nodes", s.num_images)
        if nodes != s.num_images:
            raise ValueError(
                f"the E-step's graph has {nodes} nodes but plate {self.plate!r} has "
                f"{s.num_images} images"
            )
        layout, dynamic = plan(self, setup, args, kwargs, dynamic)
        term_keys = jax.random.split(init_key, max(1, len(self.terms)))
        term_params = tuple(
            t.init(k, s.num_values) for t, k in zip(self.terms, term_keys, strict=False)
        )
        if self.closed_form is not None:
            opt_state = self.optimizer.init(term_params)
        else:
            transforms = self._transforms(setup, args, kwargs)
            unconstrained = {k: transforms[k].inv(v) for k, v in values.items()}
            opt_state = self.optimizer.init((unconstrained, term_params))
        phi0 = fold_in(self, layout, values, dynamic)
        # the best iterate is kept apart only where it may differ from the last
        keep_best = bool(self.estep.keep_best)
        best = (values, phi0, term_params) if keep_best else ()
        state = (
            loop_key,
            values,
            phi0,
            opt_state,
            term_params,
            best,
            jnp.float32(-jnp.inf),
            jnp.bool_(False),
            no_fault(),
        )
        state, e_arrays = layout.place(state, self.estep.arrays)
        step = self._build_step(layout, float(opts["tolerance"]))
        state, losses = run_steps(
            step,
            state,
            num_steps,
            data=(dynamic, e_arrays),
            progress_bar=opts["progress_bar"],
            desc="VEM",
        )
        fault = jax.device_get(state[8])
        if fault[0]:
            objective = -losses[int(fault[1])]
            raise_fault(fault, state[1], args, kwargs, objective)
        values, phi, term_params = state[5] if keep_best else itemgetter(1, 2, 4)(state)
        params = jax.tree.map(sharding.gather, dict(values))  # whole on every process
        params["terms"] = term_params
        return VEMResult(params, layout.real(phi), losses)

    def laplace_draws(
        self, rng_key: jax.Array, result: VEMResult, num_draws: int, *args, **kwargs
    ) -> VEMResult:
        r"""``result`` with draws of the global posterior its posteriors imply.

        The draws come from the Laplace approximation of
        :math:`q(\theta) \propto \exp(\sum_{ik}\phi_{ik} a_{ik}(\theta) + \log
        p(\theta))` at ``result.params``, in the sites' unconstrained coordinates
        (the factor of :math:`\theta` that mean-field variational Bayes pairs with
        the posteriors :math:`\phi`; :mod:`~jaxannot.inference._vem_globals`). Each
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
        setup, dynamic = self._setup(args, kwargs)
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
            self, layout, int(num_draws), rng_key, values, result.posteriors, dynamic
        )
        if float(smallest) <= 0:
            warnings.warn(
                "the fit's global values are not a maximum of the expected complete "
                f"log joint (Hessian eigenvalue {float(smallest):.3g}); draws along "
                "such directions use unit precision: fit longer (num_steps, m_steps)",
                UserWarning,
                stacklevel=2,
            )
        phis = fold_in_all(self, layout, draws, dynamic)
        return result._replace(draws=draws, draw_posteriors=phis)

    def local_log_joint(self, params: dict, *args, **kwargs) -> jax.Array:
        """:math:`a_{ik} = \\log p(x_i, z_i = k \\mid \\theta)` for every image of
        ``args`` and value ``k`` under the global values ``params``, [N, K]."""
        setup, dynamic = self._setup(args, kwargs)
        missing_globals(setup.structure, params, "params")
        values = {k: jnp.asarray(params[k]) for k in setup.structure.globals_}
        return log_joint_all(self, _Whole(setup), values, dynamic)

    def posteriors_for(self, params: dict, *args, **kwargs) -> jax.Array:
        """Exact local posteriors :math:`\\phi_i = \\operatorname{softmax}(a_i)` of
        the images in ``args`` under ``params`` (fold-in of new images), [N, K]."""
        setup, dynamic = self._setup(args, kwargs)
        missing_globals(setup.structure, params, "params")
        values = {k: jnp.asarray(params[k]) for k in setup.structure.globals_}
        return fold_in(self, _Whole(setup), values, dynamic)

    def predict(self, result: VEMResult, *args, term: int = 0, **kwargs):
        """Predictions of extra term ``term`` (e.g. :class:`MaxMargin`) for the images
        in ``args``, from their fold-in posteriors."""
        if not self.terms:
            raise ValueError("this VEM has no extra terms to predict with")
        phi = self.posteriors_for(result.params, *args, **kwargs)
        return self.terms[term].predict(result.params["terms"][term], phi)


def _final_objective(result: VEMResult) -> float:
    """The last finite objective of a fit (``-inf`` if none)."""
    objective = -np.asarray(result.losses, np.float64)
    finite = objective[np.isfinite(objective)]
    return float(finite[-1]) if finite.size else -np.inf
