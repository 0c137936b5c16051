"""Link-LDA's fast path (one view = LDA) against scikit-learn and gensim batch LDA.

All three fit the same corpus with the same number of topics K, the same symmetric
priors (alpha on θ, eta on β), the same number of passes over the data and the same
number of per-document E-step iterations:

- jaxannot: :func:`jaxannot.methods.topic_models.link_lda_vb.fit_vb` (batch VB, one
jit-compiled
  ``lax.scan``; the compile time is reported separately and excluded from the
  per-iteration time, which is measured on a second, cached call);
- scikit-learn: ``LatentDirichletAllocation(learning_method="batch")``,
  ``max_iter`` passes, ``max_doc_update_iter`` E-step iterations, ``n_jobs=1``;
- gensim: ``LdaModel`` in batch mode (``update_every=0``, one chunk = the corpus),
  ``passes`` passes, ``iterations`` E-step iterations.

Held-out perplexity is measured the same way for all three, by document completion:
each test document's tokens are split at random into two halves; θ is inferred from the
first half and the per-word perplexity of the second half is ``exp(-Σ n log(θ̂ β̂) /
N)`` with β̂ the normalized topic-word matrix. The figure compared
(``heldout_perplexity``, and ``perplexity_ratio_vs_sklearn``) infers θ with one
estimator for all three: jaxannot's ``fold_in`` (100 VB updates, the same α) from each
system's topic-word pseudo-counts λ (ours; sklearn's ``components_``; gensim's
``state.get_lambda()``), so the models are compared and not their test-time routines.
Each system's own routine (our ``fold_in``, sklearn's ``transform``, gensim's
``inference``) gives ``own_inference_perplexity`` beside it, and sklearn's own
``perplexity()`` bound is reported too. Times: wall (``perf_counter``) and CPU
(``process_time``) seconds; the speed-ups use CPU seconds, the steadier figure on a
shared machine.

Corpora (``--corpus``):

- ``corel5k`` (default): the library's own regime, many short bags — the 4,500
  Corel5k training images, each one bag of its blob tokens and words (499 + 374 ids,
  ~12 tokens), held-out = the 500 test images (needs ``--data-dir`` or
  ``$JAXANNOT_DATA``);
- ``synthetic``: text-like long documents sampled from LDA itself (numpy; K_true
  topics, Dirichlet(0.05) topic-word distributions, Dirichlet(0.1) proportions, Poisson
  lengths around ``--length``).

    python -m benchmarks.peers.link_lda_vs_sklearn                    # Corel5k, 1-2 min
    python -m benchmarks.peers.link_lda_vs_sklearn --corpus synthetic # 3 min, 2 cores
"""

from __future__ import annotations

import json
import resource
import sys
import time

import numpy as np

import jax
import jax.numpy as jnp

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.lda_corpus import completion_perplexity, lda_corpus, split_halves
from benchmarks.common.records import RESULTS, write_json
from jaxannot.methods.topic_models import link_lda as ll
from jaxannot.methods.topic_models import link_lda_vb as llvb


def shared_perplexity(lam, obs, held, alpha):
    """Perplexity of the held-out halves with θ from jaxannot's ``fold_in`` on the
    observed halves, for topic-word pseudo-counts ``lam`` [K, V] of any system."""
    lam = jnp.asarray(lam, jnp.float32)
    gamma = llvb.fold_in((lam,), (obs,), jnp.float32(alpha), num_inner=100)
    return completion_perplexity(np.asarray(gamma), np.asarray(lam, np.float64), held)


def sklearn_lda(args):
    """scikit-learn's batch variational LDA with the benchmark's K, priors, passes
    and E-step iterations (no early stop, one job)."""
    from sklearn.decomposition import LatentDirichletAllocation

    return LatentDirichletAllocation(
        n_components=args.topics,
        doc_topic_prior=args.alpha,
        topic_word_prior=args.eta,
        learning_method="batch",
        max_iter=args.iterations,
        max_doc_update_iter=args.inner,
        mean_change_tol=0.0,
        evaluate_every=-1,
        n_jobs=1,
        random_state=args.seed,
    )


def _public(argv) -> list[str]:
    """The command-line arguments without ``--data-dir`` and its value (a path of
    the machine that ran it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--data-dir":
            skip = True
        elif not a.startswith("--data-dir="):
            out.append(a)
    return out


def main(argv=None):
    ap = script_parser(__doc__)
    ap.add_argument("--docs", type=int, default=3000)
    ap.add_argument("--test-docs", type=int, default=500)
    ap.add_argument("--vocab", type=int, default=2000)
    ap.add_argument("--true-topics", type=int, default=20)
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--inner", type=int, default=10)
    ap.add_argument("--length", type=int, default=100)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--eta", type=float, default=0.05)
    ap.add_argument("--skip-gensim", action="store_true")
    ap.add_argument("--corpus", choices=("corel5k", "synthetic"), default="corel5k")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out",
        default=None,
        help="default benchmarks/results/link_lda_vs_sklearn_<corpus>.json",
    )
    args = ap.parse_args(argv)
    use_device(args.device)
    rng = np.random.default_rng(args.seed)
    if args.corpus == "corel5k":
        from jaxannot.data.datasets import load_dataset

        tr, te = load_dataset("corel5k", args.data_dir)

        def bag(c):
            return np.concatenate(
                [
                    np.asarray(c.views["blobs"], np.float32),
                    np.asarray(c.words, np.float32),
                ],
                axis=1,
            )

        train, test = bag(tr), bag(te)
        args.docs, args.test_docs, args.vocab = (
            train.shape[0],
            test.shape[0],
            train.shape[1],
        )
        args.true_topics = args.length = None
    else:
        counts = lda_corpus(
            rng, args.docs + args.test_docs, args.vocab, args.true_topics, args.length
        )
        train, test = counts[: args.docs], counts[args.docs :]
    obs, held = split_halves(rng, test)
    results = {}

    # ---- jaxannot
    key = jax.random.key(args.seed)
    prior = ll.LDAPrior(alpha=args.alpha, eta=args.eta)
    t0 = time.perf_counter()
    llvb.fit_vb(
        key,
        (train,),
        args.topics,
        num_iterations=args.iterations,
        num_inner=args.inner,
        prior=prior,
    )
    first = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    state, elbo = llvb.fit_vb(
        key,
        (train,),
        args.topics,
        num_iterations=args.iterations,
        num_inner=args.inner,
        prior=prior,
    )
    jax.block_until_ready(state)
    ours_s, ours_cpu = time.perf_counter() - t0, time.process_time() - c0
    own = shared_perplexity(state.lambdas[0], obs, held, args.alpha)
    results["jaxannot"] = dict(
        seconds=ours_s,
        cpu_seconds=ours_cpu,
        seconds_per_iteration=ours_s / args.iterations,
        cpu_seconds_per_iteration=ours_cpu / args.iterations,
        first_call_seconds_incl_compile=first,
        heldout_perplexity=own,
        own_inference_perplexity=own,
        elbo_non_decreasing=bool(np.all(np.diff(elbo) >= -1e-5 * np.abs(elbo[1:]))),
    )
    print("jaxannot", results["jaxannot"], flush=True)

    # ---- scikit-learn
    sk = sklearn_lda(args)
    t0, c0 = time.perf_counter(), time.process_time()
    sk.fit(train)
    sk_s, sk_cpu = time.perf_counter() - t0, time.process_time() - c0
    sk.set_params(max_doc_update_iter=100)
    results["sklearn"] = dict(
        seconds=sk_s,
        cpu_seconds=sk_cpu,
        seconds_per_iteration=sk_s / args.iterations,
        cpu_seconds_per_iteration=sk_cpu / args.iterations,
        heldout_perplexity=shared_perplexity(sk.components_, obs, held, args.alpha),
        own_inference_perplexity=completion_perplexity(
            sk.transform(obs), sk.components_, held
        ),
        sklearn_perplexity_bound_on_test=float(sk.perplexity(test)),
    )
    print("sklearn", results["sklearn"], flush=True)

    # ---- gensim
    if not args.skip_gensim:
        from gensim.models import LdaModel

        def bow(m):
            return [
                [
                    (int(w), float(c))
                    for w, c in zip(np.flatnonzero(r), r[r > 0], strict=False)
                ]
                for r in m
            ]

        corpus = bow(train)
        t0, c0 = time.perf_counter(), time.process_time()
        gm = LdaModel(
            corpus=corpus,
            id2word={i: str(i) for i in range(args.vocab)},
            num_topics=args.topics,
            alpha=np.full(args.topics, args.alpha),
            eta=args.eta,
            passes=args.iterations,
            iterations=args.inner,
            update_every=0,
            chunksize=len(corpus),
            random_state=args.seed,
            gamma_threshold=0.0,
            eval_every=None,
        )
        gm_s, gm_cpu = time.perf_counter() - t0, time.process_time() - c0
        gm.iterations = 100
        g_gamma, _ = gm.inference(bow(obs))
        results["gensim"] = dict(
            seconds=gm_s,
            cpu_seconds=gm_cpu,
            seconds_per_iteration=gm_s / args.iterations,
            cpu_seconds_per_iteration=gm_cpu / args.iterations,
            heldout_perplexity=shared_perplexity(
                gm.state.get_lambda(), obs, held, args.alpha
            ),
            own_inference_perplexity=completion_perplexity(
                np.asarray(g_gamma), gm.get_topics(), held
            ),
        )
        print("gensim", results["gensim"], flush=True)

    ours = results["jaxannot"]
    out = dict(
        benchmark="link_lda_vs_sklearn",
        corpus=dict(
            name=args.corpus,
            train_docs=args.docs,
            test_docs=args.test_docs,
            vocab=args.vocab,
            true_topics=args.true_topics,
            mean_length=args.length,
            train_tokens=float(train.sum()),
        ),
        topics=args.topics,
        iterations=args.iterations,
        inner=args.inner,
        alpha=args.alpha,
        eta=args.eta,
        results=results,
        speedup_vs_sklearn=results["sklearn"]["cpu_seconds_per_iteration"]
        / ours["cpu_seconds_per_iteration"],
        wall_speedup_vs_sklearn=results["sklearn"]["seconds_per_iteration"]
        / ours["seconds_per_iteration"],
        perplexity="jaxannot fold_in (100 VB updates) from each system's λ",
        perplexity_ratio_vs_sklearn=ours["heldout_perplexity"]
        / results["sklearn"]["heldout_perplexity"],
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        jax=jax.__version__,
        device=device_record(),
        command=" ".join(
            ["python -m benchmarks.peers.link_lda_vs_sklearn", *_public(argv)]
        ),
    )
    if "gensim" in results:
        out["speedup_vs_gensim"] = (
            results["gensim"]["cpu_seconds_per_iteration"]
            / ours["cpu_seconds_per_iteration"]
        )
    path = args.out or RESULTS / f"link_lda_vs_sklearn_{args.corpus}.json"
    write_json(path, out)
    print(json.dumps({k: v for k, v in out.items() if k != "results"}, indent=1))
    return out


if __name__ == "__main__":
    main()
