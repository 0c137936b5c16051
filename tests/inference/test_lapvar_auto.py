"""``lam="auto"``: the graph penalty's weight chosen on held-out evidence (issue 43,
point 3), the warning at a harmful fixed weight and LapVar2's early stop."""

import importlib.util
import pathlib
import warnings

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

import jax
import jax.numpy as jnp

from jaxannot.inference import VEM, LapVar1, LapVar2
from jaxannot.inference.vem import declared, run
from jaxannot.inference.vem.heldout import CHECK_IMAGES, GATE, HELD_OUT, LamPath
from jaxannot.inference.vem.run import warn_early_stop
from jaxannot.inference.vem.steps import VEMResult

#: its programs run more than they compile (some 60 fits a case): LLVM -O1
pytestmark = pytest.mark.xla_optimized

_spec = importlib.util.spec_from_file_location(
    "_graph_toy", pathlib.Path(__file__).with_name("_graph_toy.py")
)
_toy_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_toy_module)
weak_bernoulli = _toy_module.weak_bernoulli
bernoulli_mixture = _toy_module.bernoulli_mixture
bernoulli_m_step = _toy_module.bernoulli_m_step

_TOY = dict(contrast=0.15, view_separation=0.8)


def _fit(toy, estep, seed, steps=30):
    vem = VEM(bernoulli_mixture, "z", estep=estep, m_step=bernoulli_m_step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = vem.run(
            jax.random.key(seed),
            steps,
            jnp.asarray(toy.x),
            num_classes=4,
            progress_bar=False,
        )
    ari = adjusted_rand_score(toy.truth, np.asarray(result.posteriors).argmax(1))
    return result, float(ari), [w for w in caught if w.category is UserWarning]


def _weak_fits(seeds, steps, graphs=("classes", "random"), toy_settings=None) -> dict:
    """Plain VEM and ``lam="auto"`` on issue 43's weak Bernoulli mixture (``_TOY``
    unless ``toy_settings``), with the graph that carries the classes and a random
    one, ``steps`` EM iterations a fit:
    ``{(graph, seed): (plain ARI, auto ARI, auto result)}``."""
    settings = _TOY if toy_settings is None else toy_settings
    fits = {}
    for graph in graphs:
        for seed in seeds:
            random_graph = graph == "random"
            toy = weak_bernoulli(600, seed=seed, random_graph=random_graph, **settings)
            _, plain, _ = _fit(toy, None, seed, steps)
            result, auto, _ = _fit(toy, LapVar1(toy.graph, "auto"), seed, steps)
            fits[graph, seed] = plain, auto, result
    return fits


@pytest.fixture(scope="module")
def weak_fits():
    """Seed 0 at 30 EM iterations a fit (the default run: an auto fit is 30 masked
    fits; at 60 iterations they took twice the time): the ARIs 0.323 plain, 0.378
    auto with the classes' graph (held-out gain +0.119 nats an image, s.e. 0.017),
    0.323 for both with the random one (-0.027, s.e. 0.013)."""
    return _weak_fits((0,), 30)


@pytest.fixture(scope="module")
def weak_fits_all():
    """Seeds 0-2 at 60 EM iterations, the issue's claim (``-m slow``: about 30 s)."""
    return _weak_fits((0, 1, 2), 60)


# the default run: seed 0 at 30 iterations; -m slow: seeds 0, 1, 2 at 60 (the
# figures measured in the tests below are theirs)
_EITHER = pytest.mark.parametrize(
    "fits", ["weak_fits", pytest.param("weak_fits_all", marks=pytest.mark.slow)]
)


@_EITHER
def test_auto_keeps_zero_on_a_random_graph(fits, request):
    fits = request.getfixturevalue(fits)
    for (graph, seed), (plain, auto, result) in fits.items():
        if graph != "random":
            continue
        path = result.lam_path
        assert isinstance(path, LamPath)
        assert path.lams == (0.0, 0.1, 0.2, 0.3, 0.5, 1.0)
        assert path.held_out_images == 600  # five folds: every image once
        # measured -0.036, -0.043, -0.022 nats an image (s.e. 0.014): the random
        # neighbours predict worse than the image's own prior
        assert path.graph_gain <= GATE * path.graph_gain_se, path
        assert result.lam == path.chosen == 0.0
        assert auto >= plain, (seed, auto, plain)


@_EITHER
def test_auto_beats_plain_where_the_graph_carries_the_classes(fits, request):
    fits = request.getfixturevalue(fits)
    # plain VEM 0.35, 0.33, 0.37 over seeds 0-2
    gains = []
    for (graph, seed), (plain, auto, result) in fits.items():
        if graph != "classes":
            continue
        # measured +0.13, +0.20, +0.18 nats an image (s.e. 0.017)
        assert result.lam_path.graph_gain > 4 * result.lam_path.graph_gain_se
        assert result.lam > 0, result.lam_path
        assert auto >= plain + 0.01, (seed, auto, plain)
        gains.append(auto - plain)
    if len(gains) == 3:  # measured +0.036, +0.085, +0.018
        assert np.mean(gains) >= 0.04, gains


#: The toy at the view separation whose fixed-weight figures are closest to the
#: issue's (seeds 0-4, 500 EM iterations; the issue's plain VEM 0.33 to 0.35, LapVar1
#: 0.41 to 0.42 at 0.3 to 0.5 and 0.22 to 0.28 at 1): at 0.9, 0.402 and 0.400 at 0.3
#: and 0.5, 0.263 at 1 (plain VEM 0.364); at 1.0, 0.411, 0.416, 0.325; at 0.8
#: (``_TOY``), 0.395, 0.385, 0.145, where no weight gains +0.05 on seeds 0 and 2
_ISSUE_TOY = dict(contrast=0.15, view_separation=0.9)


def _issue_gains(seeds) -> list:
    """``lam="auto"``'s ARI gain over plain VEM on ``_ISSUE_TOY``, seed by seed, at
    the benchmark's 500 EM iterations."""
    fits = _weak_fits(seeds, 500, ("classes",), _ISSUE_TOY)
    for (_, seed), (_, _, result) in fits.items():
        assert result.lam > 0, (seed, result.lam_path)
    return [auto - plain for plain, auto, _ in fits.values()]


def test_auto_gains_the_issues_005_where_the_graph_carries_the_classes():
    # seeds 0-2: +0.042, +0.086, +0.053 (lam 0.5 on each), the same to 4 decimals on
    # one and two threads and at XLA -O1 (AMD EPYC, AVX2); the margins 0.010 on the
    # mean, 0.022 on the least; at 0.3 chosen instead of 0.5 seeds 0 and 2 would gain
    # about +0.031 each and the mean fail
    gains = _issue_gains(range(3))
    assert min(gains) >= 0.02, gains
    assert np.mean(gains) >= 0.05, gains


@pytest.mark.slow
def test_auto_gains_the_issues_005_over_ten_seeds():
    # seeds 0-9: mean +0.063, every seed above plain VEM (the least +0.042, seed 0);
    # 8 of the 10 gain +0.05 or more, seeds 0 and 4 do not (+0.042, +0.048). At 60
    # EM iterations the mean is +0.059 and seed 8 loses 0.003; at separation 1.0,
    # +0.070 at 60 (the least +0.010) and +0.067 at 500 (seed 4 -0.006)
    gains = _issue_gains(range(10))
    assert min(gains) > 0, gains
    assert np.mean(gains) >= 0.05, gains


def test_a_harmful_fixed_lam_warns_and_a_checked_path_comes_back(monkeypatch):
    toy = weak_bernoulli(600, seed=0, **_TOY)
    setups = []  # the model's set-ups (each traces it): one per argument objects
    real = declared.read_by_value
    monkeypatch.setattr(
        declared, "read_by_value", lambda *a: setups.append(1) or real(*a)
    )
    result, _, caught = _fit(toy, LapVar1(toy.graph, 3.0), 0)
    # the whole data, each of the 5 masked folds (shared by both masked fits and
    # their scores), the final fit: 7, where each fit set up its arguments anew
    assert len(setups) == 7, len(setups)
    assert result.lam == 3.0 and result.lam_path.lams == (0.0, 3.0)
    # a tenth would hold out 60 < CHECK_IMAGES: every image once, over 5 folds
    assert result.lam_path.held_out_images == 600
    assert result.lam_path.heldout[1] < result.lam_path.heldout[0]
    assert any("held-out" in str(w.message) for w in caught)
    assert all(len(str(w.message)) < 300 for w in caught)
    _, _, quiet = _fit(toy, LapVar1(toy.graph, 3.0, heldout_check=False), 0)
    assert not any("held-out" in str(w.message) for w in quiet)


def test_the_masked_fits_stop_at_convergence_and_the_final_fit_runs_on(monkeypatch):
    # the masked fits are scored, not kept: each stops at the first EM iteration
    # that raises its objective by less than heldout.TOLERANCE (measured at seed
    # 0: the fits at 0 stop after 49 to 119 iterations, at 0.3, warm-started,
    # after 11 to 22); the final fit runs every iteration asked for
    toy = weak_bernoulli(600, seed=0, **_TOY)
    ran = []
    real = run.run_one

    def counted(*args, **kwargs):
        fit = real(*args, **kwargs)
        ran.append(int(np.isfinite(np.asarray(fit.losses)).sum()))
        return fit

    monkeypatch.setattr(run, "run_one", counted)
    result, _, _ = _fit(toy, LapVar1(toy.graph, 0.3), 0, steps=200)
    assert len(ran) == 11, ran  # 5 folds x (0, 0.3), then the fit
    assert all(n < 200 for n in ran[:-1]), ran
    assert ran[-1] == 200 and result.lam == 0.3


def test_the_check_sees_a_drop_one_fold_of_a_tenth_missed():
    # seed 2: LapVar2(lam=1) lowers the ARI (0.20 against plain VEM's 0.33) and
    # the held-out evidence by 0.26 nats an image over all 600 images (s.e.
    # 0.038); on one fold of 60 images the drop read 0.067 against a standard
    # error of 0.11, and no warning came
    toy = weak_bernoulli(600, seed=2, **_TOY)
    assert round(HELD_OUT * 600) < CHECK_IMAGES
    result, fixed, caught = _fit(toy, LapVar2(toy.graph, 1.0), 2)
    path = result.lam_path
    assert path.held_out_images == 600
    assert path.heldout[1] < path.heldout[0] - path.stderr[1], path
    assert any("held-out" in str(w.message) for w in caught), caught
    # a helpful weight stays quiet (ARI 0.40 against 0.33)
    _, _, quiet = _fit(toy, LapVar1(toy.graph, 0.3), 2)
    assert not any("held-out" in str(w.message) for w in quiet), quiet


def test_auto_refuses_init_and_bad_weights():
    toy = weak_bernoulli(40, seed=0, **_TOY)
    vem = VEM(bernoulli_mixture, "z", estep=LapVar1(toy.graph))
    with pytest.raises(ValueError, match="auto"):
        vem.init(jax.random.key(0), jnp.asarray(toy.x), num_classes=2)
    with pytest.raises(ValueError, match="lam"):
        LapVar1(toy.graph, "often")
    with pytest.raises(ValueError, match="lam_path"):
        LapVar2(toy.graph, lam_path=(0.1, 1.0))
    fixed = LapVar1(toy.graph).with_lam(0.5)
    assert fixed.lam == 0.5 and float(fixed.arrays[1]) == pytest.approx(
        0.5 * fixed._unit
    )


def test_lapvar2_stopping_at_its_start_warns():
    def result(finite):
        losses = np.full(50, np.nan)
        losses[:finite] = -1.0
        return VEMResult({}, jnp.zeros((2, 2)), losses)

    with pytest.warns(UserWarning, match="stopped after 2 EM iterations") as rec:
        assert warn_early_stop(result(2), 50, "LapVar2")
    assert len(str(rec[0].message)) < 300
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not warn_early_stop(result(4), 50, "LapVar2")
        assert not warn_early_stop(result(2), 3, "LapVar2")


def test_lapvar2_scores_each_weight_from_the_default_start():
    # warm-started, LapVar2's masked fits were copies of the fit at 0 (held-out
    # scores within 0.0015 nats an image): "auto" chose 1 on seed 2 at 500 EM
    # iterations (ARI 0.20, plain VEM 0.36) and a given lam=1 passed the check.
    # From the default start, 1 reads 0.2 nats an image lower on seed 0 (measured
    # at 30 iterations: -20.31 against -20.11) and lowers the ARI (0.19 against
    # 0.32): "auto" keeps a smaller weight and the given 1 warns.
    toy = weak_bernoulli(600, seed=0, **_TOY)
    _, plain, _ = _fit(toy, None, 0)
    result, auto, _ = _fit(toy, LapVar2(toy.graph, "auto"), 0)
    path = result.lam_path
    assert path.lams[-1] == 1.0 and path.held_out_images == 600
    assert path.heldout[-1] < path.heldout[0] - 0.05, path
    assert result.lam < 1.0, path
    assert auto >= plain - 0.01, (auto, plain)
    result, fixed, caught = _fit(toy, LapVar2(toy.graph, 1.0), 0)
    assert fixed < plain - 0.05, (fixed, plain)
    assert result.lam_path.heldout[1] < result.lam_path.heldout[0], result.lam_path
    assert any("held-out" in str(w.message) for w in caught), caught
    assert all(len(str(w.message)) < 300 for w in caught)
