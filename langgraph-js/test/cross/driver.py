"""The Python side of the cross-language tests (cross.test.js): runs a
script of puts and writes on the Python HxSaver, or reads a thread with
it, and prints what it read in the canonical form both languages print
(codec.public_json of each value's encoding: messages as their dumps,
interrupts as {id, value}, tuples as lists), keys in their order.

    python driver.py write  < {"schema", "thread", "steps", "options", "key"}
    python driver.py read   < {"schema", "thread", "namespaces", "forks", "key"}
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

from langgraph.types import Interrupt

from hxstate.errors import ThreadConflict
from hxstate.langgraph import HxSaver
from hxstate.langgraph.codec import MESSAGE_TYPES, public_json


def native(v: Any) -> Any:
    """A script's value as Python's: {"$msg": {...}} a LangChain message,
    {"$interrupts": [...]} LangGraph's tuple of interrupts."""
    if isinstance(v, list):
        return [native(x) for x in v]
    if isinstance(v, dict):
        if "$msg" in v:
            fields = dict(v["$msg"])
            return MESSAGE_TYPES[fields.pop("type")](**fields)
        if "$interrupts" in v:
            return tuple(Interrupt(value=native(i["value"]), id=i["id"]) for i in v["$interrupts"])
        return {k: native(x) for k, x in v.items()}
    return v


def saver_of(conn_args: dict[str, Any]) -> Any:
    kwargs: dict[str, Any] = {"schema": conn_args["schema"], **conn_args.get("options", {})}
    if conn_args.get("key"):
        from hxstate.langgraph.crypto import EncryptedSerializer

        kwargs["serde"] = EncryptedSerializer({"k1": base64.b64decode(conn_args["key"])})
    return HxSaver.from_conn_string("", **kwargs)


def write(job: dict[str, Any]) -> None:
    results = []
    with saver_of(job) as saver:
        for step in job["steps"]:
            conf: dict[str, Any] = {"thread_id": job["thread"], "checkpoint_ns": step.get("ns", "")}
            if step["op"] == "put":
                if step.get("parent"):
                    conf["checkpoint_id"] = step["parent"]
                if step.get("fork_of"):
                    conf["hx_fork_of"] = step["fork_of"]
                checkpoint = {**step["checkpoint"], "id": step["id"], "channel_values": native(step["values"])}
                try:
                    saver.put({"configurable": conf}, checkpoint, native(step["metadata"]), step["new_versions"])
                    results.append("ok")
                except ThreadConflict as e:
                    results.append(f"conflict {e.sqlstate}")
            else:
                conf["checkpoint_id"] = step["checkpoint"]
                writes = [(ch, native(v)) for ch, v in step["writes"]]
                saver.put_writes({"configurable": conf}, writes, step["task"], step.get("task_path", ""))
                results.append("ok")
    print(json.dumps(results))


def canonical(saver: Any, v: Any) -> Any:
    return public_json(saver.codec.encode(v))


def entry(saver: Any, t: Any) -> dict[str, Any]:
    cp = t.checkpoint
    return {
        "config": t.config["configurable"],
        "parent": t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None,
        "checkpoint": {k: v for k, v in cp.items() if k not in ("channel_values", "id")},
        "values": {ch: canonical(saver, v) for ch, v in cp["channel_values"].items()},
        "metadata": canonical(saver, t.metadata),
        "writes": [[w[0], w[1], canonical(saver, w[2])] for w in t.pending_writes or []],
    }


def read(job: dict[str, Any]) -> None:
    out: dict[str, Any] = {}
    with saver_of(job) as saver:
        for ns in job["namespaces"]:
            base = {"thread_id": job["thread"], "checkpoint_ns": ns}
            head = saver.get_tuple({"configurable": base})
            out[ns] = {
                "head": entry(saver, head) if head else None,
                "list": [entry(saver, t) for t in saver.list({"configurable": base})],
            }
        out["forks"] = {}
        for ns, cid in job.get("forks", []):
            t = saver.get_tuple({"configurable": {"thread_id": job["thread"], "checkpoint_ns": ns, "checkpoint_id": cid}})
            out["forks"][cid] = entry(saver, t)
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    {"write": write, "read": read}[sys.argv[1]](json.load(sys.stdin))
