"""The synthetic concept corpus and the linear SVMs of the ALE benchmarks
(``benchmarks.scale.ale_scale``, ``benchmarks.peers.ale_vs_peers``)."""

from __future__ import annotations

import resource
import time

import numpy as np

from jaxannot.metrics import mean_interpolated_average_precision, precision_at_k


def peak_rss_mb() -> float:
    """Peak resident set size of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class ConceptGenerator:
    """Seeded synthetic concept-detection data, generated chunk by chunk."""

    def __init__(
        self, *, dims=512, latent=16, clusters=40, concepts=10, noise=1.0, seed=0
    ):
        rng = np.random.default_rng([seed, 10**6])
        self.centres = rng.normal(size=(clusters, latent)) * 2.0
        self.mixing = (rng.normal(size=(latent, dims)) / np.sqrt(latent)).astype(
            np.float32
        )
        self.membership = np.zeros((clusters, concepts), np.float32)
        for k in range(concepts):
            self.membership[rng.choice(clusters, size=4, replace=False), k] = 1.0
        self.dims, self.latent, self.noise, self.seed = dims, latent, noise, seed

    def chunk(self, stream: int, index: int, size: int):
        rng = np.random.default_rng([self.seed, stream, index])
        cluster = rng.integers(0, len(self.centres), size=size)
        z = self.centres[cluster] + rng.normal(size=(size, self.latent))
        x = (z.astype(np.float32) @ self.mixing) + self.noise * rng.standard_normal(
            (size, self.dims), dtype=np.float32
        )
        return x, self.membership[cluster]

    def source(self, stream: int, n: int, chunk: int, labels: bool = False):
        """A ChunkSource (fresh iterator per call) over ``n`` images of ``stream``."""

        def chunks():
            for i, start in enumerate(range(0, n, chunk)):
                x, y = self.chunk(stream, i, min(chunk, n - start))
                yield (x, y) if labels else x

        return chunks

    def materialize(self, stream: int, n: int, chunk: int):
        xs, ys = zip(*self.source(stream, n, chunk, labels=True)(), strict=True)
        return np.concatenate(xs), np.concatenate(ys)


def measure(scores, truth):
    return {
        "miap": 100.0 * mean_interpolated_average_precision(scores, truth),
        "p_at_100": float(
            np.mean(
                [
                    precision_at_k(scores[:, k], truth[:, k], 100)
                    for k in range(truth.shape[1])
                ]
            )
        ),
    }


#: The ``LinearSVC`` C values :func:`choose_c` cross-validates.
C_GRID = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 5.0)


def choose_c(x, y, grid=C_GRID, folds: int = 3, seed: int = 0) -> dict:
    """``LinearSVC``'s C by ``folds``-fold cross-validation on the training rows.

    Each C fits one-vs-rest primal ``LinearSVC`` (tol 0.1, the compared setting) on
    the other folds and scores the held-out fold by MiAP; the C of the highest mean
    wins (the smaller C on a tie). Returns the chosen ``c``, every C's mean and
    standard deviation over the folds and the CPU seconds of the search (its own
    figure, never added to a fit time).
    """
    from jaxannot.data.protocols import kfold_rows

    cpu = time.process_time()
    held = kfold_rows(len(x), folds, seed=seed)
    table = {}
    for c in grid:
        settings = {"C": c, "dual": False, "tol": 0.1, "max_iter": 1000}
        fold_miap = []
        for rows in held:
            keep = np.ones(len(x), bool)
            keep[rows] = False
            got = fit_linearsvc(x[keep], y[keep], x[rows], y[rows], settings)
            fold_miap.append(got["miap"])
        table[str(c)] = {
            "mean": float(np.mean(fold_miap)),
            "std": float(np.std(fold_miap)),
        }
    best = max(grid, key=lambda c: (table[str(c)]["mean"], -c))
    return {
        "c": best,
        "folds": folds,
        "seed": seed,
        "cv_miap": table,
        "cpu_seconds": time.process_time() - cpu,
    }


def linearsvc_settings(c: float, n: int, d: int) -> dict:
    """The ``LinearSVC`` settings compared (keys of the JSON, each with its settings).

    ``linearsvc_paper``: liblinear's own default, the paper's setting — the L2-loss
    dual solver (``-s 1``) at ``eps = 0.1``. ``linearsvc_primal_tol0.1``: the same
    tolerance with the primal solver, which scikit-learn's docs recommend when
    ``n_samples > n_features``. ``linearsvc_defaults``: scikit-learn's defaults
    (``dual="auto"``, which picks the primal here since n > d, at ``tol = 1e-4``).
    """
    auto_dual = not n > d  # sklearn's dual="auto" for squared hinge + l2 penalty
    return {
        "linearsvc_primal_tol0.1": {
            "C": c,
            "dual": False,
            "tol": 0.1,
            "max_iter": 1000,
        },
        "linearsvc_defaults": {
            "C": c,
            "dual": "auto",
            "tol": 1e-4,
            "max_iter": 1000,
            "dual_resolved": auto_dual,
        },
        "linearsvc_paper": {"C": c, "dual": True, "tol": 0.1, "max_iter": 1000},
    }


def fit_linearsvc(x, y, x_test, y_test, settings: dict) -> dict:
    """One-vs-rest ``LinearSVC`` per concept; wall/CPU seconds, MiAP, settings."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import LinearSVC

    kwargs = {k: v for k, v in settings.items() if k != "dual_resolved"}
    start, cpu = time.perf_counter(), time.process_time()
    coefs, intercepts, iters = [], [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        for k in range(y.shape[1]):
            clf = LinearSVC(**kwargs).fit(x, y[:, k])
            coefs.append(clf.coef_[0])
            intercepts.append(clf.intercept_[0])
            iters.append(int(np.max(clf.n_iter_)))
    secs = time.perf_counter() - start
    scores = x_test @ np.array(coefs).T + np.array(intercepts)
    warned = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
    return {
        "settings": settings,
        "fit_seconds": secs,
        "fit_cpu_seconds": time.process_time() - cpu,
        "n_iter_per_concept": iters,
        "convergence_warnings": warned,
        # every concept stopped by its tolerance, before max_iter
        "converged": warned == 0 and max(iters) < settings["max_iter"],
        **measure(scores, y_test),
    }
