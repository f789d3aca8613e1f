//! `mcplug_manager_serve` and `mcplug_server_*`: a manager's pool served as one MCP server, so
//! that other agents (any MCP host) can use it — a host's own tools (`sdk` servers) included.

use super::boundary::{ffi_boundary, json_required};
use super::handle::{self, Entries, Handle};
use super::manager::mcplug_manager;
use super::mcplug_status;
use crate::error::Error;
use crate::runtime;
use crate::server::Server;
use serde_json::json;
use std::ffi::c_char;

/// A manager's pool being served (see `mcplug_manager_serve`). Opaque; its functions may be
/// called from any thread. Freed with `mcplug_server_free`.
#[allow(non_camel_case_types)]
pub struct mcplug_server {
    server: Server,
    active: Entries,
}

impl Handle for mcplug_server {
    const NAME: &'static str = "server";
    fn entries(&self) -> &Entries {
        &self.active
    }
}

/// Serves the manager's pool as one MCP server. `options_json`: `{"transport": "http",
/// "listen": "127.0.0.1:0", "names": "prefixed"}` (Streamable HTTP at `/mcp`, both protocol
/// eras; `listen` defaults to `127.0.0.1:0`, a port of its own; requests whose `Host` or
/// `Origin` is not this machine's are refused) or `{"transport": "fds", "read_fd": n,
/// "write_fd": m}` (one client at the other end of two descriptors, newline-delimited as
/// stdio; they are duplicated and stay the host's) or `{"transport": "stdio"}` (this process's
/// stdin and stdout). `names`: `"prefixed"` (default: `mcp__<server>__<tool>`) or
/// `"unprefixed"` (the servers' own names; the first server in configuration order wins a
/// collision). Results pass as the servers sent them; what a server asks during a client's call
/// (sampling, elicitation, roots) is asked of that client.
///
/// While it serves, the manager's events are the server's: it takes them to route progress,
/// log messages, `list_changed` and the servers' requests to its clients (do not pull them as
/// well). On `MCPLUG_OK`, `*server` is the new handle and `out` is `{"url": "http://…/mcp"}`
/// (`url` null over descriptors). Errors: `invalid_argument` (options, a descriptor that is not
/// open), `transport` (the address cannot be listened on), `closed`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_manager_serve(
    manager: *mut mcplug_manager,
    options_json: *const c_char,
    server: *mut *mut mcplug_server,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = handle::enter(manager)?;
        let options = json_required(options_json, "options_json")?;
        if server.is_null() {
            return Err(Error::invalid(
                "`server` (the handle out-parameter) is NULL",
            ));
        }
        let served = crate::server::serve(h.0.manager(), &options)?;
        let out = json!({ "url": served.url() }).to_string();
        let handle = handle::into_raw(mcplug_server {
            server: served,
            active: Entries::default(),
        });
        // SAFETY: `server` was checked not NULL above and is valid for one write (the contract).
        unsafe { *server = handle };
        Ok(out)
    })
}

/// Stops serving: every client's session ends (their requests in flight are cancelled at the
/// servers), the listener closes, and the manager's events are the host's again. The manager
/// stays open. `out` is `{}`.
#[no_mangle]
pub unsafe extern "C" fn mcplug_server_close(
    server: *mut mcplug_server,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let h = handle::enter(server)?;
        runtime::block_on(h.0.server.close());
        Ok("{}".into())
    })
}

/// Closes (as `mcplug_server_close`) and frees the server. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn mcplug_server_free(server: *mut mcplug_server) {
    // SAFETY: NULL or a handle this library returned, not used again by the host (the contract).
    unsafe { handle::free(server, |h| runtime::block_on(h.server.close())) }
}
