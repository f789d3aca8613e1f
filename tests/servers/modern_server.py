#!/usr/bin/env python3
"""A 2026-07-28 ("modern" era) MCP server over stdio for mcplug's tests, built on the Python SDK
(mcp 2.3.0, `MCPServer`). server-everything only speaks the legacy era; this one proves that
mcplug negotiates the modern one and that tools work there.

    .deps/venv/bin/python tests/servers/modern_server.py

Tools: echo {message} -> text "Echo: <message>"; add {a, b} -> a + b (text, and structured
content as the SDK produces it for an int return); forecast {city} -> structured content
{temperature, sky} matching its outputSchema (derived by the SDK from the return type);
misreport {city, fail?} -> declares the same outputSchema but answers {"temperature": "hot", ...}, which
breaks it (the SDK publishes a hand-set schema without checking results against it; with
fail: true the same in an isError result);
unschemable {} -> declares an outputSchema that does not compile ({"x": {"type": 12}}) and
answers text;
calls {} -> the names of the tools called so far (to show a call was never sent).
"""
import json
from typing import TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent


class Forecast(TypedDict):
    temperature: float
    sky: str


CALLS: list = []


def misreport(city: str, fail: bool = False) -> CallToolResult:
    """A forecast whose structuredContent breaks the tool's own outputSchema (with `fail`, in an
    isError result)."""
    CALLS.append("misreport")
    return CallToolResult(
        content=[TextContent(type="text", text=f"{city}: hot")],
        structured_content={"temperature": "hot", "sky": "clear"},
        is_error=fail,
    )


# A schema set by hand (no output model): the SDK advertises it and returns the tool's result as is.
misreport_tool = Tool.from_function(misreport)
misreport_tool.fn_metadata.output_schema = {
    "type": "object",
    "properties": {"temperature": {"type": "number"}, "sky": {"type": "string"}},
    "required": ["temperature", "sky"],
}



def unschemable() -> CallToolResult:
    """Declares an outputSchema that does not compile."""
    CALLS.append("unschemable")
    return CallToolResult(content=[TextContent(type="text", text="unchecked")])


unschemable_tool = Tool.from_function(unschemable)
# An object schema (so the SDK's own legacy-era types accept the listing) with a property whose
# schema is no schema.
unschemable_tool.fn_metadata.output_schema = {"type": "object", "properties": {"x": {"type": 12}}}

server = MCPServer(
    name="modern-test-server",
    version="1.0.0",
    instructions="mcplug modern-era test server",
    tools=[misreport_tool, unschemable_tool],
)


@server.tool()
def echo(message: str) -> str:
    """Echoes the message back."""
    CALLS.append("echo")
    return "Echo: " + message


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    CALLS.append("add")
    return a + b


@server.tool()
def forecast(city: str) -> Forecast:
    """A forecast as structured content that matches the tool's outputSchema."""
    CALLS.append("forecast")
    return {"temperature": 21.5, "sky": "clear over " + city}


@server.tool()
def calls() -> str:
    """The names of the tools called so far, as JSON text."""
    return json.dumps(CALLS)


if __name__ == "__main__":
    server.run("stdio")
