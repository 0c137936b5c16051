"""The parameters' specs derived from their jaxtyping annotations
(:func:`jaxannot.annotators.persistence.spec_of`) equal the declarations each
params NamedTuple spelled out by hand before."""

import pytest

from jaxannot.annotators import available_methods
from jaxannot.annotators.typed_params import DictOf, MethodParams, TupleOf, spec_of

#: The hand-written ``spec`` of every params type before they were derived (nested
#: NamedTuple types by name).
SPECS = {
    "ale.eigenfunctions.ALEModel": {
        "pca": "PCAModel",
        "eigenfunctions": "Eigenfunctions",
        "kernel_width": "f[]",
    },
    "ale.eigenfunctions.PCAModel": {
        "mean": "f[d]",
        "components": "f[d,p]",
        "variances": "f[p]",
        "count": "iu[]",
    },
    "ale.eigenproblem.Eigenfunctions": {
        "dims": "iu[c]",
        "table": "f[c,b]",
        "eigenvalues": "f[c]",
        "lo": "f[c]",
        "width": "f[c]",
    },
    "ale.params.AleParams": {
        "ale": "ALEModel",
        "detector": "Detector",
        "fit_scores": "f[n,w]",
        "train": "AleTrain",
    },
    "ale.params.AleTrain": {
        "coords": "f[n,p]",
        "targets": "f[n,w]",
        "labelled": "b[n]",
        "rng_key": "u[_]",
    },
    "ale.params.BsvmParams": {
        "mean": "f[d]",
        "scale": "f[d]",
        "detector": "Detector",
        "fit_scores": "f[n,w]",
    },
    "ale.params.Detector": {"alpha": "f[e,w]", "coef": "f[w,e]", "intercept": "f[w]"},
    "ale.params.GsfParams": {"mean": "f[d]", "scale": "f[d]", "train": "GsfTrain"},
    "ale.params.GsfTrain": {
        "z": "f[n,d]",
        "targets": "f[n,w]",
        "labelled": "b[n]",
        "rng_key": "u[_]",
    },
    "ale.params.IaleParams": {
        "ale": "ALEModel",
        "detector": "Detector",
        "fit_scores": "f[n,w]",
    },
    "baselines.params.EmpiricalParams": {"frequency": "f[w]"},
    "baselines.params.KnnParams": {
        "features": "f[n,d]",
        "words": "fb[n,w]",
        "frequency": "f[w]",
        "width": "f[]",
    },
    "baselines.params.TagPropLatent": {
        "alpha": "f[w]",
        "beta": "f[w]",
        "gamma": "f[k]",
        "theta": "f[s]",
    },
    "baselines.params.TagPropParams": {
        "features": "f[n,d]",
        "word_ids": "iu[n,m]",
        "word_mask": "fb[n,m]",
        "idf": "f[d]",
        "distance_scale": "f[s]",
        "latent": "TagPropLatent",
    },
    "emml.mbrm.MBRMParams": {
        "features": "f[n,d]",
        "word_probabilities": "f[n,w]",
        "bandwidth": "f[]",
        "log_region_kernel": "f[n,d]",
    },
    "emml.params.EmmlParams": {
        "vrep_features": "f[v,d]",
        "vrep_words": "fb[v,w]",
        "coefficients": "f[v,w]",
        "vrep_word_scores": "f[v,w]",
        "gamma": "f[]",
    },
    "ensemble.params.EnsembleParams": {
        "weights": "f[b]",
        "prior": "f[w]",
        "thresholds": "f[w]",
        "bases": MethodParams(),
    },
    "harmoniums.harmonium.HarmoniumParams": {
        "visible_bias": TupleOf("f[_]"),
        "weights": TupleOf("f[_,k]"),
        "log_variance": TupleOf("f[_]"),
        "hidden_bias": "f[k]",
    },
    "harmoniums.params.ClassifierParams": {
        "harmonium": "HarmoniumParams",
        "predictor": "f[_,_]",
        "scaling": DictOf("ViewScaling"),
    },
    "harmoniums.params.DwhParams": {
        "harmonium": "HarmoniumParams",
        "scaling": DictOf("ViewScaling"),
    },
    "harmoniums.params.RegressorParams": {
        "harmonium": "HarmoniumParams",
        "predictor": "f[_]",
        "scaling": DictOf("ViewScaling"),
    },
    "harmoniums.params.SvmParams": {
        "predictor": "f[c,_]",
        "scaling": DictOf("ViewScaling"),
    },
    "harmoniums.params.ViewScaling": {"mean": "f[d]", "std": "f[d]"},
    "sfsls.params.FsnmParams": {
        "w": "f[d,w]",
        "g": "f[s,w]",
        "selected": "iu[s]",
        "offset": "f[w]",
        "mean": "f[d]",
        "std": "f[d]",
        "ranking": "iu[d]",
    },
    "sfsls.params.SfslsParams": {
        "g": "f[d,w]",
        "u": "f[d,r]",
        "offset": "f[w]",
        "mean": "f[d]",
        "std": "f[d]",
        "ranking": "iu[d]",
    },
    "topic_models.params.LapLinkLdaParams": {
        "beta_text": "f[k,w]",
        "beta_visual": TupleOf("f[k,_]"),
        "theta": "f[n,k]",
        "bin_edges": DictOf("f[_,_]"),
    },
    "topic_models.params.LapMixUnigramParams": {
        "log_pi": "f[k]",
        "log_beta_text": "f[k,w]",
        "log_beta_visual": TupleOf("f[k,_]"),
        "phi": "f[n,k]",
        "bin_edges": DictOf("f[_,_]"),
        "graph_features": "f[n,g]",
        "heat_width": "f[]",
        "graph_mean_degree": "f[]",
    },
    "topic_models.params.LinkLdaParams": {
        "lambda_text": "f[k,w]",
        "lambda_visual": TupleOf("f[k,_]"),
        "gamma": "f[n,k]",
        "bin_edges": DictOf("f[_,_]"),
    },
    "topic_models.params.MixUnigramParams": {
        "log_pi": "f[k]",
        "log_beta_text": "f[k,w]",
        "log_beta_visual": TupleOf("f[k,_]"),
        "phi": "f[n,k]",
        "bin_edges": DictOf("f[_,_]"),
    },
    "topic_models.params.PlsaWordsParams": {
        "beta_text": "f[k,w]",
        "beta_visual": "f[k,v]",
        "theta": "f[n,k]",
        "bin_edges": DictOf("f[_,_]"),
    },
}


def _named(spec):
    """``spec`` with its NamedTuple types replaced by their names."""
    if isinstance(spec, TupleOf | DictOf):
        return type(spec)(_named(spec.entry))
    return spec.__name__ if isinstance(spec, type) else spec


def _reachable(params_type, out):
    """``out`` with ``params_type`` and every NamedTuple type nested in it, by
    ``family.module.Name``."""
    module = params_type.__module__.removeprefix("jaxannot.methods.")
    out[f"{module}.{params_type.__name__}"] = params_type
    for spec in spec_of(params_type).values():
        while isinstance(spec, TupleOf | DictOf):
            spec = spec.entry
        if isinstance(spec, type):
            _reachable(spec, out)
    return out


@pytest.fixture(scope="module")
def params_types():
    out = {}
    for method in available_methods().values():
        if method.params is not None:
            _reachable(method.params, out)
    return out


def test_every_params_type_is_in_the_table(params_types):
    assert sorted(params_types) == sorted(SPECS)


def test_derived_specs_equal_the_hand_written_ones(params_types):
    for name, params_type in params_types.items():
        derived = {f: _named(s) for f, s in spec_of(params_type).items()}
        assert derived == SPECS[name], name
        # a load checks the arrays first, each in the same order as before
        arrays = [f for f, s in derived.items() if isinstance(s, str)]
        assert arrays == [f for f, s in SPECS[name].items() if isinstance(s, str)]
