"""What a :class:`~jaxannot.inference.vem.algorithm.VEM` fit says about images.

:class:`FoldIn`, a base class of :class:`~jaxannot.inference.vem.algorithm.VEM`:
the local log joint and exact posteriors of (new) images under fitted global values
(fold-in), the extra terms' predictions from them, and draws of the global posterior
a fit's posteriors imply (:meth:`~FoldIn.laplace_draws`, from
:mod:`~jaxannot.inference.vem.global_sites`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.inference.vem.checks import checked_start, missing_globals, model_errors
from jaxannot.inference.vem.global_sites import MAX_LAPLACE_DIM, laplace_draws
from jaxannot.inference.vem.joint_enumeration import marginals
from jaxannot.inference.vem.layout import Whole, fold_in, fold_in_all, log_joint_all
from jaxannot.inference.vem.local_map import local_maps
from jaxannot.inference.vem.model_call import ModelCall
from jaxannot.inference.vem.steps import VEMResult

if TYPE_CHECKING:
    from jaxannot.inference.vem.declared import DeclaredModel
    from jaxannot.inference.vem.log_joint import Setup
    from jaxannot.types import Array

__all__ = ["FoldIn"]

T = TypeVar("T")


class FoldIn:
    """Fold-in, predictions and Laplace draws of
    :class:`~jaxannot.inference.vem.algorithm.VEM` (a base class of it: the methods
    use its ``declared``, ``plate`` and ``terms``)."""

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
        layout = Whole(setup)
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
        return self._under(params, args, kwargs, _log_joints)

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
        return self._under(params, args, kwargs, _posteriors)

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
        return self._under(params, args, kwargs, _marginals)

    def _under(
        self,
        params: dict,
        args: tuple,
        kwargs: dict,
        compute: Callable[[DeclaredModel, Setup, dict, tuple], T],
    ) -> T:
        """``compute(declared, setup, values, dynamic)`` for the images of ``args``
        and ``kwargs`` under the global values ``params``, checked as
        ``init_params`` is, with the model's shape and type errors explained
        (:func:`~jaxannot.inference.vem.checks.model_errors`).

        Parameters
        ----------
        params : dict
            Site -> global value.
        args : tuple
            The model's positional arguments.
        kwargs : dict
            Its keyword arguments.
        compute : callable
            What is computed from the declaration, the set-up, the checked values
            and the array arguments.

        Returns
        -------
        object
            ``compute``'s answer.
        """
        with model_errors(self.plate, args, kwargs):
            setup, dynamic = self.declared.setup(args, kwargs)
        values = checked_start(self, setup, params, (args, kwargs), what="params")
        with model_errors(self.plate, args, kwargs):
            return compute(self.declared, setup, values, dynamic)

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
        if not self.terms:
            raise ValueError("this VEM has no extra terms to predict with")
        if not 0 <= int(term) < len(self.terms):
            raise ValueError(f"term must be in [0, {len(self.terms)}), got {term}")
        phi = self.posteriors_for(result.params, *args, **kwargs)
        return self.terms[term].predict(result.params["terms"][term], phi)


def _log_joints(dm: DeclaredModel, setup: Setup, values: dict, dynamic: tuple) -> Array:
    """:func:`~jaxannot.inference.vem.layout.log_joint_all` on one device."""
    return log_joint_all(dm, Whole(setup), values, dynamic)


def _posteriors(dm: DeclaredModel, setup: Setup, values: dict, dynamic: tuple) -> Array:
    """:func:`~jaxannot.inference.vem.layout.fold_in` on one device."""
    return fold_in(dm, Whole(setup), values, dynamic)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _marginals(dm: DeclaredModel, setup: Setup, values: dict, dynamic: tuple) -> dict:
    """:meth:`FoldIn.marginals`: the local MAPs of a model with real-valued local
    sites, else the enumerated sites' marginals."""
    call = ModelCall.join(dm, setup, dynamic)
    if setup.structure.enumerated.continuous:
        return local_maps(call, values)
    return marginals(call, values)
