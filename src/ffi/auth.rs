//! `mcplug_auth_*`: the host's side of interactive OAuth for single clients — the
//! `auth/authorize` requests of every connection of the process, pulled and answered here. Why
//! one queue for the process: a client's first authorization happens inside
//! `mcplug_client_connect`, before the host holds its handle (see `auth::host`).

use super::boundary::{ffi_boundary, json_arg, json_required};
use super::client::event_wait;
use super::mcplug_status;
use crate::error::Error;
use std::ffi::c_char;

/// Waits up to `timeout_ms` (negative: forever; 0: only looks) for the next authorization event
/// of any connection of the process made with `auth_interactive`:
/// `{"type": "request", "id", "method": "auth/authorize", "params": {"url", "redirect_uri",
/// "issuer", "scope"?, "server"?, "channel"?}}` — send the user to `url` (a browser) and answer
/// `{}` (the library's loopback listener at `redirect_uri` takes the callback), or answer
/// `{"callback_url": "<the redirect URL with code, state, iss>"}` when the host captured the
/// redirect itself; an `error` answer declines. Also `{"type": "request_expired", "id",
/// "method"}` (not answered within `auth_timeout_ms`) and `{"type": "request_cancelled", "id",
/// "method", "reason"}` (the connection stopped waiting). The events never carry a token.
/// Returns `MCPLUG_OK` with the event in `out` (free it with `mcplug_string_free`), or
/// `MCPLUG_TIMEOUT` when none came.
#[no_mangle]
pub unsafe extern "C" fn mcplug_auth_next_event(
    timeout_ms: i32,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let wait =
            event_wait(timeout_ms).unwrap_or(std::time::Duration::from_secs(u32::MAX as u64));
        match crate::auth::host::next_event(wait) {
            Some(event) => Ok(event.to_string()),
            None => Err(Error::timeout(format!(
                "no authorization event within {timeout_ms} ms"
            ))),
        }
    })
}

/// Answers an `auth/authorize` event: `{"id", "result": {}}`, `{"id", "result":
/// {"callback_url": "..."}}`, or `{"id", "error": {"code", "message"}}` (declined: the
/// connection fails with `needs_auth`, reason `declined`). `out` is `{}` on success. An id that
/// is not waiting (answered, expired, unknown) is `MCPLUG_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_auth_respond(
    response_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let response = json_required(response_json, "response_json")?;
        crate::auth::host::respond(&response)?;
        Ok("{}".into())
    })
}

/// Logs out of a remote server: forgets every credential the auth store holds for it (tokens,
/// its client registrations, the needs-auth mark). `server_json` is the server entry (its `url`
/// names it); `options_json` may give `auth_store` (else the default directory). `out` is
/// `{"forgotten": true|false}` (false: nothing was stored). A connection still open keeps the
/// token it holds until it is closed.
/// The record is removed without being read: one the store cannot use (corrupt, not a regular
/// file, a symbolic link — the link itself goes, never what it leads to), which fails every
/// connect to the server with `config` naming this call, is removed too.
/// Errors: `invalid_argument` (no `url`, a bad option), `config` (the store's directory or lock
/// cannot be used, the record cannot be removed).
#[no_mangle]
pub unsafe extern "C" fn mcplug_auth_logout(
    server_json: *const c_char,
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let server = json_required(server_json, "server_json")?;
        let url = server
            .get("url")
            .and_then(|u| u.as_str())
            .ok_or_else(|| Error::invalid("server_json needs the `url` of a remote server"))?;
        let options = json_arg(options_json, "options_json")?;
        let empty = serde_json::Map::new();
        let obj = match &options {
            Some(serde_json::Value::Object(o)) => o,
            None | Some(serde_json::Value::Null) => &empty,
            Some(_) => return Err(Error::invalid("options_json must be a JSON object")),
        };
        let opts = crate::auth::AuthOptions::parse(obj)?;
        let forgotten = crate::auth::logout(url, &opts)?;
        Ok(serde_json::json!({ "forgotten": forgotten }).to_string())
    })
}
