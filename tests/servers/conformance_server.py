#!/usr/bin/env python3
"""The server the conformance suite's server scenarios are run against (issue 33: directly, and
through `mcplug serve --http --names unprefixed` fronting it over stdio), on the Python SDK
(mcp 2.3, `MCPServer`). It has what the scenarios name (tests/conformance/server-scenarios.md §2):
the tools, resources, prompts and completion of the scenarios both revisions share, of the
2025-11-25 ones (sampling, elicitation, logging, progress, subscriptions) and of the 2026-07-28
ones (input rounds, missing capabilities, listen streams).

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


ENUMS_SCHEMA: dict[str, Any] = {
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
            {"const": "value3", "title": "Third Choice"}]}}}}


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str | types.InputRequiredResult:
    """Asks with each kind of enum (SEP-1330): a request of its own in the 2025-11-25 era, an
    input round in the 2026-07-28 one (no SDK resolver builds these schemas)."""
    if ctx.protocol_version == "2026-07-28":
        answer = _answers(ctx).get("enums")
        if answer is None:
            return _ask({"enums": {"method": "elicitation/create", "params": {
                "message": "Please select options", "requestedSchema": ENUMS_SCHEMA}}})
        return f"Elicitation completed: action={answer.get('action')}, content={json.dumps(answer.get('content'))}"
    said = await ctx.session.elicit(message="Please select options", requested_schema=ENUMS_SCHEMA)
    return f"Elicitation completed: action={said.action}, content={json.dumps(said.content)}"


# The 2026-07-28 scenarios (server-stateless, input-required-result-*): a tool asks for input by
# returning an InputRequiredResult whose keys the suite answers by name; the SDK seals each
# `requestState` (so a tampered one is refused) and reads `logLevel` from each request.
def _answers(ctx: Context) -> dict[str, dict[str, Any]]:
    """The client's answers of this round, as plain JSON, by key."""
    out: dict[str, dict[str, Any]] = {}
    for key, answer in (ctx.input_responses or {}).items():
        dumped = answer.model_dump(by_alias=True, exclude_none=True) if isinstance(answer, BaseModel) else answer
        if isinstance(dumped, dict):
            out[key] = dumped
    return out


def _elicit(message: str, field: str, kind: str = "string") -> dict[str, Any]:
    return {"method": "elicitation/create", "params": {"message": message, "requestedSchema": {
        "type": "object", "properties": {field: {"type": kind}}, "required": [field]}}}


def _sample(text: str, max_tokens: int = 100) -> dict[str, Any]:
    return {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens}}


ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}


def _ask(requests: dict[str, dict[str, Any]], state: str | None = None) -> types.InputRequiredResult:
    return types.InputRequiredResult.model_validate(
        {"inputRequests": requests, **({"requestState": state} if state is not None else {})})


def _said(answer: dict[str, Any] | None, field: str) -> Any:
    return (answer or {}).get("content", {}).get(field) if (answer or {}).get("action") == "accept" else None


def _sampled(answer: dict[str, Any] | None) -> str:
    content = (answer or {}).get("content")
    return content.get("text", "") if isinstance(content, dict) else ""


@server.tool()
def test_input_required_result_elicitation(ctx: Context) -> CallToolResult | types.InputRequiredResult:
    """Asks the user's name (an InputRequiredResult round), then greets them."""
    name = _said(_answers(ctx).get("user_name"), "name")
    if name is None:
        return _ask({"user_name": _elicit("What is your name?", "name")})
    return result({"type": "text", "text": f"Hello, {name}!"})


@server.tool()
def test_input_required_result_sampling(ctx: Context) -> CallToolResult | types.InputRequiredResult:
    """Asks the client's model a question, then answers with what it said."""
    answer = _answers(ctx).get("capital_question")
    if answer is None:
        return _ask({"capital_question": _sample("What is the capital of France?")})
    return result({"type": "text", "text": f"The model said: {_sampled(answer)}"})


@server.tool()
def test_input_required_result_list_roots(ctx: Context) -> CallToolResult | types.InputRequiredResult:
    """Asks the client's roots, then names them."""
    answer = _answers(ctx).get("client_roots")
    if answer is None:
        return _ask({"client_roots": ROOTS})
    uris = [r.get("uri") for r in answer.get("roots", [])]
    return result({"type": "text", "text": f"The client's roots: {', '.join(map(str, uris))}"})


@server.tool()
def test_input_required_result_request_state(ctx: Context) -> CallToolResult | types.InputRequiredResult:
    """Asks for a confirmation, keeping state between the rounds."""
    answer = _answers(ctx).get("confirm")
    if answer is None or ctx.request_state is None:
        return _ask({"confirm": _elicit("Please confirm", "ok", "boolean")}, "state-ok")
    return result({"type": "text", "text": f"Confirmed with the state kept: {ctx.request_state}"})


@server.tool()
def test_input_required_result_multiple_inputs(ctx: Context) -> CallToolResult | types.InputRequiredResult:
    """Asks three things at once: a name, a model's greeting and the roots."""
    answers = _answers(ctx)
    wanted = {"user_name": _elicit("What is your name?", "name"), "greeting": _sample("Say hello", 50),
              "client_roots": ROOTS}
    missing = {k: v for k, v in wanted.items() if k not in answers}
    if missing:
        return _ask(missing, "multiple")
    return result({"type": "text", "text": f"Got {_said(answers['user_name'], 'name')}, "
                   f"{_sampled(answers['greeting'])} and {len(answers['client_roots'].get('roots', []))} roots"})


@server.tool()
def test_input_required_result_multi_round(ctx: Context) -> CallToolResult | types.InputRequiredResult:
    """Two rounds of questions, each with a state of its own."""
    answers = _answers(ctx)
    if ctx.request_state == "S2" and "step2" in answers:
        return result({"type": "text", "text": f"Done: color {_said(answers['step2'], 'color')}"})
    if ctx.request_state == "S1" and "step1" in answers:
        return _ask({"step2": _elicit("Your favourite color?", "color")}, "S2")
    return _ask({"step1": _elicit("What is your name?", "name")}, "S1")


@server.tool()
def test_input_required_result_tampered_state(ctx: Context) -> CallToolResult | types.InputRequiredResult:
    """Keeps a state the SDK seals: one changed by the client is refused."""
    if ctx.request_state is None:
        return _ask({"confirm": _elicit("Please confirm", "ok", "boolean")}, "untampered")
    return result({"type": "text", "text": f"state {ctx.request_state}"})


@server.tool()
def test_input_required_result_capabilities(ctx: Context) -> CallToolResult | types.InputRequiredResult:
    """Asks only what the client declared it can answer (sampling, elicitation)."""
    caps = ctx.client_capabilities
    answers = _answers(ctx)
    wanted: dict[str, dict[str, Any]] = {}
    if caps is not None and caps.sampling is not None and "sample" not in answers:
        wanted["sample"] = _sample("Say something")
    if caps is not None and caps.elicitation is not None and "elicit" not in answers:
        wanted["elicit"] = _elicit("What is your name?", "name")
    if wanted:
        return _ask(wanted)
    return result({"type": "text", "text": f"answered: {sorted(answers)}"})


@server.prompt(description="A prompt that asks the user for context first")
def test_input_required_result_prompt(ctx: Context) -> list[dict[str, Any]] | types.InputRequiredResult:
    said = _said(_answers(ctx).get("user_context"), "context")
    if said is None:
        return _ask({"user_context": _elicit("What context should the prompt use?", "context")})
    return [{"role": "user", "content": {"type": "text", "text": f"With this context: {said}"}}]


@server.tool()
def test_missing_capability(prompt: str = "Hello", sampled: Annotated[types.CreateMessageResult, Resolve(ask_model)] = None) -> str:  # type: ignore[assignment]
    """Needs sampling: a client without it gets -32021 naming the capability."""
    return f"LLM response: {getattr(sampled.content, 'text', '')}"


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
def test_streaming_elicitation(who: Annotated[Name, Resolve(ask_name)]) -> str:
    """Asks the user for a name: an InputRequiredResult, never a request on the stream."""
    return f"Hello, {who.name}!"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs one message (sent only when the request asks for a log level)."""
    await ctx.info("test_logging_tool ran")
    return "logged"


@server.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Tells the listening clients that the tools changed."""
    await ctx.notify_tools_changed()
    return "tools changed"


@server.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Tells the listening clients that the prompts changed."""
    await ctx.notify_prompts_changed()
    return "prompts changed"


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
