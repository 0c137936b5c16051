r"""Approximate k-nearest-neighbour search with a faiss index (large k-NN graphs).

:func:`jaxannot.graph.knn_search` and :func:`jaxannot.graph.knn_graph` call
:func:`approx_knn_search` for ``method="approx"`` (and for ``method="auto"`` on large
inputs, see :func:`use_approx`). It returns the same arrays as the exact search: int32
database rows and float32 distances of shape ``[q, k]``, by increasing distance, equal
distances by increasing index, and with ``exclude_self`` no row among its own
neighbours.

Algorithm
---------
The index is faiss's ``IndexHNSWFlat``: a hierarchical navigable small-world graph
(Malkov & Yashunin 2018) over the database rows, searched greedily from the top layer
down with a candidate list of ``ef_search`` points on the bottom layer. Vectors are
stored uncompressed, so its memory is O(n (d + 2 M)) for ``M`` links per point; the
result is O(q k). Nothing of size n x n is ever formed.

The returned distances are recomputed from the vectors (float32), not taken from the
index, and each list is re-sorted by (distance, index); only the *set* of neighbours is
approximate. With ``exclude_self`` the index is asked for ``k + 1`` neighbours and the
query's own row is dropped (or the last one, when duplicates pushed it out). Rows for
which the index returns fewer than ``k`` results (rare; a disconnected graph) are
completed by an exact search of those rows.

From ``IVF_MIN_POINTS`` database points on (``index="auto"``) the index is faiss's
``IndexIVFFlat`` instead: k-means (on 64 rows a cell) splits the rows into ``nlist``
= round(2 sqrt(n)) cells and each query scans the rows of its ``nprobe`` = 8 nearest
cells exactly (vectors uncompressed, memory O(n d)). On the synthetic corpus of
``benchmarks/scale/scale.py`` (200,000 images, 60 dims) its recall@10 against the exact
search (ties counted as hits, 1,000 sampled rows) was 0.9998 for 25 CPU seconds
(k-means O(nlist^2 d), the search O(n (nlist + nprobe n / nlist) d), both
O(n^1.5 d) here). The index is freed before the distances are recomputed.

Metrics
-------
- ``"euclidean"``: L2 search;
- ``"cosine"``: L2 search on the rows scaled to unit norm, since
  :math:`\|a - b\|^2 = 2 (1 - \cos(a, b))` for unit vectors. A zero database row is
  placed on an extra axis, at squared distance 2 (cosine similarity 0) from every unit
  vector, as in the exact search.

Settings
--------
``M = 32``, ``efConstruction = 200``, ``efSearch = 128``. faiss's defaults
(``efConstruction = 40``, ``efSearch = 16``) reached recall@10 >= 0.95 on a 64-d
Gaussian mixture of 100,000 points (0.979) and on Corel5k, but not on Delicious's 500
binary dims (0.78; 0.90 at efSearch 64); efConstruction 200 and efSearch 128 reach
0.957 there and 0.9999 on the mixture, for 35.6 CPU seconds at n = 100,000 (1 thread;
benchmarks/scale/knn_index.py, docs/graphs.md).

Threshold of ``method="auto"``: the exact blocked search of the same 100,000 points
took 77.6 CPU seconds (quadratic in n), and 4.3 against the index's 8.0 on Delicious's
16,105 points; the crossover is near 40,000-50,000 points, so ``APPROX_MIN_POINTS``
is 50,000.

Why faiss and not pynndescent (NN-descent, Dong et al. 2011): after its numba
compilation pynndescent built the 100,000-point graph faster (7.6 CPU seconds at its
default ``n_neighbors = 30``, recall 1.0; 0.986 on Delicious), but the compilation
costs about 30 CPU seconds in every new process and its peak memory was 5x larger
(about 530 MB against 97 MB); faiss answers queries outside the database with the same
index and no compilation.
The build uses faiss's OpenMP threads;
with more than one thread the graph (hence the returned neighbours, never their
distances) may differ slightly between runs. ``num_threads=1`` makes it deterministic.

References
----------
Malkov, Y. A., Yashunin, D. A. "Efficient and robust approximate nearest neighbor
search using Hierarchical Navigable Small World graphs", IEEE TPAMI 42(4), 2018.

Dong, W., Moses, C., Li, K. "Efficient k-nearest neighbor graph construction for
generic similarity measures", WWW 2011 (NN-descent, pynndescent; benchmarked only).

Douze, M. et al. "The Faiss library", arXiv:2401.08281, 2024
(https://github.com/facebookresearch/faiss).
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = [
    "APPROX_METRICS",
    "APPROX_MIN_POINTS",
    "DEFAULT_EF_SEARCH",
    "DEFAULT_NPROBE",
    "INDEXES",
    "IVF_MIN_POINTS",
    "approx_available",
    "approx_knn_search",
    "ivf_cells",
    "use_approx",
]

log = logging.getLogger(__name__)

APPROX_METRICS = ("euclidean", "cosine")

#: ``method="auto"`` uses the index from this many database points on (and when the
#: exact search would compare at least ``APPROX_MIN_POINTS ** 2`` pairs).
APPROX_MIN_POINTS = 50_000

DEFAULT_M = 32
DEFAULT_EF_CONSTRUCTION = 200
DEFAULT_EF_SEARCH = 128

#: ``index="auto"`` uses IVF-Flat from this many database points on, HNSW below.
IVF_MIN_POINTS = 200_000
DEFAULT_NPROBE = 8
INDEXES = ("auto", "hnsw", "ivf")

_INSTALL_HINT = 'pip install "jaxannot[scale]"'

# rows whose distances are recomputed at a time (memory O(block * k * d))
_BLOCK = 4096


def _import_faiss():
    try:
        import faiss
    except ImportError as err:
        raise ImportError(
            "the approximate k-NN search (method='approx') needs faiss (faiss-cpu); "
            f"install it with: {_INSTALL_HINT}"
        ) from err
    return faiss


def approx_available() -> bool:
    """Whether faiss can be imported (the ``scale`` extra is installed).

    Returns
    -------
    bool
    """
    try:
        _import_faiss()
    except ImportError:
        return False
    return True


def use_approx(num_queries: int, num_points: int) -> bool:
    """The choice of ``method="auto"``: the index for large searches, else exact.

    Parameters
    ----------
    num_queries, num_points : int
        Rows of the queries and of the database.

    Returns
    -------
    bool
        True when ``num_points >= APPROX_MIN_POINTS`` and
        ``num_queries * num_points >= APPROX_MIN_POINTS ** 2`` (a few queries against
        a large database stay exact: building the index would cost more) and faiss is
        installed; without faiss a warning is logged and the exact search is chosen.
    """
    large = (
        num_points >= APPROX_MIN_POINTS
        and num_queries * num_points >= APPROX_MIN_POINTS**2
    )
    if large and not approx_available():
        log.warning(
            "k-NN search of %d queries in %d points: faiss is not installed, so "
            "method='auto' falls back to the exact search (memory O(block x n), time "
            "O(q n d)); for the approximate index: %s",
            num_queries,
            num_points,
            _INSTALL_HINT,
        )
        return False
    return large


def _as_rows(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32))


def _unit_rows(x: np.ndarray, zero_axis: bool) -> np.ndarray:
    """Rows scaled to unit norm plus one extra column (1 on zero rows if zero_axis)."""
    norms = np.linalg.norm(x, axis=1)
    out = np.zeros((x.shape[0], x.shape[1] + 1), np.float32)
    nonzero = norms > 0
    out[nonzero, :-1] = x[nonzero] / norms[nonzero, None]
    if zero_axis:
        out[~nonzero, -1] = 1.0
    return out


def _pair_distances(queries, database, idx, metric: str) -> np.ndarray:
    """Distances between each query and its listed database rows, float32 [q, k]."""
    out = np.empty(idx.shape, np.float32)
    for start in range(0, idx.shape[0], _BLOCK):
        q = queries[start : start + _BLOCK]
        nb = database[idx[start : start + _BLOCK]]  # [b, k, d]
        if metric == "euclidean":
            diff = nb - q[:, None, :]
            d = np.sqrt(np.einsum("bkd,bkd->bk", diff, diff))
        else:
            dots = np.einsum("bkd,bd->bk", nb, q)
            denom = np.linalg.norm(nb, axis=2) * np.linalg.norm(q, axis=1)[:, None]
            cos = np.where(denom > 0, dots / np.where(denom > 0, denom, 1.0), 0.0)
            d = 1.0 - cos
        out[start : start + _BLOCK] = d
    return out


def _sort_rows(idx: np.ndarray, dist: np.ndarray):
    """Sort each row by (distance, index)."""
    q, k = idx.shape
    rows = np.repeat(np.arange(q), k)
    order = np.lexsort((idx.reshape(-1), dist.reshape(-1), rows)).reshape(q, k)
    order -= np.arange(q)[:, None] * k
    return (
        np.take_along_axis(idx, order, axis=1),
        np.take_along_axis(dist, order, axis=1),
    )


def _completed(
    found: np.ndarray,
    queries: np.ndarray,
    database: np.ndarray,
    k: int,
    metric: str,
    exclude_self: bool,
) -> np.ndarray:
    """The index's neighbours ``found`` [q, k (+1)] cut to ``k`` a row: with
    ``exclude_self``, the first ``k`` that are neither the row itself nor missing
    (-1); a row left with a missing one is searched exactly."""
    if exclude_self:
        bad = (found == np.arange(queries.shape[0])[:, None]) | (found < 0)
        keep = np.argsort(bad, axis=1, kind="stable")[:, :k]
        bad = np.take_along_axis(bad, keep, axis=1)
        found = np.take_along_axis(found, keep, axis=1)
    else:
        bad = found < 0
    missing = np.flatnonzero(bad.any(axis=1))
    if missing.size:
        log.info(
            "the index returned < %d neighbours for %d rows: exact", k, missing.size
        )
        found[missing] = _exact_rows(
            queries, database, missing, k, metric, exclude_self
        )
    return found


def _exact_rows(queries, database, rows, k: int, metric: str, exclude_self: bool):
    """Exact k-NN lists of queries[rows] (numpy, 256 rows at a time), int64 [r, k]."""
    if metric == "cosine":
        norms = np.linalg.norm(database, axis=1)
        db = database / np.where(norms > 0, norms, 1.0)[:, None]
    else:
        db, db_sq = database, np.einsum("nd,nd->n", database, database)
    out = np.empty((rows.size, k), np.int64)
    for start in range(0, rows.size, 256):
        r = rows[start : start + 256]
        qr = queries[r]
        if metric == "cosine":
            qn = np.linalg.norm(qr, axis=1)
            d = 1.0 - (qr / np.where(qn > 0, qn, 1.0)[:, None]) @ db.T
        else:
            d = db_sq[None, :] - 2.0 * (qr @ db.T)  # + |q|^2, the same along a row
        if exclude_self:
            d[np.arange(r.size), r] = np.inf
        out[start : start + r.size] = np.argsort(d, axis=1, kind="stable")[:, :k]
    return out


def ivf_cells(num_points: int) -> int:
    """``nlist`` of the IVF-Flat index: round(2 sqrt(n)), at least 1.

    Parameters
    ----------
    num_points : int
        Rows of the database.

    Returns
    -------
    int
    """
    return max(1, round(2.0 * float(num_points) ** 0.5))


def _search_index(faiss, index_db, index_q, want: int, kind: str, settings: dict):
    """The ``want`` neighbours (int64, -1 where missing) of every query row found
    by a faiss ``kind`` index ("hnsw" or "ivf") over the database rows; the index is
    freed before returning."""
    d = index_db.shape[1]
    if kind == "ivf":
        quantizer = faiss.IndexFlatL2(d)
        nlist = min(settings["nlist"] or ivf_cells(len(index_db)), len(index_db))
        index = faiss.IndexIVFFlat(quantizer, d, int(nlist))
        index.cp.max_points_per_centroid = 64  # the k-means sample: 64 rows a cell
        index.train(index_db)
        index.add(index_db)
        index.nprobe = min(int(settings["nprobe"]), int(nlist))
    else:
        index = faiss.IndexHNSWFlat(d, int(settings["m"]))
        index.hnsw.efConstruction = int(settings["ef_construction"])
        index.add(index_db)
        index.hnsw.efSearch = max(int(settings["ef_search"]), want)
    _, found = index.search(index_q, want)
    index.reset()
    del index
    return found.astype(np.int64)


@contextlib.contextmanager
def _faiss_threads(faiss, num_threads: int | None):
    if num_threads is None:
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(int(num_threads))
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def approx_knn_search(
    queries: ArrayLike,
    database: ArrayLike,
    k: int,
    *,
    metric: str = "euclidean",
    exclude_self: bool = False,
    m: int = DEFAULT_M,
    ef_construction: int = DEFAULT_EF_CONSTRUCTION,
    ef_search: int = DEFAULT_EF_SEARCH,
    num_threads: int | None = None,
    index: str = "auto",
    nlist: int | None = None,
    nprobe: int = DEFAULT_NPROBE,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Approximate k nearest neighbours with a faiss HNSW or IVF-Flat index.

    Builds ``faiss.IndexHNSWFlat`` (Malkov & Yashunin 2018) or ``faiss.IndexIVFFlat``
    over the database (see the module docstring), searches every query, recomputes
    the distances of the returned pairs and sorts each list by (distance, index).
    The arguments are checked by :func:`jaxannot.graph.knn_search`, which calls this
    for ``method="approx"``.

    Parameters
    ----------
    queries, database, k, exclude_self
        As in :func:`jaxannot.graph.knn_search`.
    metric : {"euclidean", "cosine"}
        Distance (``"cosine"``: L2 search of unit-norm rows, see the module
        docstring).
    m : int
        HNSW links per point (faiss ``M``); memory grows as ``n * 2m``.
    ef_construction : int
        Candidate list while building (faiss ``efConstruction``).
    ef_search : int
        Candidate list while searching (faiss ``efSearch``; at least ``k + 1`` is
        used); larger = higher recall, slower.
    num_threads : int, optional
        OpenMP threads of faiss for this call (default: faiss's setting, all cores);
        1 gives a deterministic index.
    index : {"auto", "hnsw", "ivf"}
        The faiss index; ``"auto"``: IVF-Flat from ``IVF_MIN_POINTS`` database rows
        on, HNSW below.
    nlist : int, optional
        IVF cells (default :func:`ivf_cells`: round(2 sqrt(n))); at most n.
    nprobe : int
        IVF cells scanned per query (larger = higher recall, slower).

    Returns
    -------
    indices, distances : ndarray [q, k]
        As :func:`jaxannot.graph.knn_search` returns them (numpy int32 / float32).

    Raises
    ------
    ImportError
        faiss is not installed (``pip install "jaxannot[scale]"``).
    ValueError
        A metric or an index that is not supported (the message lists the valid
        ones).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0], [1.0], [3.0]], np.float32)
    >>> idx, d = approx_knn_search(x, x, 1, exclude_self=True)  # doctest: +SKIP
    >>> idx[:, 0].tolist(), d[:, 0].tolist()  # doctest: +SKIP
    ([1, 0, 1], [1.0, 1.0, 2.0])
    """
    for name, value, valid in (
        ("metric", metric, APPROX_METRICS),
        ("index", index, INDEXES),
    ):
        if value not in valid:
            raise ValueError(
                f"unknown {name} {value!r} for the approximate k-NN search; valid "
                f"choices: {', '.join(valid)}"
            )
    faiss = _import_faiss()
    queries, database = _as_rows(queries), _as_rows(database)
    n = database.shape[0]
    extra = 1 if exclude_self else 0
    want = min(k + extra, n)
    if metric == "cosine":
        index_db = _unit_rows(database, zero_axis=True)
        index_q = index_db if exclude_self else _unit_rows(queries, zero_axis=False)
    else:
        index_db, index_q = database, queries
    if index == "auto":
        index = "ivf" if n >= IVF_MIN_POINTS else "hnsw"
    settings = {
        "m": m,
        "ef_construction": ef_construction,
        "ef_search": ef_search,
        "nlist": nlist,
        "nprobe": nprobe,
    }
    with _faiss_threads(faiss, num_threads):
        found = _search_index(faiss, index_db, index_q, want, index, settings)
    del index_db, index_q
    found = _completed(found, queries, database, k, metric, exclude_self)
    dist = _pair_distances(queries, database, found, metric)
    idx, dist = _sort_rows(found, dist)
    return idx.astype(np.int32), dist.astype(np.float32)
