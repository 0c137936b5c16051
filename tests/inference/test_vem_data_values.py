"""Models that read their sizes from their data's values, fitted by VEM unchanged.

The annotation models below are written the way numpyro users write them: the
number of classes and annotators comes from ``int(np.max(...)) + 1`` of the data,
not from keywords (issue 48, point 1). Data: a synthetic Dawid & Skene (1979)
Table 1 layout, 45 items with 7 annotations by 5 annotators (annotator 0 three
times, the others once), 4 classes."""

import itertools
import warnings

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.infer.reparam import LocScaleReparam
from numpyro.ops.indexing import Vindex

from jaxannot.inference import VEM
from jaxannot.inference.vem.declaration import DeclarationError
from jaxannot.inference.vem.fit_warnings import EmptyComponentWarning

POSITIONS = np.array([0, 0, 0, 1, 2, 3, 4])  # annotator of each annotation


def multinomial(annotations):
    """One distribution of annotations per true class, shared by all annotators."""
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("class", num_classes):
        zeta = numpyro.sample("zeta", dist.Dirichlet(jnp.ones(num_classes)))
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi))
        with numpyro.plate("position", num_positions):
            numpyro.sample("y", dist.Categorical(zeta[c]), obs=annotations)


def dawid_skene(positions, annotations):
    """A confusion matrix per annotator; ``positions`` says who gave each label."""
    num_annotators = int(np.max(positions)) + 1
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("annotator", num_annotators, dim=-2):
        with numpyro.plate("class", num_classes):
            beta = numpyro.sample("beta", dist.Dirichlet(jnp.ones(num_classes)))
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi))
        with numpyro.plate("position", num_positions):
            numpyro.sample("y", dist.Categorical(beta[positions, c]), obs=annotations)


def mace(positions, annotations):
    """MACE (Hovy et al. 2013): an annotator copies the true class ``c`` unless
    it spams (``s = 1``, with probability ``1 - theta``), then draws its label from
    its own ``epsilon``. Both ``c`` and ``s`` are enumerated."""
    num_annotators = int(np.max(positions)) + 1
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("annotator", num_annotators):
        epsilon = numpyro.sample("epsilon", dist.Dirichlet(jnp.full(num_classes, 10.0)))
        theta = numpyro.sample("theta", dist.Beta(0.5, 0.5))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample(
            "c",
            dist.DiscreteUniform(0, num_classes - 1),
            infer={"enumerate": "parallel"},
        )
        with numpyro.plate("position", num_positions):
            s = numpyro.sample(
                "s",
                dist.Bernoulli(1 - theta[positions]),
                infer={"enumerate": "parallel"},
            )
            probs = jnp.where(
                s[..., None] == 0,
                jax.nn.one_hot(c, num_classes),
                epsilon[positions],
            )
            numpyro.sample("y", dist.Categorical(probs), obs=annotations)


def hierarchical_dawid_skene(positions, annotations):
    """Dawid–Skene with each annotator's confusion logits drawn around shared class
    means (``zeta``, ``Omega``), non-centred by ``LocScaleReparam``; the last logit
    of each row is fixed at 0."""
    num_annotators = int(np.max(positions)) + 1
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("class", num_classes):
        zeta = numpyro.sample(
            "zeta", dist.Normal(0, 1).expand([num_classes - 1]).to_event(1)
        )
        omega = numpyro.sample(
            "Omega", dist.HalfNormal(1).expand([num_classes - 1]).to_event(1)
        )
    with numpyro.plate("annotator", num_annotators, dim=-2):
        with numpyro.plate("class", num_classes):
            with handlers.reparam(config={"beta": LocScaleReparam(0)}):
                beta = numpyro.sample("beta", dist.Normal(zeta, omega).to_event(1))
            beta = jnp.pad(beta, [(0, 0)] * (jnp.ndim(beta) - 1) + [(0, 1)])
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi), infer={"enumerate": "parallel"})
        with numpyro.plate("position", num_positions):
            logits = Vindex(beta)[positions, c, :]
            numpyro.sample("y", dist.Categorical(logits=logits), obs=annotations)


def branching_on_a_latent(annotations):
    """Python control flow on a sampled value: cannot be traced, whatever VEM does."""
    num_classes = int(np.max(annotations)) + 1
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    noise = 0.1 if float(pi[0]) > 0.5 else 0.2
    with numpyro.plate("item", annotations.shape[0], dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi))
        probs = jax.nn.one_hot(c, num_classes) * (1 - noise) + noise / num_classes
        with numpyro.plate("position", annotations.shape[1]):
            numpyro.sample("y", dist.Categorical(probs), obs=annotations)


def _annotations(seed=0, num_items=45, num_classes=4):
    """Annotations drawn from a Dawid–Skene model with diagonal-heavy confusions."""
    rng = np.random.default_rng(seed)
    num_annotators = POSITIONS.max() + 1
    truth = rng.integers(0, num_classes, num_items)
    confusion = rng.dirichlet(np.ones(num_classes), (num_annotators, num_classes))
    confusion = 0.35 * confusion + 0.65 * np.eye(num_classes)
    y = np.stack(
        [
            [rng.choice(num_classes, p=confusion[a, truth[i]]) for a in POSITIONS]
            for i in range(num_items)
        ]
    )
    y[0, 0] = num_classes - 1  # the largest class is observed: the size is right
    return jnp.asarray(y, jnp.int32), truth


def _log_likelihood(pi, beta, annotations):
    """log p(annotations) of Dawid–Skene, the true class summed out (float64)."""
    y = np.asarray(annotations)
    log_b = np.log(np.maximum(np.asarray(beta, np.float64), 1e-300))
    # [items, classes]: sum over positions of log beta[annotator, class, label]
    per = log_b[POSITIONS[None, :], :, y].sum(1)
    joint = np.log(np.maximum(np.asarray(pi, np.float64), 1e-300)) + per
    top = joint.max(1, keepdims=True)
    return float((top[:, 0] + np.log(np.exp(joint - top).sum(1))).sum())


def _votes(annotations, num_classes):
    """Counts ``n_{ial}`` of label l from annotator a on item i, and the majority
    vote (ties split)."""
    y = np.asarray(annotations)
    counts = np.zeros((y.shape[0], POSITIONS.max() + 1, num_classes))
    for j, a in enumerate(POSITIONS):
        counts[np.arange(y.shape[0]), a, y[:, j]] += 1
    votes = counts.sum(1)
    t = (votes == votes.max(1, keepdims=True)).astype(float)
    return counts, t / t.sum(1, keepdims=True)


def _reference_m_step(t, counts):
    """Dawid & Skene's closed-form M-step (the MAP under Dirichlet(1) priors)."""
    beta = np.einsum("ik,ial->akl", t, counts) + 1e-12
    return t.mean(0), beta / beta.sum(-1, keepdims=True)


def _reference_e_step(pi, beta, counts):
    log_t = np.log(pi + 1e-300) + np.einsum("ial,akl->ik", counts, np.log(beta))
    t = np.exp(log_t - log_t.max(1, keepdims=True))
    return t / t.sum(1, keepdims=True)


def _reference_em(annotations, num_classes, steps=500):
    """Dawid & Skene's EM: majority-vote start, closed-form M-step, exact E-step."""
    counts, t = _votes(annotations, num_classes)
    for _ in range(steps):
        pi, beta = _reference_m_step(t, counts)
        t = _reference_e_step(pi, beta, counts)
    return pi, beta


def test_multinomial_reading_its_sizes_fits_with_defaults():
    annotations, truth = _annotations()
    result = VEM(multinomial, "c", plate="item").run(
        jax.random.key(0), 100, annotations, progress_bar=False
    )
    assert result.params["zeta"].shape == (4, 4)
    assert result.posteriors.shape == (45, 4)
    assert np.all(np.isfinite(np.asarray(result.losses)))
    # classes are found up to a relabelling: the fitted one matches the truth
    pred = np.asarray(result.posteriors).argmax(1)
    agree = max(
        np.mean(pred == np.asarray(p)[truth])
        for p in __import__("itertools").permutations(range(4))
    )
    assert agree > 0.8, agree


@pytest.fixture(scope="module")
def dawid_skene_fit():
    """One default fit of Dawid–Skene, key 0, 200 iterations."""
    annotations, _ = _annotations()
    vem = VEM(dawid_skene, "c", plate="item")
    return vem.run(jax.random.key(0), 200, POSITIONS, annotations, progress_bar=False)


def test_dawid_skene_reading_its_sizes_comes_near_the_reference_em(dawid_skene_fit):
    annotations, _ = _annotations()
    result = dawid_skene_fit
    assert result.params["beta"].shape == (5, 4, 4)
    fitted = _log_likelihood(result.params["pi"], result.params["beta"], annotations)
    reference = _log_likelihood(*_reference_em(annotations, 4), annotations)
    # Measured (keys 0, 1, 2, 200 iterations, one default fit each): 8e-7, 4e-7,
    # 2e-7 nats from the reference -306.489 (the majority-vote start and the
    # closed-form M-step); before them 1.66, 0.098, 0.102 nats below it
    assert fitted > reference - 0.05, (fitted, reference)


def test_dawid_skene_em_iterates_are_the_reference_em(dawid_skene_fit):
    """From the reference's first M-step, each EM iteration of VEM (the closed-form
    updates of its Dirichlet sites) is the reference EM's: the same parameters, an
    objective that never falls and equals the reference's log-likelihood plus the
    Dirichlet(1) priors' constant log density, log(3!) for each of 21 rows."""
    annotations, _ = _annotations()
    counts, t = _votes(annotations, 4)
    pi, beta = _reference_m_step(t, counts)
    # the fit's state with the reference's values: the compiled loop is reused
    start = {"pi": jnp.asarray(pi, jnp.float32), "beta": jnp.asarray(beta, jnp.float32)}
    state = dawid_skene_fit.state._replace(params=start)
    steps = 8
    result = VEM(dawid_skene, "c", plate="item").run(
        jax.random.key(0), steps, POSITIONS, annotations, init_state=state,
        progress_bar=False,
    )  # fmt: skip
    log_likelihoods = []
    for _ in range(steps):
        log_likelihoods.append(_log_likelihood(pi, beta, annotations))
        pi, beta = _reference_m_step(_reference_e_step(pi, beta, counts), counts)
    objective = -np.asarray(result.losses, np.float64)
    np.testing.assert_allclose(
        objective, np.array(log_likelihoods) + 21 * np.log(6.0), atol=2e-3
    )
    assert np.all(np.diff(objective) >= -1e-4), np.diff(objective).min()
    np.testing.assert_allclose(result.params["pi"], pi, atol=1e-5)
    np.testing.assert_allclose(result.params["beta"], beta, atol=1e-5)


def test_a_second_fit_on_the_same_values_compiles_nothing(count_compiles):
    annotations, _ = _annotations()
    vem = VEM(dawid_skene, "c", plate="item")
    vem.run(jax.random.key(0), 5, POSITIONS, annotations, progress_bar=False)
    copy = jnp.array(np.asarray(annotations))  # equal values, another array
    with count_compiles() as again:
        VEM(dawid_skene, "c", plate="item").run(
            jax.random.key(1), 7, POSITIONS.copy(), copy, progress_bar=False
        )
    assert again.count == 0


def test_python_control_flow_on_a_latent_value_is_named_with_its_fix():
    annotations, _ = _annotations()
    with pytest.raises(DeclarationError) as error:
        VEM(branching_on_a_latent, "c", plate="item").run(
            jax.random.key(0), 5, annotations, progress_bar=False
        )
    message = str(error.value)
    assert "test_vem_data_values.py" in message  # the line
    assert "float(pi[0]) > 0.5" in message  # the construct
    assert "jnp.where" in message  # the fix


def _mace_by_brute_force(positions, annotations, epsilon, theta):
    """MACE's posteriors of ``c`` [items, K] and ``s`` [items, J, 2] and its
    log-likelihood, by an explicit sum over every (c, s_1, ..., s_J) of each item
    (float64)."""
    y = np.asarray(annotations)
    eps, th = np.asarray(epsilon, np.float64), np.asarray(theta, np.float64)
    num_items, num_positions = y.shape
    num_classes = eps.shape[1]
    post_c = np.zeros((num_items, num_classes))
    post_s = np.zeros((num_items, num_positions, 2))
    total = 0.0
    for i in range(num_items):
        for c in range(num_classes):
            for s in itertools.product((0, 1), repeat=num_positions):
                p = 1.0 / num_classes
                for j, (a, spam) in enumerate(zip(positions, s, strict=True)):
                    label = eps[a, y[i, j]] if spam else float(y[i, j] == c)
                    p *= (1 - th[a] if spam else th[a]) * label
                post_c[i, c] += p
                for j, spam in enumerate(s):
                    post_s[i, j, spam] += p
        evidence = post_c[i].sum()
        total += np.log(evidence)
        post_c[i] /= evidence
        post_s[i] /= evidence
    return post_c, post_s, total


def test_mace_posteriors_equal_brute_force_enumeration():
    # the fit's data (annotator 0 at three positions): the marginals' program is
    # the one the fit below reads its marginals with
    positions = POSITIONS
    annotations, _ = _annotations()
    rng = np.random.default_rng(3)
    params = {
        "epsilon": jnp.asarray(rng.dirichlet(np.ones(4), 5), jnp.float32),
        "theta": jnp.array([0.9, 0.6, 0.3, 0.75, 0.45], jnp.float32),
    }
    vem = VEM(mace, "c", plate="item")
    marginals = vem.marginals(params, positions, annotations)
    post_c, post_s, log_lik = _mace_by_brute_force(
        positions, annotations, params["epsilon"], params["theta"]
    )
    assert sorted(marginals) == ["c", "s"]
    np.testing.assert_allclose(marginals["c"], post_c, atol=1e-5)
    np.testing.assert_allclose(marginals["s"], post_s, atol=1e-5)
    np.testing.assert_allclose(
        vem.posteriors_for(params, positions, annotations), post_c, atol=1e-5
    )
    a = vem.local_log_joint(params, positions, annotations)  # [items, K]
    fitted = float(jax.scipy.special.logsumexp(a, axis=1).sum())
    np.testing.assert_allclose(fitted, log_lik, rtol=1e-5)


def test_mace_fits_with_defaults_and_em_never_decreases_the_objective():
    annotations, truth = _annotations()
    vem = VEM(mace, "c", plate="item")
    # Before the majority-vote start and the closed-form updates of epsilon
    # (Dirichlet) and theta (Beta), the default start (random soft classes) ended
    # with every theta at 1.2e-38 (Beta(0.5, 0.5)'s density is unbounded at 0) and
    # a CollapsedFitWarning. Measured now (keys 0, 1, 2, 60 iterations): objective
    # -319.20, theta 0.58 to 0.70, 98 % of the true classes, falls <= 6e-5 nats.
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmptyComponentWarning)
        result = vem.run(
            jax.random.key(0), 20, POSITIONS, annotations, progress_bar=False
        )
    objective = -np.asarray(result.losses)
    # float32 round-off of a sum of ~300 terms: 6e-5 measured
    assert np.all(np.diff(objective) >= -1e-4), np.diff(objective).min()
    assert objective[-1] > -320.0, objective[-1]
    theta = np.asarray(result.params["theta"])
    assert np.all((theta > 0.5) & (theta < 0.8)), theta
    pred = np.asarray(result.posteriors).argmax(1)
    assert np.mean(pred == truth) > 0.9
    marginals = vem.marginals(result.params, POSITIONS, annotations)
    assert marginals["s"].shape == (45, 7, 2)
    np.testing.assert_allclose(marginals["c"], result.posteriors, atol=1e-5)


def test_hierarchical_dawid_skene_reading_its_sizes_fits_with_defaults():
    """The fifth of numpyro's annotation models: Normal and HalfNormal globals (no
    closed form: the generic M-step) and a reparametrized site, with defaults."""
    annotations, truth = _annotations()
    result = VEM(hierarchical_dawid_skene, "c", plate="item").run(
        jax.random.key(0), 60, POSITIONS, annotations, progress_bar=False
    )
    assert result.params["beta_decentered"].shape == (5, 4, 3)
    objective = -np.asarray(result.losses, np.float64)
    assert np.all(np.isfinite(objective))
    # the optax M-step may overshoot by round-off. Measured (key 0, 60 iterations):
    # largest fall 6.1e-5, objective -415.75 -> -412.99, every item's class found
    # (up to a relabelling); 9.2e-5 at 100 iterations in vem_vs_nuts.json
    assert np.diff(objective).min() > -1e-3, np.diff(objective).min()
    assert objective[-1] > objective[0] + 1.0
    pred = np.asarray(result.posteriors).argmax(1)
    agree = max(
        np.mean(pred == np.asarray(p)[truth]) for p in itertools.permutations(range(4))
    )
    assert agree > 0.9, agree
