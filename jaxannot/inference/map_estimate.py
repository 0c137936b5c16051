r"""Maximum a posteriori (MAP) fit of a numpyro model whose latent sites are all global.

For a model with latent sample sites :math:`\theta = (\theta_1, \dots, \theta_S)`
(no per-image local latent variables: a latent site inside the image plate is
refused, see :class:`MAP`'s ``plate``) and observed data :math:`y`, :class:`MAP`
maximizes the log joint density *as declared*,

.. math:: \hat\theta = \arg\max_\theta \; \log p(\theta) + \log p(y \mid \theta),

computed by :func:`numpyro.infer.util.log_density`. Each site is optimized through an
unconstrained value :math:`u_s` with :math:`\theta_s = T_s(u_s)`,
:math:`T_s` = ``biject_to(support_s)`` (e.g. ``exp`` for a positive site, stick-breaking
for a simplex). The Jacobian :math:`\log|\det \partial T_s / \partial u_s|` is *not*
added, so the optimum is the mode of the declared density in the constrained space
(a change of variables moves the mode of a density; the mode is only re-parametrized
here). Improper flat priors can be declared with ``numpyro.factor`` or
``dist.ImproperUniform``; the fit is then maximum (penalized) likelihood.

The optimizer is any optax ``GradientTransformation``; every step is the full-batch
gradient of :math:`-\log p(\theta, y)`, run by
:func:`~jaxannot.runtime.progress.run_steps` in one jit-compiled loop. The step is
built once per :class:`MAP` instance (per layout of the non-array model arguments),
so a second :meth:`MAP.run` on arrays of the same shapes compiles nothing.
:meth:`MAP.init` and :meth:`MAP.update` take the steps one at a time (as numpyro's
``SVI.init`` and ``SVI.update``) through the same compiled loop
(:func:`~jaxannot.runtime.progress.run_step`): ``n`` updates from :meth:`MAP.init`
give bit for bit the state of :meth:`MAP.run` for ``n`` steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
import optax
from numpyro import handlers
from numpyro.distributions.transforms import biject_to
from numpyro.infer import init_to_median
from numpyro.infer.util import log_density

from jaxannot.runtime.progress import check_count, run_step, run_steps

if TYPE_CHECKING:
    from jaxannot.types import PRNGKey

__all__ = ["MAP", "MAPState", "MAPResult"]


class MAPState(NamedTuple):
    """Optimizer state: unconstrained site values and the optax state."""

    unconstrained: dict
    opt_state: optax.OptState


class MAPResult(NamedTuple):
    """Outcome of :meth:`MAP.run`.

    Attributes
    ----------
    params : dict
        Constrained value of every latent site at the last step, by site name.
    losses : np.ndarray [num_steps]
        :math:`-\\log p(\\theta_t, y)` at the values entering step ``t``.
    state : MAPState
        The final optimizer state (to continue with :meth:`MAP.update`, or a new
        :meth:`MAP.run` with ``init_params=result.params``).
    """

    params: dict
    losses: np.ndarray
    state: MAPState


def _is_array(leaf) -> bool:
    return isinstance(leaf, (np.ndarray, jax.Array, np.generic))


def _split_arguments(args: tuple, kwargs: dict) -> tuple[list, tuple]:
    """Array leaves of the model arguments (traced) and a hashable key for the rest."""
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    arrays = [leaf for leaf in leaves if _is_array(leaf)]
    static = tuple(None if _is_array(leaf) else leaf for leaf in leaves)
    mask = tuple(_is_array(leaf) for leaf in leaves)
    return arrays, (treedef, static, mask)


def _join_arguments(arrays: list, key: tuple) -> tuple[tuple, dict]:
    treedef, static, mask = key
    it = iter(arrays)
    leaves = [
        next(it) if is_array else value
        for value, is_array in zip(static, mask, strict=True)
    ]
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _constrain(unconstrained: Mapping) -> Callable:
    """``substitute_fn`` giving each latent site ``biject_to(support)(u)``."""

    def substitute_fn(msg):
        name = msg.get("name")
        if msg["type"] == "sample" and not msg["is_observed"] and name in unconstrained:
            return biject_to(msg["fn"].support)(unconstrained[name])
        return None

    return substitute_fn


def _negative_log_joint(model: Callable, unconstrained: dict, args, kwargs):
    constrained_model = handlers.substitute(
        model, substitute_fn=_constrain(unconstrained)
    )
    log_joint, _ = log_density(constrained_model, args, kwargs, {})
    return -log_joint


def _in_plate(site: dict, plate: str | None) -> bool:
    return any(f.name == plate for f in site.get("cond_indep_stack", ()))


def _latent_sites(
    model: Callable, rng_key, init_strategy, plate: str | None, args, kwargs
) -> dict:
    """Initial constrained values of the latent sites; clear errors for bad models."""
    seeded = handlers.seed(model, rng_key)
    trace = handlers.trace(
        handlers.substitute(seeded, substitute_fn=init_strategy)
    ).get_trace(*args, **kwargs)
    return {name: site["value"] for name, site in _checked_latent(trace, plate).items()}


def _checked_latent(trace: Mapping, plate: str | None) -> dict:
    """The latent sample sites of a model's ``trace``; clear errors for bad models."""
    params = [name for name, site in trace.items() if site["type"] == "param"]
    if params:
        raise ValueError(
            f"MAP fits latent sample sites only; declare {params} with "
            "numpyro.sample and a prior instead of numpyro.param"
        )
    latent = {
        name: site
        for name, site in trace.items()
        if site["type"] == "sample" and not site["is_observed"]
    }
    if not latent:
        raise ValueError(
            "the model has no latent sample sites: there is nothing to fit "
            "(every numpyro.sample site is observed)"
        )
    local = [n for n, s in latent.items() if _in_plate(s, plate)]
    if local:
        raise ValueError(
            f"MAP fits global latent sites; {local} are inside plate {plate!r} (one "
            "value per item). Fit a discrete per-item site with "
            "jaxannot.inference.VEM(model, site), a continuous one with "
            "numpyro.infer.SVI and a guide, or marginalize it in the model; "
            "plate=None fits the joint mode of every site anyway"
        )
    discrete = [n for n, s in latent.items() if s["fn"].support.is_discrete]
    if discrete:
        raise ValueError(
            f"MAP needs continuous latent sites; {discrete} are discrete "
            "(marginalize them in the model, e.g. with logsumexp and numpyro.factor)"
        )
    return latent


def _site_supports(
    model: Callable, rng_key, init_strategy, plate: str | None, args, kwargs
) -> dict:
    """The latent sites' supports, in the model's order, from one abstract trace
    (shapes only: nothing of the model runs op by op, nothing compiles); a support
    that depends on a traced value (another site's, the data's) is None. The same
    errors for bad models as :func:`_latent_sites`."""
    arrays, key = _split_arguments(args, kwargs)
    found: dict = {}

    def trace_abstractly(*arrays):
        model_args, model_kwargs = _join_arguments(list(arrays), key)
        seeded = handlers.seed(model, rng_key)
        trace = handlers.trace(
            handlers.substitute(seeded, substitute_fn=init_strategy)
        ).get_trace(*model_args, **model_kwargs)
        for name, site in _checked_latent(trace, plate).items():
            support = site["fn"].support
            fixed = not any(
                isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(support)
            )
            found[name] = support if fixed else None

    jax.eval_shape(trace_abstractly, *arrays)
    return found


def _unconstrain(model: Callable, constrained: Mapping, args, kwargs) -> dict:
    """Unconstrained values of ``constrained`` (inverse support transforms)."""
    trace = handlers.trace(
        handlers.substitute(handlers.seed(model, 0), data=dict(constrained))
    ).get_trace(*args, **kwargs)
    return {
        name: biject_to(trace[name]["fn"].support).inv(jnp.asarray(value))
        for name, value in constrained.items()
    }


class MAP:
    r"""MAP estimate of the latent sites of a numpyro model by gradient ascent.

    Maximizes :math:`\log p(\theta, y)` (``numpyro.infer.util.log_density``, no
    Jacobian of the support transforms; see the module docstring) with optax.

    Parameters
    ----------
    model : callable
        A numpyro model whose latent sample sites are all continuous and global
        (marginalize discrete or per-image variables in the model first).
    optimizer : optax.GradientTransformation, optional
        Default ``optax.adam(1e-2)`` (built per instance).
    init_strategy : callable
        A numpyro ``init_to_*`` strategy for the sites ``init_params`` does not give;
        default :func:`numpyro.infer.init_to_median`.
    plate : str or None
        The per-item plate (default ``"image"``, the library's image plate): a latent
        sample site inside it is a per-item (local) variable, which MAP refuses
        (a point estimate of one value per image is rarely what is meant: VEM gives
        a discrete one its exact posterior, SVI a continuous one a guide). None
        turns the check off and fits the joint mode of all sites.

    Examples
    --------
    >>> import numpy as np, jax, numpyro, numpyro.distributions as dist
    >>> def model(y):
    ...     mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    ...     with numpyro.plate("n", y.shape[0]):
    ...         numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)
    >>> y = np.array([1.0, 2.0, 3.0], np.float32)
    >>> result = MAP(model).run(jax.random.key(0), 2000, y, progress_bar=False)
    >>> round(float(result.params["mu"]), 3)  # closed form: sum(y) / (n + 1)
    1.5
    """

    def __init__(
        self,
        model: Callable,
        optimizer: optax.GradientTransformation | None = None,
        *,
        init_strategy: Callable = init_to_median,
        plate: str | None = "image",
    ):
        self.model = model
        self.optimizer = optax.adam(1e-2) if optimizer is None else optimizer
        self.init_strategy = init_strategy
        self.plate = plate
        self._steps: dict[tuple, Callable] = {}

    def loss(self, params: Mapping, *args: Any, **kwargs: Any) -> jax.Array:
        """:math:`-\\log p(\\theta, y)` at constrained site values ``params``.

        Parameters
        ----------
        params : Mapping
            Constrained value of every latent site.
        *args, **kwargs
            The model's data.

        Returns
        -------
        jax.Array
            The scalar negative log joint.
        """
        log_joint, _ = log_density(self.model, args, kwargs, dict(params))
        return -log_joint

    def _step(self, key: tuple) -> Callable:
        """The jit-able ``step(t, carry)`` for this argument layout (built once)."""
        if key not in self._steps:
            model, optimizer = self.model, self.optimizer

            def step(t, carry):
                del t
                state, arrays = carry
                args, kwargs = _join_arguments(arrays, key)
                loss, grads = jax.value_and_grad(
                    lambda u: _negative_log_joint(model, u, args, kwargs)
                )(state.unconstrained)
                updates, opt_state = optimizer.update(
                    grads, state.opt_state, state.unconstrained
                )
                new = optax.apply_updates(state.unconstrained, updates)
                return (MAPState(new, opt_state), arrays), loss

            self._steps[key] = step
        return self._steps[key]

    def _bind(self, args: tuple, kwargs: dict) -> tuple[Callable, list]:
        """The step for the model arguments' layout and their arrays (the part of
        the carry that no step changes)."""
        arrays, key = _split_arguments(args, kwargs)
        return self._step(key), [jnp.asarray(a) for a in arrays]

    def init(
        self,
        rng_key: PRNGKey,
        *args: Any,
        init_params: Mapping | None = None,
        **kwargs: Any,
    ) -> MAPState:
        """Initial state from ``init_params`` (constrained) or the init strategy.

        Parameters
        ----------
        rng_key : PRNGKey
            The init strategy's key.
        *args, **kwargs
            The model's data.
        init_params : Mapping, optional
            Constrained start values of some latent sites.

        Returns
        -------
        MAPState
            Unconstrained values and the optimizer's state.
        """
        return self._start(rng_key, args, kwargs, init_params)[0]

    def update(
        self, state: MAPState, *args: Any, **kwargs: Any
    ) -> tuple[MAPState, np.float32]:
        """One optimizer step from ``state``, as ``numpyro.infer.SVI.update``.

        The step is :meth:`run`'s, run in its compiled loop: ``n`` updates from
        :meth:`init` give bit for bit the state of ``run`` for ``n`` steps from the
        same key, and an update after a run (or a run after updates) on arrays of the
        same shapes compiles nothing.

        Parameters
        ----------
        state : MAPState
            From :meth:`init`, a previous :meth:`update` or :attr:`MAPResult.state`.
        *args, **kwargs
            The model's data, as in :meth:`run` (array arguments traced, the others
            static).

        Returns
        -------
        state : MAPState
            The state after the step.
        loss : np.float32
            :math:`-\\log p(\\theta, y)` at the values entering the step.
        """
        step, arrays = self._bind(args, kwargs)
        (state, _), loss = run_step(step, (state, arrays))
        return state, loss

    def _start(
        self, rng_key: PRNGKey, args: tuple, kwargs: dict, init_params: Mapping | None
    ) -> tuple[MAPState, dict | None]:
        """:meth:`init`'s state and the latent sites' supports where every site
        starts at a given value and has a fixed support (else None).

        Then the init strategy's values would all be replaced: the model is traced
        abstractly (its supports) instead of run op by op twice (the strategy's
        values, the supports), which compiled each of its operations on the data's
        shapes (some 50 small programs for TagProp). The start is the same.
        """
        init_params = dict(init_params or {})
        supports = _site_supports(
            self.model, rng_key, self.init_strategy, self.plate, args, kwargs
        )
        unknown = sorted(set(init_params) - set(supports))
        if unknown:
            raise KeyError(
                f"init_params has unknown sites {unknown}; "
                f"latent sites: {sorted(supports)}"
            )
        if set(init_params) == set(supports) and None not in supports.values():
            unconstrained = {
                name: biject_to(support).inv(jnp.asarray(init_params[name]))
                for name, support in supports.items()
            }
        else:
            supports = None
            latent = _latent_sites(
                self.model, rng_key, self.init_strategy, self.plate, args, kwargs
            )
            latent.update({k: jnp.asarray(v) for k, v in init_params.items()})
            unconstrained = _unconstrain(self.model, latent, args, kwargs)
        return MAPState(unconstrained, self.optimizer.init(unconstrained)), supports

    def run(
        self,
        rng_key: PRNGKey,
        num_steps: int,
        *args: Any,
        progress_bar: bool = True,
        init_params: Mapping | None = None,
        **kwargs: Any,
    ) -> MAPResult:
        """Run ``num_steps`` optimizer steps from the initial values.

        Parameters
        ----------
        rng_key : jax.Array
            Seeds the initialization strategy.
        num_steps : int
            At least 1, as ``numpyro.infer.SVI.run`` (a float, a bool or a string
            raises TypeError, 0 ValueError: neither is truncated or run).
        *args, **kwargs
            Model arguments. Array arguments are traced; the others (ints, strings,
            ...) are static: a new combination of them builds a new step.
        progress_bar : bool
            tqdm bar with the loss (for runs longer than 2 s).
        init_params : dict, optional
            Constrained initial values of some or all latent sites.

        Returns
        -------
        MAPResult

        Raises
        ------
        TypeError, ValueError
            ``num_steps`` is not an integer >= 1; the model has a per-item latent
            site (see ``plate``), a discrete one or a ``numpyro.param``.
        """
        num_steps = check_count("num_steps", num_steps)  # before the model is traced
        state, supports = self._start(rng_key, args, kwargs, init_params)
        step, arrays = self._bind(args, kwargs)
        (state, _), losses = run_steps(
            step,
            (state, arrays),
            num_steps,
            progress_bar=progress_bar,
            desc="MAP",
        )
        if supports is not None:  # the model's transforms, without running it
            constrained = {
                name: biject_to(supports[name])(u)
                for name, u in state.unconstrained.items()
            }
            return MAPResult(constrained, losses, state)
        params = handlers.substitute(
            self.model, substitute_fn=_constrain(state.unconstrained)
        )
        trace = handlers.trace(handlers.seed(params, 0)).get_trace(*args, **kwargs)
        constrained = {name: trace[name]["value"] for name in state.unconstrained}
        return MAPResult(constrained, losses, state)
