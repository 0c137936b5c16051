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
from jaxannot.inference.vem.heldout import LamPath
from jaxannot.inference.vem.run import warn_early_stop
from jaxannot.inference.vem.steps import VEMResult

_spec = importlib.util.spec_from_file_location(
    "_graph_toy", pathlib.Path(__file__).with_name("_graph_toy.py")
)
_toy_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_toy_module)
weak_bernoulli = _toy_module.weak_bernoulli
bernoulli_mixture = _toy_module.bernoulli_mixture
bernoulli_m_step = _toy_module.bernoulli_m_step

_TOY = dict(contrast=0.15, view_separation=0.8)


def _fit(toy, estep, seed, steps=60):
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


@pytest.mark.xfail(
    strict=True,
    reason="not met yet: auto chooses lam=0.3 on this random graph (issue 43, point 3)",
)
def test_auto_keeps_zero_on_a_random_graph():
    toy = weak_bernoulli(600, seed=0, random_graph=True, **_TOY)
    _, plain, _ = _fit(toy, None, 0)
    result, auto, _ = _fit(toy, LapVar1(toy.graph), 0)
    assert isinstance(result.lam_path, LamPath)
    assert result.lam_path.lams == (0.0, 0.1, 0.3, 1.0, 3.0)
    assert result.lam == result.lam_path.chosen == 0.0
    assert auto >= plain


@pytest.mark.xfail(
    strict=True,
    reason="not met yet: at 60 EM iterations seed 2 chooses lam=1 (ARI 0.11 against "
    "plain 0.37); at 100 it chose 0.3 (issue 43, point 3)",
)
def test_auto_beats_plain_where_the_graph_carries_the_classes():
    # issue 43's weak Bernoulli mixture: plain VEM 0.33-0.36 over these seeds
    gains = []
    for seed in range(3):
        toy = weak_bernoulli(600, seed=seed, **_TOY)
        _, plain, _ = _fit(toy, None, seed)
        result, auto, _ = _fit(toy, LapVar1(toy.graph), seed)
        assert result.lam > 0, result.lam_path
        assert auto >= plain, (seed, auto, plain)
        gains.append(auto - plain)
    # measured +0.023, +0.098, +0.023: the issue's +0.05 on one seed in three
    assert np.mean(gains) >= 0.03, gains


def test_a_harmful_fixed_lam_warns_and_a_checked_path_comes_back():
    toy = weak_bernoulli(600, seed=0, **_TOY)
    result, _, caught = _fit(toy, LapVar1(toy.graph, 3.0), 0)
    assert result.lam == 3.0 and result.lam_path.lams == (0.0, 3.0)
    assert result.lam_path.heldout[1] < result.lam_path.heldout[0]
    assert any("held-out" in str(w.message) for w in caught)
    assert all(len(str(w.message)) < 300 for w in caught)
    _, _, quiet = _fit(toy, LapVar1(toy.graph, 3.0, heldout_check=False), 0)
    assert not any("held-out" in str(w.message) for w in quiet)


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
