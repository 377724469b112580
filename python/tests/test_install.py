"""The package as a user installs it: built from its own metadata
(pyproject.toml) and installed with pip from PyPI into an empty venv,
without extras and with each, as the README's commands do.  Every public
module imports where its extra is installed, and says which extra to
install where it is not; the console script runs.

pip keeps what it downloads in $HX_CACHE/pip (when HX_CACHE is set), so a
second run installs from there; PyPI must be reachable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from paths import TOP

PROJECT = TOP / "python"
EXTRAS = sorted(tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
# the extra each part of the package needs (the longest prefix that matches)
NEEDS = {"hxstate.langgraph": "langgraph", "hxstate.langgraph.crypto": "crypto"}
# what each extra brings with it (an extra that names another)
IMPLIES = {"crypto": {"langgraph"}}

# the installed package's modules, from its files (importing a subpackage
# whose extra is missing would fail)
LIST_MODULES = """
import json, pathlib, importlib.util
root = pathlib.Path(importlib.util.find_spec("hxstate").origin).parent
names = set()
for f in root.rglob("*.py"):
    parts = ["hxstate", *f.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    names.add(".".join(parts))
print(json.dumps(sorted(n for n in names if not any(p.startswith("_") for p in n.split(".")))))
"""
IMPORT = """
import importlib, json, sys
out = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
        out[name] = None
    except ImportError as e:
        out[name] = str(e)
print(json.dumps(out))
"""


def pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if os.environ.get("HX_CACHE"):
        env["PIP_CACHE_DIR"] = str(Path(os.environ["HX_CACHE"]) / "pip")
    return env


def run(*args: str | Path, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([str(a) for a in args], env=pip_env(), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{args}: {out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The package built once, from its metadata, as pip builds it: from a
    copy of its sources (pip builds in the directory it is given, and
    would leave build/ in the tree)."""
    dist = tmp_path_factory.mktemp("dist")
    project = tmp_path_factory.mktemp("project") / "python"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".pytest_cache", ".mypy_cache", "tests"))
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", dist, project)
    (found,) = dist.glob("hxstate-*.whl")
    yield found


def needed(module: str) -> str | None:
    best = max((p for p in NEEDS if module == p or module.startswith(p + ".")), key=len, default=None)
    return NEEDS[best] if best else None


@pytest.mark.parametrize("extra", [None, *EXTRAS], ids=lambda e: e or "no-extra")
def test_installed_from_its_metadata(wheel: Path, tmp_path: Path, extra: str | None) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    # from an empty directory: nothing of the source tree on the path
    where = tmp_path / "elsewhere"
    where.mkdir()
    run(py, "-m", "pip", "install", "--quiet", f"{wheel}[{extra}]" if extra else wheel, cwd=where)
    run(py, "-m", "pip", "check", cwd=where)
    modules = json.loads(run(py, "-c", LIST_MODULES, cwd=where).stdout)
    assert {"hxstate", "hxstate.aio", "hxstate.errors", "hxstate.langgraph", "hxstate.langgraph.agui"} <= set(modules)
    results = json.loads(run(py, "-c", IMPORT, json.dumps(modules), cwd=where).stdout)
    have = {extra, *IMPLIES.get(extra or "", set())} - {None}
    for name, error in results.items():
        need = needed(name)
        if need is None or need in have:
            assert error is None, f"{name} with {extra or 'no extra'}: {error}"
        else:
            # it names an extra to install: its own, or one its own brings that is missing first
            missing = ({need} | IMPLIES.get(need, set())) - have
            assert error is not None and any(f"pip install 'hxstate[{m}]'" in error for m in missing), (
                f"{name} with {extra or 'no extra'}: {error}")
    script = env_dir / "bin" / "hxstate-agui"
    assert script.exists()
    if "langgraph" in have:
        assert "hxstate-agui" in run(script, "--help", cwd=where).stdout
        # an input refused before any database is tried
        out = subprocess.run([str(script), "g:x", "--thread=t", "--dsn=host=/nonexistent"], input="{", env=pip_env(),
                             cwd=where, capture_output=True, text=True, timeout=120)
        assert out.returncode == 1 and json.loads(out.stdout)["error"]["code"] == "hxstate_input_invalid"
