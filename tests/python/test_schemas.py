"""Output schemas through the Python binding, against the Python SDK's server: a tool whose
structuredContent breaks its own outputSchema raises InvalidResultError (kind "invalid_result")
with the validator's message and the untouched result; a conforming one and an isError result
come back as they are; arguments are checked against the inputSchema only when asked."""
from __future__ import annotations

import sys
from typing import Any, Dict, List

import pytest

import mcplug
from conftest import text_of, wait_until


def test_a_result_that_breaks_its_output_schema_raises_invalid_result(modern_server: Dict[str, Any]) -> None:
    with mcplug.Client.connect(modern_server, connect_timeout=30) as client:
        client.list_tools()  # where the client learns the schemas
        forecast = client.call_tool("forecast", {"city": "Oslo"})
        assert forecast["structuredContent"] == {"temperature": 21.5, "sky": "clear over Oslo"}

        with pytest.raises(mcplug.InvalidResultError) as info:
            client.call_tool("misreport", {"city": "Oslo"})
        e = info.value
        assert isinstance(e, mcplug.McpError) and e.kind == "invalid_result"
        assert "misreport" in e.message and "at /temperature" in e.message, e.message
        assert e.data["tool"] == "misreport"
        assert e.data["errors"][0]["instance_path"] == "/temperature"
        assert e.data["result"]["structuredContent"] == {"temperature": "hot", "sky": "clear"}

        failed = client.call_tool("misreport", {"city": "Oslo", "fail": True})
        assert failed["isError"] is True and text_of(failed) == "Oslo: hot"


def test_arguments_are_checked_only_when_asked(modern_server: Dict[str, Any]) -> None:
    with mcplug.Client.connect(modern_server, options={"validate_arguments": True}) as client:
        client.list_tools()
        with pytest.raises(mcplug.InvalidArgumentError) as info:
            client.call_tool("add", {"a": "two", "b": 3})
        assert "inputSchema" in info.value.message and "at /a" in info.value.message
        assert client.call_tool("add", {"a": 2, "b": 3})["structuredContent"] == {"result": 5}


BOMB_SERVER = '''
import json, sys
defs = {"d0": {"type": "string"}}
for i in range(1, 31):  # each an anyOf of the one before, twice: 2**30 branches once expanded
    defs[f"d{i}"] = {"anyOf": [{"$ref": f"#/$defs/d{i-1}"}, {"$ref": f"#/$defs/d{i-1}"}]}
bomb = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d30"}}}
tools = [{"name": "bomb", "inputSchema": bomb, "outputSchema": bomb}]
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    r = {"initialize": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "bomb", "version": "1"}},
         "tools/list": {"tools": tools},
         "tools/call": {"content": [{"type": "text", "text": "boom"}], "structuredContent": {"x": 5}}}.get(m["method"])
    out = {"jsonrpc": "2.0", "id": m["id"]}
    out.update({"result": r} if r is not None else {"error": {"code": -32601, "message": "no"}})
    print(json.dumps(out), flush=True)
'''


def test_a_schema_that_explodes_once_expanded_is_refused_not_checked(tmp_path: Any) -> None:
    # 31 small $defs whose checks would take 2**30 steps and gigabytes (20 took 7 s and 1.5 GiB
    # before the refusal): the schema is refused at tools/list with a warning naming it, and
    # the call comes back unchecked, within its time-out.
    server = tmp_path / "bomb.py"
    server.write_text(BOMB_SERVER)
    warnings: List[Dict[str, Any]] = []
    with mcplug.Client.connect({"command": sys.executable, "args": [str(server)]},
                               handlers={"warning": warnings.append}) as client:
        client.list_tools()
        result = client.call_tool("bomb", {"x": 5}, timeout=10, validate_arguments=True)
        assert result["structuredContent"] == {"x": 5}
        assert wait_until(lambda: len(warnings) >= 2, 5), warnings
    schemas = sorted(w["schema"] for w in warnings if w.get("tool") == "bomb" and w["reason"] == "invalid_schema")
    assert schemas == ["inputSchema", "outputSchema"], warnings
    assert all("spans more than 10000 nodes" in w["message"] for w in warnings), warnings
