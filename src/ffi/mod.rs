//! The C ABI: translation only. Pointers and C strings become Rust values, the engine's results
//! and errors become one owned JSON string per call, and no panic crosses the boundary.
//!
//! Conventions (see `include/mcplug.h`): every fallible function returns an `mcplug_status` and
//! writes one owned JSON string to its last parameter `out` — the result on `MCPLUG_OK`, an error
//! object `{"error": {"kind", "message", ...}}` otherwise — which the caller frees with
//! `mcplug_string_free`. `out` may be NULL when the caller does not want that string.
//!
//! Safety, once for every function: each `const char *` argument is NULL or a NUL-terminated
//! string that stays valid for the call; each handle is NULL or one that mcplug returned and that
//! has not been freed; each out-pointer is NULL or valid for one write. Nothing else is required:
//! NULL, bad UTF-8 and malformed JSON are reported as `MCPLUG_INVALID_ARGUMENT`, never undefined
//! behaviour.
//!
//! Fork: in a child forked after mcplug started (its runtime ran, or a handle was made), every
//! fallible function returns `MCPLUG_CLOSED` at once and `*_free` returns without touching
//! anything, so a child can neither hang on the parent's threads nor disturb its servers
//! (`sys/fork.rs`).
#![allow(clippy::missing_safety_doc)]
// Every `unsafe` block here says why it is sound (the C boundary is where the contract is kept).

pub mod auth;
pub(crate) mod boundary;
pub mod client;
pub mod config;
pub(crate) mod handle;
pub mod log;
pub mod manager;
pub mod server;

use crate::client::cancel;
use boundary::{ffi_boundary, str_arg};
use std::ffi::{c_char, CString};

/// The incompatible-change counter of this ABI. Bindings refuse a library whose
/// `mcplug_abi_version()` differs from the one they were written for.
pub const MCPLUG_ABI_VERSION: u32 = 1;

/// Status of every fallible call. The numbers are fixed and never reused; each names the `kind`
/// of the error object written to `out` (`MCPLUG_RPC` is `"rpc"`, and so on).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mcplug_status {
    MCPLUG_OK = 0,
    /// The caller passed something unusable (NULL, invalid UTF-8, malformed JSON, an unknown or bad
    /// option); the message names it.
    MCPLUG_INVALID_ARGUMENT = 1,
    /// A local timer ran out (connect, request, tool call, or a wait for events).
    MCPLUG_TIMEOUT = 2,
    /// The host cancelled the call (its tag, its cancel token, its started call's cancel).
    MCPLUG_CANCELLED = 3,
    /// The connection is closed: the server exited, or the handle was closed — or this process is
    /// a child forked after mcplug started in its parent, where every call returns it (`data`:
    /// `{"reason": "forked", "parent_pid"}`) and freeing a handle does nothing.
    MCPLUG_CLOSED = 4,
    /// The transport failed: the server could not start, a pipe or socket broke, an HTTP error
    /// status (then `data.http_status` is its number), a message too large.
    MCPLUG_TRANSPORT = 5,
    /// The server broke the protocol (handshake, version, a malformed message or result).
    MCPLUG_PROTOCOL = 6,
    /// The server answered with a JSON-RPC error; `code`, `message` and `data` are its own.
    MCPLUG_RPC = 7,
    /// The server needs authorization (OAuth) first; `data` says what it asked for.
    MCPLUG_NEEDS_AUTH = 8,
    /// Refused, though everything worked: the host answered the server's input request with an error,
    /// the server left a subscription out of its acknowledgement, or a limit of the library (a skill
    /// over 512 files or 16 MiB).
    MCPLUG_DENIED = 9,
    /// A configuration could not be read, merged or written; the message names the file and field.
    MCPLUG_CONFIG = 10,
    /// A bug in mcplug was caught at the boundary; the handle may still be used or freed.
    MCPLUG_PANIC = 11,
    /// Nothing matched: no call carries that tag, no such server, tool, task or token.
    MCPLUG_NOT_FOUND = 12,
    /// A feature this version of mcplug does not implement.
    MCPLUG_NOT_IMPLEMENTED = 13,
    /// The server's result breaks what it declared: a tool's structuredContent does not match its
    /// outputSchema; `data` has `tool`, `errors` and the untouched `result`.
    MCPLUG_INVALID_RESULT = 14,
}

static VERSION_C: &[u8] = concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes();

/// The library's version, e.g. "0.1.0". Static: never free it.
#[no_mangle]
pub extern "C" fn mcplug_version() -> *const c_char {
    VERSION_C.as_ptr() as *const c_char
}

/// The ABI version (`MCPLUG_ABI_VERSION` of the library actually loaded).
#[no_mangle]
pub extern "C" fn mcplug_abi_version() -> u32 {
    MCPLUG_ABI_VERSION
}

/// Every error kind as JSON, `[{"kind": "invalid_argument", "status": 1, "meaning": "..."}, ...]`,
/// in status order: the one table the bindings build theirs from (and the comments of
/// `mcplug_status` say the same). Static: never free it.
#[no_mangle]
pub extern "C" fn mcplug_error_kinds() -> *const c_char {
    ERROR_KINDS.as_ptr()
}

/// The text of `mcplug_error_kinds`, made once.
static ERROR_KINDS: once_cell::sync::Lazy<CString> = once_cell::sync::Lazy::new(error_kinds_text);

fn error_kinds_text() -> CString {
    CString::new(crate::error::ErrorKind::table().to_string()).expect("JSON has no NUL")
}

/// Frees a string that mcplug returned through an `out` parameter. NULL is a no-op. Never pass a
/// string from anywhere else, and never free one twice.
#[no_mangle]
pub unsafe extern "C" fn mcplug_string_free(s: *mut c_char) {
    if s.is_null() {
        return;
    }
    // SAFETY: not NULL, and by the contract a string this library returned (CString::into_raw)
    // that was not freed before.
    let _ = std::panic::catch_unwind(|| drop(unsafe { CString::from_raw(s) }));
}

/// Cancels every in-flight blocking call whose options carried `"tag": tag`, from any thread.
/// Each such call returns `MCPLUG_CANCELLED` and the server is sent `notifications/cancelled`.
///
/// Returns `MCPLUG_OK` if at least one call was found, `MCPLUG_NOT_FOUND` if none was — it may
/// have finished already, or not have started yet (a host that queues a call on a worker thread
/// and may cancel it before it enters uses a cancel token instead: `mcplug_cancel_token_new`) —,
/// `MCPLUG_INVALID_ARGUMENT` if `tag` is NULL or not UTF-8.
#[no_mangle]
pub unsafe extern "C" fn mcplug_cancel(tag: *const c_char) -> mcplug_status {
    let status = ffi_boundary!(std::ptr::null_mut(), {
        let tag = str_arg(tag, "tag")?;
        if cancel::cancel(tag) == 0 {
            return Err(crate::Error::new(
                crate::ErrorKind::NotFound,
                format!("no call in flight has tag {tag:?}"),
            ));
        }
        Ok(String::new())
    });
    status
}

/// Makes a cancel token, for a call the host will make later (or is queuing on a worker thread):
/// named in the call's options (`"cancel_token": N`, connect's too), it can be cancelled with
/// `mcplug_cancel_token_cancel` at any time — before the call enters the library (it then returns
/// `MCPLUG_CANCELLED` at once, nothing sent and no server started), while it runs (as
/// `mcplug_cancel` of its tag), or after (nothing happens). Unlike a tag, no retry is needed. A
/// token is not reused: once cancelled, every call naming it is cancelled. Free it with
/// `mcplug_cancel_token_free` once its calls have returned. Writes the token (never 0) to `*token`;
/// `MCPLUG_INVALID_ARGUMENT` if `token` is NULL.
#[no_mangle]
pub unsafe extern "C" fn mcplug_cancel_token_new(token: *mut u64) -> mcplug_status {
    if token.is_null() {
        return mcplug_status::MCPLUG_INVALID_ARGUMENT;
    }
    if boundary::not_forked().is_err() {
        return mcplug_status::MCPLUG_CLOSED;
    }
    // SAFETY: not NULL, and by the contract valid for one write.
    unsafe { *token = cancel::token_new() };
    mcplug_status::MCPLUG_OK
}

/// Cancels the calls that name `token` in their options, those running and those still to come.
/// `MCPLUG_OK`, or `MCPLUG_NOT_FOUND` if there is no such token (never made, or freed). From any
/// thread.
#[no_mangle]
pub extern "C" fn mcplug_cancel_token_cancel(token: u64) -> mcplug_status {
    if boundary::not_forked().is_err() {
        return mcplug_status::MCPLUG_CLOSED;
    }
    if cancel::token_cancel(token) {
        mcplug_status::MCPLUG_OK
    } else {
        mcplug_status::MCPLUG_NOT_FOUND
    }
}

/// Frees a cancel token: a call that names it afterwards is refused (`MCPLUG_INVALID_ARGUMENT`);
/// a call running with it keeps it until it returns. `MCPLUG_OK`, or `MCPLUG_NOT_FOUND` if there
/// was no such token.
#[no_mangle]
pub extern "C" fn mcplug_cancel_token_free(token: u64) -> mcplug_status {
    if boundary::not_forked().is_err() {
        return mcplug_status::MCPLUG_CLOSED;
    }
    if cancel::token_free(token) {
        mcplug_status::MCPLUG_OK
    } else {
        mcplug_status::MCPLUG_NOT_FOUND
    }
}
