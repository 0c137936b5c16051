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

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp
import numpyro
import optax
from jax import lax
from numpyro.distributions.transforms import biject_to

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
from jaxannot.inference._vem_layout import _Whole, fold_in, log_joint_all, plan
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
        if int(m_steps) < 1 or int(chunk_size) < 1 or int(term_steps) < 0:
            raise ValueError("m_steps and chunk_size must be >= 1, term_steps >= 0")
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
        subsamples = _subsamples(
            self.model, self.plate, self.local_site, structure, args, kwargs
        )
        if chunk < n and not subsamples:
            raise ValueError(
                f"the model does not read its data through plate {self.plate!r}'s "
                f"indices, so VEM cannot process its {n} images in chunks of "
                f"{chunk}: use numpyro.subsample(x, event_dim=...) inside the plate, "
                f"or pass chunk_size >= {n}"
            )
        setup = _Setup(
            structure, subsamples, chunk, -(-n // chunk), treedef, static, is_dynamic
        )
        return setup, dynamic

    def _small_substitutions(self, setup: _Setup) -> dict:
        """Plate indices for traces that need only the out-of-plate sites."""
        n = 1 if setup.subsamples else setup.structure.num_images
        return {self.plate: jnp.arange(n), self.local_site: jnp.zeros(n, jnp.int32)}

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
        """One EM iteration as a pure ``step(t, carry)``; cached per static layout
        and E-step configuration (the E-step's arrays travel in the carry)."""
        estep = self.estep
        setup = layout.setup
        key = (layout, tolerance, estep.static_key)
        if key in self._steps:
            return self._steps[key]
        keep_best = bool(estep.keep_best)

        def step(t, carry):
            state, dynamic, e_arrays = carry
            args, kwargs = layout.join(dynamic)
            transforms = self._transforms(setup, args, kwargs)
            (rng, values, phi, opt_state, term_params, best, best_obj, stop) = state

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
                improved = (t == 0) | (
                    objective > best_obj + tolerance * jnp.abs(best_obj)
                )
                fitted = (new_values, new_phi, new_tp)
                if keep_best:
                    new_best = jax.tree_util.tree_map(
                        lambda n, o: jnp.where(improved, n, o), fitted, best
                    )
                    halt = ~improved
                else:
                    new_best = fitted
                    halt = (t > 0) & ~improved if tolerance > 0 else jnp.bool_(False)
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
                )
                return state, -objective

            def skip(_):
                return state, jnp.float32(jnp.nan)

            state, loss = lax.cond(stop, skip, iterate, None)
            return (state, dynamic, e_arrays), loss

        self._steps[key] = step
        return step

    # ---------------------------------------------------------------- API
    def init_params(self, rng_key, *args, **kwargs) -> dict:
        """Starting global values: the closed-form M-step from random soft
        assignments (Dirichlet(1) rows) when one is registered, else prior draws."""
        setup, _ = self._setup(args, kwargs)
        s = setup.structure
        if self.closed_form is not None:
            e = jax.random.exponential(rng_key, (s.num_images, s.num_values))
            phi = e / e.sum(-1, keepdims=True)
            return {
                k: jnp.asarray(v)
                for k, v in self.closed_form(phi, *args, **kwargs).items()
            }
        seed = int(jax.random.randint(rng_key, (), 0, 2**30))
        trace = _trace(
            self.model, self._small_substitutions(setup), args, kwargs, seed=seed
        )
        return {k: trace[k]["value"] for k in s.globals_}

    def run(
        self,
        rng_key: jax.Array,
        num_steps: int,
        *args,
        init_params: dict | None = None,
        progress_bar: bool = True,
        tolerance: float = 0.0,
        **kwargs,
    ) -> VEMResult:
        """Run ``num_steps`` EM iterations.

        Parameters
        ----------
        rng_key : PRNGKey
            Split into an initialization key and the loop key (E-step transforms
            that sweep in random order draw from the loop key).
        num_steps : int
            EM iterations (the maximum when ``tolerance > 0``).
        *args, **kwargs
            The model's arguments. Arrays are traced (a new corpus of the same shape
            reuses the compiled fit); other values are static.
        init_params : dict, optional
            Constrained starting values of the global sites.
        progress_bar : bool
            A tqdm bar with the loss when the run lasts over ~2 s.
        tolerance : float
            Stop when the objective fails to improve by this relative amount
            (E-steps that keep their best iterate, as LapVar2, always stop then).

        Returns
        -------
        VEMResult
        """
        setup, dynamic = self._setup(args, kwargs)
        s = setup.structure
        init_key, loop_key = jax.random.split(rng_key)
        if init_params is None:
            init_params = self.init_params(init_key, *args, **kwargs)
        missing = set(s.globals_) - set(init_params)
        if missing:
            raise ValueError(
                f"init_params lacks the global sites {sorted(missing)} (has "
                f"{sorted(init_params)})"
            )
        nodes = getattr(self.estep, "num_nodes", s.num_images)
        if nodes != s.num_images:
            raise ValueError(
                f"the E-step's graph has {nodes} nodes but plate {self.plate!r} has "
                f"{s.num_images} images"
            )
        values = {k: jnp.asarray(init_params[k]) for k in s.globals_}
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
        best = (values, phi0, term_params)
        state = (
            loop_key,
            values,
            phi0,
            opt_state,
            term_params,
            best,
            jnp.float32(-jnp.inf),
            jnp.bool_(False),
        )
        state, e_arrays = layout.place(state, self.estep.arrays)
        step = self._build_step(layout, float(tolerance))
        (state, _, _), losses = run_steps(
            step,
            (state, dynamic, e_arrays),
            num_steps,
            progress_bar=progress_bar,
            desc="VEM",
        )
        values, phi, term_params = state[5]
        params = jax.tree.map(sharding.gather, dict(values))  # whole on every process
        params["terms"] = term_params
        return VEMResult(params, layout.real(phi), losses)

    def local_log_joint(self, params: dict, *args, **kwargs) -> jax.Array:
        """:math:`a_{ik} = \\log p(x_i, z_i = k \\mid \\theta)` for every image of
        ``args`` and value ``k`` under the global values ``params``, [N, K]."""
        setup, dynamic = self._setup(args, kwargs)
        values = {k: jnp.asarray(params[k]) for k in setup.structure.globals_}
        return log_joint_all(self, _Whole(setup), values, dynamic)

    def posteriors_for(self, params: dict, *args, **kwargs) -> jax.Array:
        """Exact local posteriors :math:`\\phi_i = \\operatorname{softmax}(a_i)` of
        the images in ``args`` under ``params`` (fold-in of new images), [N, K]."""
        setup, dynamic = self._setup(args, kwargs)
        values = {k: jnp.asarray(params[k]) for k in setup.structure.globals_}
        return fold_in(self, _Whole(setup), values, dynamic)

    def predict(self, result: VEMResult, *args, term: int = 0, **kwargs):
        """Predictions of extra term ``term`` (e.g. :class:`MaxMargin`) for the images
        in ``args``, from their fold-in posteriors."""
        if not self.terms:
            raise ValueError("this VEM has no extra terms to predict with")
        phi = self.posteriors_for(result.params, *args, **kwargs)
        return self.terms[term].predict(result.params["terms"][term], phi)
