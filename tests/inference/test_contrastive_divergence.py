"""Contrastive divergence against a brute-force computation on a tiny harmonium.

The reference below never calls the harmonium's conditionals: it defines each mean-field
marginal by its variational fixed-point equation q(a) ∝ exp(E_{q(rest)} log p~), with
q(x) normalized by enumerating all 2^3 binary configurations and q(z), q(h) read off
the (quadratic) log density by finite differences; the CD objective
E_{q1}[log p~] − E_{q0}[log p~] is integrated by enumeration × Gauss–Hermite
quadrature, and differentiated by central differences in float64.
"""

import itertools

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.inference import contrastive_divergence as cd
from jaxannot.methods.harmoniums import harmonium as hm

KINDS = ("bernoulli", "gaussian")
DX, DZ, K = 3, 1, 2
CONFIGS = np.array(list(itertools.product([0.0, 1.0], repeat=DX)))
GH_T, GH_W = np.polynomial.hermite_e.hermegauss(8)  # exact to degree 15
GH_W = GH_W / GH_W.sum()


def _unpack(theta):
    i = 0
    out = []
    for shape in [(DX,), (DX, K), (DZ,), (DZ, K), (DZ,), (K,)]:
        n = int(np.prod(shape))
        out.append(theta[i : i + n].reshape(shape))
        i += n
    return out  # alpha, W, beta, U, log_var, lam


def _log_joint(theta, x, z, h):
    """log p~(x, z, h) written from the paper's energy, broadcasting over batches."""
    alpha, W, beta, U, log_var, lam = _unpack(theta)
    return (
        x @ alpha
        + np.einsum("...i,ik,...k->...", x, W, h)
        + z @ beta
        + np.einsum("...j,jk,...k->...", z, U, h)
        - 0.5 * np.sum(z**2 * np.exp(-log_var), -1)
        + h @ lam
        - 0.5 * np.sum(h**2, -1)
    )


def _expect(theta, qx, qz, qh, f=_log_joint):
    """E_q f(x, z, h) for q = q(x) q(z) q(h): enumeration × Gauss–Hermite."""
    px = np.prod(np.where(CONFIGS == 1, qx, 1 - qx), axis=1)  # [8]
    mz, vz = qz
    zs = mz + np.sqrt(vz) * GH_T  # DZ == 1
    grid = np.array(list(itertools.product(range(len(GH_T)), repeat=K)))
    hpts = qh + GH_T[grid]  # q(h) = N(qh, I)
    hw = np.prod(GH_W[grid], axis=1)
    total = 0.0
    for xi, pxi in zip(CONFIGS, px, strict=False):
        for zt, zw in zip(zs, GH_W, strict=False):
            vals = f(theta, xi, np.array([zt]), hpts)
            total += pxi * zw * np.sum(hw * vals)
    return total


def _quadratic_fit(fn, dim, eps=1e-3):
    """Mean and variance of the Gaussian exp(fn(a)) (fn separable and quadratic)."""
    mean, var = np.zeros(dim), np.zeros(dim)
    for j in range(dim):
        e = np.zeros(dim)
        e[j] = eps
        f0, fp, fm = fn(np.zeros(dim)), fn(e), fn(-e)
        g, hess = (fp - fm) / (2 * eps), (fp - 2 * f0 + fm) / eps**2
        mean[j], var[j] = -g / hess, -1 / hess
    return mean, var


def _brute_states(theta, x, z, sweeps):
    """q0 and q1 by the variational definitions (no harmonium formulas)."""
    # q0: x, z clamped; q0(h) ∝ exp(log p~(x, z, h))
    mh, _ = _quadratic_fit(lambda h: _log_joint(theta, x, z, h), K)
    q0 = (x.copy(), (z.copy(), np.zeros(DZ)), mh.copy())
    qx, qz = x.copy(), (z.copy(), np.zeros(DZ))
    for _ in range(sweeps):
        # q(x) ∝ exp(E_{q(z)q(h)} log p~): only the mean of z and h enter linearly here
        logits = np.array([_log_joint(theta, c, qz[0], mh) for c in CONFIGS])
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        qx = probs @ CONFIGS  # marginal P(x_i = 1)
        # q(z) ∝ exp(E_{q(x)q(h)} log p~(x, z, h))
        px = np.prod(np.where(CONFIGS == 1, qx, 1 - qx), 1)

        def log_qz(zz, px=px, mh=mh):
            terms = zip(CONFIGS, px, strict=True)
            return sum(p * _log_joint(theta, c, zz, mh) for c, p in terms)

        qz = _quadratic_fit(log_qz, DZ)
        mh, _ = _quadratic_fit(
            lambda h, qx=qx, qz=qz: _log_joint(theta, qx, qz[0], h), K
        )
    return q0, (qx, qz, mh)


def test_cd_gradient_matches_brute_force():
    rng = np.random.default_rng(3)
    theta = rng.normal(0, 0.6, size=DX + DX * K + DZ + DZ * K + DZ + K)
    data_x = CONFIGS[[1, 6]]
    data_z = np.array([[0.4], [-0.9]])
    sweeps = 2

    def brute_objective(th, states):
        total = 0.0
        for q0, q1 in states:
            total += _expect(th, q1[0], q1[1], q1[2]) - _expect(th, q0[0], q0[1], q0[2])
        return total / len(states)

    states = [
        _brute_states(theta, x, z, sweeps) for x, z in zip(data_x, data_z, strict=True)
    ]
    eps = 1e-5
    brute_grad = np.zeros_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = eps
        brute_grad[i] = (
            brute_objective(theta + e, states) - brute_objective(theta - e, states)
        ) / (2 * eps)

    alpha, W, beta, U, log_var, lam = _unpack(theta)
    params = hm.HarmoniumParams(
        visible_bias=(jnp.asarray(alpha, jnp.float32), jnp.asarray(beta, jnp.float32)),
        weights=(jnp.asarray(W, jnp.float32), jnp.asarray(U, jnp.float32)),
        log_variance=(jnp.zeros(DX), jnp.asarray(log_var, jnp.float32)),
        hidden_bias=jnp.asarray(lam, jnp.float32),
    )
    phase = hm.cd_phase_statistics(KINDS, num_sweeps=sweeps)
    elp = lambda p, q: hm.expected_log_potential(p, KINDS, q)
    images = (
        (jnp.asarray(data_x, jnp.float32), jnp.asarray(data_z, jnp.float32)),
        (jnp.ones(2), jnp.ones(2)),
    )
    # the q1 states themselves agree with the variational definitions
    q0, q1 = jax.jit(jax.vmap(phase, in_axes=(None, 0)))(params, images)
    for d, (bq0, bq1) in enumerate(states):
        np.testing.assert_allclose(q0.hidden[d], bq0[2], rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(q1.means[0][d], bq1[0], rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(q1.means[1][d], bq1[1][0], rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(q1.hidden[d], bq1[2], rtol=1e-3, atol=1e-4)
    _, grads = jax.jit(lambda p: cd.cd_gradient(p, images, phase, elp))(params)
    ours = np.concatenate(
        [
            np.ravel(grads.visible_bias[0]),
            np.ravel(grads.weights[0]),
            np.ravel(grads.visible_bias[1]),
            np.ravel(grads.weights[1]),
            np.ravel(grads.log_variance[1]),
            np.ravel(grads.hidden_bias),
        ]
    )
    # float32 model vs float64 central differences (step 1e-5): 1e-3 relative
    np.testing.assert_allclose(ours, brute_grad, rtol=1e-3, atol=2e-4)
    assert np.abs(brute_grad).max() > 1e-2  # the check is not vacuous


def _toy_data(rng, n=64):
    h = rng.normal(size=(n, 2))
    w = rng.normal(size=(2, 6)) * 2
    x = (rng.random((n, 6)) < 1 / (1 + np.exp(-(h @ w)))).astype(np.float32)
    z = (h @ rng.normal(size=(2, 3)) + 0.3 * rng.normal(size=(n, 3))).astype(np.float32)
    return x, z


def test_compile_once_and_reconstruction_improves(rng_key, rng, count_compiles):
    """A second fit of the same shapes, of another length and key, traces and
    compiles nothing: the runner's loop serves any number of steps."""
    x, z = _toy_data(rng)
    params = hm.initialize(rng_key, KINDS, (6, 3), 3, views=(x, z))
    traces = {"n": 0}
    base_phase = hm.cd_phase_statistics(KINDS, num_sweeps=5)

    def phase(p, image):
        traces["n"] += 1  # runs only while tracing
        return base_phase(p, image)

    elp = lambda p, q: hm.expected_log_potential(p, KINDS, q)
    opt = cd.make_optimizer("adam", 0.05)
    step = cd.build_kernel(opt, phase, elp)
    images = ((jnp.asarray(x), jnp.asarray(z)), (jnp.ones(len(x)), jnp.ones(len(x))))
    data = (images, None)

    def recon_error(p):
        q0, q1 = jax.vmap(
            hm.cd_phase_statistics(KINDS, num_sweeps=1), in_axes=(None, 0)
        )(p, images)
        return float(jnp.mean((q1.means[0] - x) ** 2))

    before = recon_error(params)
    state = cd.init(params, opt)
    state, info = cd.fit_cd(jax.random.key(1), state, data, step=step, num_steps=40)
    n_after_first = traces["n"]
    counter = count_compiles()
    with counter:
        state, info = cd.fit_cd(jax.random.key(2), state, data, step=step, num_steps=70)
    assert counter.count == 0
    assert traces["n"] == n_after_first  # second fit reuses the compiled loop
    assert n_after_first <= 3  # the loop's body, its info's shapes (+ one abstract)
    assert info.cd_gap.shape == (70,)
    assert np.all(np.isfinite(np.asarray(info.grad_norm)))
    assert recon_error(state.params) < before


def _lbfgs_direction(g, pairs):
    """Nocedal & Wright Alg. 7.4 (two-loop recursion), H0 = (s'y / y'y) I (their
    7.20); with no pair yet, ``min(1, 1/|g|) g`` (optax's first step)."""
    if not pairs:
        return g * min(1.0, 1.0 / np.linalg.norm(g))
    q, alphas = g.copy(), []
    for s, y in reversed(pairs):
        a = (s @ q) / (y @ s)
        alphas.append(a)
        q = q - a * y
    s, y = pairs[-1]
    r = (s @ y) / (y @ y) * q
    for (s, y), a in zip(pairs, reversed(alphas), strict=True):
        r = r + s * (a - (y @ r) / (y @ s))
    return r


def test_lbfgs_steps_are_lbfgs_on_the_cd_gradient(rng_key, rng):
    """Each CD step with ``lbfgs`` is the step a hand-written L-BFGS (fixed step 0.5,
    no line search) takes from the same iterates with the CD gradient; ``fit_cd``
    ends where those steps end."""
    from jax.flatten_util import ravel_pytree

    x, z = _toy_data(rng, 32)
    params = hm.initialize(rng_key, KINDS, (6, 3), 2, views=(x, z))
    opt = cd.make_optimizer("lbfgs", 0.5)
    phase = hm.cd_phase_statistics(KINDS, 2)
    elp = lambda p, q: hm.expected_log_potential(p, KINDS, q)  # noqa: E731
    images = ((jnp.asarray(x), jnp.asarray(z)), (jnp.ones(32), jnp.ones(32)))
    step = cd.build_kernel(opt, phase, elp)
    # compiled once each, not dispatched op by op on every iteration
    gradient = jax.jit(lambda p: cd.cd_gradient(p, images, phase, elp)[1])
    jitted_step = jax.jit(step)
    state, pairs, previous = cd.init(params, opt), [], None
    for _ in range(4):
        theta = np.asarray(ravel_pytree(state.params)[0], np.float64)
        grads = gradient(state.params)
        g = np.asarray(ravel_pytree(grads)[0], np.float64)
        if previous is not None:
            pairs.append((theta - previous[0], g - previous[1]))
        previous = (theta, g)
        expected = -0.5 * _lbfgs_direction(g, pairs)
        state, _ = jitted_step(rng_key, state, (images, None))
        moved = np.asarray(ravel_pytree(state.params)[0], np.float64) - theta
        assert np.abs(expected).max() > 1e-4  # a real step
        np.testing.assert_allclose(moved, expected, rtol=0, atol=1e-6)
    fitted, _ = cd.fit_cd(
        rng_key, cd.init(params, opt), (images, None), step=step, num_steps=4
    )
    np.testing.assert_allclose(
        ravel_pytree(fitted.params)[0], ravel_pytree(state.params)[0], atol=1e-6
    )
    # not plain gradient descent with that step
    assert not np.allclose(moved, -0.5 * g, atol=1e-4)


def test_unknown_optimizer_raises():
    import pytest

    with pytest.raises(ValueError, match="valid optimizers"):
        cd.make_optimizer("rmsprop")


def test_zero_steps_return_the_start_and_empty_traces(rng_key, rng):
    x, z = _toy_data(rng, 16)
    params = hm.initialize(rng_key, KINDS, (6, 3), 2, views=(x, z))
    opt = cd.make_optimizer("adam", 0.05)
    step = cd.build_kernel(
        opt,
        hm.cd_phase_statistics(KINDS, 1),
        lambda p, q: hm.expected_log_potential(p, KINDS, q),
    )
    images = ((jnp.asarray(x), jnp.asarray(z)), (jnp.ones(16), jnp.ones(16)))
    state = cd.init(params, opt)
    fitted, info = cd.fit_cd(rng_key, state, (images, None), step=step, num_steps=0)
    assert fitted is state
    assert all(leaf.shape == (0,) for leaf in info)
