"""Declared parameters: NamedTuples rebuilt from a saved model and checked field by
field (:mod:`jaxannot.annotators.persistence`)."""

import re
from typing import Annotated, Any, NamedTuple

import numpy as np
import pytest
from jaxtyping import Array, Bool, Float, Int, Integer, Shaped

from jaxannot.annotators import Fitted, load, save
from jaxannot.annotators.typed_params import (
    DictOf,
    MethodParams,
    TupleOf,
    flatten_params,
    params_from_arrays,
    spec_of,
)
from jaxannot.data.errors import DataFormatError
from jaxannot.methods.baselines.params import KnnParams


class Inner(NamedTuple):
    scale: Float[Array, " k"]


class Toy(NamedTuple):
    weights: Float[Array, "k d"]
    per_view: tuple[Float[Array, "k v"], ...]
    by_name: dict[str, Integer[Array, " _"]]
    inner: Inner
    width: Float[Array, ""] | None = None


def test_the_spec_is_derived_from_the_annotations():
    assert spec_of(Toy) == {
        "weights": "f[k,d]",
        "per_view": TupleOf("f[k,v]"),
        "by_name": DictOf("iu[_]"),
        "inner": Inner,
        "width": "f[]",
    }
    assert list(spec_of(Toy)) == list(Toy._fields)
    assert spec_of(Composite) == {"weights": "f[b]", "bases": MethodParams()}

    class Kinds(NamedTuple):
        mask: Float[Array, "n w"] | Bool[Array, "n w"]
        ids: Int[Array, " n"] | None = None

    assert spec_of(Kinds) == {"mask": "fb[n,w]", "ids": "i[n]"}


def _toy():
    return Toy(
        weights=np.zeros((2, 3), np.float32),
        per_view=(np.ones((2, 4), np.float32), np.ones((2, 5), np.float32)),
        by_name={"a": np.arange(3), "b": np.arange(1, dtype=np.int32)},
        inner=Inner(np.ones(2, np.float32)),
    )


def test_flatten_uses_field_paths_and_rebuilds_the_same_tuple():
    flat = flatten_params(_toy())
    assert sorted(flat) == [
        "by_name/a",
        "by_name/b",
        "inner/scale",
        "per_view/0",
        "per_view/1",
        "weights",
    ]  # width, None, is left out
    back = params_from_arrays(Toy, flat)
    assert type(back) is Toy and type(back.inner) is Inner and back.width is None
    assert len(back.per_view) == 2 and back.per_view[1].shape == (2, 5)
    assert sorted(back.by_name) == ["a", "b"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"weights": None}, "no parameter 'weights'"),
        ({"extra": np.zeros(1)}, "unexpected parameter 'extra'"),
        ({"inner/other": np.zeros(1)}, "unexpected parameter 'inner/other'"),
        ({"weights": np.zeros((2, 3), np.int32)}, "'weights' holds int32 values"),
        ({"width": np.zeros(2, np.float32)}, "'width' has shape (2,), not []"),
        ({"inner/scale": np.ones(3, np.float32)}, "its k is 3, 'weights' gives 2"),
        ({"per_view/1": np.ones((3, 5), np.float32)}, "'per_view/1' has shape (3, 5)"),
        ({"per_view/1": None, "per_view/2": np.ones((2, 1), np.float32)}, "0 to 1"),
        ({"by_name/a": np.ones(3, np.float32)}, "'by_name/a' holds float32"),
        ({"weights/x": np.ones(3, np.float32)}, "'weights' should be one array"),
        ({"inner//scale": np.ones(2, np.float32)}, "'inner//scale' has an empty part"),
    ],
)
def test_a_field_that_does_not_fit_is_named(change, expected):
    flat = flatten_params(_toy())
    for key, value in change.items():
        if value is None:
            del flat[key]
        else:
            flat[key] = value
    with pytest.raises(ValueError, match=re.escape(expected)):
        params_from_arrays(Toy, flat)


def test_an_empty_tuple_or_dict_comes_back_empty():
    flat = flatten_params(_toy()._replace(per_view=(), by_name={}))
    back = params_from_arrays(Toy, flat)
    assert back.per_view == () and back.by_name == {}


def test_each_tuple_entry_has_its_own_dimensions():
    # per_view entries of 4 and 5 columns: v is bound per entry, k across the model
    params_from_arrays(Toy, flatten_params(_toy()))


@pytest.mark.parametrize(
    "annotation",
    [
        object,  # no array, tuple, dict or NamedTuple
        Shaped[Array, " n"],  # any dtype: no kinds
        Float[Array, "n ..."],  # not plain dimension names
        Float[Array, " n"] | Bool[Array, " m"],  # members with other dimensions
        tuple[Float[Array, " n"], Float[Array, " n"]],  # not tuple[ENTRY, ...]
    ],
)
def test_an_undeclared_field_is_a_type_error_naming_it(annotation):
    class Partial(NamedTuple):
        a: Float[Array, ""]
        b: annotation

    with pytest.raises(TypeError, match=re.escape("Partial.b declares no parameter")):
        params_from_arrays(Partial, {"a": np.zeros(())})
    with pytest.raises(TypeError, match="must be a NamedTuple"):
        spec_of(dict)


def test_a_model_saved_with_dict_parameters_loads_as_its_named_tuple(tmp_path):
    # the paths of today's NamedTuples are those of the dicts saved before them
    rng = np.random.default_rng(0)
    old = {
        "features": rng.normal(size=(4, 3)).astype(np.float32),
        "words": np.ones((4, 2), np.float32),
        "frequency": np.full(2, 0.5, np.float32),
    }
    hyper = {"k": 2, "view": "features", "metric": "cosine", "weight": "heat"}
    save(tmp_path / "old.npz", Fitted("knn", old, hyper))
    back = load(tmp_path / "old.npz")
    assert type(back.params) is KnnParams and back.params.width is None
    np.testing.assert_array_equal(back.params.features, old["features"])


def test_a_misfit_saved_model_names_the_file_and_the_field(tmp_path):
    bad = {"features": np.zeros((4, 3), np.float32), "words": np.ones((5, 2), bool)}
    bad["frequency"] = np.ones(2, np.float32)
    save(tmp_path / "bad.npz", Fitted("knn", bad, {}))
    with pytest.raises(DataFormatError, match=r"bad\.npz.*method 'knn'.*'words'"):
        load(tmp_path / "bad.npz")


class Composite(NamedTuple):
    weights: Float[Array, " b"]
    bases: Annotated[dict[str, Any], MethodParams()]


def test_method_params_are_each_checked_by_their_own_method():
    knn = {"features": np.ones((3, 2), np.float32), "words": np.eye(3, 4, dtype=bool),
           "frequency": np.full(4, 0.25, np.float32)}  # fmt: skip
    flat = {"weights": np.ones(2, np.float32)}
    for base in ("knn:k=3", "knn"):
        flat.update({f"bases/{base}/{k}": v for k, v in knn.items()})
    built = params_from_arrays(Composite, flat)
    assert sorted(built.bases) == ["knn", "knn:k=3"]
    assert type(built.bases["knn:k=3"]) is KnnParams
    np.testing.assert_array_equal(built.bases["knn"].features, knn["features"])
    # a base's own dimensions: another base may have other sizes
    other = {**flat, "bases/knn/features": np.ones((3, 5), np.float32)}
    assert params_from_arrays(Composite, other).bases["knn"].features.shape == (3, 5)
    bad = {**flat, "bases/knn:k=3/frequency": np.ones(4, np.int32)}
    with pytest.raises(ValueError, match=re.escape("'bases/knn:k=3/frequency'")):
        params_from_arrays(Composite, bad)
    unknown = {**flat, "bases/no-such/x": np.ones(1, np.float32)}
    with pytest.raises(ValueError, match=re.escape("'bases/no-such'")):
        params_from_arrays(Composite, unknown)
    assert params_from_arrays(Composite, {"weights": flat["weights"]}).bases == {}
