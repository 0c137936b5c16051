"""``jaxannot query MODEL KIND``: annotate, word, image and multimodal queries.

The queries of §4 of Guo et al. (2016) on a model saved by ``jaxannot evaluate emml
--save MODEL``: the database is the dataset's training images, the query images its
test rows (``annotate`` works for any saved method). Registered in
:func:`jaxannot.cli.app.build_parser` by :func:`add_query_command`.
"""

from __future__ import annotations

import json

__all__ = ["add_query_command"]


def _cmd_query(args) -> int:
    """``jaxannot query MODEL KIND``: EMML queries (§4 of Guo et al. 2016) on a saved
    model; the database is the dataset's training images, query images its test rows."""
    import numpy as np

    from jaxannot import retrieval
    from jaxannot.annotators.persistence import load_scorer
    from jaxannot.data.datasets import load_dataset

    fitted, method = load_scorer(args.model)
    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    queries = test if test is not None else train
    names = list(train.word_names)

    def rows_of(corpus, rows):
        bad = [r for r in rows if not 0 <= r < corpus.num_images]
        if bad:
            raise ValueError(f"--row {bad[0]} out of range [0, {corpus.num_images})")
        return rows

    def word_weights():
        unknown = [w for w in args.word if w not in names]
        if unknown:
            raise ValueError(
                f"unknown word {unknown[0]!r}; the vocabulary has {len(names)} words"
            )
        return np.isin(np.array(names), args.word).astype(np.float32)

    if args.kind == "annotate":
        rows = rows_of(queries, args.row or [0])
        scores = np.asarray(method.score_words(fitted, queries.subset(np.array(rows))))
        for r, s in zip(rows, scores, strict=True):
            top = np.argsort(-s, kind="stable")[: args.top]
            print(json.dumps({"row": r, "words": [names[j] for j in top]}))
        return 0
    if fitted.method != "emml":
        raise ValueError(
            f"{args.kind} queries need an 'emml' model, got {fitted.method!r}"
        )
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
    x = np.asarray(queries.view(view), np.float32)
    options = retrieval.QueryOptions(top_images=args.top)
    if args.kind == "word":
        if not args.word:
            raise ValueError("a word query needs --word")
        ids, sc = retrieval.word_query(index, word_weights(), options=options)
    elif args.kind == "image":
        (r,) = rows_of(queries, args.row[:1] or [0])
        ids, sc = retrieval.image_retrieval(index, x[r], options=options)
    else:
        rows = rows_of(queries, args.row or [])
        w = word_weights() if args.word else np.zeros(len(names), np.float32)
        imgs = x[np.array(rows, int)] if rows else np.zeros((1, x.shape[1]), np.float32)
        a = np.full(max(len(rows), 1), 1.0 if rows else 0.0, np.float32)
        ids, sc = retrieval.multimodal_query(
            index, imgs, a * args.image_weight, w, options=options
        )
    for i, s in zip(np.asarray(ids), np.asarray(sc), strict=True):
        if i >= 0:
            words = [names[j] for j in np.flatnonzero(np.asarray(train.words)[i] > 0)]
            print(json.dumps({"image": int(i), "score": float(s), "words": words}))
    return 0


def add_query_command(add) -> None:
    """Add ``query`` through ``add(name, func, **parser_kwargs)`` (the sub-command
    factory of :func:`jaxannot.cli.app.build_parser`)."""
    qu = add("query", _cmd_query, help="annotate / word / image / multimodal queries")
    qu.add_argument("model", help="a model saved by `evaluate --save`")
    qu.add_argument("kind", choices=("annotate", "word", "image", "multimodal"))
    qu.add_argument("--dataset", required=True, help="database: its training images")
    qu.add_argument("--data-dir", default=None)
    qu.add_argument("--row", type=int, action="append", default=[], help="query row")
    qu.add_argument("--word", action="append", default=[], help="query word")
    qu.add_argument("--image-weight", type=float, default=1.0)
    qu.add_argument("--top", type=int, default=5)
