"""The standard multi-label learners on a Mulan dataset, on jaxannot's own split.

The data come through :func:`jaxannot.data.datasets.load_dataset` and
:func:`jaxannot.data.make_task` (inductive protocol, seed 0), so the training images,
the scored images and their truth are those ``jaxannot evaluate`` uses. Every learner
sees the primary feature view: real views standardised (``StandardScaler`` fitted on
the training images), bag and binary views as they are, in a sparse matrix.

Learners (scikit-learn, one thread each; the values tried are in the JSON):

- ``br_logreg``: binary relevance, ``OneVsRestClassifier(LogisticRegression(
  solver="liblinear", C))``; scores: the probabilities.
- ``br_linear_svm``: binary relevance, ``OneVsRestClassifier(LinearSVC(C))``;
  scores: the decision values.
- ``classifier_chain``: ``ClassifierChain`` of the same logistic regression, the
  words chained from the most to the least frequent in the training images (Read et
  al., 2011); scores: the chain's probabilities. ``C`` by cross-validation like
  its siblings (on every dataset: the earlier cap, above which the chain took
  ``br_logreg``'s ``C``, is gone).
- ``random_forest``: ``RandomForestClassifier`` (native multi-output trees,
  ``--trees`` trees; a word constant in the training images scores that constant,
  :class:`Forest`); ``min_samples_leaf`` chosen by the out-of-bag label-ranking AP
  of the training images (no folds: the fit is the most costly here).
- ``ml_knn``: ML-kNN (Zhang & Zhou, "ML-KNN: A lazy learning approach to
  multi-label learning", Pattern Recognition 2007) by :class:`MLkNN` below, Euclidean
  neighbours, smoothing 1 (scikit-multilearn 0.2.0 does not run with scikit-learn
  1.9: its ``MLkNN`` passes ``k`` positionally to ``NearestNeighbors``).

Settings other than the random forest's are chosen by ``--folds``-fold
cross-validation of the training images (``KFold(shuffle=True, random_state=0)``),
highest mean label-ranking AP; when the best is the smallest or largest value tried,
the grid grows one step past it (C x/÷ 10, k and min_samples_leaf x/÷ 2 and 3), at
most ``--extend`` times (:func:`search`; ``chosen_at_grid_edge`` in the JSON says
whether the optimum is still at an edge). The chosen setting is refitted on all the
training images and scored once on the test images.

Metrics (:mod:`jaxannot.metrics`): every annotation metric of ``jaxannot evaluate``
and the multi-label ones; the bipartition of ``metrics`` is the top-k rule of
``evaluate`` (the ``k`` top-scored words, ``k`` = the training label cardinality
rounded); ``native`` holds the bipartition metrics of each learner's own
``predict`` (probability or decision value above 0.5 / 0). ``fit_seconds`` is the
final fit, ``predict_seconds`` the scores and the native prediction of the test
images, ``selection_seconds`` the cross-validation (or the out-of-bag fits).

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.peers.multilabel_peers \\
        --dataset scene \\
        --json benchmarks/results/multilabel_peers_scene.json
"""

from __future__ import annotations

import platform
import sys
import time

import numpy as np
import scipy.sparse as sp
import sklearn
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold
from sklearn.multiclass import OneVsRestClassifier
from sklearn.multioutput import ClassifierChain
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from benchmarks.common.cli import script_parser
from benchmarks.common.device import use_device
from benchmarks.common.records import write_json
from jaxannot import metrics
from jaxannot.data import make_task
from jaxannot.data.datasets import load_dataset

LEARNERS = ("br_logreg", "br_linear_svm", "classifier_chain", "ml_knn", "random_forest")


# ----------------------------------------------------------------------------- ML-kNN
class MLkNN(ClassifierMixin, BaseEstimator):
    r"""ML-kNN (Zhang & Zhou, 2007): a MAP rule on the word counts of the neighbours.

    With :math:`C_{il}` the number of the ``k`` nearest training images of image
    ``i`` (itself excluded for a training image) that have word ``l``, smoothing
    ``s``, ``m`` training images:

    .. math:: P(H^l_1) = \frac{s + \sum_i y_{il}}{2s + m},\quad
              P(E^l_j \mid H^l_b) = \frac{s + c_b[l, j]}{s(k+1) +
              \sum_{p=0}^{k} c_b[l, p]}

    with :math:`c_b[l, j]` the number of training images with :math:`y_{il} = b` and
    :math:`C_{il} = j`. The score of word ``l`` for a test image with count ``j`` is
    the posterior :math:`P(H^l_1 \mid E^l_j)`; ``predict`` keeps the words above 1/2.
    """

    def __init__(self, k: int = 10, s: float = 1.0):
        self.k = k
        self.s = s

    def fit(self, X, Y):
        Y = np.asarray(Y) > 0
        m = Y.shape[0]
        if not 1 <= self.k < m:
            raise ValueError(f"k must be in [1, {m - 1}] (training images - 1), got "
                             f"{self.k}")  # fmt: skip
        self.index_ = NearestNeighbors(n_neighbors=self.k + 1).fit(X)
        self.Y_ = Y
        neighbours = self._neighbours(X, self.k + 1)
        own = neighbours == np.arange(m)[:, None]
        # drop the image itself (or, for a duplicate found first, the farthest)
        own[~own.any(axis=1), -1] = True
        neighbours = neighbours[~own].reshape(m, self.k)
        counts = Y[neighbours].sum(axis=1)  # [m, words]
        self.prior_ = (self.s + Y.sum(axis=0)) / (2 * self.s + m)
        self.likelihood_ = np.stack([self._likelihood(counts, Y == b) for b in (0, 1)])
        return self

    def _likelihood(self, counts, hyp):
        """``[words, k + 1]``: smoothed P(count j | hypothesis) of each word."""
        c = np.stack([np.sum(hyp & (counts == j), axis=0) for j in range(self.k + 1)])
        return (self.s + c.T) / (self.s * (self.k + 1) + c.sum(axis=0)[:, None])

    def _neighbours(self, X, k):
        return self.index_.kneighbors(X, n_neighbors=k, return_distance=False)

    def predict_proba(self, X):
        counts = self.Y_[self._neighbours(X, self.k)].sum(axis=1)
        words = np.arange(self.Y_.shape[1])[None, :]
        on = self.prior_ * self.likelihood_[1][words, counts]
        off = (1 - self.prior_) * self.likelihood_[0][words, counts]
        return on / (on + off)

    def predict(self, X):
        return (self.predict_proba(X) > 0.5).astype(int)


# ------------------------------------------------------------------- other learners
class _Binary(ClassifierMixin, BaseEstimator):
    """``estimator`` for one word; a constant when the fit images have one class (a
    word absent from a fold), which ``ClassifierChain`` does not handle."""

    def __init__(self, estimator=None):
        self.estimator = estimator

    def fit(self, X, y):
        y = np.asarray(y).astype(int)
        self.classes_ = np.array([0, 1])
        self.constant_ = None if len(np.unique(y)) == 2 else float(y[0])
        if self.constant_ is None:
            self.fitted_ = clone(self.estimator).fit(X, y)
        return self

    def predict_proba(self, X):
        if self.constant_ is not None:
            p = np.full(X.shape[0], self.constant_)
        else:
            p = self.fitted_.predict_proba(X)[:, 1]
        return np.column_stack([1 - p, p])

    def predict(self, X):
        return (self.predict_proba(X)[:, 1] > 0.5).astype(int)


def _dense(X):
    """``X`` as a dense array: scikit-learn's trees split dense columns faster."""
    return X.toarray() if sp.issparse(X) else X


class Forest(ClassifierMixin, BaseEstimator):
    """``RandomForestClassifier``'s native multi-output trees over the words with
    both classes in the fit images; a word with one class scores that class (0 or
    1): scikit-learn's out-of-bag code fails on such a word (Corel5k has 3 words no
    training image has, enron 1). One thread, ``random_state=0``."""

    def __init__(self, trees: int = 100, min_samples_leaf: int = 1, oob=False):
        self.trees = trees
        self.min_samples_leaf = min_samples_leaf
        self.oob = oob

    def fit(self, X, Y):
        Y = np.asarray(Y) > 0
        self.varies_ = Y.any(axis=0) & ~Y.all(axis=0)
        if not self.varies_.any():
            raise ValueError("every word is constant in the fit images")
        self.constant_ = Y.all(axis=0).astype(np.float64)
        target = Y[:, self.varies_].astype(int)
        self.forest_ = RandomForestClassifier(
            n_estimators=self.trees,
            min_samples_leaf=self.min_samples_leaf,
            oob_score=self.oob,
            random_state=0,
            n_jobs=1,
        ).fit(_dense(X), target[:, 0] if target.shape[1] == 1 else target)
        return self

    def _fill(self, varying):
        out = np.tile(self.constant_, (len(varying), 1))
        out[:, self.varies_] = varying
        return out

    def scores(self, X):
        """``[images, words]``: P(word) of the forest (constant words: 0 or 1)."""
        proba = self.forest_.predict_proba(_dense(X))
        proba = proba if isinstance(proba, list) else [proba]
        return self._fill(np.column_stack([p[:, 1] for p in proba]))

    def oob_scores(self):
        """:meth:`scores` of the training images from the trees that did not see
        them (NaN rows for an image in every tree's sample)."""
        oob = self.forest_.oob_decision_function_  # [images, 2(, words)]
        return self._fill(oob[:, 1, :] if oob.ndim == 3 else oob[:, 1:2])

    def predict(self, X):
        return (self.scores(X) > 0.5).astype(int)


def _logistic(C):
    return LogisticRegression(solver="liblinear", C=C)


def make_learner(name: str, setting: dict, order=None):
    """The estimator ``name`` with ``setting`` (``order``: the chain's word order)."""
    if name == "br_logreg":
        return OneVsRestClassifier(_logistic(setting["C"]))
    if name == "br_linear_svm":
        return OneVsRestClassifier(LinearSVC(C=setting["C"]))
    if name == "classifier_chain":
        return ClassifierChain(_Binary(_logistic(setting["C"])), order=order)
    if name == "random_forest":
        return Forest(
            trees=setting["trees"],
            min_samples_leaf=setting["min_samples_leaf"],
            oob=setting.get("oob", False),
        )
    if name == "ml_knn":
        return MLkNN(k=setting["k"])
    raise ValueError(f"unknown learner {name!r}; valid: {list(LEARNERS)}")


def scores_of(model, X) -> np.ndarray:
    """The ranking scores of ``model`` for the images ``X``."""
    if isinstance(model, Forest):
        return model.scores(X)
    if isinstance(model, OneVsRestClassifier) and isinstance(
        model.estimator, LinearSVC
    ):
        return np.asarray(model.decision_function(X))
    return np.asarray(model.predict_proba(X))


def _oob_scores(forest, Y):
    """The out-of-bag scores of the training images some tree left out, and their
    truth."""
    scores = forest.oob_scores()
    seen = np.isfinite(scores).all(axis=1)
    return scores[seen], Y[seen]


# ------------------------------------------------------------------------- selection
#: How a grid grows past its edge, per setting: (smaller, larger) value.
STEPS = {
    "C": (lambda v: v / 10, lambda v: v * 10),
    "k": (lambda v: v // 2, lambda v: v * 2),
    "min_samples_leaf": (lambda v: v // 3, lambda v: v * 3),
}


def search(score, grid, key, extend):
    """Score every setting of ``grid`` (they differ in ``key``); while the best is
    the smallest or largest value tried, try one step beyond it (:data:`STEPS`), at
    most ``extend`` times. ``score(setting) -> (value, extra)``; returns ``(best
    setting, its extra, table sorted by the value of key, best still at an edge)``.
    """
    rows = {}

    def add(setting):
        value, extra = score(setting)
        rows[setting[key]] = (setting, value, extra)

    for setting in grid:
        add(setting)
    for _ in range(extend):
        best = max(rows.values(), key=lambda r: r[1])[0][key]
        side = 0 if best == min(rows) else 1 if best == max(rows) else None
        if side is None:
            break
        new = STEPS[key][side](best)
        if new < 1 and key != "C" or new in rows:
            break
        add({**grid[0], key: new})
    best = max(rows.values(), key=lambda r: r[1])
    edge = best[0][key] in (min(rows), max(rows))
    table = [{"setting": rows[v][0], "score": rows[v][1]} for v in sorted(rows)]
    return best[0], best[2], table, edge


def cv_score(name, X, Y, folds, order=None):
    """``score(setting)`` for :func:`search`: the mean label-ranking AP over
    ``folds`` folds of the training images (the per-fold values as extra)."""
    splits = list(KFold(folds, shuffle=True, random_state=0).split(X))

    def score(setting):
        values = []
        for fit_rows, held in splits:
            model = make_learner(name, setting, order).fit(X[fit_rows], Y[fit_rows])
            held_scores = scores_of(model, X[held])
            values.append(metrics.label_ranking_average_precision(held_scores, Y[held]))
        return float(np.mean(values)), [float(v) for v in values]

    return score


def oob_score(X, Y):
    """``score(setting)`` for :func:`search`: a forest's out-of-bag label-ranking AP
    on the training images (the fitted forest as extra)."""

    def score(setting):
        forest = make_learner("random_forest", {**setting, "oob": True}).fit(X, Y)
        value = metrics.label_ranking_average_precision(*_oob_scores(forest, Y))
        return float(value), forest

    return score


# ----------------------------------------------------------------------------- data
def features(task):
    """Training and scored feature matrices of the primary view, and how they were
    prepared."""
    view = task.train.primary_view
    kind = task.train.view_kinds[view]
    x_train = np.asarray(task.train.views[view], dtype=np.float64)
    x_test = np.asarray(task.test.views[view], dtype=np.float64)[task.eval_rows]
    if kind == "real":
        scaler = StandardScaler().fit(x_train)
        return scaler.transform(x_train), scaler.transform(x_test), "standardised"
    return sp.csr_matrix(x_train), sp.csr_matrix(x_test), f"{kind}, as is (sparse)"


def load_task(dataset: str, data_dir=None):
    """The inductive task of ``jaxannot evaluate`` (seed 0) for ``dataset``."""
    train, test = load_dataset(dataset, data_dir=data_dir)
    return make_task(train, test, protocol="inductive", seed=0)


# ------------------------------------------------------------------------------ runs
def _grids(args):
    return {
        "br_logreg": [{"C": c} for c in args.logreg_c],
        "br_linear_svm": [{"C": c} for c in args.svm_c],
        "classifier_chain": [{"C": c} for c in args.logreg_c],
        "random_forest": [
            {"trees": args.trees, "min_samples_leaf": leaf} for leaf in args.leaf
        ],
        "ml_knn": [{"k": k} for k in args.knn_k],
    }


def run_learner(name, grid, data, k, args, order=None):
    """Select, refit, score one learner; its JSON record. ``data``: ``(x, y,
    x_test, truth)``."""
    x, y, x_test, truth = data
    key = next(iter(STEPS.keys() & grid[0].keys()))
    record = {"grid": grid, "searched": key}
    start = time.perf_counter()
    model = None
    if name == "random_forest":
        setting, model, table, edge = search(oob_score(x, y), grid, key, args.extend)
        record["selection"] = "out-of-bag label-ranking AP of the training images"
    else:
        score = cv_score(name, x, y, args.folds, order)
        setting, _, table, edge = search(score, grid, key, args.extend)
        record["selection"] = f"{args.folds}-fold CV label-ranking AP"
    record["selection_seconds"] = time.perf_counter() - start
    if model is None:
        start = time.perf_counter()
        model = make_learner(name, setting, order).fit(x, y)
        fit_seconds = time.perf_counter() - start
    else:  # the chosen forest was fitted during the selection
        fit_seconds = record["selection_seconds"] / len(table)
        record["fit_seconds_note"] = "mean of the out-of-bag fits (same cost)"
    start = time.perf_counter()
    scores = scores_of(model, x_test)
    native = np.asarray(model.predict(x_test))
    predict_seconds = time.perf_counter() - start
    record.update(
        setting=setting,
        table=table,
        chosen_at_grid_edge=edge,
        fit_seconds=fit_seconds,
        predict_seconds=predict_seconds,
        metrics={
            **metrics.annotation_report(scores, truth, n=min(5, truth.shape[1])),
            **metrics.multilabel_report(scores, truth, k),
        },
        native=metrics.bipartition_report(native, truth),
    )
    return record


def run(task, args, log=print, save=None) -> dict:
    """Every learner of ``args.learners`` on ``task``: the JSON of one dataset
    (``save(payload)`` after each learner, ``complete`` False until the last)."""
    x, x_test, prepared = features(task)
    y = (np.asarray(task.train.words) > 0).astype(int)
    truth = (np.asarray(task.truth_words) > 0).astype(int)
    k = metrics.bipartition_k(y)
    order = np.argsort(-y.sum(axis=0), kind="stable")  # most frequent word first
    grids = _grids(args)
    out = {
        "dataset": task.train.name,
        "protocol": task.protocol,
        "seed": task.seed,
        "n_train": int(y.shape[0]),
        "n_test": int(truth.shape[0]),
        "n_words": int(y.shape[1]),
        "n_features": int(x.shape[1]),
        "features": prepared,
        "train_label_cardinality": float(y.sum(axis=1).mean()),
        "bipartition": {"rule": "top-k", "k": k},
        "folds": args.folds,
        "grid_extensions": args.extend,
        "chain_order": "by decreasing training frequency",
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "sklearn": sklearn.__version__,
        },  # fmt: skip
        "learners": {},
        "complete": False,
    }
    for name in args.learners:
        log(f"{out['dataset']}: {name} ...")
        chain = order if name == "classifier_chain" else None
        rec = run_learner(name, grids[name], (x, y, x_test, truth), k, args, chain)
        out["learners"][name] = rec
        m = rec["metrics"]
        log(
            f"  {rec['setting']}: lrap {m['lrap']:.4f} micro_f1 {m['micro_f1']:.4f} "
            f"example_f1 {m['example_f1']:.4f} fit {rec['fit_seconds']:.1f} s"
        )
        out["complete"] = len(out["learners"]) == len(args.learners)
        if save is not None:
            save(out)
    return out


def _floats(text):
    return [float(v) for v in text.split(",")]


def _ints(text):
    return [int(v) for v in text.split(",")]


def parse_args(argv):
    ap = script_parser(
        __doc__, "jaxannot's learners run on it; the scikit-learn peers run on the CPU"
    )
    ap.add_argument("--dataset", required=True, help="a jaxannot dataset name or dir")
    ap.add_argument("--data-dir", default=None, help="data root ($JAXANNOT_DATA)")
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--learners", default=",".join(LEARNERS),
                    type=lambda t: t.split(","))  # fmt: skip
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--logreg-c", type=_floats, default=[0.01, 0.1, 1.0, 10.0])
    ap.add_argument("--svm-c", type=_floats, default=[0.001, 0.01, 0.1, 1.0])
    ap.add_argument("--knn-k", type=_ints, default=[5, 10, 20])
    ap.add_argument("--leaf", type=_ints, default=[1, 3, 10])
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--extend", type=int, default=2,
                    help="steps a grid may grow past an edge optimum")  # fmt: skip
    args = ap.parse_args(argv)
    use_device(args.device)
    unknown = [n for n in args.learners if n not in LEARNERS]
    if unknown:
        ap.error(f"unknown learners {unknown}; valid: {list(LEARNERS)}")
    return args


def main(argv=None):
    args = parse_args(argv)
    task = load_task(args.dataset, args.data_dir)
    command = "python -m benchmarks.peers.multilabel_peers " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    run(
        task,
        args,
        log=lambda s: print(s, file=sys.stderr, flush=True),
        save=lambda out: write_json(args.json, {**out, "command": command}, indent=2),
    )


if __name__ == "__main__":
    main()
