"""Where the tests find things: the repository, this directory, and the
package under test (the one this interpreter imports, so that a process the
tests start runs the same code)."""

from __future__ import annotations

from pathlib import Path

import hxstate

TOP = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SRC = Path(hxstate.__file__).resolve().parents[1]
