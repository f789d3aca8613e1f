//! `mcplug_client_*`: one server behind an opaque handle.

use super::boundary::{
    call_options, ffi_boundary, ffi_boundary_quiet, json_arg, json_required, raw_object_arg,
    str_arg, tool_call_options,
};
use super::handle::{self, Entered, Entries, Handle};
use super::mcplug_status;
use crate::client::options::{CallOptions, ConnectOptions, ServerSpec};
use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::queue::{Lines, Pulled};
use crate::runtime;
use std::ffi::c_char;
use std::time::Duration;

/// An open connection to one MCP server. Opaque; every function may be called on it from any
/// thread, concurrently. Freed with `mcplug_client_free`.
#[allow(non_camel_case_types)]
pub struct mcplug_client {
    client: Client,
    /// Entry points currently running on this handle; `mcplug_client_free` waits for them.
    active: Entries,
}

impl Handle for mcplug_client {
    const NAME: &'static str = "client";
    fn entries(&self) -> &Entries {
        &self.active
    }
}

type Active<'a> = Entered<'a, mcplug_client>;

fn enter<'a>(ptr: *mut mcplug_client) -> Result<Active<'a>, Error> {
    handle::enter(ptr)
}

/// Starts (or reaches) one MCP server and negotiates the protocol.
///
/// `server_json`: one server entry in the Claude Code format — `{"command", "args", "env", "cwd"}`
/// for stdio (the default when `type` is absent), with an optional `"name"`; or a remote server
/// `{"type", "url", "headers"}`: `"http"` (alias `"streamable-http"`: Streamable HTTP in either
/// era, falling back to HTTP+SSE when the server only speaks that), `"sse"` (the deprecated
/// HTTP+SSE transport), `"ws"` (WebSocket, subprotocol `mcp`); `"sse-ide"`/`"ws-ide"` are taken
/// as `"sse"`/`"ws"`. `headers` (strings) go with every HTTP request and the WebSocket handshake.
/// A remote failure is a `transport` error naming the HTTP status (or the connect error) and URL.
/// Authorization (README "Authorizing a server"): the entry's `oauth` object and `headersHelper`
/// (a shell command printing a JSON object of headers, run before the first request and again
/// on a 401/403); options `auth_store` (a directory, or `"memory"`), `auth_interactive` (the
/// host answers `auth/authorize`, see `mcplug_auth_next_event`), `auth_timeout_ms` (300000),
/// `auth_request_timeout_ms` (30000), `auth_cache_ttl_ms` (900000), `refresh_skew_ms` (300000:
/// a token is refreshed that long before it expires, but never more than half its life before;
/// a request always carries the token held), `allow_private_auth_urls` (false), `auth_channel`, `headers_helper_timeout_ms` (10000),
/// `tls` (`{"ca_file", "ca_pem", "client_cert", "client_key", "client_key_passphrase"}`, each
/// optional: CAs trusted besides the system's store and a client certificate, for every remote
/// transport and OAuth request; a server entry's own `tls` fields win; see the README's
/// "Company networks"), `proxy` (every remote server's proxy, `"http://user:password@host:port"`,
/// or `false` for none, over the environment's `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY`/`NO_PROXY`;
/// a server entry's own `proxy` wins),
/// `xaa_idp` (`{"issuer", "client_id", "client_secret"?, "callback_port"?}`: the enterprise IdP
/// of the servers whose entry says `oauth.xaa: true`, as Claude Code's `settings.xaaIdp`; its
/// login is one more authorization through `auth/authorize`, and the ID token it gives is kept
/// in the store per IdP and used by every server of it). A
/// server that needs authorization the connection cannot give is `needs_auth`, with `data`
/// `{"reason", "issuer"?, "scope"?, "resource_metadata"?}`.
/// `options_json` (NULL for defaults): `connect_timeout_ms` (30000), `request_timeout_ms` (60000),
/// `tool_timeout_ms` (null: no limit), `host_request_timeout_ms` (60000: how long a server's
/// request — or an input request of a modern call — waits for `mcplug_client_respond`),
/// `client_info`, `capabilities`, `handlers`, `roots`, `protocol_versions`, `max_message_bytes`,
/// `discover_timeout_ms` (5000: how long the `server/discover` probe waits before a silent
/// server is taken for a legacy one; at most half of `connect_timeout_ms`; the handshake's timers do
/// not count the time credentials are obtained — a login — and start again, whole, after it). A server entry's own
/// `timeout` (milliseconds) limits each of its requests and tool calls.
/// `max_events` (10000 queued events at most, and 16 MiB of their text: past either, the oldest
/// that need no answer are dropped and an `overflow` event counts them), `max_list_bytes` (64 MiB,
/// or twice `max_message_bytes` when that is more: the most bytes of pages one listing of every
/// page takes — `mcplug_client_list_tools`, `all_pages`, a manager's lists — before it fails
/// `denied` naming the option; its cursors are kept as hashes, a repeated one is `protocol`, as
/// are more than 10000 pages), `shutdown_grace_ms`,
/// and `tag` (so that `mcplug_cancel` can abort the connect). An unknown option is
/// `invalid_argument` naming it.
///
/// What the host serves: `handlers` names the server requests the host answers through a
/// handler (`["sampling/createMessage", "elicitation/create", "roots/list"]`, and any others,
/// which declare nothing): each declares its capability (`sampling` `{}`, `elicitation`
/// `{"form": {}}`, `roots` `{"listChanged": true}`), and `capabilities` merges over them, one
/// level deep for those three (`false` leaves one out). Without `handlers`, declared exactly as
/// given: `capabilities` may hold `sampling` (with
/// `tools` to receive tool-using sampling), `elicitation` (`form` and/or `url`; `{}` is form
/// only), `roots` (`listChanged`), `experimental`, `extensions`; `true` stands for `{}`. A
/// request the host did not declare never reaches it: a legacy server gets -32601 (-32602 for an
/// undeclared elicitation mode or `sampling.tools`), a modern call asking for it fails.
/// `roots` (`[{"uri": "file://...", "name"}]`) are answered by the engine and imply
/// `capabilities.roots` `{"listChanged": true}`; `mcplug_client_set_roots` changes them later.
/// `tasks` (true): tool calls that become tasks are awaited (and a legacy server's
/// task-augmented sampling/elicitation is run as a task by the engine; the engine declares the
/// `tasks` capability, or the `io.modelcontextprotocol/tasks` extension, itself).
/// `log_level` (none): as `mcplug_client_set_log_level` from the start.
/// `max_input_rounds` (16): how many times one call may be asked for more input
/// (`InputRequiredResult`, -32042) before it fails with `protocol`.
/// `elicitation_defaults` (false): an accepted form elicitation gets the schema's `default`s
/// where the host's answer left a field out.
/// `validate_arguments` (false): the default of the per-call option of `mcplug_client_call_tool`.
/// The client keeps each listed tool's `inputSchema` and `outputSchema` for the checks of
/// `mcplug_client_call_tool` (a whole list replaces what it knew, a page adds to it;
/// `notifications/tools/list_changed` forgets it all). A schema that does not compile is not
/// used, and the host gets the event `{"type": "warning", "reason": "invalid_schema", "tool",
/// "schema": "outputSchema"|"inputSchema", "message"}`.
///
/// Caching (2026-07-28): `cache` (true) keeps the results a modern server marks cacheable
/// (`ttlMs`, `cacheScope` on `tools/list`, `prompts/list`, `resources/list`,
/// `resources/templates/list`, `resources/read`) and answers the same request (same method and
/// params; each page by its cursor) from them, untouched, until `ttlMs` has passed — sooner
/// when the server says the list changed (`notifications/tools/list_changed` and the like) or
/// the resource was updated (`notifications/resources/updated`), or when the listen stream
/// that would have said so dropped. A result not marked `"public"` is served only under the
/// headers it was fetched with; a cache is never shared between connections. Nothing says a
/// result came from the cache (the spec defines no marker); the per-call option
/// `"cache": false` asks the server. Legacy results and results reached through input rounds
/// are never cached.
/// `listen` (`"auto"`): when a modern connection opens its `subscriptions/listen` stream for
/// the list changes the server offers — `"auto"`: when the host first waits for events
/// (`mcplug_client_next_event`, `_next_events`, `_event_fd`); `true`: at connect; `false`:
/// never. `resources/subscribe` opens it in every mode (see `mcplug_client_request`).
///
/// On `MCPLUG_OK`, `*client` is the new handle and `out` holds
/// `{"name", "era", "protocol_version", "server_info", "capabilities", "instructions", "result"}`.
/// Otherwise `*client` is untouched and no process is left running. Errors: `invalid_argument`,
/// `transport` (could not start), `timeout`, `closed` (the server exited), `protocol`, `rpc`,
/// `cancelled`, `not_implemented` (a transport this version lacks: `sdk`).
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_connect(
    server_json: *const c_char,
    options_json: *const c_char,
    client: *mut *mut mcplug_client,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let server = json_required(server_json, "server_json")?;
        let options = json_arg(options_json, "options_json")?;
        if client.is_null() {
            return Err(Error::invalid(
                "`client` (the handle out-parameter) is NULL",
            ));
        }
        let spec = ServerSpec::parse(&server)?;
        let tag = match options.as_ref().and_then(|o| o.get("tag")) {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(v) => {
                return Err(Error::invalid(format!(
                    "option `tag` must be a string (got {v})"
                )))
            }
        };
        let mut opts = ConnectOptions::parse(options.as_ref())?;
        opts.apply_entry(&server);
        // Cancelled while the host's call waited to enter: no server is started.
        if opts.cancel.as_ref().is_some_and(|c| c.0.is_fired()) {
            return Err(Error::cancelled_by_host("connect"));
        }
        // A stdio server starts before the call enters the runtime: on the host's first connect
        // the runtime is then built while the server starts up, not before.
        let started = Client::start_server(&spec)?;
        let connect = Client::connect_started(&spec, opts, tag.as_deref(), started);
        let (c, info) = runtime::block_on(Box::pin(connect))?;
        let handle = handle::into_raw(mcplug_client {
            client: c,
            active: Entries::default(),
        });
        // SAFETY: `client` was checked not NULL above and is valid for one write (the contract).
        unsafe { *client = handle };
        Ok(info.to_string())
    })
}

/// Lists the server's tools, following pagination to the end: `out` is `{"tools": [...]}`.
/// With `"cursor"` in `options_json`, returns that one page as the server sent it (with
/// `nextCursor`). Options: `timeout_ms` (per page; default the request timeout), `tag`,
/// `cache` (false: every page from the server, even when cached; see `mcplug_client_connect`).
/// The client keeps each listed tool's `inputSchema` and `outputSchema` for the checks of
/// `mcplug_client_call_tool` (a whole list replaces what it knew, a page adds to it;
/// `notifications/tools/list_changed` forgets it all). A schema that does not compile is not
/// used, and the host gets the event `{"type": "warning", "reason": "invalid_schema", "tool",
/// "schema": "outputSchema"|"inputSchema", "message"}`.
/// Streamable HTTP in the 2026-07-28 era (SEP-2243): a tool whose `x-mcp-header` annotations are
/// invalid (empty, not an HTTP token, on a property that is not string/integer/boolean or not
/// reached through `properties` alone, duplicated without regard to case) is left out of the
/// result, the rest kept byte for byte, and the host gets the event `{"type": "warning",
/// "reason": "invalid_tool_headers", "tool", "message"}` once per tool and reason.
/// `format` (`"anthropic"`, `"openai"`): each tool as that model API's tool definition (see
/// `mcplug_manager_list_tools`).
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_list_tools(
    client: *mut mcplug_client,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let opts = tool_call_options(options_json)?;
        let v = runtime::block_on(h.0.client.list_tools(&opts))?;
        Ok(v.into_string())
    })
}

/// Calls a tool. `arguments_json` is a JSON object (NULL: no arguments). `out` is the server's
/// `CallToolResult`, untouched — a result with `isError: true` is still `MCPLUG_OK`.
/// Options: `timeout_ms` (default: the connection's `tool_timeout_ms`, no limit unless set; null
/// for no limit), `tag`, `progress` (true: progress notifications arrive as events carrying the
/// tag), `reset_timeout_on_progress`, `max_total_timeout_ms`, `task`, `task_ttl_ms`.
///
/// What the server needs on the way is resolved here: the input requests of an
/// `InputRequiredResult` (2026-07-28) and the elicitations of a -32042 error arrive as `request`
/// events to answer with `mcplug_client_respond` (from another thread: this call waits), and the
/// call goes out again with the answers; each round has its own `timeout_ms`. A call that becomes
/// a task is awaited (polling as the server suggests; `timeout_ms` bounds the whole wait; a
/// cancel or timeout sends `tasks/cancel`) and its result returned. `task`: absent = a legacy
/// tool listed as `taskSupport: "required"` is called as a task (a modern server decides itself);
/// true = ask a legacy server for a task; false = never ask; `"handle"` = ask, and return the
/// task itself (`CreateTaskResult`) for the host to follow with `tasks/get` etc. through
/// `mcplug_client_request`. `task_ttl_ms`: the lifetime asked for.
/// Errors: `rpc` (e.g. unknown tool, a failed task), `timeout`, `cancelled`, `closed`,
/// `invalid_argument`, `protocol` (too many rounds; an input request of a capability not
/// declared), `denied` (the host answered an input request with an error: its code and data
/// are kept), `invalid_result` (see below).
///
/// `validate_arguments` (true: check the arguments against the tool's `inputSchema` first;
/// default: the connection's option). Schemas: when the tool was seen in a `tools/list` result
/// (`mcplug_client_list_tools`, or `tools/list` through `mcplug_client_request`) with an
/// `outputSchema`, a result that is not `isError: true` must carry `structuredContent` matching
/// it (JSON Schema 2020-12 unless the schema's `$schema` names draft 4, 6, 7 or 2019-09; no
/// external `$ref` is ever fetched), else `MCPLUG_INVALID_RESULT`, whose `data` is `{"tool",
/// "errors": [{"message", "instance_path", "schema_path"}], "result"}` — the untouched result is
/// still there. With `validate_arguments`, arguments that break the `inputSchema` are
/// `MCPLUG_INVALID_ARGUMENT` (with `data` `{"tool", "errors"}`) and nothing is sent. A tool
/// never seen listed is not checked (no `tools/list` is sent for it).
///
/// `format`: `"mcp"` (the default: the `CallToolResult` untouched), `"anthropic"` (what a
/// Messages API `tool_result` block holds, `{"content": [blocks], "is_error"}`: text blocks;
/// JPEG/PNG/GIF/WebP images as base64 image blocks; embedded PDFs as base64 document blocks;
/// embedded text resources and resource links as text naming their URI; audio and other media as
/// a text note; `structuredContent` as JSON text when there is no content) or `"openai"` (a Chat
/// Completions tool message `{"role": "tool", "content": "<text>", "is_error"}`: tool messages
/// take text only, so media are named in a note). Checks run on the MCP result first. Any other
/// function given `format` refuses it (`invalid_argument`).
///
/// Custom headers (Streamable HTTP, 2026-07-28 era, SEP-2243): the arguments of the properties
/// the tool's last listed `inputSchema` marks `"x-mcp-header": "<Name>"` also go as request
/// headers `Mcp-Param-<Name>` (strings as they are, integers in decimal, booleans
/// `true`/`false`, `=?base64?...?=` for what is not plain ASCII or has a space at an end; none
/// for a null or missing argument). A tool never listed goes without them; when the server
/// answers -32020 (header mismatch: the tool is unknown here or its schema changed), the tools
/// are listed again and the call is sent once more. A tool left out of `tools/list` for invalid
/// annotations is refused: `MCPLUG_INVALID_ARGUMENT`, `data` `{"tool", "reason"}`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_call_tool(
    client: *mut mcplug_client,
    name: *const c_char,
    arguments_json: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let name = str_arg(name, "name")?;
        // Validated but not parsed into a tree: the arguments travel as the text the host gave.
        let args = raw_object_arg(arguments_json, "arguments_json")?;
        let opts = tool_call_options(options_json)?;
        let v = runtime::run_now(Box::pin(h.0.client.call_tool(name, args, &opts)))?;
        Ok(v.into_string())
    })
}

/// Sends any request (`resources/read`, `prompts/get`, `completion/complete`, ...) and returns its
/// result untouched. `params_json` is a JSON object or NULL. Options: `timeout_ms` (default: the
/// request timeout), `tag`, `progress`, and `all_pages` (for list methods: follow `nextCursor`
/// and return every item under the list's field). `prompts/get`, `resources/read` and
/// `tools/call` resolve input requests as `mcplug_client_call_tool` does (and `tools/call` its
/// tasks, with the same `task` options). A `tools/list` result teaches the client the tools'
/// schemas, and `tools/call` is checked as `mcplug_client_call_tool` checks it (also the
/// `validate_arguments` option). The cacheable methods may be answered from the connection's
/// cache (see `mcplug_client_connect`); the option `cache` (false) asks the server whatever
/// the cache holds, and keeps the new result.
///
/// On a modern (2026-07-28) connection, `resources/subscribe` and `resources/unsubscribe`
/// (`{"uri"}`) are the engine's: that era has no such methods, so the URI joins (or leaves)
/// the connection's `subscriptions/listen` stream, and `notifications/resources/updated` for it
/// arrive as events. Subscribe returns `{}` once the server acknowledged a stream carrying the
/// URI; errors: `invalid_argument` (no `uri`; the server offers no `resources.subscribe`),
/// `denied` (its acknowledgement left the URI out), `rpc` (-32601: it does not serve
/// `subscriptions/listen`), `timeout` (no acknowledgement within the request timeout).
/// Unsubscribe returns `{}` at once. On a legacy connection both go to the server as they are.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_request(
    client: *mut mcplug_client,
    method: *const c_char,
    params_json: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let method = str_arg(method, "method")?;
        let params = params_arg(params_json)?;
        let opts = call_options(options_json)?;
        let v = runtime::run_now(h.0.client.request(method, params, &opts))?;
        Ok(v.into_string())
    })
}

/// Sends a notification to the server (for example `notifications/roots/list_changed`).
/// `out` is `{}` on success.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_notify(
    client: *mut mcplug_client,
    method: *const c_char,
    params_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let method = str_arg(method, "method")?;
        let params = params_arg(params_json)?;
        runtime::run_now(h.0.client.notify(method, params))?;
        Ok("{}".into())
    })
}

/// Waits up to `timeout_ms` (negative: forever; 0: only looks) for the next event: a server
/// notification (`{"type": "notification", "method", "params"}`: progress, log messages, list
/// changes, channel messages from servers that declared `experimental["claude/channel"]`), a
/// request needing `mcplug_client_respond` (`{"type": "request", "id", "method", "params"}`: a
/// legacy server's request or a modern call's input request, the same shape), a request the
/// host no longer needs to answer (`{"type": "request_cancelled", "id", "method", "reason"}`: the
/// call was cancelled, or the server cancelled its task) or that expired
/// (`{"type": "request_expired", "id", "method"}`), a stderr line, or the final
/// `{"type": "closed"}`. On a modern connection, list changes and resource updates come from
/// its `subscriptions/listen` stream (option `listen`): only those of the stream the client
/// holds, each with `params._meta["io.modelcontextprotocol/subscriptionId"]`. When the server
/// acknowledges a stream, the host gets `{"type": "listening", "subscription": N,
/// "notifications": {...what the server agreed to send}, "reopened": bool}` (another one later:
/// what is listened for changed, or, with `reopened` true, the last stream ended and was opened
/// again — changes in between may have been missed, so a host that keeps lists of its own lists
/// them again; the connection's cache has already forgotten them).
/// A server that does not serve the method gives
/// `{"type": "warning", "reason": "listen_unsupported", "message"}`.
/// Returns `MCPLUG_OK` with the event in `out`, `MCPLUG_TIMEOUT` when none came, or
/// `MCPLUG_CLOSED` once the connection is closed and every event was pulled.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_next_event(
    client: *mut mcplug_client,
    timeout_ms: i32,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        pulled(h.0.client.next_event(event_wait(timeout_ms)), timeout_ms)
    })
}

/// A pull's `timeout_ms`: negative waits forever, 0 only looks.
pub(super) fn event_wait(timeout_ms: i32) -> Option<Duration> {
    (timeout_ms >= 0).then(|| Duration::from_millis(timeout_ms as u64))
}

/// What a pull gives the host: the event(s), `timeout`, or `closed` after the last.
pub(super) fn pulled(p: Pulled, timeout_ms: i32) -> Result<String, Error> {
    match p {
        Pulled::Event(text) => Ok(text),
        Pulled::TimedOut => Err(Error::timeout(format!("no event within {timeout_ms} ms"))),
        Pulled::Closed => Err(Error::new(
            ErrorKind::Closed,
            "the connection is closed and every event was delivered",
        )),
    }
}

/// `params_json`: a JSON object, or NULL / `null` for none.
pub(super) fn params_arg(params_json: *const c_char) -> Result<Option<serde_json::Value>, Error> {
    let params = json_arg(params_json, "params_json")?.filter(|p| !p.is_null());
    match &params {
        Some(p) if !p.is_object() => Err(Error::invalid(format!(
            "`params_json` must be a JSON object (got {p})"
        ))),
        _ => Ok(params),
    }
}

/// The host's buffer for events (`cap` bytes at `buf`; NULL only with `cap` 0).
fn out_buf<'a>(buf: *mut c_char, cap: usize) -> Result<&'a mut [u8], Error> {
    if cap == 0 {
        Ok(&mut [])
    } else if buf.is_null() {
        Err(Error::invalid(format!("`buf` is NULL but `cap` is {cap}")))
    } else {
        // SAFETY: the caller gives `cap` writable bytes at `buf`.
        Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), cap) })
    }
}

/// The call-number out-parameter of the start functions.
fn call_out<'a>(call: *mut u64) -> Result<&'a mut u64, Error> {
    // SAFETY: the caller passes NULL or a writable pointer (the header's convention).
    unsafe { call.as_mut() }
        .ok_or_else(|| Error::invalid("`call` (the call number out-parameter) is NULL"))
}

/// Starts a tool call without waiting: on `MCPLUG_OK`, `*call` is the call's number and `*out`
/// is NULL; the outcome arrives later, exactly once, as the event
/// `{"type": "completion", "call": N, "result": {...}}` (the server's `CallToolResult`, untouched)
/// or `{"type": "completion", "call": N, "error": {"kind", "message", "code"?, "data"?}}` — also
/// when the connection closes (before the final `closed` event). Takes the same arguments and
/// options as `mcplug_client_call_tool`, plus `defer` (true: the call may wait to be written
/// together with later ones — at the latest with the next call that is not deferred, or with
/// `mcplug_client_flush`; many calls, one write). Never blocks on the server: a write the server
/// is not reading finishes in the background. On failure `*call` is untouched, `*out` holds the error,
/// and no completion event follows. Pair it with `mcplug_client_event_fd` (poll) and
/// `mcplug_client_next_events` (take many at once), or with `mcplug_client_next_event`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_call_tool_start(
    client: *mut mcplug_client,
    name: *const c_char,
    arguments_json: *const c_char,
    options_json: *const c_char,
    call: *mut u64,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary_quiet!(out, {
        let h = enter(client)?;
        let name = str_arg(name, "name")?;
        let args = raw_object_arg(arguments_json, "arguments_json")?;
        let opts = tool_call_options(options_json)?;
        let call = call_out(call)?;
        let n = runtime::run_now(h.0.client.start_call_tool(name, args, &opts))?;
        *call = n;
        Ok(())
    })
}

/// Starts any request without waiting (see `mcplug_client_call_tool_start` for the completion
/// event); the same arguments and options as `mcplug_client_request`, except `all_pages`, which
/// is refused (`invalid_argument`): a started request is one request.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_request_start(
    client: *mut mcplug_client,
    method: *const c_char,
    params_json: *const c_char,
    options_json: *const c_char,
    call: *mut u64,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary_quiet!(out, {
        let h = enter(client)?;
        let method = str_arg(method, "method")?;
        let params = params_arg(params_json)?;
        let opts = call_options(options_json)?;
        let call = call_out(call)?;
        let n = runtime::run_now(h.0.client.start_request(method, params, &opts))?;
        *call = n;
        Ok(())
    })
}

/// Writes every call started with the option `"defer": true` that has not gone out yet (they
/// also go out with the next call that is not deferred). Never blocks on the server. `out` is
/// NULL on success. Errors: `closed` (the deferred calls then complete with it).
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_flush(
    client: *mut mcplug_client,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary_quiet!(out, {
        let h = enter(client)?;
        runtime::run_now(h.0.client.flush())
    })
}

/// Cancels a started call: unless its answer won the race, its completion event carries a
/// `cancelled` error, and the server is sent `notifications/cancelled`. `out` is
/// `{"cancelled": true}`, or `{"cancelled": false}` when the call was no longer in flight
/// (completed, or never started on this handle).
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_cancel_call(
    client: *mut mcplug_client,
    call: u64,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let found = runtime::block_on(h.0.client.cancel_call(call))?;
        Ok(format!("{{\"cancelled\":{found}}}"))
    })
}

/// Gives the host a descriptor to poll (`POLLIN`) instead of blocking in
/// `mcplug_client_next_event`: it is readable while events wait, and stays readable once the
/// connection is closed. After it polls readable, pull events (`mcplug_client_next_events` or
/// `mcplug_client_next_event` with timeout 0) until `MCPLUG_TIMEOUT` — the descriptor is
/// re-armed only by the pull that empties the queue. The host may read and discard bytes from
/// it (an event loop that reads readable pipes eagerly is fine). `*fd` is a new descriptor the
/// host owns and closes; each call gives another. `out` is NULL on success.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_event_fd(
    client: *mut mcplug_client,
    fd: *mut i32,
    out: *mut *mut c_char,
) -> mcplug_status {
    // SAFETY: this function's arguments are passed on under the same contract.
    unsafe { descriptor_out(client, fd, out, Client::event_fd) }
}

/// The descriptor getters' common body: `get`'s descriptor into `*fd`, checked.
unsafe fn descriptor_out(
    client: *mut mcplug_client,
    fd: *mut i32,
    out: *mut *mut c_char,
    get: fn(&Client) -> Result<i32, Error>,
) -> mcplug_status {
    ffi_boundary_quiet!(out, {
        let h = enter(client)?;
        if fd.is_null() {
            return Err(Error::invalid(
                "`fd` (the descriptor out-parameter) is NULL",
            ));
        }
        let n = get(&h.0.client)?;
        // SAFETY: `fd` is not NULL (checked above) and valid for one write (the contract).
        unsafe { *fd = n };
        Ok(())
    })
}

/// Like `mcplug_client_next_event`, but once one event came, takes up to `max_events` (0 counts
/// as one) without waiting more: `out` is a JSON array of events. Same statuses:
/// `MCPLUG_TIMEOUT` when none came, `MCPLUG_CLOSED` after the last. An array shorter than
/// `max_events` means the queue was empty after it (the event descriptor is re-armed).
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_next_events(
    client: *mut mcplug_client,
    max_events: u32,
    timeout_ms: i32,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        pulled(
            h.0.client
                .next_events(max_events as usize, event_wait(timeout_ms)),
            timeout_ms,
        )
    })
}

/// Takes events like `mcplug_client_next_events` (the same `max_events`, `timeout_ms` and
/// statuses), written into the host's buffer instead of an allocated string: for an event loop
/// that polls `mcplug_client_event_fd` and reads it itself (as Node's sockets do).
///
/// - `buf` (`cap` bytes) receives the events, each as its JSON object followed by `\n` (an event
///   never contains a newline: one in a server's raw result, which can only be whitespace, is
///   written as a space); `*len` is the number of bytes written. No NUL is added. Events that
///   do not fit stay queued for the next pull; if the first does not fit, nothing is taken and
///   `*len` is the size it needs (more than `cap`): call again with a buffer that large. `buf`
///   may be NULL when `cap` is 0.
/// - A completion with a result is always written exactly as
///   `{"type":"completion","call":N,"result":` + the server's result + `}`, so a host may take the
///   result's text from the line without parsing the rest (other events, error completions
///   included, have no fixed key order).
/// - The descriptor: the pull that takes the last waiting event does not read it back (the host
///   read the byte that woke it — one syscall saved per wake-up). A host that does not read it
///   finds it readable once more; a pull that then finds nothing (`MCPLUG_TIMEOUT`) empties it.
///
/// On `MCPLUG_OK` `out` is NULL; otherwise it holds the error (`timeout`, `closed` after the
/// last event, `invalid_argument` for a NULL `len`, or a NULL `buf` with `cap` > 0).
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_take_events(
    client: *mut mcplug_client,
    max_events: u32,
    timeout_ms: i32,
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary_quiet!(out, {
        let h = enter(client)?;
        // SAFETY: the caller passes NULL or a writable pointer (the header's convention).
        let Some(len) = (unsafe { len.as_mut() }) else {
            return Err(Error::invalid("`len` (the length out-parameter) is NULL"));
        };
        let buf = out_buf(buf, cap)?;
        let wait = event_wait(timeout_ms);
        match h.0.client.take_events(max_events as usize, wait, buf) {
            Lines::Taken(n) | Lines::TooSmall(n) => {
                *len = n;
                Ok(())
            }
            Lines::TimedOut => pulled(Pulled::TimedOut, timeout_ms).map(drop),
            Lines::Closed => pulled(Pulled::Closed, timeout_ms).map(drop),
        }
    })
}

/// For a host whose event loop reads descriptors itself (Node): a new descriptor of the
/// server's stdout, which the host reads from now on, handing every chunk, in order, to
/// `mcplug_client_feed`. Nobody else reads it meanwhile, so an answer reaches the host's thread
/// without a library thread reading it and waking that thread. Calls blocked in the library
/// (e.g. `mcplug_client_list_tools` on another thread) get their answers from this feeding, so
/// the host must keep reading while they wait. When the host stops reading (end of stream,
/// error, closing) it calls `mcplug_client_feed` with `len` 0: the library reads by itself
/// again. `*fd` is the host's to close. Errors: `not_implemented` (a remote server: no stdout),
/// `closed`. `out` is NULL on success.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_stdout_fd(
    client: *mut mcplug_client,
    fd: *mut i32,
    out: *mut *mut c_char,
) -> mcplug_status {
    // SAFETY: this function's arguments are passed on under the same contract.
    unsafe { descriptor_out(client, fd, out, Client::stdout_fd) }
}

/// Hands the library `len` bytes the host read from `mcplug_client_stdout_fd` (`len` 0: the
/// host stopped reading; `data` may then be NULL), then takes the events waiting into `buf` as
/// `mcplug_client_take_events` does with timeout 0 (the same lines, `max_events`, `*len` and
/// too-small rule), except that none waiting is `MCPLUG_OK` with `*events_len` 0. Events left
/// behind (more than `max_events`, or too big for `buf`) are not signalled on the event
/// descriptor: take them with `mcplug_client_take_events` now. `out` is NULL on success.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_feed(
    client: *mut mcplug_client,
    data: *const c_char,
    len: usize,
    max_events: u32,
    buf: *mut c_char,
    cap: usize,
    events_len: *mut usize,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary_quiet!(out, {
        let h = enter(client)?;
        // SAFETY: `events_len` is NULL (refused below) or valid for one write (the contract).
        let Some(events_len) = (unsafe { events_len.as_mut() }) else {
            return Err(Error::invalid(
                "`events_len` (the length out-parameter) is NULL",
            ));
        };
        let data: &[u8] = if len == 0 {
            &[]
        } else if data.is_null() {
            return Err(Error::invalid(format!("`data` is NULL but `len` is {len}")));
        } else {
            // SAFETY: the caller gives `len` readable bytes at `data`.
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
        };
        let buf = out_buf(buf, cap)?;
        *events_len = match h.0.client.feed(data, max_events as usize, buf) {
            Lines::Taken(n) | Lines::TooSmall(n) => n,
            Lines::TimedOut | Lines::Closed => 0,
        };
        Ok(())
    })
}

/// Answers a server's request event: `{"id": "<event id>", "result": {...}}` or
/// `{"id": "<event id>", "error": {"code": -1, "message": "..."}}`. `out` is `{}` on success.
/// An id that is not waiting (answered, expired, unknown) is `MCPLUG_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_respond(
    client: *mut mcplug_client,
    response_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let response = json_required(response_json, "response_json")?;
        runtime::block_on(h.0.client.respond(&response))?;
        Ok("{}".into())
    })
}

/// Sets the roots the client answers to the server's `roots/list` by itself, from now on:
/// `roots_json` is `[{"uri": "file:///...", "name": "..."}]` (or `{"roots": [...]}`); `null`
/// hands `roots/list` back to the host as `request` events. On a legacy connection whose
/// capabilities declared `roots.listChanged` (the default when `roots` was given at connect) the
/// server is sent `notifications/roots/list_changed`; a modern server asks for roots per request,
/// so it simply gets the new ones. `out` is `{"notified": true|false}`.
/// Errors: `invalid_argument` (malformed roots — each needs a `file://` `uri` —, or the
/// connection did not declare the roots capability), `closed`, `transport`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_set_roots(
    client: *mut mcplug_client,
    roots_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let roots = json_required(roots_json, "roots_json")?;
        let v = runtime::block_on(h.0.client.set_roots(&roots))?;
        Ok(v.to_string())
    })
}

/// Asks the server for log messages at `level` and above (`"debug"`, `"info"`, `"notice"`,
/// `"warning"`, `"error"`, `"critical"`, `"alert"`, `"emergency"`); they arrive as
/// `notifications/message` events. Legacy connection: sends `logging/setLevel` and waits for the
/// answer (request timeout). Modern connection (2026-07-28): the level rides every later
/// request's `_meta` (`io.modelcontextprotocol/logLevel`), as that revision asks — a server
/// logs only while it answers a request. The connection option `log_level` does the same from
/// connect on. `out` is `{"level": "...", "sent": "logging/setLevel" | "per request"}`.
/// Errors: `invalid_argument` (an unknown level), `rpc` (the server refused), `timeout`, `closed`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_set_log_level(
    client: *mut mcplug_client,
    level: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let level = str_arg(level, "level")?;
        let v = runtime::block_on(h.0.client.set_log_level(
            &serde_json::Value::String(level.into()),
            &CallOptions::default(),
        ))?;
        Ok(v.to_string())
    })
}

/// The skills extension (SEP-2640, `io.modelcontextprotocol/skills`): `skills/list`, following
/// pagination to the end; `out` is `{"skills": [...]}`, each entry as the server sent it
/// (`{"uri": ".../SKILL.md", "frontmatter", "resources": [{"uri", "digest", "size"}] |
/// "dynamic"}`). Each entry becomes the one the client holds for that skill; no skill file is
/// read (files are fetched only when a skill is loaded or read). Options: `timeout_ms` (per
/// page), `tag`. Errors: `not_found` (the server does not declare the extension under
/// `capabilities.extensions`), `rpc`, `timeout`, `cancelled`, `closed`, `protocol`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_list_skills(
    client: *mut mcplug_client,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let opts = call_options(options_json)?;
        let v = runtime::block_on(h.0.client.list_skills(&opts))?;
        Ok(v.to_string())
    })
}

/// `skills/get`: the entry of the skill whose `SKILL.md` is at `uri`, listed or not; `out` is
/// the entry, which the client holds for that skill from now on (a refresh after a verification
/// failure). Options: `timeout_ms`, `tag`. Errors: as `mcplug_client_list_skills`; `rpc`
/// (-32602) for a URI the server serves no skill at.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_get_skill(
    client: *mut mcplug_client,
    uri: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let uri = str_arg(uri, "uri")?;
        let opts = call_options(options_json)?;
        let v = runtime::block_on(h.0.client.get_skill(uri, &opts))?;
        Ok(v.to_string())
    })
}

/// Loads a skill: reads its `SKILL.md` (`uri`) now, with `resources/read`, and verifies it
/// against the entry held for it (`skills/get` first when none is): the byte length against
/// the entry's `size`, the SHA-256 against its `digest`, and the YAML frontmatter field by
/// field against its `frontmatter`. `out` is `{"uri", "name", "frontmatter", "text",
/// "verified", "files": [uri, ...] | "dynamic"}`. A skill whose `resources` is `"dynamic"`
/// cannot be verified by digest: it loads with `"verified": false` (frontmatter still
/// compared). Nothing unverified is returned: a mismatch is `MCPLUG_INVALID_RESULT` with
/// `data` `{"skill", "uri", "check": "size"|"digest"|"frontmatter", "expected", "actual"}`
/// (refresh the entry with `mcplug_client_get_skill`, approve again, and load again). Other
/// errors: `protocol` (an invalid entry: not loaded; among them an entry whose URI or a listed
/// file's has a dot segment, `.` or `..`, also percent-encoded as `%2e` or made with `%2f`,
/// named in the message), `denied` (the entry is over the limits of
/// a skill: 512 files, 16 MiB), and those of `mcplug_client_list_skills`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_load_skill(
    client: *mut mcplug_client,
    uri: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let uri = str_arg(uri, "uri")?;
        let opts = call_options(options_json)?;
        let v = runtime::block_on(h.0.client.load_skill(uri, &opts))?;
        Ok(v.to_string())
    })
}

/// Reads one file of a skill loaded on this connection (`skill`: its `SKILL.md` URI; `file`:
/// the file's URI, or its path relative to the skill's directory, e.g. `references/FORMS.md`),
/// verified against the entry the skill was loaded from. `out` is `{"uri", "mimeType", "text" |
/// "blob", "verified"}`. A file that entry does not list is refused without being read, and a
/// mismatch is `MCPLUG_INVALID_RESULT` (`check` `"unlisted"`, `"size"` or `"digest"`), as for
/// `mcplug_client_load_skill`. Errors also: `not_found` (the skill is not loaded),
/// `invalid_argument` (a path that leaves the skill's directory, or a URI with a dot segment —
/// `.` or `..`, also `%2e`/`%2E` or made with `%2f` — refused unsent, the URI named).
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_read_skill_file(
    client: *mut mcplug_client,
    skill: *const c_char,
    file: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let skill = str_arg(skill, "skill")?;
        let file = str_arg(file, "file")?;
        let opts = call_options(options_json)?;
        let v = runtime::block_on(h.0.client.read_skill_file(skill, file, &opts))?;
        Ok(v.to_string())
    })
}

/// Closes the connection without freeing the handle: pending calls fail with `MCPLUG_CLOSED`
/// at once, the server's stdin is closed, then its whole process group gets SIGINT, SIGTERM and
/// SIGKILL, each after `shutdown_grace_ms`, if it lingers; when this returns, the server and its children are gone. Events still queued
/// can be pulled, then `mcplug_client_next_event` returns `MCPLUG_CLOSED`. Safe to call from any
/// thread while other calls run on the handle, and more than once; this is how a host stops an
/// event-pump thread cleanly: close, join the pump (it sees `MCPLUG_CLOSED`), then free.
/// `out` is `{}`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_close(
    client: *mut mcplug_client,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        h.0.client.begin_close(false);
        runtime::block_on(h.0.client.close());
        Ok("{}".into())
    })
}

/// Closes the connection (as `mcplug_client_close`) and frees the handle. Calls running on the
/// handle in other threads return `MCPLUG_CLOSED` at once — a `mcplug_client_next_event` blocked
/// in another thread too, dropping events still queued — and this waits for them to return
/// before freeing. When this returns, the server and its children are gone. NULL is a no-op.
/// No call may *start* on the handle once this has been called: a thread that loops on
/// `mcplug_client_next_event` must stop at `MCPLUG_CLOSED` (or use `mcplug_client_close`, join
/// it, then free).
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_free(client: *mut mcplug_client) {
    // SAFETY: NULL or a handle this library returned, not used again by the host (the contract).
    unsafe {
        handle::free(client, |h| {
            h.client.begin_close(true);
            runtime::block_on(h.client.close());
        })
    }
}
