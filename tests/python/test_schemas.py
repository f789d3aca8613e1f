"""Output schemas through the Python binding, against the Python SDK's server: a tool whose
structuredContent breaks its own outputSchema raises InvalidResultError (kind "invalid_result")
with the validator's message and the untouched result; a conforming one and an isError result
come back as they are; arguments are checked against the inputSchema only when asked."""
from __future__ import annotations

from typing import Any, Dict

import pytest

import mcplug
from conftest import text_of


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
