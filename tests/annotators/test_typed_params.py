"""The parameters' specs derived from their jaxtyping annotations
(:func:`jaxannot.annotators.typed_params.spec_of`) equal the declarations each
params NamedTuple spelled out by hand before."""

import pytest

from jaxannot.annotators import available_methods
from jaxannot.annotators.typed_params import DictOf, MethodParams, TupleOf, spec_of

#: The hand-written ``spec`` of some params types before it was derived from their
#: annotations (nested NamedTuple types by name), one of each kind of field. The
#: derived specs of all 30 types equalled the old literals when the annotations
#: replaced them.
SPECS = {
    "ale.eigenfunctions.PCAModel": {
        "mean": "f[d]",
        "components": "f[d,p]",
        "variances": "f[p]",
        "count": "iu[]",
    },
    "ale.params.AleTrain": {
        "coords": "f[n,p]",
        "targets": "f[n,w]",
        "labelled": "b[n]",
        "rng_key": "u[_]",
    },
    "baselines.params.KnnParams": {
        "features": "f[n,d]",
        "words": "fb[n,w]",
        "frequency": "f[w]",
        "width": "f[]",
    },
    "baselines.params.TagPropParams": {
        "features": "f[n,d]",
        "word_ids": "iu[n,m]",
        "word_mask": "fb[n,m]",
        "idf": "f[d]",
        "distance_scale": "f[s]",
        "latent": "TagPropLatent",
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
    "harmoniums.params.DwhParams": {
        "harmonium": "HarmoniumParams",
        "scaling": DictOf("ViewScaling"),
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


def test_every_params_type_declares_its_fields(params_types):
    # spec_of raises a TypeError naming a field its annotation does not declare
    assert len(params_types) == 30 and set(SPECS) <= set(params_types)
    for name, params_type in params_types.items():
        assert list(spec_of(params_type)) == list(params_type._fields), name


def test_derived_specs_equal_the_hand_written_ones(params_types):
    for name in SPECS:
        params_type = params_types[name]
        derived = {f: _named(s) for f, s in spec_of(params_type).items()}
        assert derived == SPECS[name], name
        # a load checks the arrays first, each in the same order as before
        arrays = [f for f, s in derived.items() if isinstance(s, str)]
        assert arrays == [f for f, s in SPECS[name].items() if isinstance(s, str)]
