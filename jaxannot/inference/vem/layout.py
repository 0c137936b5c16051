"""Where :class:`~jaxannot.inference.vem.algorithm.VEM` keeps its per-image arrays.

A *layout* is the static part of a fit that says how the image axis is laid out;
the compiled EM step asks it for the pieces that touch that axis:

- :class:`Whole`: one device, the arrays as given (the reference path).
- :class:`Shards`: the image axis padded to a multiple of the device count and split
  over a one-axis mesh (:mod:`jaxannot.runtime.sharding`). The local log joint
  :math:`a` is computed by ``shard_map`` on each device's block of images (the
  model is traced on the block, so its plate has the block's size); the sums over
  images (objective, closed-form sufficient statistics) run under GSPMD, which adds
  the cross-device reductions. Padded images repeat the last image and have weight 0:
  their posteriors are zeroed before the M-step and their terms masked out of the
  objective, so they change no result.

:func:`plan` picks the layout of a run.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from jaxannot.inference.vem.declaration import inspect_model
from jaxannot.inference.vem.declared import chunk_for, read_subsamples
from jaxannot.inference.vem.log_joint import Setup, split_leaves
from jaxannot.inference.vem.model_call import ModelCall
from jaxannot.inference.vem.steps import ExactEStep
from jaxannot.runtime import sharding

if TYPE_CHECKING:
    from jaxannot.inference.vem.declared import DeclaredModel
    from jaxannot.inference.vem.steps import EStep, VEMState
    from jaxannot.types import Array, PRNGKey

__all__ = [
    "Layout",
    "Shards",
    "Whole",
    "fold_in_all",
    "log_joint_all",
    "plan",
]

_log = logging.getLogger(__name__)


#: The model's densities, each traced once per set-up and shapes and inlined where
#: it is called (``inline=True``: the program is the one the calls themselves
#: would trace, so a fit's numbers do not move): a fit's programs call them many
#: times (the E-step, each M-step evaluation under its derivatives, the start),
#: and each call otherwise runs the numpyro model again in Python (about 1 s of
#: the 2.4 s of tracing of a first fit on 2 CPU cores, issue 43).
_traced = functools.partial(jax.jit, static_argnums=(0, 1), inline=True)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _chunk_log_joint(dm: DeclaredModel, setup: Setup, values, idx, dynamic):
    """:meth:`ModelCall.log_joint_chunk` on ``dynamic``, traced once."""
    return ModelCall.join(dm, setup, dynamic).log_joint_chunk(values, idx)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _log_joint(dm: DeclaredModel, setup: Setup, values, dynamic):
    """:meth:`ModelCall.log_joint` on ``dynamic``, traced once."""
    return ModelCall.join(dm, setup, dynamic).log_joint(values)


@_traced
def _log_prior(dm: DeclaredModel, setup: Setup, values, dynamic):
    """:meth:`ModelCall.log_prior` on ``dynamic``, traced once."""
    return ModelCall.join(dm, setup, dynamic).log_prior(values)


class Layout:
    """The protocol of a layout (module docstring): what :class:`Whole` and
    :class:`Shards` both answer; their methods are documented here once.
    """

    __slots__ = ()
    setup: Setup

    def join(self, dynamic: tuple) -> tuple[tuple, dict]:
        """The call's ``(args, kwargs)`` from its array leaves (:meth:`Setup.join`).

        Parameters
        ----------
        dynamic : tuple
            The array leaves, in order.

        Returns
        -------
        tuple of (tuple, dict)
            The model's positional and keyword arguments.
        """
        return self.setup.join(dynamic)

    def log_prior(
        self, dm: DeclaredModel, values: dict[str, Array], dynamic: tuple
    ) -> Array:
        """The log density of the sites outside the plate, :math:`\\log p(\\theta)`.

        Parameters
        ----------
        dm : DeclaredModel
            The model.
        values : dict
            Site -> global value :math:`\\theta` (replicated on every device).
        dynamic : tuple
            The model's array arguments, placed by :func:`plan`.

        Returns
        -------
        jax.Array
            The log prior, a scalar.
        """
        return _log_prior(dm, self.setup, values, dynamic)

    def log_joint(
        self, dm: DeclaredModel, values: dict[str, Array], dynamic: tuple
    ) -> Array:
        """The log joint :math:`a_{ik} = \\log p(x_i, z_i = k \\mid \\theta)` of
        every image of the layout (padded ones included).

        Parameters
        ----------
        dm, values, dynamic
            As :meth:`log_prior` takes them.

        Returns
        -------
        jax.Array [images, K]
            The log joints, laid out as :meth:`constrain` places them.
        """
        raise NotImplementedError

    def estep(
        self, estep: EStep, arrays: Any, rng_key: PRNGKey, phi: Array, a: Array
    ) -> tuple[Array, Array]:
        """The E-step transform (:meth:`EStep.apply`) on the layout's images.

        Parameters
        ----------
        estep : EStep
            The transform.
        arrays : pytree
            Its arrays.
        rng_key : PRNGKey
            Its key.
        phi : jax.Array [images, K]
            The previous posteriors.
        a : jax.Array [images, K]
            The log joints.

        Returns
        -------
        tuple of (jax.Array, jax.Array)
            The new posteriors and the E-step's objective over the real images.
        """
        raise NotImplementedError

    def statistics(self, phi: Array) -> Array:
        """The posteriors the M-step sums over (a padded image's row zeroed).

        Parameters
        ----------
        phi : jax.Array [images, K]
            The posteriors.

        Returns
        -------
        jax.Array [images, K]
            The posteriors the M-step sums over.
        """
        raise NotImplementedError

    def expected(
        self, dm: DeclaredModel, values: dict[str, Array], phi: Array, dynamic: tuple
    ) -> Array:
        """:math:`\\sum_{ik}\\phi_{ik}a_{ik} + \\log p(\\theta)` over the real
        images.

        Parameters
        ----------
        dm, values, dynamic
            As :meth:`log_prior` takes them.
        phi : jax.Array [images, K]
            The posteriors.

        Returns
        -------
        jax.Array
            The expected complete log joint, a scalar.
        """
        raise NotImplementedError

    def constrain(self, phi: Array) -> Array:
        """Per-image values placed as the layout keeps them.

        Parameters
        ----------
        phi : jax.Array [images, ...]
            Values with the image axis first.

        Returns
        -------
        jax.Array [images, ...]
            ``phi``, placed.
        """
        raise NotImplementedError

    def place(self, state: VEMState, e_arrays: Any) -> tuple[VEMState, Any]:
        """The loop's state and the E-step's arrays placed for the loop.

        Parameters
        ----------
        state : VEMState
            The loop's state.
        e_arrays : pytree
            The E-step's arrays.

        Returns
        -------
        tuple of (VEMState, pytree)
            ``(state, e_arrays)``, placed.
        """
        raise NotImplementedError

    def real(self, phi: Array) -> Array:
        """The rows of the real images, on one device.

        Parameters
        ----------
        phi : jax.Array [images, K]
            The posteriors, a padded image's row included.

        Returns
        -------
        jax.Array [real images, K]
            Their rows.
        """
        raise NotImplementedError


class _WholeFields(NamedTuple):
    setup: Setup


class Whole(_WholeFields, Layout):
    """Every image on one device, as given: :meth:`statistics`, :meth:`constrain`,
    :meth:`place` and :meth:`real` return their argument(s) unchanged, and
    :meth:`expected` sums the log joints chunk by chunk.

    Parameters
    ----------
    setup : Setup
        The static set-up of the call.
    """

    __slots__ = ()

    def log_joint(
        self, dm: DeclaredModel, values: dict[str, Array], dynamic: tuple
    ) -> Array:
        return _log_joint(dm, self.setup, values, dynamic)

    def estep(
        self, estep: EStep, arrays: Any, rng_key: PRNGKey, phi: Array, a: Array
    ) -> tuple[Array, Array]:
        return estep.apply(arrays, rng_key, phi, a)

    def statistics(self, phi: Array) -> Array:
        return phi

    def expected(
        self, dm: DeclaredModel, values: dict[str, Array], phi: Array, dynamic: tuple
    ) -> Array:
        setup = self.setup
        chunks, valid = dm.chunk_indices(setup)
        phi_p = jnp.zeros((chunks.size, phi.shape[1]), phi.dtype)
        phi_p = phi_p.at[: phi.shape[0]].set(phi).reshape(chunks.shape + (-1,))

        def body(total, xs):
            idx, ok, ph = xs
            a = _chunk_log_joint(dm, setup, values, idx, dynamic)
            return total + jnp.where(ok[:, None], ph * a, 0.0).sum(), None

        xs = (chunks, valid, phi_p)
        if chunks.shape[0] == 1:  # no loop: smaller to compile, derivatives too
            total, _ = body(jnp.float32(0.0), jax.tree.map(lambda x: x[0], xs))
        else:
            total, _ = lax.scan(body, jnp.float32(0.0), xs)
        return total + self.log_prior(dm, values, dynamic)

    def constrain(self, phi: Array) -> Array:
        return phi

    def place(self, state: VEMState, e_arrays: Any) -> tuple[VEMState, Any]:
        return state, e_arrays

    def real(self, phi: Array) -> Array:
        return phi


class _ShardsFields(NamedTuple):
    setup: Setup  # the padded whole: plate size num_padded
    local: Setup  # one device's block: plate size num_padded // devices
    mesh: Mesh
    num_real: int
    per_image: tuple[bool, ...]  # which dynamic leaves have the image axis first


class Shards(_ShardsFields, Layout):
    """The image axis padded and split over ``mesh`` (see the module docstring).

    :meth:`log_joint` traces and computes each device's block there
    (``shard_map``); :meth:`estep` runs the exact transform per image on each
    device and one that couples images (a graph) on the real images, replicated;
    :meth:`place` replicates the state but splits the posteriors (current and, if
    kept, best) over the devices; :meth:`real` gathers the real rows.

    Parameters
    ----------
    setup : Setup
        The padded whole: plate size ``num_padded``.
    local : Setup
        One device's block: plate size ``num_padded // devices``.
    mesh : jax.sharding.Mesh
        The one-axis mesh of the devices.
    num_real : int
        The images before padding.
    per_image : tuple of bool
        Which array arguments have the image axis first.
    """

    __slots__ = ()

    @property
    def num_padded(self) -> int:
        """The images after padding (a multiple of the device count)."""
        return self.setup.structure.num_images

    def weights(self) -> Array:
        """1 for a real image, 0 for a padded one.

        Returns
        -------
        jax.Array [num_padded]
            The weights, float32.
        """
        return (jnp.arange(self.num_padded) < self.num_real).astype(jnp.float32)

    def constrain(self, phi: Array) -> Array:
        return lax.with_sharding_constraint(phi, sharding.image_sharding(self.mesh))

    def _specs(self):
        return tuple(P(sharding.AXIS) if p else P() for p in self.per_image)

    def log_joint(
        self, dm: DeclaredModel, values: dict[str, Array], dynamic: tuple
    ) -> Array:
        def local(values, *leaves):
            return ModelCall.join(dm, self.local, leaves).log_joint(values)

        a = jax.shard_map(
            local,
            mesh=self.mesh,
            in_specs=(P(), *self._specs()),
            out_specs=P(sharding.AXIS),
            # numpyro validates distribution arguments with ops that the
            # replication checker refuses; the specs above are exact
            check_vma=False,
        )(values, *dynamic)
        return self.constrain(a)

    def estep(
        self, estep: EStep, arrays: Any, rng_key: PRNGKey, phi: Array, a: Array
    ) -> tuple[Array, Array]:
        if type(estep) is ExactEStep:  # per image: stays on each device
            q = jnp.where(self.weights() > 0, jax.nn.logsumexp(a, axis=-1), 0.0)
            return self.constrain(jax.nn.softmax(a, axis=-1)), q.sum()
        # a transform that couples images (a graph): on the real images, replicated
        n = self.num_real
        phi_r, q = estep.apply(arrays, rng_key, phi[:n], a[:n])
        rest = jax.nn.softmax(a[n:], axis=-1)
        return self.constrain(jnp.concatenate([phi_r, rest])), q

    def statistics(self, phi: Array) -> Array:
        return phi * self.weights()[:, None]

    def expected(
        self, dm: DeclaredModel, values: dict[str, Array], phi: Array, dynamic: tuple
    ) -> Array:
        a = self.log_joint(dm, values, dynamic)
        ok = self.weights()[:, None] > 0
        total = jnp.where(ok, phi * a, 0.0).sum()
        return total + self.log_prior(dm, values, dynamic)

    def place(self, state: VEMState, e_arrays: Any) -> tuple[VEMState, Any]:
        # the posteriors go straight to their split: replicated first, each device
        # copied every image's (80 MB a device for issue 46's 1M images) to drop half
        best = state.best
        per_image = (state.posteriors, best[1] if best else None)
        rest = state._replace(
            posteriors=None, best=(best[0], None, best[2]) if best else best
        )
        rest, e_arrays = sharding.put((rest, e_arrays), sharding.replicated(self.mesh))
        phi, best_phi = sharding.put(per_image, sharding.image_sharding(self.mesh))
        if best:  # an E-step that keeps its best iterate
            best = (rest.best[0], best_phi, rest.best[2])
        return rest._replace(posteriors=phi, best=best), e_arrays

    def real(self, phi: Array) -> Array:
        return sharding.gather(_first_rows(phi, self.num_real))


@functools.partial(jax.jit, static_argnums=1)
def _first_rows(x, n):
    return x[:n]


@functools.partial(jax.jit, static_argnums=(0, 1, 4))
def log_joint_all(
    dm: DeclaredModel,
    layout: Layout,
    values: dict[str, Array],
    dynamic: tuple,
    posteriors: bool = False,
) -> Array:
    """:math:`a` for every image of the layout, [images, K], or with ``posteriors``
    the exact posteriors :math:`\\operatorname{softmax}(a_i)` (fold-in).

    Parameters
    ----------
    dm : DeclaredModel
        The model (static).
    layout : Layout
        The layout (static): :class:`Whole` or :class:`Shards`.
    values : dict
        Site -> global value :math:`\\theta`.
    dynamic : tuple
        The model's array arguments.
    posteriors : bool
        Return the posteriors instead of the log joints (static).

    Returns
    -------
    jax.Array [images, K]
        The log joints or the posteriors.
    """
    a = layout.log_joint(dm, values, dynamic)
    return layout.constrain(jax.nn.softmax(a, axis=-1)) if posteriors else a


@functools.partial(jax.jit, static_argnums=(0, 1))
def fold_in_all(
    dm: DeclaredModel, layout: Layout, draws: dict[str, Array], dynamic: tuple
) -> Array:
    """The posteriors of :func:`log_joint_all` under each of ``draws``
    ({site: [draws, ...]}), [draws, images, K], one draw at a time.

    Parameters
    ----------
    dm, layout, dynamic
        As :func:`log_joint_all` takes them.
    draws : dict
        Site -> draws [draws, ...].

    Returns
    -------
    jax.Array [draws, images, K]
        The posteriors under each draw.
    """
    return lax.map(
        lambda values: log_joint_all(dm, layout, values, dynamic, True), draws
    )


def plan(
    vem: Any, setup: Setup, args: tuple, kwargs: dict, dynamic: tuple
) -> tuple[Whole | Shards, tuple]:
    """The layout of a fit and its dynamic leaves placed for it.

    Shards when more than one device is to be used (``vem.devices``), the fit has
    no extra terms, some array argument has the plate's size as its leading axis,
    and the model takes its plate size from that data (checked by tracing it on
    one device's block). Otherwise one device, as given.

    Parameters
    ----------
    vem : VEM
        The algorithm (its devices and terms).
    setup : Setup
        The static set-up.
    args : tuple
        The model's positional arguments.
    kwargs : dict
        Its keyword arguments.
    dynamic : tuple
        The model's array arguments.

    Returns
    -------
    tuple of (Whole or Shards, tuple)
        The layout and the array arguments placed for it.
    """
    devices = () if vem.devices is None else tuple(vem.devices)
    n = setup.structure.num_images
    per_image = tuple(np.ndim(x) >= 1 and np.shape(x)[0] == n for x in dynamic)
    if len(devices) < 2 or vem.terms or not any(per_image):
        return Whole(setup), dynamic
    mesh = sharding.image_mesh(devices)
    n_pad = sharding.pad_images(n, mesh.size)
    n_local = n_pad // mesh.size
    padded = tuple(
        sharding.pad_axis0(x, n_pad) if p else x
        for x, p in zip(dynamic, per_image, strict=True)
    )
    block = tuple(
        x[:n_local] if p else x for x, p in zip(padded, per_image, strict=True)
    )
    local = _layout_setup(vem, setup, block)
    if local is None or local.structure.num_images != n_local:
        _log.info(
            "VEM runs on one device: the model's plate %r does not take its size "
            "from the per-image arrays",
            vem.plate,
        )
        return Whole(setup), dynamic
    whole = setup._replace(
        structure=dataclasses.replace(setup.structure, num_images=n_pad),
        subsamples=local.subsamples,
    )
    layout = Shards(whole, local, mesh, n, per_image)
    placed = tuple(
        sharding.put(
            x,
            sharding.image_sharding(mesh) if p else sharding.replicated(mesh),
        )
        for x, p in zip(padded, per_image, strict=True)
    )
    return layout, placed


def _layout_setup(vem, setup: Setup, block) -> Setup | None:
    """The setup of one device's block of images, or None if the model cannot be
    traced on it."""
    args, kwargs = setup.join(tuple(map(jnp.asarray, block)), unwrap=False)
    dm = vem.declared
    try:
        structure = inspect_model(dm.model, dm.local_site, dm.plate, args, kwargs)
    except (ValueError, TypeError, IndexError):
        return None
    n = structure.num_images
    subsamples, _ = read_subsamples(
        dm.model, dm.plate, dm.local_site, structure, args, kwargs
    )
    chunk = chunk_for(dm.chunk_size, n, structure.num_values, block)
    if chunk < n and not subsamples:
        chunk = n  # the block in one piece, as a model read without the plate needs
    treedef, static, is_dynamic, _ = split_leaves(args, kwargs)
    return Setup(
        structure, subsamples, chunk, -(-n // chunk), treedef, static, is_dynamic
    )
