"""Queries of jaxannot.retrieval against brute force, and their cost independent of
the database size (XLA cost analysis) versus MBRM's linear cost."""

import numpy as np
import pytest

import jax

from jaxannot import retrieval
from jaxannot.methods.emml.mbrm import fit_mbrm, mbrm_word_probabilities
from jaxannot.methods.emml.structured_output import kernel_matrix
from jaxannot.retrieval import QueryOptions

GAMMA = 0.5


@pytest.fixture(scope="module")
def db():
    rng = np.random.default_rng(0)
    vreps = rng.normal(size=(12, 3)).astype(np.float32)
    scores = rng.normal(size=(12, 9)).astype(np.float32)
    images = rng.normal(size=(300, 3)).astype(np.float32)
    words = (rng.random((300, 9)) < 0.25).astype(np.float32)
    index = retrieval.build_index(
        vreps,
        scores,
        images,
        database_words=words,
        gamma=GAMMA,
        neighbours=20,
        block_size=64,
    )
    return vreps, scores, images, words, index


def _sims(a, b):
    return np.asarray(kernel_matrix(a, b, "rbf", GAMMA), np.float64)


def test_neighbour_lists_are_the_exact_top_k(db):
    vreps, _, images, _, index = db
    s = _sims(vreps, images)
    expected = np.argsort(-s, axis=1, kind="stable")[:, :20]
    got = np.asarray(index.neighbour_ids)
    np.testing.assert_allclose(
        np.take_along_axis(s, got, 1), np.take_along_axis(s, expected, 1), rtol=1e-5
    )


def test_annotation_is_the_merge_of_the_nearest_vreps(db):
    vreps, scores, images, _, index = db
    q = images[:4] + 0.1
    s = _sims(q, vreps)
    top = np.argsort(-s, 1)[:, :3]
    expected = np.stack([s[i, top[i]] @ scores[top[i]] for i in range(4)])
    got = retrieval.annotation_scores(index, q, options=QueryOptions(top_vreps=3))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-4, atol=1e-5)
    ids, best = retrieval.annotate(
        index, q, options=QueryOptions(top_vreps=3, top_words=4)
    )
    np.testing.assert_array_equal(np.asarray(ids), np.argsort(-expected, 1)[:, :4])


def _brute_word_query(index, weights, top_vreps):
    f = np.asarray(index.vrep_word_scores) @ weights
    top = np.argsort(-f)[:top_vreps]
    merged = {}
    for v in top:
        for t, sim in zip(
            np.asarray(index.neighbour_ids[v]),
            np.asarray(index.neighbour_similarities[v]),
            strict=True,
        ):
            merged[int(t)] = merged.get(int(t), 0.0) + f[v] * sim
    return merged


def test_word_query_merges_the_top_vreps_neighbour_lists(db):
    *_, index = db
    w = np.zeros(9, np.float32)
    w[[2, 5]] = 1.0
    merged = _brute_word_query(index, w, 4)
    ids, scores = retrieval.word_query(
        index, w, options=QueryOptions(top_vreps=4, top_images=6)
    )
    expected = sorted(merged.values(), reverse=True)[:6]
    np.testing.assert_allclose(np.asarray(scores), expected, rtol=1e-4)
    for t, sc in zip(np.asarray(ids), np.asarray(scores), strict=True):
        np.testing.assert_allclose(merged[int(t)], sc, rtol=1e-4)


def test_image_retrieval_is_s_intersect_t(db):
    *_, words, index = db
    q = np.asarray(db[2][7])
    ann, _ = retrieval.annotate(
        index, q[None], options=QueryOptions(top_vreps=3, top_words=2)
    )
    ann = set(np.asarray(ann)[0].tolist())
    w = np.zeros(9, np.float32)
    w[list(ann)] = 1.0
    t = _brute_word_query(index, w, 3)
    s = {r for r in range(words.shape[0]) if ann & set(np.flatnonzero(words[r]))}
    r_expected = sorted(((v, k) for k, v in t.items() if k in s), reverse=True)
    options = QueryOptions(top_vreps=3, top_words=2, top_images=5)
    ids, scores = retrieval.image_retrieval(index, q, options=options)
    ids, scores = np.asarray(ids), np.asarray(scores)
    valid = ids >= 0
    assert set(ids[valid].tolist()) <= s & set(t)
    np.testing.assert_allclose(scores[valid], [v for v, _ in r_expected[:5]], rtol=1e-4)


def test_multimodal_query_reduces_to_its_parts(db):
    images, index = db[2], db[4]
    q = images[[3, 9]]
    w = np.zeros(9, np.float32)
    w[4] = 1.0
    top5 = QueryOptions(top_images=5)
    only_words = retrieval.multimodal_query(index, q, np.zeros(2), w, options=top5)
    np.testing.assert_allclose(
        np.asarray(only_words[1]),
        np.asarray(retrieval.word_query(index, w, options=top5)[1]),
        rtol=1e-5,
    )
    one_image = retrieval.multimodal_query(
        index, q, np.array([1.0, 0.0]), np.zeros(9), options=top5
    )
    alone = retrieval.image_retrieval(index, q[0], options=top5)
    np.testing.assert_allclose(
        np.asarray(one_image[1]), np.asarray(alone[1]), rtol=1e-5
    )
    both = retrieval.multimodal_query(index, q, np.array([0.5, 0.5]), w, options=top5)
    assert np.all(np.isfinite(np.asarray(both[1])))


def test_cross_stage_inference_through_the_ontology(db):
    *_, index = db
    names_a = [f"a{j}" for j in range(9)]
    names_b = [f"b{j}" for j in range(9)]
    table = {"a0": ["b3", "b4"], "a1": "b0"}
    onto = retrieval.ontology_matrix(table, names_a, names_b)
    assert onto.sum() == 3 and onto[0, 3] == onto[0, 4] == onto[1, 0] == 1
    stages = retrieval.CrossStage(index, index, onto)
    w_a = np.zeros(9, np.float32)
    w_a[0] = 1.0
    top4 = QueryOptions(top_images=4)
    got = retrieval.cross_stage_word_query(stages, w_a, options=top4)
    w_b = np.zeros(9, np.float32)
    w_b[[3, 4]] = 1.0
    want = retrieval.word_query(index, w_b, options=top4)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    q = db[2][:2]
    two = QueryOptions(top_words=2)
    ids, _ = retrieval.cross_stage_annotate(stages, q, options=two)
    s = np.asarray(retrieval.annotation_scores(index, q)) @ onto
    np.testing.assert_array_equal(np.asarray(ids), np.argsort(-s, 1)[:, :2])
    # image -> images: the word query of the mapped top words of the annotation
    img_ids, img_scores = retrieval.cross_stage_image_query(stages, q[0], options=two)
    ann, _ = retrieval.annotate(index, q[:1], options=two)
    w_ann = np.zeros(9, np.float32)
    w_ann[np.asarray(ann)[0]] = 1.0
    want = retrieval.word_query(index, w_ann @ onto, options=two)
    np.testing.assert_array_equal(np.asarray(img_ids), np.asarray(want[0]))
    np.testing.assert_allclose(np.asarray(img_scores), np.asarray(want[1]))
    assert np.asarray(img_ids).shape == (10,)
    with pytest.raises(ValueError, match=r"ontology must be \[source words"):
        retrieval.CrossStage(index, index, onto[:, :5])
    with pytest.raises(KeyError, match="'zz' is not in the source vocabulary"):
        retrieval.ontology_matrix({"zz": ["b1"]}, names_a, names_b)


def _flops(fn, *args):
    cost = jax.jit(fn).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["flops"])


def test_query_cost_is_independent_of_the_database_size():
    # XLA's cost model for one compiled query: EMML's flops do not change when the
    # database grows 20x (only the index-time work does); MBRM's grow with it. Image
    # retrieval runs annotation and a word query inside, so it covers all three.
    rng = np.random.default_rng(1)
    vreps = rng.normal(size=(16, 4)).astype(np.float32)
    f = rng.normal(size=(16, 10)).astype(np.float32)
    q = rng.normal(size=(1, 4)).astype(np.float32)
    emml_flops, mbrm_flops = [], []
    for n in (500, 10000):
        images = rng.normal(size=(n, 4)).astype(np.float32)
        words = (rng.random((n, 10)) < 0.2).astype(np.float32)
        index = retrieval.build_index(vreps, f, images, neighbours=32, gamma=GAMMA)
        emml_flops.append(
            (
                _flops(lambda i, x: retrieval.annotate(i, x), index, q),
                _flops(lambda i, x: retrieval.image_retrieval(i, x[0]), index, q),
            )
        )
        params = fit_mbrm(images, words, bandwidth=1.0)
        mbrm_flops.append(_flops(lambda p, x: mbrm_word_probabilities(p, x), params, q))
    assert emml_flops[0] == emml_flops[1]
    assert mbrm_flops[1] > 10 * mbrm_flops[0]


def test_build_index_rejects_bad_shapes(db):
    vreps, scores, images, _, _ = db
    with pytest.raises(ValueError, match="database_features must be"):
        retrieval.build_index(vreps, scores, images[:, :2])
    with pytest.raises(ValueError, match="unknown kernel"):
        retrieval.build_index(vreps, scores, images, kernel="poly")


def test_queries_use_the_kernel_the_index_was_built_with(db):
    vreps, scores, images, words, _ = db
    linear = retrieval.build_index(
        vreps, scores, images, database_words=words, kernel="linear", neighbours=20
    )
    assert linear.kernel == "linear"
    q = images[:3]
    s = np.asarray(kernel_matrix(q, vreps, "linear"), np.float64)
    top = np.argsort(-s, 1)[:, :2]
    expected = np.stack([s[i, top[i]] @ scores[top[i]] for i in range(3)])
    got = retrieval.annotation_scores(linear, q, options=QueryOptions(top_vreps=2))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-4, atol=1e-4)


def test_a_closed_over_index_jits_and_vmaps(db):
    # the benchmark's batched queries: the index (arrays and static kernel) is a
    # constant of the traced function
    images, index = db[2], db[4]
    batch = jax.jit(jax.vmap(lambda q: retrieval.image_retrieval(index, q)))
    ids, scores = batch(images[:4])
    for r in range(4):
        one_ids, one_scores = retrieval.image_retrieval(index, images[r])
        np.testing.assert_array_equal(np.asarray(ids[r]), np.asarray(one_ids))
        # float32: the batched program fuses its sums differently (1e-7 relative)
        np.testing.assert_allclose(
            np.asarray(scores[r]), np.asarray(one_scores), rtol=1e-6
        )


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("top_vreps", 0, ValueError),
        ("top_words", -1, ValueError),
        ("top_images", 2.0, TypeError),
        ("top_images", True, TypeError),
    ],
)
def test_query_options_are_validated(field, value, error):
    with pytest.raises(error, match=f"QueryOptions.{field} must be"):
        QueryOptions(**{field: value})
    assert QueryOptions(top_images=np.int64(3)).top_images == 3
