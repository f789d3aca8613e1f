//! `mcplug_client_*`: one server behind an opaque handle.

use super::boundary::{ffi_boundary, json_arg, json_required, raw_object_arg, str_arg};
use super::mcplug_status;
use crate::client::events::Pulled;
use crate::client::options::{CallOptions, ConnectOptions, ServerSpec};
use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::runtime;
use std::ffi::c_char;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// An open connection to one MCP server. Opaque; every function may be called on it from any
/// thread, concurrently. Freed with `mcplug_client_free`.
#[allow(non_camel_case_types)]
pub struct mcplug_client {
    client: Client,
    /// Entry points currently running on this handle; `mcplug_client_free` waits for them.
    active: AtomicUsize,
}

struct Active<'a>(&'a mcplug_client);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

fn enter<'a>(c: *mut mcplug_client) -> Result<Active<'a>, Error> {
    if c.is_null() {
        return Err(Error::invalid("`client` is NULL"));
    }
    let handle = unsafe { &*c };
    handle.active.fetch_add(1, Ordering::AcqRel);
    Ok(Active(handle))
}

/// Starts (or reaches) one MCP server and negotiates the protocol.
///
/// `server_json`: one server entry in the Claude Code format — `{"command", "args", "env", "cwd"}`
/// for stdio (the default when `type` is absent), with an optional `"name"`.
/// `options_json` (NULL for defaults): `connect_timeout_ms` (30000), `request_timeout_ms` (60000),
/// `tool_timeout_ms` (null: no limit), `host_request_timeout_ms` (60000), `client_info`,
/// `capabilities`, `roots`, `protocol_versions`, `max_message_bytes`, `max_events`,
/// `shutdown_grace_ms`, `validate_arguments` (false: the default of the per-call option of
/// `mcplug_client_call_tool`), and `tag` (so that `mcplug_cancel` can abort the connect).
///
/// On `MCPLUG_OK`, `*client` is the new handle and `out` holds
/// `{"name", "era", "protocol_version", "server_info", "capabilities", "instructions", "result"}`.
/// Otherwise `*client` is untouched and no process is left running. Errors: `invalid_argument`,
/// `transport` (could not start), `timeout`, `closed` (the server exited), `protocol`, `rpc`,
/// `cancelled`, `not_implemented` (a transport this version lacks).
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
        let opts = ConnectOptions::parse(options.as_ref())?;
        let (c, info) = runtime::block_on(Client::connect(&spec, opts, tag.as_deref()))?;
        let handle = Box::new(mcplug_client {
            client: c,
            active: AtomicUsize::new(0),
        });
        unsafe { *client = Box::into_raw(handle) };
        Ok(info.to_string())
    })
}

/// Lists the server's tools, following pagination to the end: `out` is `{"tools": [...]}`.
/// With `"cursor"` in `options_json`, returns that one page as the server sent it (with
/// `nextCursor`). Options: `timeout_ms` (per page; default the request timeout), `tag`.
/// The client keeps each listed tool's `inputSchema` and `outputSchema` for the checks of
/// `mcplug_client_call_tool` (a whole list replaces what it knew, a page adds to it;
/// `notifications/tools/list_changed` forgets it all). A schema that does not compile is not
/// used, and the host gets the event `{"type": "warning", "reason": "invalid_schema", "tool",
/// "schema": "outputSchema"|"inputSchema", "message"}`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_list_tools(
    client: *mut mcplug_client,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let opts = CallOptions::parse(json_arg(options_json, "options_json")?.as_ref())?;
        let v = runtime::block_on(h.0.client.list_tools(&opts))?;
        Ok(v.into_string())
    })
}

/// Calls a tool. `arguments_json` is a JSON object (NULL: no arguments). `out` is the server's
/// `CallToolResult`, untouched — a result with `isError: true` is still `MCPLUG_OK`.
/// Options: `timeout_ms` (default: the connection's `tool_timeout_ms`, no limit unless set; null
/// for no limit), `tag`, `progress` (true: progress notifications arrive as events carrying the
/// tag), `reset_timeout_on_progress`, `max_total_timeout_ms`, `validate_arguments` (true: check
/// the arguments against the tool's `inputSchema` first; default: the connection's option).
///
/// Schemas: when the tool was seen in a `tools/list` result (`mcplug_client_list_tools`, or
/// `tools/list` through `mcplug_client_request`) with an `outputSchema`, a result that is not
/// `isError: true` must carry `structuredContent` matching it (JSON Schema 2020-12 unless the
/// schema's `$schema` names draft 4, 6, 7 or 2019-09; no external `$ref` is ever fetched), else
/// `MCPLUG_INVALID_RESULT`, whose `data` is `{"tool", "errors": [{"message", "instance_path",
/// "schema_path"}], "result"}` — the untouched result is still there. With `validate_arguments`,
/// arguments that break the `inputSchema` are `MCPLUG_INVALID_ARGUMENT` (with `data` `{"tool",
/// "errors"}`) and nothing is sent. A tool never seen listed is not checked (no `tools/list` is
/// sent for it).
/// Errors: `rpc` (e.g. unknown tool), `timeout`, `cancelled`, `closed`, `invalid_argument`,
/// `invalid_result`.
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
        let opts = CallOptions::parse(json_arg(options_json, "options_json")?.as_ref())?;
        let v = runtime::block_on(h.0.client.call_tool(name, args, &opts))?;
        Ok(v.into_string())
    })
}

/// Sends any request (`resources/read`, `prompts/get`, `completion/complete`, ...) and returns its
/// result untouched. `params_json` is a JSON object or NULL. Options: `timeout_ms` (default: the
/// request timeout), `tag`, `progress`, and `all_pages` (for list methods: follow `nextCursor`
/// and return every item under the list's field). A `tools/list` result teaches the client the
/// tools' schemas, and `tools/call` is checked as `mcplug_client_call_tool` checks it (also the
/// `validate_arguments` option).
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
        let params = json_arg(params_json, "params_json")?;
        if let Some(p) = &params {
            if !p.is_object() && !p.is_null() {
                return Err(Error::invalid(format!(
                    "`params_json` must be a JSON object (got {p})"
                )));
            }
        }
        let params = params.filter(|p| !p.is_null());
        let opts = CallOptions::parse(json_arg(options_json, "options_json")?.as_ref())?;
        let v = runtime::block_on(h.0.client.request(method, params, &opts))?;
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
        let params = json_arg(params_json, "params_json")?.filter(|p| !p.is_null());
        if let Some(p) = &params {
            if !p.is_object() {
                return Err(Error::invalid(format!(
                    "`params_json` must be a JSON object (got {p})"
                )));
            }
        }
        runtime::block_on(h.0.client.notify(method, params))?;
        Ok("{}".into())
    })
}

/// Waits up to `timeout_ms` (negative: forever; 0: only looks) for the next event: a server
/// notification, a server request needing `mcplug_client_respond`, a stderr line, or the final
/// `{"type": "closed"}`. Returns `MCPLUG_OK` with the event in `out`, `MCPLUG_TIMEOUT` when none
/// came, or `MCPLUG_CLOSED` once the connection is closed and every event was pulled.
#[no_mangle]
pub unsafe extern "C" fn mcplug_client_next_event(
    client: *mut mcplug_client,
    timeout_ms: i32,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = enter(client)?;
        let wait = if timeout_ms < 0 {
            None
        } else {
            Some(Duration::from_millis(timeout_ms as u64))
        };
        match h.0.client.next_event(wait) {
            Pulled::Event(text) => Ok(text),
            Pulled::TimedOut => Err(Error::timeout(format!("no event within {timeout_ms} ms"))),
            Pulled::Closed => Err(Error::new(
                ErrorKind::Closed,
                "the connection is closed and every event was delivered",
            )),
        }
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

/// Closes the connection without freeing the handle: pending calls fail with `MCPLUG_CLOSED`
/// at once, the server's stdin is closed, then its whole process group gets SIGTERM and SIGKILL
/// if it lingers; when this returns, the server and its children are gone. Events still queued
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
    if client.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let handle = unsafe { &*client };
        handle.client.begin_close(true);
        runtime::block_on(handle.client.close());
        while handle.active.load(Ordering::Acquire) != 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(unsafe { Box::from_raw(client) });
    }));
}
