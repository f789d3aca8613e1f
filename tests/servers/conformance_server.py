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
import datetime
import hashlib
import json
import sys
import uuid
import warnings
from collections.abc import Sequence
from types import MappingProxyType
from typing import Annotated, Any, Literal

from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve, Sample
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared import inbound as _inbound
from mcp.shared.exceptions import MCPError
from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY
from pydantic import BaseModel
from mcp import types
from mcp.types import CallToolResult

# Logging is deprecated in 2026-07-28 but the 2025-11-25 scenarios use it.
warnings.simplefilter("ignore")

# --- The tasks extension (io.modelcontextprotocol/tasks, SEP-2663): the suite's tasks-* scenarios.
# A task-supporting tool called by a client that declares the extension becomes a task: its work
# runs on, `tasks/get` shows it (its result inlined once completed), `tasks/update` answers what it
# asks (`input_required`), `tasks/cancel` stops it. Without the extension it runs as a plain call,
# or is refused with -32021 when it needs a task.
TASKS = "io.modelcontextprotocol/tasks"
TASK_TTL_MS = 300_000


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _declares_tasks(ctx: Any) -> bool:
    """Whether the request's client declared the extension (in its `_meta`, else its session)."""
    meta = (ctx.params or {}).get("_meta") or {}
    caps = meta.get("io.modelcontextprotocol/clientCapabilities")
    if isinstance(caps, dict):
        return TASKS in (caps.get("extensions") or {})
    declared = getattr(ctx.session, "client_capabilities", None)
    return TASKS in (getattr(declared, "extensions", None) or {})


def _needs_tasks() -> MCPError:
    return MCPError(MISSING_REQUIRED_CLIENT_CAPABILITY, "This needs the io.modelcontextprotocol/tasks extension",
                    {"requiredCapabilities": {"extensions": {TASKS: {}}}})


class Task:
    """One task: its state, what it asks, and the work that runs it."""

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex
        self.status = "working"
        self.created = self.updated = _now()
        self.result: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.asked: dict[str, Any] = {}
        self.answers: dict[str, Any] = {}
        self.answered = asyncio.Event()
        self.runner: asyncio.Task[None] | None = None

    def set(self, status: str) -> None:
        self.status, self.updated = status, _now()

    def created_result(self) -> dict[str, Any]:
        return {"resultType": "task", "taskId": self.id, "status": self.status, "createdAt": self.created,
                "lastUpdatedAt": self.updated, "ttlMs": TASK_TTL_MS, "pollIntervalMs": 100}

    def detailed(self) -> dict[str, Any]:
        out = {**self.created_result(), "resultType": "complete"}
        if self.status == "completed" and self.result is not None:
            out["result"] = self.result
        if self.status == "failed" and self.error is not None:
            out["error"] = self.error
        if self.status == "input_required":
            out["inputRequests"] = {k: v for k, v in self.asked.items() if k not in self.answers}
        return out

    async def ask(self, requests: dict[str, Any]) -> dict[str, Any]:
        """Parks the task until every one of `requests` is answered (by tasks/update)."""
        self.asked.update(requests)
        while any(k not in self.answers for k in requests):
            self.set("input_required")
            self.answered.clear()
            await self.answered.wait()
        self.set("working")
        return {k: self.answers[k] for k in requests}


TASK_STORE: dict[str, Task] = {}


async def _work(name: str, arguments: dict[str, Any], task: Task | None) -> dict[str, Any]:
    """What each task-supporting tool does, as a task or a plain call; a tool result."""
    def text(t: str, is_error: bool = False) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": t}], "isError": is_error}

    if name == "slow_compute":
        await asyncio.sleep(float(arguments.get("seconds", 0)))
        return text(f"computed {arguments.get('label', '')} in {arguments.get('seconds', 0)}s")
    if name == "failing_job":
        await asyncio.sleep(1)
        return text("failing_job failed, as it always does", is_error=True)
    if name == "protocol_error_job":
        raise RuntimeError("protocol_error_job broke")
    if name in ("confirm_delete", "multi_input"):
        if task is None:
            return text(f"{name} needs a task to ask its questions", is_error=True)
        if name == "confirm_delete":
            said = await task.ask({"confirm": _elicit(f"Delete {arguments.get('filename')}?", "confirm", "boolean")})
            return text(f"deleted {arguments.get('filename')}: {json.dumps(said)}")
        said = await task.ask({"first": _elicit("First?", "value"), "second": _elicit("Second?", "value")})
        return text(f"got both: {json.dumps(said)}")
    if name == "test_tool_with_task":
        return text(f"Hello, {arguments.get('_name', '?')}!")
    raise ValueError(name)


async def _run_task(task: Task, name: str, arguments: dict[str, Any]) -> None:
    try:
        task.result = await _work(name, arguments, task)
        task.set("completed")
    except asyncio.CancelledError:
        task.set("cancelled")
    except Exception as e:  # the protocol-level failure of protocol_error_job
        task.error = {"code": -32603, "message": str(e)}
        task.set("failed")


def _start_task(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    task = Task()
    TASK_STORE[task.id] = task
    task.runner = asyncio.get_running_loop().create_task(_run_task(task, name, arguments))
    return task.created_result()


# The SDK checks `Mcp-Name` against the body only for the core methods; the tasks extension's
# name its task too (tasks-request-headers), so its methods join the SDK's table here.
_inbound.NAME_BEARING_METHODS = MappingProxyType({
    **_inbound.NAME_BEARING_METHODS, "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"})


class TaskIdParams(types.RequestParams):
    taskId: str


class TaskUpdateParams(types.RequestParams):
    taskId: str
    inputResponses: dict[str, Any] | None = None


def _task_of(ctx: Any, task_id: str) -> Task:
    if not _declares_tasks(ctx):
        raise _needs_tasks()
    task = TASK_STORE.get(task_id)
    if task is None:
        raise MCPError(-32602, f"unknown taskId {task_id!r}", {"taskId": task_id})
    return task


async def _tasks_get(ctx: Any, params: TaskIdParams) -> dict[str, Any]:
    return _task_of(ctx, params.taskId).detailed()


async def _tasks_update(ctx: Any, params: TaskUpdateParams) -> dict[str, Any]:
    task = _task_of(ctx, params.taskId)
    for key, answer in (params.inputResponses or {}).items():
        if key in task.asked:
            task.answers[key] = answer
    task.answered.set()
    return {"resultType": "complete"}


async def _tasks_cancel(ctx: Any, params: TaskIdParams) -> dict[str, Any]:
    task = _task_of(ctx, params.taskId)
    if task.status not in ("completed", "failed", "cancelled") and task.runner is not None:
        task.runner.cancel()
        task.set("cancelled")
    return {"resultType": "complete"}


# The tools that may become tasks, and those that must.
TASK_TOOLS = {"slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input", "test_tool_with_task"}
TASK_ONLY = {"failing_job", "test_tool_with_task", "confirm_delete", "multi_input"}


class TasksExtension(Extension):
    identifier = TASKS

    def methods(self) -> Sequence[MethodBinding]:
        return (MethodBinding("tasks/get", TaskIdParams, _tasks_get),
                MethodBinding("tasks/update", TaskUpdateParams, _tasks_update),
                MethodBinding("tasks/cancel", TaskIdParams, _tasks_cancel))

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        if params.name not in TASK_TOOLS:
            return await call_next(ctx)
        arguments = dict(params.arguments or {})
        if not _declares_tasks(ctx):
            if params.name in TASK_ONLY:
                raise _needs_tasks()
            return CallToolResult.model_validate(await _work(params.name, arguments, None))
        if params.name == "test_tool_with_task":
            # An input round first (no task yet), then the task with what it gathered.
            said = (params.input_responses or {}).get("user_name")
            content = getattr(said, "content", None) if said is not None else None
            if not content:
                return _ask({"user_name": _elicit("What is your name?", "name")})
            arguments["_name"] = content.get("name")
        return _start_task(params.name, arguments)


# --- The skills extension (io.modelcontextprotocol/skills, SEP-2640): one skill of two files,
# listed by skills/list and skills/get and read as skill:// resources.
SKILLS = "io.modelcontextprotocol/skills"
SKILL_NAME = "conformance-skill"
SKILL_DESCRIPTION = "A skill for the conformance suite's skills checks."
SKILL_FILES = {
    "SKILL.md": ("text/markdown", f"---\nname: {SKILL_NAME}\ndescription: {SKILL_DESCRIPTION}\n---\n"
                 "# Conformance skill\n\nRead reference.md for the details.\n"),
    "reference.md": ("text/markdown", "# Reference\n\nThe details of the conformance skill.\n"),
}


def _skill_uri(file: str) -> str:
    return f"skill://{SKILL_NAME}/{file}"


def _skill_entry() -> dict[str, Any]:
    return {"uri": _skill_uri("SKILL.md"), "frontmatter": {"name": SKILL_NAME, "description": SKILL_DESCRIPTION},
            "resources": [{"uri": _skill_uri(f), "digest": "sha256:" + hashlib.sha256(t.encode()).hexdigest(),
                           "size": len(t.encode())} for f, (_, t) in SKILL_FILES.items()]}


class SkillsListParams(types.RequestParams):
    cursor: str | None = None


class SkillsGetParams(types.RequestParams):
    uri: str


async def _skills_list(ctx: Any, params: SkillsListParams) -> dict[str, Any]:
    return {"skills": [_skill_entry()], "ttlMs": 60_000, "cacheScope": "public"}


async def _skills_get(ctx: Any, params: SkillsGetParams) -> dict[str, Any]:
    if params.uri != _skill_uri("SKILL.md"):
        raise MCPError(-32602, f"no skill at {params.uri}", {"uri": params.uri})
    return {"skill": _skill_entry(), "ttlMs": 60_000, "cacheScope": "public"}


class SkillsExtension(Extension):
    identifier = SKILLS

    def methods(self) -> Sequence[MethodBinding]:
        return (MethodBinding("skills/list", SkillsListParams, _skills_list),
                MethodBinding("skills/get", SkillsGetParams, _skills_get))


server = MCPServer("mcplug-conformance-server", instructions="The conformance suite's server scenarios.",
                   extensions=[TasksExtension(), SkillsExtension()])


def _skill_file(file: str) -> Any:
    mime, text = SKILL_FILES[file]
    description = SKILL_DESCRIPTION if file == "SKILL.md" else f"{file} of {SKILL_NAME}"
    name = SKILL_NAME if file == "SKILL.md" else file

    @server.resource(_skill_uri(file), name=name, description=description, mime_type=mime)
    def read() -> str:
        return text

    return read


for _file in SKILL_FILES:
    _skill_file(_file)


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


# The tasks extension's tools (after the others: a header scenario calls the first listed with {}).
@server.tool()
def greet(name: str) -> str:
    """Greets (a plain call, never a task)."""
    return f"Hello, {name}!"


@server.tool()
async def slow_compute(seconds: float, label: str) -> str:
    """Takes `seconds` (a task for a client with the tasks extension)."""
    return _texts_of(await _work("slow_compute", {"seconds": seconds, "label": label}, None))


@server.tool()
async def failing_job() -> str:
    """Fails after a second (a task only)."""
    raise ToolError("needs a task")


@server.tool()
async def protocol_error_job() -> str:
    """Breaks (a task for a client with the tasks extension)."""
    return _texts_of(await _work("protocol_error_job", {}, None))


@server.tool()
async def confirm_delete(filename: str) -> str:
    """Asks for a confirmation, then deletes (a task only)."""
    raise ToolError("needs a task")


@server.tool()
async def multi_input() -> str:
    """Asks two things at once (a task only)."""
    raise ToolError("needs a task")


@server.tool()
async def test_tool_with_task() -> str:
    """Asks a name in an input round, then greets it in a task (a task only)."""
    raise ToolError("needs a task")


def _texts_of(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result["content"])

# A 1x1 red PNG, and a short WAV header with no samples.
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415408d763f8cfc0000003010100c9fe92ef0000000049454e44ae426082"
)).decode()
WAV = base64.b64encode(b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80\x3e\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00").decode()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
