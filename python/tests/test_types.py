"""The package type-checks under mypy --strict (its py.typed is a promise)."""

from __future__ import annotations

from pathlib import Path

import mypy.api as mypy_api


def test_mypy_strict() -> None:
    root = Path(__file__).resolve().parent.parent
    out, err, status = mypy_api.run(["--config-file", str(root / "pyproject.toml"), "--no-incremental", str(root / "src" / "hxstate")])
    assert status == 0, out + err
