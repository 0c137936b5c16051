"""The persistent compilation cache: one call for library users, on by default in the
CLI with an opt-out flag and environment variable."""

import argparse
import os
import pathlib
import subprocess
import sys

import pytest

from jaxannot.cli import app as cli
from jaxannot.cli.parser import build_parser
from jaxannot.runtime import compilation_cache as cc

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_enable_stores_compiled_programs_in_the_folder(tmp_path):
    code = (
        "import jax, jax.numpy as jnp\n"
        "from jaxannot.runtime.compilation_cache import enable_compilation_cache\n"
        f"print(enable_compilation_cache({str(tmp_path / 'c')!r}))\n"
        "jax.jit(lambda x: jnp.sin(x) * 2 + 1)(jnp.ones(3)).block_until_ready()\n"
    )
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / "c")
    assert any((tmp_path / "c").iterdir()), "no program was written to the cache"


def test_default_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("JAXANNOT_CACHE_DIR", str(tmp_path / "mine"))
    assert cc.default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("JAXANNOT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cc.default_cache_dir() == tmp_path / "xdg" / "jaxannot" / "jax"


def test_an_unusable_folder_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match="compilation cache folder .*file"):
        cc.enable_compilation_cache(blocker / "cache")


def test_a_folder_name_that_is_not_utf8_is_a_clear_warning(tmp_path):
    """``JAXANNOT_CACHE_DIR`` with a stray byte: a ``TypeError`` traceback at the
    first compile; now a warning naming the folder, and the run goes on."""
    code = (
        "import argparse, jax, jax.numpy as jnp\n"
        "from jaxannot.cli import app\n"
        "app._compilation_cache(argparse.Namespace(no_compilation_cache=False))\n"
        "print(jax.jit(lambda x: x + 1)(jnp.ones(2)).sum())\n"
    )
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAXANNOT_NO_COMPILATION_CACHE="")
    env = {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
    env[b"JAXANNOT_CACHE_DIR"] = os.fsencode(tmp_path) + b"/c\xff"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert out.stdout.strip() == "4.0"
    assert "not UTF-8" in out.stderr and "running without it" in out.stderr


@pytest.mark.parametrize(
    ("flag", "env", "enabled"),
    [(False, "", True), (True, "", False), (False, "1", False), (False, "0", True)],
)
def test_cli_turns_it_on_unless_told_not_to(monkeypatch, flag, env, enabled):
    calls = []
    monkeypatch.setattr(cc, "enable_compilation_cache", lambda: calls.append(1))
    monkeypatch.setenv("JAXANNOT_NO_COMPILATION_CACHE", env)
    cli._compilation_cache(argparse.Namespace(no_compilation_cache=flag))
    assert bool(calls) == enabled


def test_cli_runs_on_without_a_usable_folder(monkeypatch, caplog):
    def refuse():
        raise ValueError("compilation cache folder /nowhere is not writable")

    monkeypatch.setattr(cc, "enable_compilation_cache", refuse)
    monkeypatch.setenv("JAXANNOT_NO_COMPILATION_CACHE", "")
    cli._compilation_cache(argparse.Namespace(no_compilation_cache=False))
    assert "running without it" in caplog.text


def test_the_flag_parses():
    args = build_parser().parse_args(["--no-compilation-cache", "methods"])
    assert args.no_compilation_cache
