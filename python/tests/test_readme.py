"""The README's Python examples run as written (each block after a
``<!-- python-example -->`` marker), against the test database."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]


def blocks() -> list[str]:
    text = (TOP / "README.md").read_text()
    return re.findall(r"<!-- python-example:[^>]*-->\n```python\n(.*?)```", text, re.S)


def test_there_are_examples() -> None:
    assert len(blocks()) >= 2


@pytest.mark.parametrize("n", range(2))
def test_example_runs(dsn: str, n: int) -> None:
    code = blocks()[n]
    env = {**os.environ, "DATABASE_URL": dsn, "PYTHONPATH": str(TOP / "python" / "src")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    if n == 0:
        assert "refused: XH201" in out.stdout
        assert "{'calls': 1, 'todos': ['write']}" in out.stdout
        assert "STATE_SNAPSHOT {'calls': 1, 'todos': ['write']}" in out.stdout
        assert "STATE_DELTA {'calls': 1, 'todos': ['write'], 'done': True}" in out.stdout
    else:
        assert out.stdout.strip() == "['hi', 'hello!']"
