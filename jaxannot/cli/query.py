"""``jaxannot query MODEL KIND``: annotate, word, image and multimodal queries.

The queries of §4 of Guo et al. (2016) on a model saved by ``jaxannot evaluate emml
--save MODEL``: the database is the dataset's training images, the query images its
test rows (``annotate`` works for any saved method). Registered in
:func:`jaxannot.cli.parser.build_parser` by :func:`add_query_command`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

__all__ = ["add_query_command"]


def _cmd_query(args) -> int:
    """``jaxannot query MODEL KIND``: EMML queries (§4 of Guo et al. 2016) on a saved
    model; the database is the dataset's training images, query images its test rows.
    ``annotate`` works for every method that scores words, the other kinds for a
    method that declares them (:attr:`~jaxannot.annotators.Method.queries`)."""
    from jaxannot.annotators.base import available_methods
    from jaxannot.annotators.persistence import load_scorer
    from jaxannot.data.datasets import load_dataset

    fitted, method = load_scorer(args.model)
    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    queries = test if test is not None else train
    if args.kind == "annotate":
        return _annotate(args, fitted, method, queries, list(train.word_names))
    if args.kind not in method.queries:
        answering = [
            m.name for m in available_methods().values() if args.kind in m.queries
        ]
        raise ValueError(
            f"{args.kind} queries need a model of a method that answers them "
            f"({', '.join(answering)}), got {fitted.method!r}"
        )
    index, view = _index(fitted, train)
    ids, scores = _retrieve(args, index, queries, view, list(train.word_names))
    _print_images(ids, scores, train)
    return 0


def _rows_of(corpus, rows: list[int]) -> list[int]:
    """``rows`` (``--row``), checked to be rows of ``corpus``."""
    bad = [r for r in rows if not 0 <= r < corpus.num_images]
    if bad:
        raise ValueError(f"--row {bad[0]} out of range [0, {corpus.num_images})")
    return rows


def _word_weights(words: list[str], names: list[str]):
    """0/1 weights over the vocabulary ``names`` of the ``--word`` ``words``."""
    import numpy as np

    unknown = [w for w in words if w not in names]
    if unknown:
        raise ValueError(
            f"unknown word {unknown[0]!r}; the vocabulary has {len(names)} words"
        )
    return np.isin(np.array(names), words).astype(np.float32)


def _annotate(args, fitted, method, queries, names: list[str]) -> int:
    """The ``--top`` words of each ``--row`` (default 0), one JSON line each."""
    import numpy as np

    rows = _rows_of(queries, args.row or [0])
    try:
        scores = method.score_words(fitted, queries.subset(np.array(rows)))
    except ValueError as err:  # a dataset whose features do not fit the model's
        raise ValueError(f"model {args.model}: {err}") from None
    scores = np.asarray(scores)
    for r, s in zip(rows, scores, strict=True):
        top = np.argsort(-s, kind="stable")[: args.top]
        print(json.dumps({"row": r, "words": [names[j] for j in top]}))
    return 0


def _index(fitted, train):
    """The retrieval index of a saved model over the training images, and the view
    it reads (its arrays were checked against the method's parameters on load)."""
    from jaxannot import retrieval

    p = fitted.params  # its arrays checked by load_scorer
    view = fitted.hyper.get("view") or train.primary_view
    index = retrieval.build_index(
        p.vrep_features,
        p.vrep_word_scores,
        train.view(view),
        database_words=train.words,
        kernel=fitted.hyper["kernel"],
        gamma=float(p.gamma),
    )
    return index, view


def _retrieve(args, index, queries, view: str, names: list[str]):
    """The image ids and scores of a ``word``, ``image`` or ``multimodal`` query."""
    import numpy as np

    from jaxannot import retrieval

    x = np.asarray(queries.view(view), np.float32)
    options = retrieval.QueryOptions(top_images=args.top)
    if args.kind == "word":
        if not args.word:
            raise ValueError("a word query needs --word")
        return retrieval.word_query(
            index, _word_weights(args.word, names), options=options
        )
    if args.kind == "image":
        (r,) = _rows_of(queries, args.row[:1] or [0])
        return retrieval.image_retrieval(index, x[r], options=options)
    rows = _rows_of(queries, args.row or [])
    w = _word_weights(args.word, names) if args.word else np.zeros(len(names))
    imgs = x[np.array(rows, int)] if rows else np.zeros((1, x.shape[1]), np.float32)
    a = np.full(max(len(rows), 1), 1.0 if rows else 0.0, np.float32)
    return retrieval.multimodal_query(
        index, imgs, a * args.image_weight, w.astype(np.float32), options=options
    )


def _print_images(ids, scores, train) -> None:
    """One JSON line per retrieved image: its id, score and training words."""
    import numpy as np

    names = list(train.word_names)
    words_of = np.asarray(train.words)
    for i, s in zip(np.asarray(ids), np.asarray(scores), strict=True):
        if i >= 0:
            words = [names[j] for j in np.flatnonzero(words_of[i] > 0)]
            print(json.dumps({"image": int(i), "score": float(s), "words": words}))


def add_query_command(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``query`` through ``add(name, func, **parser_kwargs)`` (the sub-command
    factory of :func:`jaxannot.cli.parser.build_parser`)."""
    qu = add("query", _cmd_query, help="annotate / word / image / multimodal queries")
    qu.add_argument("model", help="a model saved by `evaluate --save`")
    qu.add_argument("kind", choices=("annotate", "word", "image", "multimodal"))
    qu.add_argument("--dataset", required=True, help="database: its training images")
    qu.add_argument("--data-dir", default=None)
    qu.add_argument("--row", type=int, action="append", default=[], help="query row")
    qu.add_argument("--word", action="append", default=[], help="query word")
    qu.add_argument("--image-weight", type=float, default=1.0)
    qu.add_argument("--top", type=int, default=5)
