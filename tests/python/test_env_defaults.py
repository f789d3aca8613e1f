"""Claude Code's environment variables as defaults under explicit options: MCP_TIMEOUT (connect),
MCP_TOOL_TIMEOUT (a tool call), MAX_MCP_OUTPUT_TOKENS (what a result may hold). Each case runs in a
process of its own, the variable set there, against server-everything."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

from conftest import REPO

SCRIPT = r"""
import json, sys, time
import mcplug
spec, case = json.loads(sys.argv[1]), sys.argv[2]
out = {}
try:
    options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    with mcplug.Manager(options) as m:
        m.connect({"mcpServers": {"everything": spec}})
        m.wait(30)
        if case == "slow":
            t0 = time.monotonic()
            try:
                m.call_tool("mcp__everything__trigger-long-running-operation", {"duration": 5, "steps": 5})
                out["outcome"] = "answered"
            except mcplug.TimeoutError as e:
                out["outcome"] = "timeout"
                out["message"] = e.message
            out["took"] = time.monotonic() - t0
        elif case == "long":
            r = m.call_tool("mcp__everything__echo", {"message": "x" * 4000})
            out["text"] = "".join(c.get("text", "") for c in r["content"])
except mcplug.McpError as e:
    out["error"] = e.message
print(json.dumps(out))
"""


def _run(everything_server: Dict[str, Any], case: str, env: Dict[str, str], options: Any = None) -> Dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k not in ("MCP_TIMEOUT", "MCP_TOOL_TIMEOUT", "MAX_MCP_OUTPUT_TOKENS")}
    environ.update(env)
    environ["PYTHONPATH"] = str(REPO / "bindings" / "python")
    args = [sys.executable, "-c", SCRIPT, json.dumps(everything_server), case]
    if options is not None:
        args.append(json.dumps(options))
    done = subprocess.run(args, env=environ, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    result: Dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_mcp_tool_timeout_bounds_a_tool_call_unless_an_option_says_otherwise(everything_server: Dict[str, Any]) -> None:
    timed = _run(everything_server, "slow", {"MCP_TOOL_TIMEOUT": "600"})
    assert timed["outcome"] == "timeout" and timed["took"] < 4, timed
    # An explicit tool timeout wins over the variable.
    given = _run(everything_server, "slow", {"MCP_TOOL_TIMEOUT": "600"}, {"connection": {"tool_timeout_ms": 20000}})
    assert given["outcome"] == "answered", given


def test_max_mcp_output_tokens_caps_what_a_result_holds(everything_server: Dict[str, Any]) -> None:
    cut = _run(everything_server, "long", {"MAX_MCP_OUTPUT_TOKENS": "100"})
    assert 300 < len(cut["text"]) < 1000, len(cut["text"])
    whole = _run(everything_server, "long", {})
    assert len(whole["text"]) >= 4000, len(whole["text"])
    # An explicit cap wins over the variable.
    given = _run(everything_server, "long", {"MAX_MCP_OUTPUT_TOKENS": "100"}, {"max_output_tokens": 2000})
    assert len(given["text"]) >= 4000, len(given["text"])


def test_a_bad_value_is_refused_naming_the_variable(everything_server: Dict[str, Any]) -> None:
    for name in ("MCP_TIMEOUT", "MCP_TOOL_TIMEOUT", "MAX_MCP_OUTPUT_TOKENS"):
        refused = _run(everything_server, "long", {name: "soon"})
        assert name in refused.get("error", "") and "soon" in refused["error"], refused


def test_mcp_timeout_bounds_the_connect(everything_server: Dict[str, Any], tmp_path: Path) -> None:
    # A server that never answers initialize: the connect fails after MCP_TIMEOUT, not 30 s.
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}
    script = r'''
import json, sys, time, mcplug
with mcplug.Manager({"reconnect_attempts": 0}) as m:
    t0 = time.monotonic()
    m.connect({"mcpServers": {"silent": json.loads(sys.argv[1])}})
    m.wait(20)
    s = m.status()["servers"]["silent"]
    print(json.dumps({"state": s["state"], "error": s.get("error", {}).get("message", ""), "took": time.monotonic() - t0}))
'''
    environ = {**os.environ, "MCP_TIMEOUT": "700", "PYTHONPATH": str(REPO / "bindings" / "python")}
    done = subprocess.run([sys.executable, "-c", script, json.dumps(silent)], env=environ, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout.strip().splitlines()[-1])
    assert status["state"] == "failed" and status["took"] < 5, status
