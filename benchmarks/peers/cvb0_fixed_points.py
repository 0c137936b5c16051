"""Where batch CVB0 settles, seed by seed, and whether its objective tells early.

For each fit seed one CVB0 fit (:func:`jaxannot.methods.topic_models.link_lda_cvb0.
fit_cvb0`, ``--blocks`` blocks) is continued ``--step`` sweeps at a time up to
``--sweeps``; at every checkpoint the record keeps the training objective (the
leave-one-out log predictive of the last sweep) and the held-out perplexity of
:mod:`benchmarks.peers.link_lda_vs_peers` (the same corpus options, split and
estimator, :mod:`benchmarks.common.lda_peers`). No timings: the figures do not
depend on the machine's load.

From the curves:

- ``spread``: the last checkpoint's perplexity over the seeds (mean, sd, min, max)
  and, with ``--target``, the seeds that reach it at any checkpoint and by when;
- ``predicts``: per checkpoint ``t``, the correlation over the seeds between the
  objective at ``t`` and the last perplexity (strongly negative: the objective at
  ``t`` already ranks the fixed points the fits end in);
- ``restarts``: restarts chosen by the objective, simulated on the seeds: for
  ``R`` starts and a choice at checkpoint ``t``, over every ``R``-subset of the
  seeds, the mean last perplexity of the start with the highest objective at ``t``
  (against the mean over all seeds, a random choice) and, with ``--target``, the
  share of subsets whose chosen start reaches it.

    python -m benchmarks.peers.cvb0_fixed_points --sweeps 300 --step 10 \
        --target 397.37 --json OUT
    python -m benchmarks.peers.cvb0_fixed_points --blocks 256 --sweeps 50 --step 5 \
        --seeds 8 --target 567.92 --corpus synthetic --docs 10000 --json OUT
"""

from __future__ import annotations

import itertools
import os
import sys

import numpy as np

import jax
import jax.numpy as jnp

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.lda_corpus import split_halves
from benchmarks.common.lda_peers import (
    checked_perplexity,
    draw_corpus,
    shared_perplexity,
    threads_setting,
)
from benchmarks.common.records import write_json
from jaxannot.methods.topic_models import link_lda as ll
from jaxannot.methods.topic_models import link_lda_cvb0 as cvb0


def curve(args, seed, train, evaluate):
    """One seed's fit, continued: ``[(sweeps, objective, perplexity)]``."""
    state, rows = None, []
    for done in range(args.step, args.sweeps + 1, args.step):
        state, objective = cvb0.fit_cvb0(
            jax.random.key(seed),
            (train,),
            args.topics,
            prior=ll.LDAPrior(alpha=args.alpha, eta=args.eta),
            num_iterations=args.step,
            num_blocks=args.blocks,
            state=state,
        )
        ppl = evaluate(np.asarray(state.lambdas[0]))
        rows.append(
            (
                done,
                float(objective[-1]),
                checked_perplexity(ppl, "cvb0", seed, done),
            )
        )
    return rows


def reached(rows, target):
    """The first checkpoint at or below ``target``, or None."""
    return next((n for n, _, p in rows if p <= target), None)


def spread(curves, target):
    """The last perplexities over the seeds, and who reaches ``target``."""
    last = np.array([rows[-1][2] for rows in curves])
    out = dict(
        mean=float(last.mean()),
        sd=float(last.std(ddof=1)),
        min=float(last.min()),
        max=float(last.max()),
        last=last.tolist(),
    )
    if target is not None:
        out["first_at_or_below_target"] = [reached(rows, target) for rows in curves]
    return out


def predicts(curves):
    """Per checkpoint: corr over seeds of (objective there, last perplexity)."""
    last = np.array([rows[-1][2] for rows in curves])
    out = []
    for i, (sweeps, _, _) in enumerate(curves[0]):
        objective = np.array([rows[i][1] for rows in curves])
        out.append(dict(sweeps=sweeps, corr=float(np.corrcoef(objective, last)[0, 1])))
    return out


def restarts(curves, target, starts=(2, 3, 4)):
    """Restarts chosen by the objective at each checkpoint, simulated on the seeds."""
    last = [rows[-1][2] for rows in curves]
    out = []
    for r in (s for s in starts if s <= len(curves)):
        subsets = list(itertools.combinations(range(len(curves)), r))
        for i, (sweeps, _, _) in enumerate(curves[0]):
            picks = [max(c, key=lambda s, i=i: curves[s][i][1]) for c in subsets]
            row = dict(
                starts=r,
                choice_at=sweeps,
                chosen_last_mean=float(np.mean([last[s] for s in picks])),
            )
            if target is not None:
                hits = [reached(curves[s], target) is not None for s in picks]
                row["chosen_reach_target"] = float(np.mean(hits))
            out.append(row)
    return out


def parse_args(argv):
    ap = script_parser(__doc__)
    ap.add_argument("--corpus", choices=("corel5k", "synthetic"), default="corel5k")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--docs", type=int, default=3000, help="synthetic: documents")
    ap.add_argument("--test-docs", type=int, default=500)
    ap.add_argument("--vocab", type=int, default=2000)
    ap.add_argument("--true-topics", type=int, default=20)
    ap.add_argument("--length", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0, help="corpus and split seed")
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--eta", type=float, default=0.05)
    ap.add_argument("--blocks", type=int, default=128, help="CVB0 image blocks")
    ap.add_argument("--sweeps", type=int, default=300, help="sweeps of each seed")
    ap.add_argument("--step", type=int, default=10, help="sweeps between checkpoints")
    ap.add_argument("--seeds", type=int, default=10, help="fit seeds 0, 1, ...")
    ap.add_argument("--target", type=float, default=None, help="a perplexity to reach")
    ap.add_argument("--json", default=None, help="output JSON (default: print only)")
    args = ap.parse_args(argv)
    for name in ("blocks", "sweeps", "step", "seeds", "topics"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1")
    if args.sweeps % args.step:
        ap.error("--sweeps must be a multiple of --step")
    return args


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    threads = threads_setting("1")  # before the backend starts
    use_device(args.device)
    rng = np.random.default_rng(args.seed)
    train, test = draw_corpus(args, rng)
    obs, held = split_halves(rng, test)

    def evaluate(lam):
        return shared_perplexity(lam, obs, held, jnp.float32(args.alpha))

    curves = []
    for seed in range(args.seeds):
        curves.append(curve(args, seed, train, evaluate))
        print("seed", seed, "last", curves[-1][-1], flush=True)
    record = dict(
        benchmark="cvb0_fixed_points",
        corpus=args.corpus,
        train_docs=int(train.shape[0]),
        topics=args.topics,
        alpha=args.alpha,
        eta=args.eta,
        blocks=args.blocks,
        target=args.target,
        fields=("sweeps", "objective", "perplexity"),
        curves=curves,
        spread=spread(curves, args.target),
        predicts=predicts(curves),
        restarts=restarts(curves, args.target),
        load_average=list(os.getloadavg()),
        threads=threads,
        device=device_record(),
        command="python -m benchmarks.peers.cvb0_fixed_points " + " ".join(argv),
    )
    print("spread", record["spread"])
    print("predicts", [(p["sweeps"], round(p["corr"], 2)) for p in record["predicts"]])
    if args.json:
        write_json(args.json, record)


if __name__ == "__main__":
    main()
