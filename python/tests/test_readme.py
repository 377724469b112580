"""python/README.md's examples run as written (each block after a
``<!-- python-example -->`` marker), against the test database."""

from __future__ import annotations

import importlib
import os
import re
import secrets
import shlex
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import psycopg
import pytest

from hxstate.langgraph import HxSaver
from paths import SRC, TOP


def blocks() -> list[str]:
    text = (TOP / "python" / "README.md").read_text()
    return re.findall(r"<!-- python-example:[^>]*-->\n```python\n(.*?)```", text, re.S)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_there_are_examples() -> None:
    assert len(blocks()) == 2


@pytest.mark.parametrize("n", range(2))
def test_example_runs(dsn: str, n: int) -> None:
    code = blocks()[n]
    env = {**os.environ, "DATABASE_URL": dsn, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    if n == 0:
        assert "refused: XH201" in out.stdout
        assert "{'calls': 1, 'todos': ['write']}" in out.stdout
        assert "STATE_SNAPSHOT {'calls': 1, 'todos': ['write']}" in out.stdout
        assert "STATE_DELTA {'calls': 1, 'todos': ['write'], 'done': True}" in out.stdout
    else:
        assert out.stdout.strip() == "['hi', 'hello!']"


def hitl_blocks() -> dict[str, str]:
    """The example's files, in docs/langgraph.md."""
    found: dict[str, str] = {}
    for name, code in re.findall(r"<!-- langgraph-hitl: (\S+)[^>]*-->\n```\w+\n(.*?)```", (TOP / "docs/langgraph.md").read_text(), re.S):
        assert name not in found, f"{name} twice"
        found[name] = code
    return found


def console_scripts(bin_dir: Path) -> None:
    """The package's console scripts, as pip makes them from its metadata
    (pyproject.toml's [project.scripts]), for the interpreter of the suite."""
    scripts = tomllib.loads((TOP / "python" / "pyproject.toml").read_text())["project"]["scripts"]
    bin_dir.mkdir()
    for name, target in scripts.items():
        module, func = target.split(":")
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n")
        path.chmod(0o755)


def test_human_in_the_loop_example(dsn: str, tmp_path: Path) -> None:
    """"Human in the loop through the gateway" (docs/langgraph.md): its files
    as written, in a directory of their own, and its commands, each line as
    written: the setup, the gateway (until it listens), the client; then a
    thread whose key begins with a dash."""
    files = hitl_blocks()
    dashed = f"-x-{secrets.token_hex(4)}"  # a key that begins with a dash
    assert sorted(files) == ["approval.py", "client.js", "run.sh", "server.js"]
    for name in ("approval.py", "client.js", "server.js"):
        (tmp_path / name).write_text(files[name])
    setup, server, client = [line.split("#")[0].strip() for line in files["run.sh"].strip().splitlines()]
    assert (setup, server, client) == ("hxstate-agui --setup", "node server.js &", "node client.js thread-1")
    console_scripts(tmp_path / "bin")
    conn = psycopg.conninfo.conninfo_to_dict(dsn)
    host, port = os.environ.get("PGHOST", "/var/run/postgresql"), os.environ.get("PGPORT", "5432")
    env = {
        **os.environ,
        # hxstate-agui runs the suite's Python, which has langgraph; the package is not installed but on the path
        "PATH": os.pathsep.join([str(tmp_path / "bin"), os.environ.get("PATH", "")]),
        "PYTHONPATH": str(SRC),
        "PYTHONDONTWRITEBYTECODE": "1",
        "NODE_PATH": str(TOP / "node_modules"),  # the repository's, for files outside it
        "DATABASE_URL": f"postgresql://{os.environ.get('PGUSER', 'postgres')}@/{conn['dbname']}?host={host}&port={port}",
        "HX_GATEWAY_SECRET": secrets.token_hex(32),
        "PORT": str(free_port()),
    }
    out = subprocess.run(["sh", "-c", setup], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    gateway = subprocess.Popen(shlex.split(server.rstrip("& ")), cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert gateway.stdout is not None
        assert gateway.stdout.readline() == f"listening on http://127.0.0.1:{env['PORT']}\n"
        out = subprocess.run(["sh", "-c", client], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout == 'asked: call add with {"a": 2, "b": 3}?\nanswer: add(2, 3): 5\n'
        # declined, as the prose says
        (tmp_path / "decline.js").write_text(files["client.js"].replace("approved: true", "approved: false"))
        out = subprocess.run(["node", "decline.js", "thread-2"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.endswith("answer: add(2, 3): declined\n")
        out = subprocess.run(["node", "client.js", dashed], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.endswith("answer: add(2, 3): 5\n")
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    # the threads, as graph.get_state() shows them
    sys.path.insert(0, str(tmp_path))
    try:
        approval = importlib.import_module("approval")
    finally:
        sys.path.remove(str(tmp_path))
    with psycopg.connect(dsn, autocommit=True) as c:
        graph = approval.builder.compile(checkpointer=HxSaver(c))
        for thread, last in (("thread-1", "5"), ("thread-2", "declined"), (dashed, "5")):
            state = graph.get_state({"configurable": {"thread_id": thread}})
            assert [(m.type, m.content) for m in state.values["messages"]] == [
                ("human", "what is 2 + 3?"), ("ai", ""), ("tool", last), ("ai", f"add(2, 3): {last}")]
            assert state.next == () and state.interrupts == ()
