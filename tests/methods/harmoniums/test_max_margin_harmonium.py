"""Max-margin harmonium: the hinge subgradient against seed 001's formula, the
Θ-step terms against the generic MaxMargin term, and fits. Gradients are taken in
one compiled program each (``jax.jit``), not one per primitive of an eager call."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.inference import contrastive_divergence as cd
from jaxannot.inference.max_margin import MaxMargin
from jaxannot.methods.harmoniums import harmonium as hm
from jaxannot.methods.harmoniums import max_margin_harmonium as mmh
from jaxannot.methods.harmoniums import mmh_steps as steps
from jaxannot.runtime.row_buckets import pad_to_bucket
from jaxannot.solvers import multiclass_svm, svr
from jaxannot.solvers.margin_losses import crammer_singer_loss
from jaxannot.solvers.multiclass_svm import DualStop

KINDS = ("bernoulli", "gaussian")


def _toy(rng, n=90, t=3):
    y = rng.integers(0, t, n)
    px = rng.random((t, 8)) * 0.8 + 0.1
    x = (rng.random((n, 8)) < px[y]).astype(np.float32)
    z = (rng.normal(0, 1.0, (t, 4))[y] + rng.normal(0, 1.0, (n, 4))).astype(np.float32)
    return x, z, y.astype(np.int32)


def _embed(params, image):
    views, _ = image
    return hm.hidden_mean(params, views)


def _images(x, z):
    n = len(x)
    return (jnp.asarray(x), jnp.asarray(z)), (jnp.ones(n), jnp.ones(n))


def test_hinge_gradient_is_seed001_subgradient(rng_key, rng):
    x, z, y = _toy(rng, n=12)
    params = hm.initialize(rng_key, KINDS, (8, 4), 3, weight_scale=0.5, views=(x, z))
    v = jnp.asarray(rng.normal(size=(3, 4)), jnp.float32)  # K + 1 offset column
    c1, c2 = 0.5, 2.0
    extra = steps.classification_extra_loss(_embed)
    term = MaxMargin(y, c2 / c1, num_classes=3)
    aux = (term, c1 / len(y), v, jnp.zeros(3), jnp.ones(3))
    grads = jax.jit(jax.grad(lambda p: extra(p, (_images(x, z), aux))))(params)
    feats = np.asarray(
        steps.with_offset(jax.vmap(_embed, (None, 0))(params, _images(x, z)))
    )
    vn = np.asarray(v)
    scores = feats @ vn.T
    ybar = np.argmax(scores + 1.0 - np.eye(3)[y], axis=1)  # loss-augmented prediction
    diff = vn[y, :3] - vn[ybar, :3]  # (V_{y_d k} - V_{ybar_d k}), hidden dims only
    # seed 001: ∂W_ik = -C2 Σ_d (V_{y_d k} − V_{ȳ_d k}) x_di   (here averaged over d)
    expect_w = -c2 * x.T @ diff / len(x)
    expect_u = -c2 * z.T @ diff / len(x)
    np.testing.assert_allclose(grads.weights[0], expect_w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads.weights[1], expect_u, rtol=1e-4, atol=1e-5)
    assert np.abs(expect_w).max() > 1e-3


def test_standardized_theta_step_is_p1_hinge_at_folded_v(rng_key, rng):
    # The Θ-step term on standardized features equals, in value and gradient, C2 ×
    # the mean P1 hinge on raw [E_q0[h], 1] with V folded back (the formula written
    # out here) and (C1/D) × the generic MaxMargin term's penalty.
    x, z, y = _toy(rng, n=12)
    params = hm.initialize(rng_key, KINDS, (8, 4), 3, weight_scale=0.5, views=(x, z))
    v = jnp.asarray(rng.normal(size=(3, 4)), jnp.float32)
    center = jnp.asarray(rng.normal(size=3), jnp.float32)
    scale = jnp.asarray(rng.uniform(0.5, 2.0, 3), jnp.float32)
    c1, c2 = 0.5, 2.0
    extra = steps.classification_extra_loss(_embed)
    term = MaxMargin(y, c2 / c1, num_classes=3)
    data = (_images(x, z), (term, c1 / len(y), v, center, scale))
    raw_v = steps.to_raw(v, center, scale)

    def generic(p):
        feats = (jax.vmap(_embed, (None, 0))(p, _images(x, z)) - center) / scale
        return c1 / len(y) * term.penalty(steps.term_params(v), feats, jnp.arange(12))

    def p1_hinge(p):
        feats = steps.with_offset(jax.vmap(_embed, (None, 0))(p, _images(x, z)))
        scores = feats @ raw_v.T
        margin = 1.0 - jax.nn.one_hot(y, 3)
        true = jnp.take_along_axis(scores, jnp.asarray(y)[:, None], axis=1)
        return c2 * jnp.mean(jnp.max(margin + scores - true, axis=1))

    value, grads = jax.jit(jax.value_and_grad(lambda p: extra(p, data)))(params)
    for reference in (p1_hinge, generic):
        ref_value, ref_grads = jax.jit(jax.value_and_grad(reference))(params)
        np.testing.assert_allclose(value, ref_value, rtol=1e-5)
        for got, want in zip(grads.weights, ref_grads.weights, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert float(value) > 0


def test_regression_gradient_is_eq11(rng_key, rng):
    x, z, _ = _toy(rng, n=10)
    params = hm.initialize(rng_key, KINDS, (8, 4), 3, weight_scale=0.5, views=(x, z))
    v = jnp.asarray(rng.normal(size=4), jnp.float32)
    beta = jnp.asarray(rng.uniform(-1, 1, 10), jnp.float32)  # mu - mu*
    extra = steps.regression_extra_loss(_embed)
    data = (_images(x, z), (beta, v, jnp.zeros(3), jnp.ones(3)))
    grads = jax.jit(jax.grad(lambda p: extra(p, data)))(params)
    expect = -np.outer(x.T @ np.asarray(beta), np.asarray(v)[:3]) / 10
    np.testing.assert_allclose(grads.weights[0], expect, rtol=1e-4, atol=1e-6)


def test_eq11_gradient_is_epsilon_insensitive_gradient_at_the_v_step(rng_key, rng):
    # At the SVR optimum (the V-step), eq. (11)'s Lagrangian term and (C1/D) ×
    # MaxMargin's ε-insensitive penalty have the same Θ-gradient on every image off
    # the tube boundary |y - V'f| = ε (KKT: β_d = C2 sign(residual) outside the
    # tube, 0 inside); on the boundary β_d is one element of the subdifferential.
    x, z, _ = _toy(rng, n=40)
    target = (z @ np.array([1.0, -0.5, 0.3, 0.0]) + x[:, 0]).astype(np.float32)
    params = hm.initialize(rng_key, KINDS, (8, 4), 3, weight_scale=0.5, views=(x, z))
    c1, c2, eps = 0.5, 0.05, 0.1
    hidden = jax.vmap(_embed, (None, 0))(params, _images(x, z))
    feats = steps.with_offset(hidden)
    stop = DualStop(5000, 1e-7)
    state, _ = svr.fit_svr(rng_key, feats, target, c1, c2, eps, stop=stop)
    beta, v = np.asarray(state.beta), state.weights
    resid = target - np.asarray(steps.with_offset(hidden) @ v)
    off = np.abs(np.abs(resid) - eps) > 1e-3
    outside, inside = off & (np.abs(resid) > eps), off & (np.abs(resid) < eps)
    np.testing.assert_allclose(beta[outside], c2 * np.sign(resid[outside]), atol=1e-6)
    np.testing.assert_allclose(beta[inside], 0.0, atol=1e-6)
    assert outside.sum() >= 10 and inside.sum() >= 3

    rows = np.flatnonzero(off)
    images = jax.tree.map(lambda a: a[rows], _images(x, z))
    extra = steps.regression_extra_loss(_embed)
    data = (images, (jnp.asarray(beta[rows]), v, jnp.zeros(3), jnp.ones(3)))
    grads = jax.jit(jax.grad(lambda p: extra(p, data)))(params)
    term = MaxMargin(target, c2 / c1, loss="epsilon_insensitive", epsilon=eps)

    def penalty(p):
        feats = jax.vmap(_embed, (None, 0))(p, images)
        return c1 / len(rows) * term.penalty(steps.term_params(v[None]), feats, rows)

    want = jax.jit(jax.grad(penalty))(params)
    for got, ref in zip(grads.weights, want.weights, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    assert np.abs(np.asarray(want.weights[0])).max() > 1e-3


def _model(embed):
    return mmh.MMHModel(
        phase_statistics=hm.cd_phase_statistics(KINDS, 5),
        expected_log_potential=lambda p, q: hm.expected_log_potential(p, KINDS, q),
        embed=embed,
        optimizer=cd.make_optimizer("adam", 0.02),
    )


#: Traces of :data:`MODEL`'s ``embed`` (it runs only while a program is traced).
EMBED_TRACES = {"n": 0}


def _traced_embed(params, image):
    EMBED_TRACES["n"] += 1
    return _embed(params, image)


#: One model for the fits below: its functions key the compiled loops, so fits of
#: the same shapes and schedule in different tests share them.
MODEL = _model(_traced_embed)


def test_classifier_fits_compiles_once_and_beats_chance(rng_key, rng):
    x, z, y = _toy(rng)
    params = hm.initialize(rng_key, KINDS, (8, 4), 4, views=(x, z))
    before = EMBED_TRACES["n"]
    # the shapes and Θ-steps of the compile-count and C1 -> 0 tests below (MODEL):
    # one set of compiled loops for the three
    res = mmh.fit_mmh_classifier(
        rng_key,
        params,
        _images(x, z),
        y,
        3,
        MODEL,
        c1=0.5,
        c2=1.0,
        schedule=mmh.Schedule(iterations=4, inner_steps=10, pretrain_steps=10),
    )
    # embed_all traced once, the Θ-step loss traced once (+ its scan body): no
    # retracing across the 4 alternations (none at all if an earlier test compiled)
    assert EMBED_TRACES["n"] - before <= 3
    feats = steps.with_offset(jax.vmap(_embed, (None, 0))(res.params, _images(x, z)))
    acc = float(jnp.mean(jnp.argmax(feats @ res.predictor.T, 1) == y))
    assert acc > 0.7  # three well-separated classes; chance is 1/3
    assert res.trace["cd_gap"].shape == (10 + 4 * 10,)
    assert np.all(np.isfinite(res.trace["svm_primal"]))


def _fit_classifier(params, x, z, y, **schedule):
    return mmh.fit_mmh_classifier(
        jax.random.key(1),
        params,
        _images(x, z),
        y,
        3,
        MODEL,
        c1=0.5,
        c2=1.0,
        schedule=mmh.Schedule(
            iterations=1, inner_steps=10, pretrain_steps=10, **schedule
        ),
    )


def _p1_minimum_cvxpy(feats, y, c, num_classes):
    """min_V 1/2 ||V||^2 + c sum_d max_y [1 - delta(y, y_d) + (V_y - V_{y_d}) f_d]."""
    import cvxpy as cp

    v = cp.Variable((num_classes, feats.shape[1]))
    scores = feats @ v.T
    onehot = np.eye(num_classes)[y]
    true = cp.sum(cp.multiply(onehot, scores), axis=1, keepdims=True)
    hinge = cp.max(1.0 - onehot + scores - true @ np.ones((1, num_classes)), axis=1)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(v) + c * cp.sum(hinge)))
    problem.solve(solver=cp.CLARABEL)
    return float(problem.value)


def test_p1_v_step_reaches_the_qp_minimum_standardized_does_not(rng_key, rng):
    # P1's V-part divided by C1 is MaxMargin(labels, C2 / C1).objective on [E_q0[h],
    # 1]. svm_step="p1" reaches its minimum, computed independently by a generic
    # convex solver (cvxpy); svm_step="standardized" minimizes 1/2 ||V'||^2 on
    # (E[h] - m) / s, a different regularizer, so its folded-back V is measurably
    # above that minimum (docs/harmoniums.md).
    x, z, y = _toy(rng)
    params = hm.initialize(rng_key, KINDS, (8, 4), 4, views=(x, z))
    term = MaxMargin(y, 1.0 / 0.5, num_classes=3)  # C2 / C1 of _fit_classifier
    ratios, gaps = {}, {}
    for svm_step in ("p1", "standardized"):
        res = _fit_classifier(params, x, z, y, final_svm_epochs=5000, svm_step=svm_step)
        hidden = jax.vmap(_embed, (None, 0))(res.params, _images(x, z))
        feats = np.asarray(steps.with_offset(hidden), np.float64)
        best = _p1_minimum_cvxpy(feats, y, term.c, 3)
        got = float(term.objective(steps.term_params(res.predictor), hidden))
        ratios[svm_step], gaps[svm_step] = got / best, res.trace["svm_gap"]
    assert abs(ratios["p1"] - 1.0) < 1e-3  # measured 1.0001 (stops at gap 1e-4)
    assert gaps["p1"][-1] <= 1e-4  # the last V-step converged
    assert ratios["standardized"] > 1.005  # measured 1.025
    with pytest.raises(ValueError, match="svm_step"):
        _fit_classifier(params, x, z, y, svm_step="raw")


def test_regressor_fits(rng_key, rng):
    x, z, _ = _toy(rng)
    target = (z @ np.array([1.0, -0.5, 0.3, 0.0]) + x[:, 0]).astype(np.float32)
    params = hm.initialize(rng_key, KINDS, (8, 4), 4, views=(x, z))
    res = mmh.fit_mmh_regressor(
        rng_key,
        params,
        _images(x, z),
        target,
        MODEL,
        c1=0.5,
        c2=5.0,
        epsilon=0.05,
        schedule=mmh.Schedule(iterations=4, inner_steps=20),
    )
    feats = steps.with_offset(jax.vmap(_embed, (None, 0))(res.params, _images(x, z)))
    pred = np.asarray(feats @ res.predictor)
    r2 = 1 - np.sum((pred - target) ** 2) / np.sum((target - target.mean()) ** 2)
    assert r2 > 0.8  # the target is linear in the views


def test_theta_step_equals_the_hand_written_hinge_it_replaced(rng_key, rng):
    # The Θ-step term used to be written out here as
    # cost * Σ_d crammer_singer_loss([f_d, 1] @ V.T, y_d) with cost = C2 / D; it is now
    # (C1 / D) × MaxMargin.penalty. Same value and gradient (a fit on a tiny problem
    # gave bit-identical parameters, predictor and traces before and after).
    x, z, y = _toy(rng, n=12)
    params = hm.initialize(rng_key, KINDS, (8, 4), 3, weight_scale=0.5, views=(x, z))
    v = jnp.asarray(rng.normal(size=(3, 4)), jnp.float32)
    c1, c2 = 0.5, 2.0
    zero, one = jnp.zeros(3), jnp.ones(3)
    term = MaxMargin(y, c2 / c1, num_classes=3)
    new = steps.classification_extra_loss(_embed)
    data = (_images(x, z), (term, c1 / len(y), v, zero, one))

    def old(p):
        feats = steps.with_offset(jax.vmap(_embed, (None, 0))(p, _images(x, z)))
        scores = feats @ v.T
        return c2 / len(y) * jnp.sum(crammer_singer_loss(scores, jnp.asarray(y)))

    value, grads = jax.jit(jax.value_and_grad(lambda p: new(p, data)))(params)
    ref_value, ref_grads = jax.jit(jax.value_and_grad(old))(params)
    np.testing.assert_allclose(value, ref_value, rtol=1e-6)
    for got, want in zip(grads.weights, ref_grads.weights, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert float(value) > 0


def test_pretraining_and_every_v_step_share_their_programs(
    rng_key, rng, count_compiles
):
    """The pre-training is the Θ-step at a hinge of weight 0 (one CD loop, whatever
    the two's lengths); every V-step, the standardized start and the longer last
    one included, runs one compiled Crammer–Singer solver."""
    x, z, y = _toy(rng)
    params = hm.initialize(rng_key, KINDS, (8, 4), 5, views=(x, z))  # K of its own
    solvers = multiclass_svm.fit_multiclass_svm._cache_size()

    def fit(pretrain_steps, inner_steps):
        schedule = mmh.Schedule(
            iterations=2,
            inner_steps=inner_steps,
            pretrain_steps=pretrain_steps,
            svm_epochs=4,
            final_svm_epochs=9,
        )
        return mmh.fit_mmh_classifier(
            rng_key, params, _images(x, z), y, 3, MODEL, schedule=schedule
        )

    fit(0, 6)  # no pre-training: the Θ-steps' CD loop alone
    assert multiclass_svm.fit_multiclass_svm._cache_size() - solvers == 1
    counter = count_compiles()
    with counter:
        res = fit(7, 5)  # a pre-training, both of other lengths
    assert counter.count == 0
    # the budgets still hold: the V-steps' traces stop within them
    assert res.trace["cd_gap"].shape == (7 + 2 * 5,)
    assert np.all(np.isfinite(res.trace["svm_primal"]))


def test_pretraining_is_plain_cd(rng_key, rng):
    """The pre-training (the Θ-step with the hinge at weight 0) is plain CD: the
    same CD gaps as plain CD's from the same start and key."""
    x, z, y = _toy(rng)
    params = hm.initialize(rng_key, KINDS, (8, 4), 4, views=(x, z))
    schedule = mmh.Schedule(iterations=0, pretrain_steps=7, final_svm_epochs=3)
    res = mmh.fit_mmh_classifier(
        jax.random.key(5), params, _images(x, z), y, 3, MODEL, schedule=schedule
    )
    k_pre, _ = jax.random.split(jax.random.key(5))
    plain = cd.build_kernel(
        MODEL.optimizer, MODEL.phase_statistics, MODEL.expected_log_potential
    )
    images, mask = pad_to_bucket(_images(x, z))
    _, info = cd.fit_cd(
        k_pre,
        cd.init(params, MODEL.optimizer),
        (images, None),
        step=plain,
        num_steps=7,
        mask=mask,
    )
    np.testing.assert_array_equal(res.trace["cd_gap"], np.asarray(info.cd_gap))


def test_a_fit_on_other_labels_and_costs_compiles_nothing(rng_key, rng, count_compiles):
    x, z, y = _toy(rng)
    params = hm.initialize(rng_key, KINDS, (8, 4), 4, views=(x, z))
    # the shapes and schedule of test_c1_to_zero_reduces_mmh_to_cd_then_the_svm
    schedule = mmh.Schedule(iterations=3, inner_steps=10, pretrain_steps=10)
    model = MODEL  # one model: its functions are the compiled loops' keys

    def fit(labels, c1, c2):
        res = mmh.fit_mmh_classifier(
            rng_key,
            params,
            _images(x, z),
            labels,
            3,
            model,
            c1=c1,
            c2=c2,
            schedule=schedule,
        )
        return jax.block_until_ready(res)

    first = fit(y, 0.5, 1.0)
    other = rng.permutation(y)
    assert np.any(other != y)
    counter = count_compiles()
    with counter:
        second = fit(other, 0.25, 2.0)
    assert counter.count == 0
    assert not np.allclose(first.predictor, second.predictor)


def test_c1_to_zero_reduces_mmh_to_cd_then_the_svm(rng_key, rng):
    # P1 = L + C1 [1/2 ||V||^2 + (C2/C1) hinge]: at a fixed SVM cost C = C2/C1 the
    # Θ-step's hinge weighs C2 = C1 C, so C1 -> 0 leaves the Θ-steps plain CD (the
    # pre-training and the alternations' steps in one optax trajectory) and V the
    # SVM at cost C on the final [E_q0[h], 1]: MMH becomes DWH + the P1 SVM.
    x, z, y = _toy(rng)
    params = hm.initialize(rng_key, KINDS, (8, 4), 4, views=(x, z))
    model = MODEL
    schedule = mmh.Schedule(iterations=3, inner_steps=10, pretrain_steps=10)
    cost = 2.0
    plain = cd.build_kernel(
        model.optimizer, model.phase_statistics, model.expected_log_potential
    )
    state, _ = cd.fit_cd(
        rng_key,
        cd.init(params, model.optimizer),
        (_images(x, z), None),
        step=plain,
        num_steps=10 + 3 * 10,
    )
    hidden = jax.vmap(_embed, (None, 0))(state.params, _images(x, z))
    term = MaxMargin(y, cost, num_classes=3)
    svm_minimum = _p1_minimum_cvxpy(
        np.asarray(steps.with_offset(hidden), np.float64), y, cost, 3
    )
    distance = {}
    for c1 in (1e-9, 0.5):
        res = mmh.fit_mmh_classifier(
            rng_key, params, _images(x, z), y, 3, model,
            c1=c1, c2=c1 * cost, schedule=schedule,
        )  # fmt: skip
        distance[c1] = max(
            float(jnp.abs(a - b).max())
            for a, b in zip(
                jax.tree.leaves(res.params), jax.tree.leaves(state.params), strict=True
            )
        )
        if c1 < 1e-6:
            got = float(term.objective(steps.term_params(res.predictor), hidden))
    assert distance[1e-9] < 1e-4  # the same Θ as CD alone ...
    assert distance[0.5] > 1e-2  # ... which a real hinge weight moves
    assert got / svm_minimum == pytest.approx(1.0, abs=2e-3)  # V: the SVM at cost C
