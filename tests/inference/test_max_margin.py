"""Max-margin term (MaxMargin for VEM) and MaxMarginELBO for SVI."""

import cvxpy as cp
import numpy as np
import pytest

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax
from jax.test_util import check_grads
from numpyro.infer import SVI, Trace_ELBO
from numpyro.infer.autoguide import AutoDelta

from jaxannot.graph import knn_graph
from jaxannot.inference.laplacian_elbo import LaplacianELBO, penalty
from jaxannot.inference.local_summary import local_summary
from jaxannot.inference.max_margin import LOSSES, MaxMargin
from jaxannot.inference.max_margin_elbo import MaxMarginELBO

# labels per loss for 8 images; the last image is unlabelled (-1 or NaN)
LABELS = {
    "hinge": [1, -1, 1, 1, -1, -1, 1, np.nan],
    "crammer_singer": [0, 1, 2, 0, 1, 2, 2, -1],
    "epsilon_insensitive": [0.5, -1.0, 2.0, 0.3, -0.2, 1.5, -0.7, np.nan],
}


def _problem(loss, seed=0):
    rng = np.random.default_rng(seed)
    mm = MaxMargin(np.array(LABELS[loss]), c=2.0, loss=loss, epsilon=0.1)
    features = rng.normal(size=(8, 3))
    return mm, features


@pytest.mark.parametrize("loss", LOSSES)
def test_penalty_gradient_matches_finite_differences(loss):
    with jax.enable_x64(True):
        mm, features = _problem(loss)
        params = mm.init(jax.random.key(1), 3)
        params = jax.tree.map(lambda a: a + 0.5, params)  # away from w = 0
        index = jnp.array([7, 2, 0, 5, 1])
        check_grads(  # jitted: one compile instead of op-by-op float64 dispatch
            jax.jit(lambda p, f: mm.penalty(p, f, index)),
            (params, jnp.asarray(features[:5])),
            order=1,
            modes=["rev"],
            eps=1e-6,
            atol=1e-6,
            rtol=1e-6,
        )


def test_unlabelled_images_do_not_count():
    mm, features = _problem("epsilon_insensitive")
    params = mm.init(jax.random.key(0), 3)
    index = jnp.arange(8)
    moved = features.copy()
    moved[7] += 100.0  # the unlabelled image (NaN target)
    # jitted: one compile each instead of op-by-op dispatch
    penalty = jax.jit(mm.penalty)
    a = penalty(params, jnp.asarray(features, jnp.float32), index)
    b = penalty(params, jnp.asarray(moved, jnp.float32), index)
    assert float(a) == pytest.approx(float(b), rel=1e-6)
    grad = jax.jit(jax.grad(mm.penalty, argnums=1))(params, jnp.asarray(moved), index)
    assert np.all(np.isfinite(grad)) and np.all(np.asarray(grad[7]) == 0.0)


def _cvxpy_objective(mm, features, loss):
    # NaN marks the unlabelled image; -1 too for crammer_singer (a target elsewhere)
    unlabelled = (-1,) if loss == "crammer_singer" else ()
    labelled = [
        i for i, y in enumerate(LABELS[loss]) if not np.isnan(y) and y not in unlabelled
    ]
    x, y = features[labelled], np.array(LABELS[loss])[labelled]
    w = cp.Variable((mm.num_outputs, features.shape[1]))
    b = cp.Variable(mm.num_outputs)
    scores = x @ w.T + np.ones((len(labelled), 1)) @ cp.reshape(b, (1, -1), "C")
    if loss == "hinge":
        terms = cp.pos(1 - cp.multiply(y, scores[:, 0]))
    elif loss == "epsilon_insensitive":
        terms = cp.pos(cp.abs(y - scores[:, 0]) - mm.epsilon)
    else:
        y = y.astype(int)
        margin = 1.0 - np.eye(mm.num_outputs)[y]
        true = cp.hstack([scores[i, y[i]] for i in range(len(y))])
        terms = cp.max(margin + scores - cp.reshape(true, (-1, 1), "C"), axis=1)
    objective = 0.5 * (cp.sum_squares(w) + cp.sum_squares(b)) + mm.c * cp.sum(terms)
    problem = cp.Problem(cp.Minimize(objective))
    problem.solve(solver=cp.CLARABEL)
    return problem.value


@pytest.mark.parametrize("loss", LOSSES)
def test_dual_update_matches_generic_primal_solver(loss):
    with jax.enable_x64(True):
        mm, features = _problem(loss)
        params = mm.init(jax.random.key(0), 3)
        refit = mm.dual_update(jnp.asarray(features), params)
        ours = float(mm.objective(refit, jnp.asarray(features)))
        start = float(mm.objective(params, jnp.asarray(features)))
    reference = _cvxpy_objective(mm, features, loss)
    # the dual stops at a 1e-4 relative duality gap (DUAL_STOP), cvxpy tighter
    assert ours == pytest.approx(reference, rel=1e-4)
    assert ours < start


def test_dual_update_with_zero_cost_gives_zero_weights():
    mm = MaxMargin(np.array(LABELS["crammer_singer"]), c=0.0, solver="dual")
    params = mm.dual_update(jnp.ones((8, 3)), mm.init(jax.random.key(0), 3))
    assert all(np.all(np.asarray(a) == 0) for a in jax.tree.leaves(params))


@pytest.mark.parametrize("loss", LOSSES)
def test_term_passed_to_jit_has_traced_labels_and_cost(loss, count_compiles):
    # MaxMargin is a pytree: labels, coding, C and ε are its data, so a jitted
    # objective / dual solve takes another term of the same loss without compiling,
    # and gives what the term computes outside jit.
    mm, features = _problem(loss)
    feats = jnp.asarray(features, jnp.float32)
    params = mm.init(jax.random.key(0), 3)
    objective = jax.jit(lambda t, p, f: t.objective(p, f))
    refit = jax.jit(lambda t, f, p: t.dual_update(f, p))
    objective(mm, params, feats)
    refit(mm, feats, params)
    labels = np.array(LABELS[loss])[::-1].copy()  # the unlabelled image is first now
    other = MaxMargin(labels, c=0.5, loss=loss, epsilon=0.3)
    counter = count_compiles()
    with counter:
        value = objective(other, params, feats)
        weights = refit(other, feats, params)
    assert counter.count == 0
    np.testing.assert_allclose(value, other.objective(params, feats), rtol=1e-6)
    eager = other.dual_update(feats, params)
    for got, want in zip(jax.tree.leaves(weights), jax.tree.leaves(eager), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert float(other.objective(eager, feats)) < float(value)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="hinge.*crammer_singer.*epsilon"):
        MaxMargin(np.zeros(4), loss="squared")
    with pytest.raises(ValueError, match="1-D"):
        MaxMargin(np.zeros((4, 2), int))
    with pytest.raises(ValueError, match="c must be >= 0"):
        MaxMargin(np.zeros(4, int), c=-1.0)
    with pytest.raises(ValueError, match="integers"):
        MaxMargin(np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="-1, \\+1"):
        MaxMargin(np.array([1, 2]), loss="hinge")
    with pytest.raises(ValueError, match="no labelled"):
        MaxMargin(np.array([-1, -1]))
    with pytest.raises(ValueError, match="num_classes"):
        MaxMargin(np.array([0, 3]), num_classes=3)
    with pytest.raises(ValueError, match="solver"):
        MaxMargin(np.array([0, 1]), solver="cvx")


# A separable toy for SVI: h_i ~ N(0, I), x_i ~ N(h_i, 0.5^2 I), label = sign pattern.
Y = np.where(np.arange(10) % 2 == 0, 1, -1)
X = (Y[:, None] * np.array([1.0, 0.5]) + 0.3 * np.random.default_rng(0).normal(
    size=(10, 2)
)).astype(np.float32)  # fmt: skip


def model(x):
    with numpyro.plate("image", x.shape[0]):
        h = numpyro.sample("h", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
        numpyro.sample("x", dist.Normal(h, 0.5).to_event(1), obs=x)


def _fit(elbo, steps=1500):
    guide = elbo.guide(AutoDelta(model))
    schedule = optax.exponential_decay(0.05, steps, 0.01)
    optimizer = numpyro.optim.optax_to_numpyro(optax.adam(schedule))
    svi = SVI(model, guide, optimizer, elbo)
    return guide, svi.run(jax.random.key(0), steps, X, progress_bar=False).params


@pytest.fixture(scope="module")
def separable_fit():
    """The c = 10 hinge fit of the separable toy, shared by the tests that read it
    (each ``SVI.run`` is a compile)."""
    elbo = MaxMarginELBO(Trace_ELBO(), "h", Y, c=10.0, loss="hinge")
    return (elbo, *_fit(elbo))


def test_max_margin_elbo_separable_toy_reaches_zero_hinge_loss(separable_fit):
    elbo, guide, params = separable_fit
    features = local_summary(jax.random.key(0), params, None, guide, "h", X).q
    hinge = elbo.max_margin.losses(elbo.params(params), features, jnp.arange(10))
    assert float(hinge.sum()) < 1e-3  # measured 1.0e-4: Adam hovers at the margin
    np.testing.assert_array_equal(np.asarray(elbo.predict(params, guide, X)), Y)
    # c = 0: no margin is enforced and the untrained predictor misclassifies
    untrained = MaxMarginELBO(Trace_ELBO(), "h", Y, c=0.0, loss="hinge")
    guide, params = _fit(untrained, steps=200)
    hinge = untrained.max_margin.losses(
        untrained.params(params), features, jnp.arange(10)
    )
    assert float(hinge.sum()) > 5.0


def _deterministic_guide(x):
    loc = numpyro.param("loc", jnp.asarray(X) * 0.8)
    with numpyro.plate("image", x.shape[0]):
        numpyro.sample("h", dist.Delta(loc, event_dim=1))


def test_max_margin_elbo_gradient_matches_finite_differences():
    with jax.enable_x64(True):
        elbo = MaxMarginELBO(Trace_ELBO(), "h", Y, c=1.5, loss="hinge")
        rng = np.random.default_rng(3)
        params = {
            "loc": jnp.asarray(rng.normal(size=(10, 2))),
            "h_maxmargin_weights": jnp.asarray(rng.normal(size=(1, 3))),
        }
        x = jnp.asarray(X, jnp.float64)

        @jax.jit  # one compile instead of op-by-op float64 dispatch
        def loss(p):
            return elbo.loss(jax.random.key(0), p, model, _deterministic_guide, x)

        check_grads(loss, (params,), order=1, modes=["rev"], eps=1e-6, rtol=1e-6)


def test_composes_with_laplacian_elbo(separable_fit):
    graph = knn_graph(X, 2, weight="binary")
    lam, c = 0.7, 2.0
    inner = LaplacianELBO(Trace_ELBO(), "h", graph, lam)
    elbo = MaxMarginELBO(inner, "h", Y, c=c, loss="hinge")
    guide = elbo.guide(AutoDelta(model))
    params = separable_fit[2]  # fitted values of the same sites (h, hinge weights)

    @jax.jit  # one compile instead of op-by-op dispatch
    def both(params):
        got = elbo.loss(jax.random.key(0), params, model, guide, X)
        q = local_summary(jax.random.key(0), params, None, guide, "h", X).q
        weights = elbo.params(params)
        expected = (
            Trace_ELBO().loss(jax.random.key(0), params, model, guide, X)
            + lam * penalty(graph, q)
            + elbo.max_margin.regularizer(weights)
            + c * elbo.max_margin.losses(weights, q, jnp.arange(10)).sum()
        )
        return got, expected

    got, expected = both(params)
    assert float(got) == pytest.approx(float(expected), rel=1e-5)  # AutoDelta: exact


def test_max_margin_elbo_errors():
    elbo = MaxMarginELBO(Trace_ELBO(), "h", Y[:6], loss="hinge")
    guide = elbo.guide(AutoDelta(model))
    svi = SVI(model, guide, numpyro.optim.optax_to_numpyro(optax.adam(0.1)), elbo)
    with pytest.raises(ValueError, match="10 images but labels has 6"):
        svi.run(jax.random.key(0), 1, X, progress_bar=False)
    elbo = MaxMarginELBO(Trace_ELBO(), "h", Y, loss="hinge")
    with pytest.raises(KeyError, match="MaxMarginELBO.guide"):
        elbo.params({})


def enumerated_mixture(x, *, num_topics):
    """Unit-variance Gaussian mixture whose z is enumerated in the model."""
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_topics)))
    with numpyro.plate("topic", num_topics):
        mean = numpyro.sample("mean", dist.Normal(0.0, 3.0).expand([2]).to_event(1))
    with numpyro.plate("image", x.shape[0]):
        z = numpyro.sample("z", dist.Categorical(pi), infer={"enumerate": "parallel"})
        numpyro.sample("x", dist.Normal(mean[z], 1.0).to_event(1), obs=x)


def test_guide_helper_with_dim_for_a_site_enumerated_in_the_model():
    import scipy.special
    import scipy.stats

    from numpyro import handlers
    from numpyro.infer import TraceEnum_ELBO, init_to_uniform

    rng = np.random.default_rng(0)
    classes = np.arange(12) % 3
    x = jnp.asarray(rng.normal(0, 3, (3, 2))[classes] + rng.normal(size=(12, 2)))
    elbo = MaxMarginELBO(TraceEnum_ELBO(), "z", jnp.asarray(classes), c=1.0)
    # started uniformly in the unconstrained space: the default start (the median of
    # 15 prior draws) compiled the Dirichlet's gamma sampler op by op (3 s)
    auto = AutoDelta(
        handlers.block(enumerated_mixture, hide=["z"]), init_loc_fn=init_to_uniform
    )
    guide = elbo.guide(auto, dim=3)  # z is absent from the guide: dim = K
    svi = SVI(
        enumerated_mixture,
        guide,
        numpyro.optim.optax_to_numpyro(optax.adam(0.05)),
        elbo,
    )
    res = svi.run(jax.random.key(0), 20, x, num_topics=3, progress_bar=False)
    assert res.params["z_maxmargin_weights"].shape == (3, 3 + 1)  # [T, dim + 1]
    # the features are the exact local posteriors under the guide's values
    values = auto.median(res.params)
    log_joint = np.log(np.asarray(values["pi"])) + np.stack(
        [
            scipy.stats.norm.logpdf(np.asarray(x), np.asarray(m), 1.0).sum(1)
            for m in values["mean"]
        ],
        1,
    )

    @jax.jit  # one compile each instead of op-by-op dispatch (2 s each)
    def features_and_labels(params):
        key, model = jax.random.key(1), enumerated_mixture
        summary = elbo.features(key, params, model, guide, x, num_topics=3)
        labels = elbo.predict(params, guide, x, model=model, num_topics=3)
        return summary.q, labels

    q, pred = features_and_labels(res.params)
    np.testing.assert_allclose(
        np.asarray(q), scipy.special.softmax(log_joint, axis=1), atol=1e-5
    )
    assert pred.shape == (12,)


def test_class_id_gap_without_num_classes_is_refused():
    # ids 0, 1 and 3: class 2 has no image; before, T silently became 4
    with pytest.raises(ValueError, match=r"no labelled image has the ids \[2\]"):
        MaxMargin(np.array([0, 1, 3, -1]))
    with pytest.raises(ValueError, match="num_classes=4"):
        MaxMargin(np.array([0, 3]), num_classes=3)
    assert MaxMargin(np.array([0, 1, 3, -1]), num_classes=4).num_outputs == 4


@pytest.mark.parametrize("loss", LOSSES)
def test_dual_update_warm_starts_from_the_duals_in_params(loss):
    # the duals travel in params; a second solve on slightly moved features starts
    # from them and reaches the same optimum as a cold solve (cvxpy reference)
    with jax.enable_x64(True):
        mm, features = _problem(loss)
        mm = MaxMargin(
            np.array(LABELS[loss]), c=2.0, loss=loss, epsilon=0.1, solver="dual"
        )
        params = mm.init(jax.random.key(0), 3)
        assert params["duals"].shape == (8, mm.num_outputs)
        first = mm.dual_update(jnp.asarray(features), params)
        assert float(jnp.abs(first["duals"]).sum()) > 0
        moved = features + 0.05 * np.random.default_rng(1).normal(size=features.shape)
        warm = mm.dual_update(jnp.asarray(moved), first)
        ours = float(mm.objective(warm, jnp.asarray(moved)))
    mm_ref, _ = _problem(loss)
    assert ours == pytest.approx(_cvxpy_objective(mm_ref, moved, loss), rel=1e-4)


@pytest.mark.parametrize("loss", ["crammer_singer", "hinge"])
def test_warm_state_rebuilds_the_weights_from_the_duals(loss):
    with jax.enable_x64(True):
        mm = MaxMargin(np.array(LABELS[loss]), c=2.0, loss=loss, solver="dual")
        _, features = _problem(loss)
        params = mm.dual_update(jnp.asarray(features), mm.init(jax.random.key(0), 3))
        state = mm.warm_state(jnp.asarray(features), params["duals"])
        augmented = state.weights if loss == "crammer_singer" else state.w
        np.testing.assert_allclose(augmented[:, :-1], params["weights"], atol=1e-8)
        np.testing.assert_allclose(augmented[:, -1], params["bias"], atol=1e-8)
        # duals from a larger C are infeasible here: those rows restart from 0
        small = MaxMargin(np.array(LABELS[loss]), c=0.01, loss=loss, solver="dual")
        state = small.warm_state(jnp.asarray(features), params["duals"])
        alpha = np.asarray(state.alpha)
        assert np.all(alpha <= 0.01 + 1e-12)


X_NEW = np.array([[1.2, 0.4], [-0.9, -0.8], [0.7, 0.9], [-1.4, 0.1]], np.float32)


def test_max_margin_elbo_refuses_new_data_without_fold_in(separable_fit):
    # AutoDelta holds the 10 training images' h: before, predict on 4 new images
    # returned the 10 training predictions
    elbo, guide, params = separable_fit
    with pytest.raises(ValueError, match="data has 4 images.*guide gives 10.*fold_in"):
        elbo.predict(params, guide, X_NEW)


def test_max_margin_elbo_fold_in_predicts_new_images(separable_fit):
    elbo, guide, params = separable_fit
    new_guide, new_params = elbo.fold_in(
        jax.random.key(1), params, guide, X_NEW, num_steps=1500, learning_rate=0.05
    )
    # independent computation: the MAP of h ~ N(0, I), x ~ N(h, 0.5^2 I) is 0.8 x
    q = local_summary(jax.random.key(0), new_params, None, new_guide, "h", X_NEW).q
    np.testing.assert_allclose(np.asarray(q), 0.8 * X_NEW, atol=1e-3)
    weights = elbo.params(params)
    scores = 0.8 * X_NEW @ np.asarray(weights["weights"][0]) + float(weights["bias"][0])
    assert np.min(np.abs(scores)) > 0.05  # away from the boundary
    got = np.asarray(elbo.predict(new_params, new_guide, X_NEW))
    np.testing.assert_array_equal(got, np.where(scores >= 0, 1.0, -1.0))
    with pytest.raises(TypeError, match="autoguide"):
        elbo.fold_in(jax.random.key(1), params, _deterministic_guide, X_NEW)
