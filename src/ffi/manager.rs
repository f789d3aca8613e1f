//! `mcplug_manager_*`: many servers behind one opaque handle, their tools in one pool.

use super::boundary::{
    call_options, ffi_boundary, json_arg, json_required, on_spare_stack, raw_object_arg, str_arg,
    tool_call_options,
};
use super::handle::{self, Entered, Entries, Handle};
use super::mcplug_status;
use crate::error::{Error, ErrorKind};
use crate::manager::options::{Listing, ListingOptions, ManagerOptions};
use crate::manager::Manager;
use crate::queue::Pulled;
use crate::runtime;
use std::ffi::c_char;
use std::time::Duration;

/// Many MCP servers and their tools in one pool. Opaque; every function may be called on it from
/// any thread, concurrently. Freed with `mcplug_manager_free`.
#[allow(non_camel_case_types)]
pub struct mcplug_manager {
    manager: Manager,
    /// Entry points currently running on this handle; `mcplug_manager_free` waits for them.
    active: Entries,
}

impl mcplug_manager {
    pub(super) fn manager(&self) -> &Manager {
        &self.manager
    }
}

impl Handle for mcplug_manager {
    const NAME: &'static str = "manager";
    fn entries(&self) -> &Entries {
        &self.active
    }
}

type Active<'a> = Entered<'a, mcplug_manager>;

fn enter<'a>(ptr: *mut mcplug_manager) -> Result<Active<'a>, Error> {
    handle::enter(ptr)
}

/// `options_json` of a listing function, by the manager's one rule for them.
fn listing_options(options_json: *const c_char, listing: Listing) -> Result<ListingOptions, Error> {
    ListingOptions::parse(json_arg(options_json, "options_json")?.as_ref(), listing)
}

/// What a pull gives the host: the event(s), `timeout`, or `closed` after the last.
fn pulled(p: Pulled, timeout_ms: i32) -> Result<String, Error> {
    match p {
        Pulled::Event(text) => Ok(text),
        Pulled::TimedOut => Err(Error::timeout(format!("no event within {timeout_ms} ms"))),
        Pulled::Closed => Err(Error::new(
            ErrorKind::Closed,
            "the manager is closed and every event was delivered",
        )),
    }
}

fn wait_of(timeout_ms: i64) -> Option<Duration> {
    (timeout_ms >= 0).then(|| Duration::from_millis(timeout_ms as u64))
}

/// Creates a manager (no server yet: see `mcplug_manager_connect`).
///
/// `options_json` (NULL for defaults): `local_concurrency` (3: stdio servers connecting at once),
/// `remote_concurrency` (20: http/sse/ws servers connecting at once), `connection` (the
/// connection options of `mcplug_client_connect`, for every server), `max_description_chars`
/// (2048: longer tool descriptions are cut, ending with "… [truncated]"), `max_output_tokens`
/// (25000, counted as 4 characters each; or `max_output_chars`; null: no cap — tool output text
/// beyond it is cut, ending with a line saying how many characters were cut),
/// `terminal_errors` (3: that many consecutive connection failures of one server's calls — a
/// `closed` error, or a `transport` error other than an HTTP error status (which carries
/// `data.http_status`: the server answered) — close and reconnect it), `reconnect_initial_ms` (1000),
/// `reconnect_max_ms` (30000), `reconnect_attempts` (5: a lost connection is retried at once,
/// then after `reconnect_initial_ms`, doubling up to `reconnect_max_ms`, this many attempts in
/// all before the server is left `failed`; 0: never), `disabled` (server names that start
/// `disabled`), `max_events` (10000), `max_media_bytes` (5242880: base64 images, audio and
/// blobs of one result beyond it are replaced, item by item, by a text saying what was there;
/// null: no limit), `output_dir` (a directory, created 0700: an output over its limit is first
/// written there whole, to a 0600 file of its own — media with their MIME type's extension — that
/// the marker names), `output_dir_max_bytes` (1 GiB: the oldest kept outputs go first),
/// `resource_tools` (false; true: while a connected server offers resources, the pool holds
/// Claude Code's `ListMcpResourcesTool` `{server?}` — the resources as JSON text, each with
/// `server` — and `ReadMcpResourceTool` `{server, uri}` — the contents as embedded resources —
/// under those names, `server` ""; a model's mistake there is an `isError` result), `policy`
/// (`{"allowedMcpServers": [...], "deniedMcpServers": [...]}`, entries as in
/// `managed-settings.json`: `serverName`, `serverCommand`, `serverUrl` with `*`; applied to every
/// configuration `mcplug_manager_connect` is given, as Claude Code applies its policy to
/// `--mcp-config` and `setMcpServers`: a server it refuses is left out, and the connect result
/// lists it in `excluded` with `reason` `denied` or `not_allowed` and `detail`), `registry`
/// (off; `true`: the official MCP registry, or an http(s) base URL of another: fetched once in
/// the background at the first connect, cached on disk; a server it knows carries `registry:
/// {name, status, match}` in its status and pool entries — see the README). The
/// limits and the cleaning apply to tool results, `resources/read` and `prompts/get` alike. An
/// unknown option is `invalid_argument`.
/// On `MCPLUG_OK`, `*manager` is the new handle and `out` is `mcplug_manager_status`'s result.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_new(
    options_json: *const c_char,
    manager: *mut *mut mcplug_manager,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let options = json_arg(options_json, "options_json")?;
        if manager.is_null() {
            return Err(Error::invalid(
                "`manager` (the handle out-parameter) is NULL",
            ));
        }
        let m = Manager::new(ManagerOptions::parse(options.as_ref())?);
        let status = m.status().to_string();
        let handle = handle::into_raw(mcplug_manager {
            manager: m,
            active: Entries::default(),
        });
        // SAFETY: `manager` was checked not NULL above and is valid for one write (the contract).
        unsafe { *manager = handle };
        Ok(status)
    })
}

/// Takes a configuration and starts connecting every server in it; returns at once (it does not
/// wait for any server) with the status, each new server `pending` (or `disabled`, or `failed`
/// for an entry that cannot be used). `config_json`: a config file's content
/// (`{"mcpServers": {"<name>": {...entry...}}}`), the output of `mcplug_config_merge` or
/// `mcplug_config_discover` (`{"servers": {"<name>": {"config": {...}}}}`), or VS Code's
/// `{"servers": {...}}`. An entry with `"disabled": true` starts `disabled`. An entry
/// `{"type": "sdk", "tools": [...]}` is an in-process server the host serves itself (see
/// `mcplug_manager_set_tools`): `connected` at once, with no process and no socket; applied again
/// with only its `tools` changed, its tools are replaced in place (as `set_tools`), not reconnected.
///
/// Local servers connect `local_concurrency` at a time and remote ones `remote_concurrency` at a
/// time, each in its own slot: a slow or failing server never delays the others. Each state
/// change is an event `{"type": "state", "server", "state": "pending"|"connected"|"failed"|
/// "needs-auth"|"disabled", "transport", "tools": [pool names], "error"?: {"kind", "message"},
/// "attempt"?: N (a reconnect attempt), "server_info"?, "protocol_version"?}`.
/// Calling it again applies a new configuration: servers with the same entry stay as they are,
/// changed ones reconnect, and those no longer in it are closed (event `{"type": "removed",
/// "server"}`). Errors: `invalid_argument` (not one of the shapes), `closed`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_connect(
    manager: *mut mcplug_manager,
    config_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let config = json_required(config_json, "config_json")?;
        Ok(runtime::block_on(h.0.manager.connect(&config))?.to_string())
    })
}

/// Waits until no server is `pending`; returns the status. `options_json` (NULL: wait as long
/// as it takes): `timeout_ms` (then `MCPLUG_TIMEOUT` if some server is still pending).
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_wait(
    manager: *mut mcplug_manager,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let opts = call_options(options_json)?;
        Ok(runtime::block_on(h.0.manager.wait_settled(opts.timeout.or(None)))?.to_string())
    })
}

/// Every server's state: `{"servers": {"<name>": {"state", "transport", "tools": [pool names],
/// "error"?, "attempt"?, "server_info"?, "protocol_version"?, "era"?, "instructions"?,
/// "registry"?}}, "tools": N, "registry"?}` (N: the pool's size; the top-level `registry`, with
/// option `registry`: `{url, state: "idle"|"loading"|"ready"|"failed"|"skipped", servers,
/// fetched_at?, error?}`), servers in configuration order.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_status(
    manager: *mut mcplug_manager,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        Ok(h.0.manager.status().to_string())
    })
}

/// The tool pool: `{"tools": [...], "dropped": [...]}`. Each tool: `name` (the pool name
/// `mcp__{server}__{tool}`: characters outside `[a-zA-Z0-9_-]` become `_`; longer than 64
/// characters, the first 55 and `_` and 8 hex digits of a hash of the server and tool names),
/// `server`, `tool` (the server's own name for it), `description` (bidirectional controls and
/// zero-width characters removed, capped; `description_cut`: how many characters were cut),
/// `inputSchema` (as the server sent it), `outputSchema`/`annotations`/`title`/`_meta` when the
/// server sent them, and the flags `read_only` (`annotations.readOnlyHint`), `destructive`
/// (`destructiveHint`), `always_load` (`_meta["anthropic/alwaysLoad"]`), `search_hint`
/// (`_meta["anthropic/searchHint"]`, or null). Sorted by name (host tools would come first); two
/// tools of one server with one pool name: the first keeps it, the other is in `dropped` (`name`,
/// `server`, `tool`, `reason` `"duplicate"`, `detail`); tools of two servers with one pool name
/// (`mcp__x__y__z` is `x`'s `y__z` and `x__y`'s `z`): neither is in the pool, each is in
/// `dropped` with `reason` `"collision"`, and a call by the name fails `not_found` naming both
/// servers (`data.collision`: the entries). Prompts follow the same rule. Only connected
/// servers' tools are in the pool. `options_json` (NULL: all): `{"server": "<name>"}` for one
/// server's tools; any other key is `invalid_argument` naming it and the keys there are, as in
/// every listing function's options. `format` (`"mcp"`, the default; `"anthropic"`, `"openai"`):
/// each tool as that model API's tool definition instead of the pool entry (Messages API
/// `{name, description, input_schema}`; Chat Completions `{"type": "function", "function":
/// {name, description, parameters}}`), so the host hands the list on as it is.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_list_tools(
    manager: *mut mcplug_manager,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let ListingOptions { server, format, .. } = listing_options(options_json, Listing::Pool)?;
        // Written from the pool without a tree: the servers' schemas, however deep, are copied
        // as text, so no recursion depends on them (a 128 KiB host thread is enough).
        let text = h.0.manager.list_tools_text(server.as_deref());
        if format == crate::model::Format::Mcp {
            return Ok(text);
        }
        let raw = crate::protocol::RawJson::from_built(text);
        on_spare_stack(|| crate::model::listing_raw(raw, format).map(|r| r.into_string()))?
    })
}

/// Calls a tool of the pool by its pool name; the call goes to its server under the server's
/// own name for it. Arguments and options as `mcplug_client_call_tool`. `out` is the server's
/// `CallToolResult` with bidirectional controls and zero-width characters removed from its text
/// and its text capped (`max_output_tokens`; the cut item ends with a line saying how much was
/// cut). Errors as `mcplug_client_call_tool`, plus `not_found` (no such pool name; the message
/// says when its server is not connected) and `closed` (the server is not connected now).
/// A `closed` error, or a `transport` error without `data.http_status`, counts toward
/// `terminal_errors`; an answer the server gave (an HTTP error status, a JSON-RPC error,
/// `isError`) resets the count. The option `format` (`"anthropic"`, `"openai"`) maps the
/// cleaned result as `mcplug_client_call_tool` says.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_call_tool(
    manager: *mut mcplug_manager,
    pool_name: *const c_char,
    arguments_json: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let name = str_arg(pool_name, "pool_name")?;
        let args = raw_object_arg(arguments_json, "arguments_json")?;
        let opts = tool_call_options(options_json)?;
        let v = runtime::block_on(Box::pin(h.0.manager.call_tool(name, args, &opts)))?;
        Ok(v.into_string())
    })
}

/// Ranks the pool's tools by a query, for hosts that load tools on demand (deferred loading).
/// `query`: words matched case-insensitively against each tool's name, its search hint
/// (`_meta["anthropic/searchHint"]`) and its description — a word of the name counts most, then
/// the hint, then the description; `+word` must match; `select:<name>,<name>` picks tools
/// exactly (pool names, or the servers' own names), in that order. `options_json` (NULL: the
/// defaults): `max_results` (5), `server` (one server's tools only). `out`: `{"tools": [the pool
/// entries of `mcplug_manager_list_tools`, each with `score`, best first], "total": N (every
/// match, before `max_results`)}`; with `format` (as `mcplug_manager_list_tools`), each entry is
/// that API's tool definition. Errors: `invalid_argument` (an empty query, bad options, an
/// unknown key).
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_search_tools(
    manager: *mut mcplug_manager,
    query: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let query = str_arg(query, "query")?;
        let ListingOptions {
            server,
            max_results,
            format,
            ..
        } = listing_options(options_json, Listing::Search)?;
        let max = max_results.unwrap_or(5);
        let manager = &h.0.manager;
        on_spare_stack(|| {
            manager
                .search_tools(query, max, server.as_deref())
                .map(|v| crate::model::listing(v, format).to_string())
        })?
    })
}

/// The resources and resource templates of every connected server that has the `resources`
/// capability, listed now (every page; the servers asked in parallel). `options_json` (NULL:
/// the defaults): `server` (that server only; then an error of it is this call's error),
/// `timeout_ms` (per request). `out`: `{"resources": [each resource with "server"], "templates":
/// [each template with "server"], "errors": {"<server>": {"kind", "message"}}}` — a server that
/// failed to answer is in `errors`, the others' lists are whole.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_list_resources(
    manager: *mut mcplug_manager,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let ListingOptions { server, call, .. } = listing_options(options_json, Listing::Servers)?;
        Ok(runtime::block_on(h.0.manager.list_resources(server.as_deref(), &call))?.to_string())
    })
}

/// Reads a resource of one server (`resources/read`). `out`: the `ReadResourceResult`, with
/// bidirectional controls and zero-width characters removed from its text and the text capped
/// like tool output. Options as `mcplug_client_request`. Errors: `not_found` (no such server),
/// `closed` (not connected), `invalid_argument` (an in-process server), and the server's own.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_read_resource(
    manager: *mut mcplug_manager,
    server: *const c_char,
    uri: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let server = str_arg(server, "server")?;
        let uri = str_arg(uri, "uri")?;
        let opts = call_options(options_json)?;
        Ok(runtime::block_on(h.0.manager.read_resource(server, uri, &opts))?.into_string())
    })
}

/// The prompts of every connected server that has the `prompts` capability, listed now.
/// `options_json` as `mcplug_manager_list_resources`. `out`: `{"prompts": [each prompt as the
/// server sent it, with "server", "prompt" (the server's own name) and "name" the qualified name
/// `mcp__{server}__{prompt}`, made like pool names], "errors": {"<server>": {...}}, "dropped":
/// [...]}`: a qualified name prompts of two servers come out as is given to neither, each listed
/// in `dropped` (`name`, `server`, `prompt`, `reason` `"collision"`, `detail`), as tools are.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_list_prompts(
    manager: *mut mcplug_manager,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let ListingOptions { server, call, .. } = listing_options(options_json, Listing::Servers)?;
        Ok(runtime::block_on(h.0.manager.list_prompts(server.as_deref(), &call))?.to_string())
    })
}

/// Gets a prompt (`prompts/get`) by its qualified name `mcp__{server}__{prompt}`, with
/// `arguments_json` (a JSON object of strings, or NULL; or a JSON string holding a command line as
/// a user types it after `/mcp__server__prompt`, `"\"New York\" NY"`: its words, split as a POSIX
/// shell splits them, go to the prompt's declared arguments in order, as Claude Code maps its
/// slash commands — more words than arguments, a required one missing or an unbalanced quote is
/// `invalid_argument` naming the arguments). `out`: the `GetPromptResult`, its text cleaned and
/// capped like tool output. Every server whose name begins the qualified name is asked for its
/// prompts. Errors: `not_found` (no server or prompt of that name, or prompts of two servers
/// make the name: the message names both), `closed`,
/// `invalid_argument`, and the server's own.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_get_prompt(
    manager: *mut mcplug_manager,
    qualified_name: *const c_char,
    arguments_json: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let name = str_arg(qualified_name, "qualified_name")?;
        let args = json_arg(arguments_json, "arguments_json")?.filter(|a| !a.is_null());
        let opts = call_options(options_json)?;
        Ok(runtime::block_on(h.0.manager.get_prompt(name, args, &opts))?.into_string())
    })
}

/// Sends any request (`resources/subscribe`, `completion/complete`, `resources/templates/list`,
/// ...) to one connected server, as `mcplug_client_request` does; `out` is its result,
/// untouched. Errors: `not_found` (no such server), `closed` (not connected),
/// `invalid_argument` (an in-process server, bad params), and the server's own.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_request(
    manager: *mut mcplug_manager,
    server: *const c_char,
    method: *const c_char,
    params_json: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let server = str_arg(server, "server")?;
        let method = str_arg(method, "method")?;
        let params = super::client::params_arg(params_json)?;
        let opts = call_options(options_json)?;
        let v = runtime::block_on(Box::pin(h.0.manager.request(server, method, params, &opts)))?;
        Ok(v.into_string())
    })
}

/// Replaces the tools of an in-process server (a configuration entry `{"type": "sdk", "tools":
/// [...]}`: the host serves it — no process, no socket). `tools_json`: a JSON array of tools,
/// each `{"name", "description"?, "inputSchema"? (absent: any object), "title"?,
/// "outputSchema"?, "annotations"?, "_meta"?}`. Their pool names come first in the pool (host
/// tools). A call of one through `mcplug_manager_call_tool` is the event `{"type": "request",
/// "server", "id": "m7", "method": "tools/call", "params": {"name", "arguments"}}`, answered
/// with `mcplug_manager_respond` (`{"id", "result": CallToolResult}` — an object with a `content`
/// array, else `invalid_argument` and the call still waits — or `{"id", "error":
/// {"code", "message"}}`, which the caller gets as an `rpc` error); a call that times out
/// (`timeout_ms`, or the connection option `tool_timeout_ms`), is cancelled (`tag`), or whose
/// server closes ends with that error and the event `{"type": "request_cancelled", "server",
/// "id"}`. When the server is connected, the event `tools_changed` follows. `out`: the server's
/// status entry. Errors: `not_found` (no such server), `invalid_argument` (not an in-process
/// server, a bad tool list — named by its index and field).
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_set_tools(
    manager: *mut mcplug_manager,
    server: *const c_char,
    tools_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let server = str_arg(server, "server")?;
        let tools = json_required(tools_json, "tools_json")?;
        Ok(h.0.manager.set_tools(server, &tools)?.to_string())
    })
}

/// Starts a tool call by its pool name without waiting (as `mcplug_client_call_tool_start`): on
/// `MCPLUG_OK`, `*call` is the call's number and `*out` is NULL; the outcome arrives exactly
/// once in the manager's events as `{"type": "completion", "call": N, "result": {...}}` (the
/// result as `mcplug_manager_call_tool` returns it) or `{"type": "completion", "call": N,
/// "error": {...}}` — also when the manager closes, before its `closed` event. A thread of the
/// host is not held while the call runs. Errors at once: `not_found` (no such pool name),
/// `invalid_argument` (bad arguments or options), `closed`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_call_tool_start(
    manager: *mut mcplug_manager,
    pool_name: *const c_char,
    arguments_json: *const c_char,
    options_json: *const c_char,
    call: *mut u64,
    out: *mut *mut c_char,
) -> mcplug_status {
    super::boundary::ffi_boundary_quiet!(out, {
        let h = enter(manager)?;
        // SAFETY: the caller passes NULL or a writable pointer (the header's convention).
        let call = unsafe { call.as_mut() }
            .ok_or_else(|| Error::invalid("`call` (the call number out-parameter) is NULL"))?;
        let name = str_arg(pool_name, "pool_name")?;
        let args = raw_object_arg(arguments_json, "arguments_json")?.map(|a| a.to_owned());
        let opts = tool_call_options(options_json)?;
        *call = h.0.manager.call_tool_start(name, args, opts)?;
        Ok(())
    })
}

/// Cancels a started call: its completion event carries a `cancelled` error (unless its outcome
/// came first). `out`: `{"cancelled": true}`, or `false` when no call of that number is in flight.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_cancel_call(
    manager: *mut mcplug_manager,
    call: u64,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        Ok(serde_json::json!({"cancelled": h.0.manager.cancel_call(call)}).to_string())
    })
}

/// Like `mcplug_manager_next_event`, but once one event came, takes up to `max_events` (0 counts
/// as one) without waiting more: `out` is a JSON array of events. Same statuses. An array
/// shorter than `max_events` means the queue was empty after it.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_next_events(
    manager: *mut mcplug_manager,
    max_events: u32,
    timeout_ms: i32,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        pulled(
            h.0.manager
                .next_events(max_events as usize, wait_of(timeout_ms.into())),
            timeout_ms,
        )
    })
}

/// Waits up to `timeout_ms` (negative: forever; 0: only looks) for the next event of any
/// server: every event of `mcplug_client_next_event` with `"server": "<name>"` added (request
/// events get ids of the manager's own, unique across servers, for `mcplug_manager_respond`),
/// except each connection's `closed`, which becomes a `state` event; plus `{"type": "state",
/// ...}` (see `mcplug_manager_connect`), `{"type": "tools_changed", "server", "tools": [its pool
/// names], "pool": [every pool name]}` after a server's `notifications/tools/list_changed` (or
/// after its 2026-07-28 listen stream was opened again: `listening` with `reopened` true),
/// `{"type": "removed", "server"}`, `{"type": "resources_changed" | "prompts_changed", "server"}`
/// (after the server's list_changed notification for them: list them again) — coalesced: a
/// storm of notifications makes one tools re-list in flight per server and at most one queued,
/// and a new `tools_changed`, `resources_changed` or `prompts_changed` of a server replaces the
/// one of the same server still waiting in the queue (it goes last) — the `tools/call`
/// requests of in-process servers (see `mcplug_manager_set_tools`), and the `completion` events of
/// started calls (`mcplug_manager_call_tool_start`). The last event is
/// `{"type": "closed"}` once the manager is
/// closed. Returns `MCPLUG_OK`, `MCPLUG_TIMEOUT`, or `MCPLUG_CLOSED` (closed, every event pulled).
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_next_event(
    manager: *mut mcplug_manager,
    timeout_ms: i32,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        pulled(
            h.0.manager.next_event(wait_of(timeout_ms.into())),
            timeout_ms,
        )
    })
}

/// Answers a request event by its (manager) id: `{"id": "m1", "result": {...}}` or
/// `{"id": "m1", "error": {"code", "message"}}`; it goes to the server that asked. `out` is `{}`.
/// Errors: `not_found` (no request with that id waits), `closed` (that connection is gone),
/// `invalid_argument`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_respond(
    manager: *mut mcplug_manager,
    response_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let response = json_required(response_json, "response_json")?;
        runtime::block_on(h.0.manager.respond(&response))?;
        Ok("{}".into())
    })
}

/// Closes the server's connection (if any) and connects it again, one attempt; waits for that
/// attempt and returns the server's status entry. Errors: `not_found` (no such server), `closed`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_reconnect(
    manager: *mut mcplug_manager,
    server: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let name = str_arg(server, "server")?;
        Ok(runtime::block_on(h.0.manager.reconnect(name))?.to_string())
    })
}

/// Disables a server (`enabled` 0: its connection closes and its tools leave the pool; state
/// `disabled`) or enables it again (non-zero: starts connecting; returns without waiting). `out` is the
/// server's status entry. Errors: `not_found`, `closed`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_set_enabled(
    manager: *mut mcplug_manager,
    server: *const c_char,
    enabled: i32,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let name = str_arg(server, "server")?;
        Ok(runtime::block_on(h.0.manager.set_enabled(name, enabled != 0))?.to_string())
    })
}

/// Authorizes a remote server (OAuth; the manager never starts one on its own, so a server
/// without a usable token is `needs-auth`, its state event carrying `auth`: `{"reason",
/// "resource_metadata"?, "issuer"?, "scope"?}`, and its only pool tool
/// `mcp__<server>__authenticate`). Connects the server again, this time allowed to authorize,
/// and returns as soon as the authorization's URL is known: `out` is the server's status entry
/// with `"server"`, `"state": "pending"` and `"authorization": {"url", "redirect_uri",
/// "issuer", "scope"?}` — send the user to `url`; the library's loopback listener at
/// `redirect_uri` takes the browser's callback. The same URL also comes as the event
/// `{"type": "auth", "server", "state": "authorizing", "url", ...}`. When no user is needed
/// (a client-credentials grant, a token another process stored), it returns once the server is
/// connected. Once authorized, the server's tools replace the pseudo-tool (event `state`
/// `connected`). `options_json` (NULL: none): `wait` (true: return only when the authorization
/// has ended — the status of the connected server, or its error), `timeout_ms` (of that wait),
/// `callback_url` (the full redirect URL with `code`, `state`, `iss`, when the host captured it
/// itself: completes the authorization under way and waits for it). A server already
/// `connected` is left as it is (its status); calling it again while one is under way gives the
/// same URL. Errors: `not_found`, `invalid_argument` (a local or disabled server, a bad option,
/// a `callback_url` with no authorization waiting), `needs_auth` (the authorization failed or
/// timed out, with `data`), `timeout`, `closed`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_authenticate(
    manager: *mut mcplug_manager,
    server: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let name = str_arg(server, "server")?;
        let options = json_arg(options_json, "options_json")?;
        Ok(runtime::block_on(h.0.manager.authenticate(name, options.as_ref()))?.to_string())
    })
}

/// Logs out of a remote server: forgets every credential the auth store holds for it (tokens,
/// its client registrations, the needs-auth mark), closes its connection (which held the token)
/// and connects it once more without authorizing — a server that needs authorization ends
/// `needs-auth`. Waits for that attempt; `out` is the server's status entry with `"forgotten":
/// true|false` (false: nothing was stored). A record the store cannot use (corrupt, not a
/// regular file, a symbolic link), which fails the server's connect with `config` naming this
/// call, is removed without being read. A disabled server stays disabled. Errors:
/// `not_found`, `invalid_argument` (a local server), `config` (the store), `closed`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_logout(
    manager: *mut mcplug_manager,
    server: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        let name = str_arg(server, "server")?;
        Ok(runtime::block_on(h.0.manager.logout(name))?.to_string())
    })
}

/// A new descriptor the host owns (close it), readable while events wait and once the manager
/// is closed: poll it, then `mcplug_manager_next_event(m, 0, &out)`. `out` is NULL on success.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_event_fd(
    manager: *mut mcplug_manager,
    fd: *mut i32,
    out: *mut *mut c_char,
) -> mcplug_status {
    super::boundary::ffi_boundary_quiet!(out, {
        let h = enter(manager)?;
        if fd.is_null() {
            return Err(Error::invalid("`fd` is NULL"));
        }
        let n = h.0.manager.event_fd()?;
        // SAFETY: `fd` is not NULL (checked above) and valid for one write (the contract).
        unsafe { *fd = n };
        Ok(())
    })
}

/// Closes every connection (when this returns, every server process is gone); queued events can
/// still be pulled, then `{"type": "closed"}`, then `MCPLUG_CLOSED`. `out` is `{}`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_close(
    manager: *mut mcplug_manager,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(manager)?;
        runtime::block_on(h.0.manager.close());
        Ok("{}".into())
    })
}

/// Closes (as `mcplug_manager_close`) and frees the manager; a `mcplug_manager_next_event`
/// blocked in another thread returns `MCPLUG_CLOSED` at once, and this waits for calls running
/// on the handle to return. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_free(manager: *mut mcplug_manager) {
    // SAFETY: NULL or a handle this library returned, not used again by the host (the contract).
    unsafe {
        handle::free(manager, |h| {
            h.manager.abandon_events();
            runtime::block_on(h.manager.close());
        })
    }
}
