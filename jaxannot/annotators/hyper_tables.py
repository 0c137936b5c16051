"""The hyper-parameter specs of every registered method (data for :mod:`.hyper_spec`).

:data:`SHARED` holds the names that mean the same wherever they appear;
:data:`SPECIFIC` the ``(method, name)`` pairs whose meaning depends on the method.
"""

from __future__ import annotations

import dataclasses

from jaxannot.annotators._hyper_types import (
    HyperSpec,
    _bool,
    _choice,
    _float,
    _int,
    _str,
)

__all__ = ["SHARED", "SPECIFIC"]


# ------------------------------------------------------------------ shared names
#: Names that mean the same in every method that has them (unless :data:`SPECIFIC`
#: overrides them for a method).
SHARED: dict[str, HyperSpec] = {
    "view": _str("feature view to use ('' or 'all': every view side by side)"),
    "views": _str(
        "comma-separated views read as visual words ('' = the count views, or every "
        "view when there is none; real views are quantile-binned)"
    ),
    "bins": _int("quantile bins per dimension of a real-valued view (B)", ge=2),
    "topics": _int("number of topics K", ge=1),
    "loss": _choice(
        "linear SVM loss: squared_hinge (L2-loss, liblinear -s 1) or hinge (L1-loss)",
        "squared_hinge",
        "hinge",
    ),
    "max_epochs": _int("epoch cap of the linear SVM's dual coordinate descent", ge=1),
}


# ------------------------------------------------------------ method-specific names
def _for(methods: tuple[str, ...], table: dict[str, HyperSpec]) -> dict:
    return {(m, name): spec for m in methods for name, spec in table.items()}


_MIXTURES = ("mix-unigram", "lap-mix-unigram")
_ALE = ("ale-sf", "ale-svm", "iale-sf", "iale-svm")
_HARMONIUMS = ("dwh", "dwh-svm", "twh", "mmh", "mmh-regression")
_CD_ONLY = ("dwh", "dwh-svm", "twh")  # trained by CD steps alone (no alternation)
_C1_C2 = ("dwh-svm", "mmh", "mmh-regression", "svm")
_MMH = ("mmh", "mmh-regression")
_SFSLS = ("sfsls", "sfss")

_MIXTURE = {
    "pi_concentration": _float(
        "Dirichlet concentration a of the topic proportions π (MAP needs a >= 1)",
        ge=1.0,
    ),
    "beta_concentration": _float(
        "Dirichlet concentration b of every topic's word distribution β (b > 1 keeps "
        "log β finite)",
        gt=1.0,
    ),
    "text_weight": _float(
        "multiplier of the annotation-word counts against the visual words", gt=0.0
    ),
}

_LAP_MIX_UNIGRAM = {
    "lam": _float(
        "Laplacian penalty weight λ of the graph-regularized E-step (0 = plain VI)",
        ge=0.0,
    ),
    "neighbors": _int("k of the k-NN graph over the images' visual words", ge=1),
    "weight": _choice(
        "edge weights of the k-NN graph: heat kernel, binary or cosine similarity",
        "heat",
        "binary",
        "cosine",
    ),
    "metric": _choice("distance of the k-NN graph search", "euclidean", "cosine"),
    "algorithm": _choice(
        "regularized E-step: lapvar1 (Newton node updates) or lapvar2 (VI + smoothing)",
        "lapvar1",
        "lapvar2",
    ),
    "iterations": _int(
        "EM iterations with the regularized E-step (lapvar2 may stop earlier)", ge=1
    ),
    "warm_start": _int(
        "plain EM iterations run first to initialize the regularized EM (0 = none)",
        ge=0,
    ),
    "sweeps": _int("LapVar1 sweeps over the graph's nodes per E-step", ge=1),
    "newton_steps": _int("LapVar1 Newton steps per node update", ge=1),
    "gamma": _float(
        "LapVar2 smoothing rate γ of φ_i <- (1-γ) φ_i + γ m_i/d_i",
        gt=0.0,
        le=1.0,
    ),
    "smoothing_steps": _int("LapVar2 smoothing steps per E-step", ge=1),
    "schedule": _choice(
        "LapVar1 node order: colour classes of the graph updated together, or one "
        "node at a time",
        "colouring",
        "sequential",
    ),
}

_ALE_TABLE = {
    "eigenvectors": _int(
        "number of approximate eigenfunctions c_D kept (clamped to N (B - 1))", ge=1
    ),
    "bins": _int("histogram bins B per principal component", ge=3),
    "pca": _int(
        "PCA dimensions N the eigenfunctions are computed on (clamped to the "
        "feature dimension)",
        ge=1,
    ),
    "bandwidth": _float(
        "kernel width t of eq. (1), relative to the standard deviation of the first "
        "principal component",
        gt=0.0,
    ),
    "clip": _float(
        "quantile clipped at each end of every component's histogram range",
        ge=0.0,
        lt=0.5,
    ),
    "batch_size": _int(
        "images per batch when projecting onto the eigenfunctions (eq. 8)", ge=1
    ),
}

_LINEAR_SVM_TABLE = {
    "c": _float("C of the one-vs-rest linear SVMs", gt=0.0),
    "tol": _float(
        "stop the SVM when every concept's projected-gradient spread is <= tol", ge=0.0
    ),
}

#: The smooth-function ALE detectors keep the SVM's settings (one ``ALE_HYPER``) but
#: do not use them.
_SF_UNUSED = {
    name: dataclasses.replace(
        spec, help=f"{spec.help} (unused by the smooth-function detector)"
    )
    for name, spec in {
        **_LINEAR_SVM_TABLE,
        "loss": SHARED["loss"],
        "max_epochs": SHARED["max_epochs"],
    }.items()
}

_HARMONIUM_TABLE = {
    "topics": _int("number of hidden units K (the latent subspace's dimension)", ge=1),
    "learning_rate": _float(
        "step size of the optimizer of the CD (and MMH Θ-step) updates", gt=0.0
    ),
    "optimizer": _choice(
        "optax optimizer of the CD (and MMH Θ-step) updates: adam, sgd (momentum "
        "0.9) or lbfgs (fixed step)",
        "adam",
        "sgd",
        "lbfgs",
    ),
    "sweeps": _int(
        "free mean-field sweeps of CD's negative phase (5 in seed 001)", ge=1
    ),
    "batch_size": _int("images per CD minibatch (0 = all images)", ge=0),
    "weight_decay": _float("L2 weight decay on the weights W (0 = none)", ge=0.0),
    "weight_scale": _float("standard deviation of the initial weights W", gt=0.0),
    "learn_variance": _bool(
        "learn the Gaussian wings' variances σ² (else fixed at the data variance)"
    ),
    "bag_model": _choice(
        "bag views as Bernoulli presence or replicated-softmax counts",
        "bernoulli",
        "softmax",
    ),
}


def _sweeps(help: str) -> HyperSpec:
    return _int(help, ge=1)


_ANNOTATE_SWEEPS = {
    ("dwh", "annotate_sweeps"): _sweeps(
        "mean-field sweeps with the words wing free when annotating (§4.4)"
    ),
    ("twh", "annotate_sweeps"): _sweeps(
        "mean-field sweeps with the label wing free when predicting (§4.4)"
    ),
    ("mmh", "annotate_sweeps"): _sweeps(
        "mean-field sweeps with the words wing free when annotating (§4.4; with a "
        "words wing only)"
    ),
    **{
        (m, "annotate_sweeps"): _sweeps(
            "mean-field sweeps of the free wing (unused: prediction is the single "
            "linear pass)"
        )
        for m in ("dwh-svm", "mmh-regression")
    },
}

_C1_C2_TABLE = {
    "c1": _float(
        "C1 of seed 001's P1/P2, the weight of ½‖V‖² (the SVM's C is C2/C1)", gt=0.0
    ),
    "c2": _float(
        "C2 of seed 001's P1/P2, the weight of the summed hinge (ε-insensitive for "
        "regression) loss",
        gt=0.0,
    ),
}

_MMH_TABLE = {
    "svm_epochs": _int("epoch budget of each V-step inside the alternation", ge=1),
    "final_svm_epochs": _int(
        "epoch budget of the last V-step, on the final features", ge=1
    ),
    "iterations": _int(
        "(V-step, Θ-step) alternations (0 = pretraining, then one V-step)", ge=0
    ),
    "inner_steps": _int("optimizer steps per Θ-step", ge=1),
    "pretrain_steps": _int(
        "plain CD steps (likelihood alone) before the first V-step", ge=0
    ),
    "svm_step": _choice(
        "V-step: p1 (P1's SVM on the raw [E[h], 1]) or standardized (SVM on "
        "standardized E[h], folded back)",
        "p1",
        "standardized",
    ),
}

_SFSLS_TABLE = {
    "alpha": _float(
        "α of eq. (8): weight of the regression, sparsity and subspace block", gt=0.0
    ),
    "lam": _float("λ of eq. (8): weight of the row-sparsity term Σ_i ‖g^i‖^p", gt=0.0),
    "mu": _float("μ of eq. (8): weight of the shared-subspace term ‖G - UP‖²", gt=0.0),
    "subspace": _int(
        "shared-subspace dimension r, at most min(features, concepts) (0 = "
        "min(concepts - 1, features), at least 1)",
        ge=0,
    ),
    "neighbors": _int("k of the heat-kernel k-NN graph over the images", ge=1),
    "iterations": _int("iteration cap of Algorithm 1", ge=1),
    "tol": _float(
        "stop Algorithm 1 at a relative change ‖G_t - G_t-1‖ / ‖G_t‖ <= tol", ge=0.0
    ),
    "eps": _float(
        "ε added to each squared row norm ‖g^i‖² (smooths the l2,p norm at 0)", gt=0.0
    ),
    "use_unlabelled": _bool(
        "keep the images without observed words in the graph (semi-supervised)"
    ),
}


def _merge(*parts: dict) -> dict[tuple[str, str], HyperSpec]:
    """One table from several; a ``(method, name)`` given twice is an error."""
    out: dict[tuple[str, str], HyperSpec] = {}
    for part in parts:
        for key, spec in part.items():
            if key in out:
                raise ValueError(f"hyper-parameter {key} is described twice")
            out[key] = spec
    return out


_SINGLE: dict[tuple[str, str], HyperSpec] = {
    # ----------------------------------------------------------------- baselines
    ("knn", "k"): _int("number k of nearest training images that vote", ge=1),
    ("knn", "metric"): _choice(
        "distance of the nearest-neighbour search", "cosine", "euclidean"
    ),
    ("knn", "weight"): _choice(
        "votes weighted by the heat kernel exp(-δ²/2t²) or uniform",
        "heat",
        "uniform",
    ),
    # -------------------------------------------------------------- topic models
    ("mix-unigram", "iterations"): _int("MAP-EM iterations", ge=1),
    ("link-lda", "iterations"): _int("batch variational Bayes passes", ge=1),
    ("link-lda", "inner"): _int("per-image γ updates per pass", ge=1),
    ("link-lda", "fold_in_inner"): _int(
        "γ updates when an image is folded in from its visual words", ge=1
    ),
    ("link-lda", "alpha"): _float(
        "symmetric Dirichlet prior α on the topic proportions θ", gt=0.0
    ),
    ("link-lda", "eta"): _float(
        "symmetric Dirichlet prior η on every topic's word distribution β^v_k", gt=0.0
    ),
    ("plsa-words", "iterations"): _int(
        "EM iterations of each of the two stages (text topics, then visual)", ge=1
    ),
    ("plsa-words", "fold_in_iterations"): _int(
        "EM iterations when an image is folded in from its visual words", ge=1
    ),
    ("plsa-words", "smoothing"): _float(
        "additive smoothing s of the topic-word distributions", ge=0.0
    ),
    # ------------------------------------------------------------------- tagprop
    ("tagprop", "neighbors"): _int("number K of nearest training images", ge=1),
    ("tagprop", "variant"): _choice(
        "neighbour weights π_ij: from the base distances or by rank",
        "distance",
        "rank",
    ),
    ("tagprop", "distances"): HyperSpec(
        "base distances d_ij weighted by θ (the distance variant)",
        str,
        choices=("cosine", "sqeuclidean", "jaccard", "idf"),
        comma_list=True,
    ),
    ("tagprop", "boosting"): _bool(
        "word-specific logistic σ(α_w x_iw + β_w) on the neighbour vote"
    ),
    ("tagprop", "balance"): _choice(
        "weights c_iw of positive / negative labels: none, global counts (the "
        "paper) or per word",
        "none",
        "global",
        "word",
    ),
    ("tagprop", "metric"): _choice(
        "distance of the nearest-neighbour search", "cosine", "euclidean"
    ),
    ("tagprop", "steps"): _int("Adam steps of the MAP fit (0 = the start)", ge=0),
    ("tagprop", "learning_rate"): _float("Adam step size of the MAP fit", gt=0.0),
    # ------------------------------------------------------------ ALE, bsvm, gsf
    ("gsf", "eigenvectors"): _int(
        "exact Laplacian eigenvectors kept (after the trivial one)", ge=1
    ),
    ("gsf", "k"): _int("k of the symmetric heat-kernel k-NN graph", ge=1),
    ("gsf", "max_images"): _int(
        "most fit + scored images allowed (dense O(n³) eigenproblem)", ge=1
    ),
    # --------------------------------------------------------------- emml, mbrm
    ("emml", "vreps"): _int("number of visual representatives (VReps)", ge=1),
    ("emml", "vrep_method"): _choice(
        "VReps: k-means centroids or random annotated images", "kmeans", "random"
    ),
    ("emml", "word_rule"): _choice(
        "words of a k-means VRep: its members' majority or union",
        "majority",
        "union",
    ),
    ("emml", "kernel"): _choice("input kernel k(x, x_v)", "rbf", "linear"),
    ("emml", "gamma"): _float(
        "RBF width γ (0 = gamma_scale / median squared distance)", ge=0.0
    ),
    ("emml", "gamma_scale"): _float(
        "multiplier of the median heuristic when gamma = 0", gt=0.0
    ),
    ("emml", "c"): _float("C of the structured max-margin dual", gt=0.0),
    ("emml", "tolerance"): _float(
        "KKT tolerance of the dual solver (loss units)", gt=0.0
    ),
    ("emml", "capacity"): _int("working-set slots per VRep (working_set solver)", ge=1),
    ("emml", "violators_per_vrep"): _int(
        "violator candidates per VRep and iteration (working_set solver)", ge=1
    ),
    ("emml", "max_iterations"): _int(
        "outer iteration cap of Algorithm 1 (working_set solver)", ge=1
    ),
    ("emml", "max_sweeps"): _int(
        "sweeps per subproblem of Algorithm 1 (working_set solver)", ge=1
    ),
    ("emml", "top_vreps"): _int(
        "0: eq. (1) scores; > 0: §4.1 merge of this many nearest VReps", ge=0
    ),
    ("emml", "view"): _str("feature view to use ('' = the corpus's primary view)"),
    ("emml", "solver"): _choice(
        "dual solver: exact (per-VRep mixtures) or working_set (Algorithm 1)",
        "exact",
        "working_set",
    ),
    ("emml", "exact_sweeps"): _int("block-sweep cap of the exact solver", ge=1),
    ("mbrm", "bandwidth"): _float(
        "kernel bandwidth (variance) β (0 = chosen by cross-validation)", ge=0.0
    ),
    ("mbrm", "smoothing"): _float(
        "word-model smoothing μ of P_V(w|J) (0 = 9 N, N the training images)", ge=0.0
    ),
    ("mbrm", "view"): _str("feature view to use ('' = the corpus's primary view)"),
    ("mbrm", "kernel"): _choice(
        "region kernel: gaussian (global vector), regions (bag of blobs) or auto "
        "(by the view's kind)",
        "auto",
        "gaussian",
        "regions",
    ),
    ("mbrm", "folds"): _int(
        "cross-validation folds choosing β when bandwidth = 0", ge=2
    ),
    ("mbrm", "select_metric"): _choice(
        "metric the bandwidth cross-validation maximizes", "word_f1@5", "map"
    ),
    # ----------------------------------------------------------- feature selection
    ("sfsls", "p"): _float("p of the l2,p row-sparsity norm", gt=0.0, le=1.0),
    ("fsnm", "gamma"): _float(
        "γ, the weight of ‖W‖_2,1 in ‖xW - Y‖_2,1 + γ‖W‖_2,1", gt=0.0
    ),
    ("fsnm", "selected"): _float(
        "fraction of the features kept for the least-squares regression",
        gt=0.0,
        le=1.0,
    ),
    ("fsnm", "ridge"): _float(
        "ridge of the least-squares regression, times the number of images", ge=0.0
    ),
    ("fsnm", "iterations"): _int("iteration cap of the reweighting", ge=1),
    ("fsnm", "tol"): _float(
        "stop the reweighting at a relative objective change <= tol", ge=0.0
    ),
    # ---------------------------------------------------------------- harmoniums
    ("dwh-svm", "svm_epochs"): _int(
        "epoch budget of the Crammer-Singer SVM on E[h]", ge=1
    ),
    ("svm", "svm_epochs"): _int("epoch budget of the Crammer-Singer SVM", ge=1),
    ("mmh", "words_wing"): _choice(
        "annotation words as an extra Bernoulli wing: auto (when they are not the "
        "one-hot classes), yes or no",
        "auto",
        "yes",
        "no",
    ),
    ("mmh-regression", "epsilon"): _float(
        "ε of the ε-insensitive loss, in standard deviations of the response", ge=0.0
    ),
    ("mmh-regression", "target_view"): _str(
        "real view holding the response ('' = the class label read as a number)"
    ),
    ("mmh-regression", "target_column"): _int(
        "column of target_view that is the response", ge=0
    ),
}

#: Specs of ``(method, name)`` pairs; they override :data:`SHARED`.
SPECIFIC: dict[tuple[str, str], HyperSpec] = _merge(
    _SINGLE,
    _for(_MIXTURES, _MIXTURE),
    _for(("lap-mix-unigram",), _LAP_MIX_UNIGRAM),
    _for(_ALE, _ALE_TABLE),
    _for(
        ("ale-sf", "iale-sf"),
        {
            "lam": _float(
                "λ of eq. (7): weight of the labelled images' fit in the smooth "
                "function",
                gt=0.0,
            )
        },
    ),
    _for(
        ("ale-svm", "iale-svm"),
        {
            "lam": _float(
                "λ of eq. (7), used by the -sf detectors only (unused by the SVM)",
                gt=0.0,
            )
        },
    ),
    _for(("ale-svm", "iale-svm", "bsvm", "gsf"), _LINEAR_SVM_TABLE),
    _for(("ale-sf", "iale-sf"), _SF_UNUSED),
    _for(_SFSLS, _SFSLS_TABLE),
    _for(_HARMONIUMS, _HARMONIUM_TABLE),
    _ANNOTATE_SWEEPS,
    _for(_CD_ONLY, {"steps": _int("CD training steps of the harmonium", ge=0)}),
    _for(_C1_C2, _C1_C2_TABLE),
    _for(_MMH, _MMH_TABLE),
)
