#!/usr/bin/env python3
"""The server the conformance suite's server scenarios are run against (issue 33: directly, and
through `mcplug serve --http --names unprefixed` fronting it over stdio), on the Python SDK
(mcp 2.3, `MCPServer`). It has what the scenarios name (tests/conformance/server-scenarios.md §2):
so far the tools, resources, prompts and completion of the scenarios both revisions share and of
the 2025-11-25 ones (sampling, elicitation, logging, progress, subscriptions).

    .deps/venv/bin/python tests/servers/conformance_server.py            # stdio
    .deps/venv/bin/python tests/servers/conformance_server.py --http PORT
"""
import asyncio
import base64
import json
import sys
import warnings
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve, Sample
from pydantic import BaseModel
from mcp import types
from mcp.types import CallToolResult

# Logging is deprecated in 2026-07-28 but the 2025-11-25 scenarios use it.
warnings.simplefilter("ignore")

server = MCPServer("mcplug-conformance-server", instructions="The conformance suite's server scenarios.")

# A 1x1 red PNG, and a short WAV header with no samples.
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415408d763f8cfc0000003010100c9fe92ef0000000049454e44ae426082"
)).decode()
WAV = base64.b64encode(b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80\x3e\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00").decode()


def result(*content: dict[str, Any], is_error: bool = False) -> CallToolResult:
    return CallToolResult.model_validate({"content": list(content), "isError": is_error})


@server.tool()
def test_simple_text() -> CallToolResult:
    """Answers with one text item."""
    return result({"type": "text", "text": "This is a simple text response for testing."})


@server.tool()
def test_image_content() -> CallToolResult:
    """Answers with a PNG image."""
    return result({"type": "image", "data": PNG, "mimeType": "image/png"})


@server.tool()
def test_audio_content() -> CallToolResult:
    """Answers with a WAV sound."""
    return result({"type": "audio", "data": WAV, "mimeType": "audio/wav"})


@server.tool()
def test_embedded_resource() -> CallToolResult:
    """Answers with an embedded text resource."""
    return result({"type": "resource", "resource": {
        "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}})


@server.tool()
def test_multiple_content_types() -> CallToolResult:
    """Answers with text, an image and a resource."""
    return result(
        {"type": "text", "text": "Multiple content types test:"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json",
                                          "text": json.dumps({"test": "data", "value": 123})}},
    )


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Logs three messages while it runs."""
    for line in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(line)
        await asyncio.sleep(0.05)
    return "Logging test completed"


@server.tool()
def test_error_handling() -> CallToolResult:
    """Fails as a tool fails: an isError result."""
    return result({"type": "text", "text": "This tool intentionally returns an error for testing"}, is_error=True)


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100)
        await asyncio.sleep(0.05)
    return "Progress test completed"


# Sampling and elicitation through the SDK's resolvers: a server-to-client request in the
# 2025-11-25 era, an InputRequiredResult round in the 2026-07-28 one (as mcplug serve's
# connection to this server negotiates it).
def ask_model(prompt: str) -> Sample:
    return Sample([types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
                  max_tokens=100)


@server.tool()
def test_sampling(prompt: str, sampled: Annotated[types.CreateMessageResult, Resolve(ask_model)]) -> str:
    """Asks the client's model (sampling/createMessage)."""
    return f"LLM response: {getattr(sampled.content, 'text', '')}"


class UserInfo(BaseModel):
    username: str
    email: str


def ask_user(message: str) -> Elicit[UserInfo]:
    return Elicit(message, UserInfo)


@server.tool()
def test_elicitation(message: str, user: Annotated[UserInfo, Resolve(ask_user)]) -> str:
    """Asks the user (elicitation/create) for a username and an email."""
    return f"User response: action=accept, content={user.model_dump_json()}"


class Defaults(BaseModel):
    name: str = "John Doe"
    age: int = 30
    score: float = 95.5
    status: Literal["active", "inactive", "pending"] = "active"
    verified: bool = True


def ask_defaults() -> Elicit[Defaults]:
    return Elicit("Please review your information", Defaults)


@server.tool()
def test_elicitation_sep1034_defaults(given: Annotated[Defaults, Resolve(ask_defaults)]) -> str:
    """Asks with a default for every kind of field (SEP-1034)."""
    return f"Elicitation completed: action=accept, content={given.model_dump_json()}"


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Asks with each kind of enum (SEP-1330)."""
    answer = await ctx.session.elicit(message="Please select options", requested_schema={
        "type": "object", "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}]}}}})
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


@server.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", description="A static binary resource", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@server.resource("test://watched-resource", name="watched-resource", description="A resource to subscribe to", mime_type="text/plain")
def watched() -> str:
    return "Watched resource content"


@server.resource("test://template/{id}/data", name="template", description="A templated resource", mime_type="application/json")
def template(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.prompt(description="A simple prompt")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@server.prompt(description="A prompt with two arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt(description="A prompt with an embedded resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": {"type": "resource", "resource": {
            "uri": resourceUri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}}},
        {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
    ]


@server.prompt(description="A prompt with an image")
def test_prompt_with_image() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
        {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
    ]


# The 2025-11-25 methods MCPServer leaves out (deprecated in 2026-07-28): registered on its
# low-level server, which then declares `logging` and `resources.subscribe`.
async def _empty(ctx: Any, params: Any) -> dict[str, Any]:
    return {}


_low = server._lowlevel_server
_low.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _empty)
_low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _empty)
_low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _empty)


@server.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Any:
    from mcp.types import Completion

    values = [v for v in ("test", "testing", "tested") if v.startswith(argument.value or "")]
    return Completion(values=values, total=len(values), hasMore=False)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
