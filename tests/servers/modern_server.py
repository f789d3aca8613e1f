#!/usr/bin/env python3
"""A 2026-07-28 ("modern" era) MCP server over stdio for mcplug's tests, built on the Python SDK
(mcp 2.3.0, `MCPServer`). server-everything only speaks the legacy era; this one proves that
mcplug negotiates the modern one, that tools work there, and that what a server needs from the
host (elicitation, sampling, roots, logging) comes back through `InputRequiredResult` rounds.
Held to the legacy era (`protocol_versions`), the same tools ask through server-to-client
requests instead: the SDK picks the mechanism by the negotiated version.

    .deps/venv/bin/python tests/servers/modern_server.py

Tools:
  echo {message} -> text "Echo: <message>"; add {a, b} -> a + b (text and structured content).
  Output schemas: forecast {city} -> structured content {temperature, sky} matching its
  outputSchema (derived by the SDK from the return type); misreport {city, fail?} -> declares the
  same outputSchema but answers {"temperature": "hot", ...}, which breaks it (the SDK publishes a
  hand-set schema without checking results against it; with fail: true the same in an isError
  result); unschemable {} -> declares an outputSchema that does not compile ({"x": {"type": 12}})
  and answers text; calls {} -> the names of the tools called so far (to show a call was never
  sent).
  Custom headers (SEP-2243; over Streamable HTTP the SDK checks them, -32020 when they do not
  match the schema): route {region, query} -> "routed <query> to <region>", region annotated
  `x-mcp-header: Region`; rezone {} -> route's header becomes `Zone` (answers then
  "routed <query> to zone <region>"); bad_header {value} lists `x-mcp-header: "Bad Name"` (not an
  HTTP token: an HTTP client must leave it out of tools/list; stdio may list it).
  Through the SDK's resolvers (`Resolve(...)`), one round per question:
  greet {}           -> elicits {name}, answers "Hello, <name>!"
  summarize {text}   -> samples the client's model, answers "model said: <text of the answer>"
  list_roots {}      -> asks for the roots, answers "roots: <uri>, <uri>"
  greet_and_sample {text} -> elicitation and sampling in the same round
  Hand-written `InputRequiredResult`s (modern era only):
  state_echo {}      -> round 1 asks to confirm (form elicitation) with an odd requestState;
                        round 2 checks the state came back byte for byte, answers
                        "state ok; action <action>; ids <first id> <second id>"
  endless {}         -> always asks for the roots again (to hit the client's round limit)
  sample_anyway {}   -> asks for sampling whatever the client declared
  Logging: log_levels {} logs at debug, info and warning, answers "logged".
  Channels (Claude Code's `claude/channel`, declared under experimental): channel_push {text}
  sends notifications/claude/channel {content, meta}; a client's
  notifications/claude/channel/permission_request {request_id, ...} is answered with
  notifications/claude/channel/permission {request_id, behavior: "allow"}.
  Tasks (`io.modelcontextprotocol/tasks` extension, for clients that declare it):
  slow_task {ms} -> a task that completes after ms with text "slow done"; ask_task {} -> a task
  that needs a colour (input_required, answered with tasks/update), then completes with
  "colour: <colour>"; forever_task {} -> a task that never ends (for cancel and timeout);
  cancelled_tasks {} -> the ids of the tasks cancelled so far.
Skills (`io.modelcontextprotocol/skills`, SEP-2640): skills/list and skills/get serve
  skill://git-workflow/SKILL.md (files SKILL.md and references/GUIDE.md, with digests and sizes;
  scripts/unlisted.sh is served but not listed) and skill://acme/billing/refunds/SKILL.md
  ("dynamic"); skill_reads {} -> the skill files read so far (JSON); tamper_skill {} -> changes
  GUIDE.md after the fact (its listed digest goes stale; skills/get gives the new one).
Started with --no-channel, the server does not declare claude/channel (channel_push still pushes).
Caching and change notifications (2026-07-28): a resource note://current (text, "first" at start);
set_note {text, notify?} changes it (with notify: notifications/resources/updated on the
subscriptions/listen streams that asked for it); add_tool {name, notify?} adds a tool `name`
answering "I am <name>" (with notify: notifications/tools/list_changed); end_subscriptions {}
ends every listen stream gracefully (the SDK answers each listen request). Started with
--cache-ttl-ms N, list results carry ttlMs N with cacheScope "public", resources/read ttlMs N
"private" (without it the SDK sends ttlMs 0: nothing is cacheable).
"""
import asyncio
import functools
import hashlib
import json
import sys
import time
import uuid
import warnings
from typing import Annotated, Any, TypedDict

from mcp.server.caching import CacheHint
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult
from mcp_types import (
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    RequestParams,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel, ConfigDict, Field

# Logging is deprecated in 2026-07-28 but still served; the tests exercise it on purpose.
warnings.simplefilter("ignore")

TASKS = "io.modelcontextprotocol/tasks"
ODD_STATE = 'opaque "state" \u00e9 \\ \u2603 end'


class TaskParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    taskId: str


class Tasks(Extension):
    """The tasks extension, just enough of it: tasks live in memory."""

    identifier = TASKS

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}

    def methods(self):
        return (
            MethodBinding("tasks/get", TaskParams, self.get),
            MethodBinding("tasks/update", TaskParams, self.update),
            MethodBinding("tasks/cancel", TaskParams, self.cancel),
        )

    def _now(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def _new(self, status: str = "working") -> dict[str, Any]:
        task = {
            "taskId": str(uuid.uuid4()),
            "status": status,
            "createdAt": self._now(),
            "lastUpdatedAt": self._now(),
            "ttlMs": 60000,
            "pollIntervalMs": 100,
        }
        self.tasks[task["taskId"]] = task
        return task

    def _set(self, task_id: str, **fields: Any) -> None:
        task = self.tasks.get(task_id)
        if task is not None and task["status"] not in ("completed", "failed", "cancelled"):
            task.update(fields, lastUpdatedAt=self._now())

    async def intercept_tool_call(self, params, ctx, call_next):
        caps = ctx.meta.get("io.modelcontextprotocol/clientCapabilities") if isinstance(ctx.meta, dict) else None
        if caps is None and ctx.meta is not None:
            caps = getattr(ctx.meta, "model_extra", {}).get("io.modelcontextprotocol/clientCapabilities")
        declared = TASKS in ((caps or {}).get("extensions") or {})
        if params.name not in ("slow_task", "ask_task", "forever_task") or not declared:
            return await call_next(ctx)
        task = self._new()
        if params.name == "slow_task":
            ms = int((params.arguments or {}).get("ms", 300))

            async def finish() -> None:
                await asyncio.sleep(ms / 1000)
                self._set(task["taskId"], status="completed",
                          result={"content": [{"type": "text", "text": "slow done"}], "isError": False})

            asyncio.get_running_loop().create_task(finish())
        elif params.name == "ask_task":
            self._set(task["taskId"], status="input_required", inputRequests={
                "colour": {"method": "elicitation/create", "params": {
                    "mode": "form", "message": "Which colour?",
                    "requestedSchema": {"type": "object", "properties": {"colour": {"type": "string"}},
                                        "required": ["colour"]}}}})
        return {"resultType": "task", **{k: v for k, v in task.items() if k != "inputRequests"}}

    async def get(self, ctx, params: TaskParams):
        task = self.tasks.get(params.taskId)
        if task is None:
            from mcp.shared.exceptions import MCPError
            raise MCPError(code=-32602, message=f"no task {params.taskId}")
        return {"resultType": "complete", **task}

    async def update(self, ctx, params: TaskParams):
        task = self.tasks.get(params.taskId)
        answers = (params.model_extra or {}).get("inputResponses") or {}
        if task is not None and "colour" in answers:
            colour = (answers["colour"].get("content") or {}).get("colour")
            task.pop("inputRequests", None)
            self._set(params.taskId, status="working")

            async def finish() -> None:
                await asyncio.sleep(0.1)
                self._set(params.taskId, status="completed",
                          result={"content": [{"type": "text", "text": f"colour: {colour}"}], "isError": False})

            asyncio.get_running_loop().create_task(finish())
        return {"resultType": "complete"}

    async def cancel(self, ctx, params: TaskParams):
        self._set(params.taskId, status="cancelled")
        CANCELLED.append(params.taskId)
        return {"resultType": "complete"}


SKILLS = "io.modelcontextprotocol/skills"
# The skills served (SEP-2640): their files, as resources; the entries are computed from them.
SKILL_FILES = {
    "skill://git-workflow/SKILL.md": "---\nname: git-workflow\ndescription: Follow this team's Git conventions\n"
                                     "metadata:\n  version: 2\n  tags: [git, review]\n---\n\n"
                                     "Branch from main; read references/GUIDE.md.\n",
    "skill://git-workflow/references/GUIDE.md": "Rebase, never merge \u2014 caf\u00e9 rules.\n",
    # Served, but not among the skill's listed files.
    "skill://git-workflow/scripts/unlisted.sh": "echo not listed\n",
    "skill://acme/billing/refunds/SKILL.md": "---\nname: refunds\ndescription: Process refunds per policy\n---\n\n"
                                             "Generated on demand.\n",
}
LISTED = {
    "skill://git-workflow/SKILL.md": ["skill://git-workflow/SKILL.md", "skill://git-workflow/references/GUIDE.md"],
    "skill://acme/billing/refunds/SKILL.md": "dynamic",
}
FRONTMATTER = {
    "skill://git-workflow/SKILL.md": {"name": "git-workflow", "description": "Follow this team's Git conventions",
                                      "metadata": {"version": 2, "tags": ["git", "review"]}},
    "skill://acme/billing/refunds/SKILL.md": {"name": "refunds", "description": "Process refunds per policy"},
}
SKILL_READS: list[str] = []


def skill_entry(uri: str) -> dict[str, Any]:
    files = LISTED[uri]
    if files != "dynamic":
        files = [{"uri": f, "digest": "sha256:" + hashlib.sha256(SKILL_FILES[f].encode()).hexdigest(),
                  "size": len(SKILL_FILES[f].encode())} for f in files]
    return {"uri": uri, "frontmatter": FRONTMATTER[uri], "resources": files}


class SkillParams(RequestParams):
    model_config = ConfigDict(extra="allow")


class Skills(Extension):
    """The skills extension (SEP-2640): skills/list and skills/get over the files above."""

    identifier = SKILLS

    def methods(self):
        return (
            MethodBinding("skills/list", SkillParams, self.list),
            MethodBinding("skills/get", SkillParams, self.get),
        )

    async def list(self, ctx, params: SkillParams):
        return {"resultType": "complete", "skills": [skill_entry(u) for u in LISTED]}

    async def get(self, ctx, params: SkillParams):
        uri = (params.model_extra or {}).get("uri")
        if uri not in LISTED:
            from mcp.shared.exceptions import MCPError
            raise MCPError(code=-32602, message=f"no skill at {uri}")
        return {"resultType": "complete", "skill": skill_entry(uri)}


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

def bad_header(value: str) -> str:
    """Lists an x-mcp-header that is no HTTP token (set below: the SDK refuses it at
    registration), so a Streamable HTTP client must leave the tool out."""
    return "called anyway: " + value


bad_header_tool = Tool.from_function(bad_header)
bad_header_tool.parameters = {"type": "object", "required": ["value"],
                              "properties": {"value": {"type": "string", "x-mcp-header": "Bad Name"}}}

CANCELLED: list[str] = []


def _cache_hints() -> dict[str, CacheHint]:
    if "--cache-ttl-ms" not in sys.argv:
        return {}
    ttl = int(sys.argv[sys.argv.index("--cache-ttl-ms") + 1])
    hints = {m: CacheHint(ttl_ms=ttl, scope="public")
             for m in ("tools/list", "prompts/list", "resources/list", "resources/templates/list")}
    hints["resources/read"] = CacheHint(ttl_ms=ttl, scope="private")
    return hints


server = MCPServer(
    name="modern-test-server",
    version="1.0.0",
    instructions="mcplug modern-era test server",
    extensions=[Tasks(), Skills()],
    tools=[misreport_tool, unschemable_tool, bad_header_tool],
    cache_hints=_cache_hints(),
)

# Channels are an experimental capability; the SDK builds capabilities without one, so add it
# (unless started with --no-channel: then channel_push pushes all the same, undeclared).
_lowlevel = server._lowlevel_server
_get_capabilities = _lowlevel.get_capabilities


@functools.wraps(_get_capabilities)
def _with_channel(notification_options=None, experimental_capabilities=None, *args, **kwargs):
    experimental = dict(experimental_capabilities or {})
    experimental.update({"claude/channel": {}, "claude/channel/permission": {}})
    return _get_capabilities(notification_options, experimental, *args, **kwargs)


if "--no-channel" not in sys.argv:
    _lowlevel.get_capabilities = _with_channel


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


def _route(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], query: str) -> str:
    """Routes a query to a region; `region` is mirrored into Mcp-Param-Region (SEP-2243)."""
    return f"routed {query} to {region}"


def _route_zone(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Zone"})], query: str) -> str:
    """Routes a query to a region; `region` is mirrored into Mcp-Param-Zone (SEP-2243)."""
    return f"routed {query} to zone {region}"


server.add_tool(_route, name="route")



@server.tool()
def rezone() -> str:
    """Re-registers `route` with its header renamed Mcp-Param-Zone (its schema changes under
    the client, without a list_changed)."""
    server.remove_tool("route")
    server.add_tool(_route_zone, name="route")
    return "rezoned"


def _serve_skill_file(uri: str) -> None:
    def read() -> str:
        SKILL_READS.append(uri)
        return SKILL_FILES[uri]

    server.resource(uri, mime_type="text/markdown")(read)


for _uri in SKILL_FILES:
    _serve_skill_file(_uri)


@server.tool()
def skill_reads() -> str:
    """The skill files read so far (resources/read), as JSON text."""
    return json.dumps(SKILL_READS)


@server.tool()
def tamper_skill() -> str:
    """Changes git-workflow's GUIDE.md, so that an entry listed before no longer matches it."""
    SKILL_FILES["skill://git-workflow/references/GUIDE.md"] += "One more rule.\n"
    return "tampered"


@server.tool()
def calls() -> str:
    """The names of the tools called so far, as JSON text."""
    return json.dumps(CALLS)


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def ask_model(text: str) -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))],
                  max_tokens=50)


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
def cancelled_tasks() -> str:
    """The ids of the tasks a client cancelled (tasks/cancel), space-separated."""
    return " ".join(CANCELLED)


@server.tool()
def greet(name: Annotated[Name, Resolve(ask_name)]) -> str:
    """Asks the user's name (elicitation), then greets them."""
    return f"Hello, {name.name}!"


@server.tool()
def summarize(text: str, sampled: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Has the client's model summarize the text (sampling)."""
    return f"model said: {sampled.content.text}"


@server.tool()
def list_roots(listed: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """Lists the client's roots."""
    return "roots: " + ", ".join(str(r.uri) for r in listed.roots)


@server.tool()
def greet_and_sample(text: str, name: Annotated[Name, Resolve(ask_name)],
                     sampled: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Elicitation and sampling in the same round."""
    return f"Hello, {name.name}; model said: {sampled.content.text}"


SEEN_IDS: list[str] = []


@server.tool()
def state_echo(ctx: Context) -> str | InputRequiredResult:
    """Checks that the client echoes requestState byte for byte, with a new request id."""
    SEEN_IDS.append(str(ctx.request_id))
    if ctx.request_state is None:
        return InputRequiredResult(
            input_requests={"confirm": ElicitRequest(params=ElicitRequestFormParams(
                message="Confirm?", requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}}))},
            request_state=ODD_STATE,
        )
    if ctx.request_state != ODD_STATE:
        return f"state changed: {ctx.request_state!r}"
    answer = (ctx.input_responses or {}).get("confirm")
    action = getattr(answer, "action", None)
    return f"state ok; action {action}; ids {' '.join(SEEN_IDS[-2:])}"


@server.tool()
def endless(ctx: Context) -> str | InputRequiredResult:
    """Never satisfied: asks for the roots again every round."""
    n = int(ctx.request_state or "0")
    return InputRequiredResult(input_requests={f"roots{n}": ListRootsRequest()}, request_state=str(n + 1))


@server.tool()
def sample_anyway(ctx: Context) -> str | InputRequiredResult:
    """Asks for sampling whatever the client declared (a server breaking the rules)."""
    if ctx.input_responses:
        return "sampled"
    return InputRequiredResult(input_requests={"s": {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}}})


@server.tool()
async def log_levels(ctx: Context) -> str:
    """Logs one line at debug, info and warning."""
    await ctx.debug("debug line")
    await ctx.info("info line")
    await ctx.warning("warning line")
    return "logged"


@server.tool()
async def channel_push(text: str, ctx: Context) -> str:
    """Pushes a channel message (notifications/claude/channel) to the client."""
    await ctx.request_context.session._request_outbound.notify(
        "notifications/claude/channel", {"content": text, "meta": {"chat_id": "42"}})
    return "pushed"


class PermissionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    request_id: str


async def _permission_request(ctx, params: PermissionRequest) -> None:
    await ctx.session._connection.outbound.notify(
        "notifications/claude/channel/permission", {"request_id": params.request_id, "behavior": "allow"})


NOTES = {"note://current": "first"}


@server.resource("note://current")
def current_note() -> str:
    """The current note (set_note changes it)."""
    return NOTES["note://current"]


@server.tool()
async def set_note(text: str, ctx: Context, notify: bool = False) -> str:
    """Changes note://current; with notify, tells the listen streams subscribed to it."""
    NOTES["note://current"] = text
    if notify:
        await ctx.notify_resource_updated("note://current")
    return "noted"


@server.tool()
async def add_tool(name: str, ctx: Context, notify: bool = False) -> str:
    """Adds a tool `name`; with notify, tells the listen streams that asked for tool list changes."""
    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description="added at run time")
    if notify:
        await ctx.notify_tools_changed()
    return "added"


@server.tool()
def end_subscriptions() -> str:
    """Ends every subscriptions/listen stream gracefully (each listen request gets its result)."""
    _lowlevel._request_handlers["subscriptions/listen"].handler.close()
    return "ended"


_lowlevel.add_notification_handler("notifications/claude/channel/permission_request", PermissionRequest,
                                   _permission_request)


if __name__ == "__main__":
    server.run("stdio")
