"""Training and test time per image: MMH vs TWH vs scikit-learn's BernoulliRBM.

All three see the same single binary view (blob presence of a synthetic corpus sampled
from the package's multimodal mixture, with class labels), the same number of hidden
units and the same number of passes over the data. Test time is what each needs to map
a new image to its prediction / representation:

- MMH: :math:`\\arg\\max_y V_y^\\top [\\lambda + x^\\top W, 1]` — one linear pass
  (seed 001 §4.4);
- TWH: mean field with the label wing free (``annotate_sweeps`` sweeps, each a pass
  through W and through the label weights);
- BernoulliRBM: ``transform`` = :math:`\\sigma(x^\\top W + c)`, also one pass (it has no
  classifier: we time its representation only).

Writes ``benchmarks/results/harmonium_speed.json`` with seconds per image and peak RSS.

Example:
``python -m benchmarks.peers.harmonium_speed --images 2000 --dims 500 --topics 30``
"""

from __future__ import annotations

import platform
import resource
import time

import numpy as np
from sklearn.neural_network import BernoulliRBM

import jax

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import write_json
from jaxannot.annotators import get_method
from jaxannot.data import Corpus
from jaxannot.data.synthetic import make_synthetic


def _timed(fn, repeat=3):
    fn()  # compile / warm up
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        jax.block_until_ready(out)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None):
    parser = script_parser(__doc__)
    parser.add_argument("--images", type=int, default=2000, help="training images")
    parser.add_argument("--test-images", type=int, default=20000)
    parser.add_argument("--dims", type=int, default=500)
    parser.add_argument("--topics", type=int, default=30)
    parser.add_argument("--classes", type=int, default=5)
    parser.add_argument(
        "--passes", type=int, default=100, help="CD steps (full batch) = RBM epochs"
    )
    parser.add_argument(
        "--sweeps", type=int, default=10, help="TWH test-time mean-field sweeps"
    )
    parser.add_argument("--out", default="benchmarks/results/harmonium_speed.json")
    args = parser.parse_args(argv)
    use_device(args.device)

    synth = make_synthetic(
        seed=0,
        num_images=args.images + args.test_images,
        blob_vocab=args.dims,
        num_topics=args.classes,
        num_classes=args.classes,
        tokens_per_image=40,
    )
    x = (np.asarray(synth.views["blobs"]) > 0).astype(np.float32)
    corpus = Corpus.from_arrays(
        {"blobs": x}, view_kinds={"blobs": "binary"}, labels=synth.labels
    )
    n_train = args.images
    train, test = (
        corpus.subset(np.arange(n_train)),
        corpus.subset(np.arange(n_train, n_train + args.test_images)),
    )
    results = {
        "config": vars(args),
        "machine": platform.platform(),
        "jax_backend": jax.default_backend(),
        "device": device_record(),
    }

    rows = {}
    common = {"topics": args.topics, "annotate_sweeps": args.sweeps}
    # MMH: 10 alternations × passes/10 Θ-steps, so it makes the same number of passes
    settings = {
        "mmh": {
            **common,
            "iterations": 10,
            "inner_steps": args.passes // 10,
            "pretrain_steps": 0,
            "svm_epochs": 50,
        },
        "twh": {**common, "steps": args.passes},
    }
    for name, hyper in settings.items():
        m = get_method(name)
        h = {**m.hyper, **hyper}
        m.fit(train, rng_key=jax.random.key(0), **h)  # compile
        t0 = time.perf_counter()
        fitted = m.fit(train, rng_key=jax.random.key(1), **h)
        jax.block_until_ready(fitted.params)
        train_s = time.perf_counter() - t0
        test_s = _timed(lambda m=m, fitted=fitted: m.predict_labels(fitted, test))
        acc = float(np.mean(np.asarray(m.predict_labels(fitted, test)) == test.labels))
        rows[name] = {
            "train_s_per_image": train_s / n_train,
            "test_s_per_image": test_s / test.num_images,
            "test_accuracy": acc,
        }

    rbm = BernoulliRBM(
        n_components=args.topics,
        n_iter=args.passes,
        batch_size=n_train,
        learning_rate=0.05,
        random_state=0,
    )
    t0 = time.perf_counter()
    rbm.fit(np.asarray(train.views["blobs"]))
    train_s = time.perf_counter() - t0
    x_test = np.asarray(test.views["blobs"])
    test_s = _timed(lambda: rbm.transform(x_test))
    rows["sklearn-BernoulliRBM"] = {
        "train_s_per_image": train_s / n_train,
        "test_s_per_image": test_s / test.num_images,
        "test_accuracy": None,
    }
    results["rows"] = rows
    results["mmh_test_is_one_linear_pass"] = (
        "MMH predict = argmax(V @ [lambda + x W, 1]): one [n,D]x[D,K] product and one "
        "[n,K+1]x[K+1,T] product, no iteration"
    )
    results["twh_over_mmh_test_time"] = (
        rows["twh"]["test_s_per_image"] / rows["mmh"]["test_s_per_image"]
    )
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print("| method | train s/image | test s/image | test accuracy |")
    print("|---|---|---|---|")
    for k, v in rows.items():
        acc = "—" if v["test_accuracy"] is None else f"{v['test_accuracy']:.3f}"
        print(
            f"| {k} | {v['train_s_per_image']:.2e} | {v['test_s_per_image']:.2e} "
            f"| {acc} |"
        )
    print(
        f"TWH / MMH test time: {results['twh_over_mmh_test_time']:.1f}x; "
        f"peak RSS {results['peak_rss_mb']:.0f} MB"
    )
    write_json(args.out, results)


if __name__ == "__main__":
    main()
