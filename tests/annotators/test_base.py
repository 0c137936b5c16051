import ast
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from jaxannot.annotators import Fitted, Method, get_method, load, parse_hyper, save
from jaxannot.annotators.discovery import method_modules, registered_names, scan_methods


def _fitted():
    return Fitted(
        "toy",
        {"beta": np.arange(6.0).reshape(2, 3), "view": {"w": np.ones(2, np.int32)}},
        hyper={"topics": 2, "lam": 0.5},
        info={"objective": [1.0, 2.0]},
    )


def test_save_load_round_trip(tmp_path):
    path = tmp_path / "model.npz"
    save(path, _fitted())
    back = load(path)
    assert back.method == "toy" and back.hyper == {"topics": 2, "lam": 0.5}
    assert back.info == {"objective": [1.0, 2.0]}
    np.testing.assert_array_equal(back.params["beta"], np.arange(6.0).reshape(2, 3))
    assert back.params["view"]["w"].dtype == np.int32
    assert [p.name for p in tmp_path.iterdir()] == ["model.npz"]  # no temp file left


def test_load_rejects_foreign_and_pickled_files(tmp_path):
    plain = tmp_path / "plain.npz"
    np.savez(plain, a=np.ones(2))
    with pytest.raises(ValueError, match="not a jaxannot model"):
        load(plain)
    pickled = tmp_path / "obj.npz"
    np.savez(pickled, __meta__=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="holds object values, not numbers"):
        load(pickled)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="garbage.npz"):
        load(garbage)


def test_save_syncs_before_the_rename(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append("fsync") or real_fsync(fd))
    monkeypatch.setattr(
        os, "replace", lambda a, b: calls.append("replace") or real_replace(a, b)
    )
    save(tmp_path / "m.npz", _fitted())
    assert calls == ["fsync", "replace"]


def test_load_refuses_another_format_version(tmp_path):
    path = tmp_path / "model.npz"
    save(path, _fitted())
    with np.load(path) as archive:
        flat = {k: archive[k] for k in archive.files}
    meta = json.loads(flat["__meta__"].tobytes().decode())
    for version in (99, 0, "1"):
        meta["version"] = version
        flat["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        np.savez(path, **flat)
        with pytest.raises(ValueError, match="format version .* reads versions 1 to 1"):
            load(path)


def test_save_failure_leaves_nothing(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez_compressed", boom)
    with pytest.raises(OSError):
        save(tmp_path / "m.npz", _fitted())
    assert os.listdir(tmp_path) == []


def test_parse_hyper_types_and_errors():
    m = Method(
        "m",
        fit=lambda c, **k: None,
        hyper={"k": 10, "lam": 1.0, "algo": "a", "on": False},
    )
    assert parse_hyper(m, ["k=3", "lam=0.5", "algo=b", "on=true"]) == {
        "k": 3,
        "lam": 0.5,
        "algo": "b",
        "on": True,
    }
    with pytest.raises(KeyError, match="valid: k, lam, algo, on"):
        parse_hyper(m, ["topics=3"])
    with pytest.raises(ValueError, match="expects int"):
        parse_hyper(m, ["k=many"])
    with pytest.raises(ValueError, match="key=value"):
        parse_hyper(m, ["k"])
    json.dumps(parse_hyper(m, {}))


_TABLE_CHECK = """
import importlib, json, pkgutil
import jaxannot.methods as pkg
from jaxannot.annotators import base, discovery
modules = list(dict.fromkeys(discovery.method_modules().values()))
prefix = "jaxannot.methods."
every = [
    m.name[len(prefix):]
    for m in pkgutil.walk_packages(pkg.__path__, prefix)
    if not m.ispkg
]
assert len(every) > 20, every
others = [m for m in every if m not in modules]
found = {}
for module in modules + others:  # each module's dependencies come before it
    before = set(base._REGISTRY)
    importlib.import_module("jaxannot.methods." + module)
    for name in set(base._REGISTRY) - before:
        found[name] = module
print(json.dumps(found))
"""


def test_the_scan_finds_what_the_modules_register():
    # a fresh interpreter, so that nothing is registered before the imports: every
    # module of jaxannot.methods is imported and what it registers recorded
    out = subprocess.run(
        [sys.executable, "-c", _TABLE_CHECK], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == method_modules()
    assert len(method_modules()) > 20


_REGISTRATIONS = """
from jaxannot.annotators.base import Method, register, register_words_method
from jaxannot.annotators import base

register_words_method("literal", fit, "summary")
register_words_method(name="keyword", fit=fit, summary="")
register(Method("method", fit))
base.register(base.Method(name="attribute", fit=fit))


def _helper(fit, name, summary=""):
    register(Method(name=name, fit=fit, summary=summary))


def _helper_of_helper(label):
    _helper(fit, label)


_helper(fit, "by-helper")
_helper(fit, name="by-keyword")
_helper_of_helper("by-helper-of-helper")
for prefix in ("a", "b"):
    register_words_method(f"{prefix}-built", fit, "")  # built at run time: not found
_helper(*args)  # no literal
print("register_words_method")
"""


def test_the_scan_reads_every_form_of_registration():
    assert registered_names(_REGISTRATIONS) == [
        "literal",
        "keyword",
        "method",
        "attribute",
        "by-helper",
        "by-keyword",
        "by-helper-of-helper",
    ]
    assert registered_names("x = 1\n") == []


def test_the_scan_walks_the_family_folders_and_refuses_a_name_twice(tmp_path):
    family = tmp_path / "family"
    (family / "nested").mkdir(parents=True)
    for folder in (family, family / "nested"):
        (folder / "__init__.py").write_text('register_words_method("not-a-module")\n')
    (family / "one.py").write_text('register_words_method("toy", fit, "")\n')
    (family / "nested" / "deep.py").write_text('register_words_method("deep")\n')
    (tmp_path / "top.py").write_text('register_words_method("top", fit, "")\n')
    assert scan_methods([tmp_path]) == {"toy": "family.one"}
    (family / "two.py").write_text('register_words_method("toy", fit, "")\n')
    with pytest.raises(ValueError, match="'toy' is registered by family.one and "):
        scan_methods([tmp_path])


def test_get_method_imports_only_its_module():
    code = (
        "import sys; from jaxannot.annotators import get_method; "
        "get_method('knn'); print(sorted(m for m in sys.modules "
        "if m.startswith('jaxannot.methods.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    loaded = set(ast.literal_eval(out.stdout))
    assert "jaxannot.methods.baselines.annotators" in loaded
    families = {m.split(".")[2] for m in loaded}
    assert families == {"baselines"}
    assert "jaxannot.methods.baselines.tagprop_annotator" not in loaded


def test_unknown_method_lists_every_name():
    with pytest.raises(KeyError, match="valid methods: ale-sf, ale-svm, bsvm"):
        get_method("nope")
