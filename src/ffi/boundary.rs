//! The panic boundary and the argument/result helpers every C entry point uses.

use crate::error::{Error, ErrorKind};
use serde_json::value::RawValue;
use serde_json::Value;
use std::ffi::{c_char, CStr, CString};

use super::mcplug_status;

pub fn status_of(kind: ErrorKind) -> mcplug_status {
    match kind {
        ErrorKind::InvalidArgument => mcplug_status::MCPLUG_INVALID_ARGUMENT,
        ErrorKind::Timeout => mcplug_status::MCPLUG_TIMEOUT,
        ErrorKind::Cancelled => mcplug_status::MCPLUG_CANCELLED,
        ErrorKind::Closed => mcplug_status::MCPLUG_CLOSED,
        ErrorKind::Transport => mcplug_status::MCPLUG_TRANSPORT,
        ErrorKind::Protocol => mcplug_status::MCPLUG_PROTOCOL,
        ErrorKind::Rpc => mcplug_status::MCPLUG_RPC,
        ErrorKind::NeedsAuth => mcplug_status::MCPLUG_NEEDS_AUTH,
        ErrorKind::Denied => mcplug_status::MCPLUG_DENIED,
        ErrorKind::Config => mcplug_status::MCPLUG_CONFIG,
        ErrorKind::Panic => mcplug_status::MCPLUG_PANIC,
        ErrorKind::NotFound => mcplug_status::MCPLUG_NOT_FOUND,
        ErrorKind::NotImplemented => mcplug_status::MCPLUG_NOT_IMPLEMENTED,
        ErrorKind::InvalidResult => mcplug_status::MCPLUG_INVALID_RESULT,
    }
}

/// Hands an owned C string to the caller through `out` (when `out` is not NULL).
pub fn write_out(out: *mut *mut c_char, text: String) {
    if out.is_null() {
        return;
    }
    // serde_json escapes NUL, so JSON text never has an interior NUL; be safe anyway.
    let c = CString::new(text).unwrap_or_else(|_| {
        CString::new("{\"error\":{\"kind\":\"panic\",\"message\":\"NUL in output\"}}").unwrap()
    });
    // SAFETY: `out` is not NULL (checked above) and, by the module's contract, valid for one
    // write; the string is the caller's to free with mcplug_string_free.
    unsafe { *out = c.into_raw() };
}

/// Writes the outcome of an entry point and returns its status.
pub fn finish(out: *mut *mut c_char, outcome: Result<String, Error>) -> mcplug_status {
    match outcome {
        Ok(json) => {
            write_out(out, json);
            mcplug_status::MCPLUG_OK
        }
        Err(e) => {
            write_out(out, e.to_json().to_string());
            status_of(e.kind)
        }
    }
}

/// Like [`finish`] for entry points whose success has no JSON to give: `*out` is set to NULL
/// (nothing to free), and to the error object on failure.
pub fn finish_quiet(out: *mut *mut c_char, outcome: Result<(), Error>) -> mcplug_status {
    match outcome {
        Ok(()) => {
            if !out.is_null() {
                // SAFETY: `out` is not NULL and, by the module's contract, valid for one write.
                unsafe { *out = std::ptr::null_mut() };
            }
            mcplug_status::MCPLUG_OK
        }
        Err(e) => finish(out, Err(e)),
    }
}

pub fn panic_error(payload: Box<dyn std::any::Any + Send>) -> Error {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    Error::new(
        ErrorKind::Panic,
        format!("mcplug panicked (a bug; please report it): {what}"),
    )
}

/// Refuses work in a child forked after the library started (`sys/fork.rs`): its threads are
/// not there, and its handles name the parent's servers and connections. One atomic load.
#[inline]
pub fn not_forked() -> Result<(), Error> {
    match crate::sys::fork::forked_from() {
        None => Ok(()),
        Some(parent) => Err(forked_error(parent)),
    }
}

#[cold]
fn forked_error(parent: u32) -> Error {
    Error::closed(format!(
        "mcplug cannot be used in this process: it was forked from process {parent} after mcplug \
         started there, and mcplug's threads and connections stay with that process. A handle \
         from the parent may only be freed here (which does nothing to the parent's servers). \
         Use mcplug in a process started fresh (exec, or Python multiprocessing's \"spawn\" or \
         \"forkserver\" start method), or only in processes forked before it first connected"
    ))
    .with_data(serde_json::json!({"reason": "forked", "parent_pid": parent}))
}

/// Runs an entry point's body inside the panic boundary. Used *inside* each literal
/// `#[no_mangle] extern "C" fn` so that cbindgen still sees the function.
macro_rules! ffi_boundary {
    ($out:expr, $body:block) => {{
        let out = $out;
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(
            || -> ::std::result::Result<String, $crate::error::Error> {
                $crate::ffi::boundary::not_forked()?;
                $body
            },
        )) {
            Ok(outcome) => $crate::ffi::boundary::finish(out, outcome),
            Err(payload) => {
                $crate::ffi::boundary::finish(out, Err($crate::ffi::boundary::panic_error(payload)))
            }
        }
    }};
}
pub(crate) use ffi_boundary;

/// [`ffi_boundary!`] for a body that returns `Result<(), Error>`: on success `*out` is NULL.
macro_rules! ffi_boundary_quiet {
    ($out:expr, $body:block) => {{
        let out = $out;
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(
            || -> ::std::result::Result<(), $crate::error::Error> {
                $crate::ffi::boundary::not_forked()?;
                $body
            },
        )) {
            Ok(outcome) => $crate::ffi::boundary::finish_quiet(out, outcome),
            Err(payload) => $crate::ffi::boundary::finish_quiet(
                out,
                Err($crate::ffi::boundary::panic_error(payload)),
            ),
        }
    }};
}
pub(crate) use ffi_boundary_quiet;

/// A required string argument: NULL and invalid UTF-8 are errors that name the parameter.
pub fn str_arg<'a>(ptr: *const c_char, name: &str) -> Result<&'a str, Error> {
    if ptr.is_null() {
        return Err(Error::invalid(format!("`{name}` is NULL")));
    }
    // SAFETY: `ptr` is not NULL and, by the module's contract, a NUL-terminated string that stays
    // valid for this call (the borrow ends with it).
    let bytes = unsafe { CStr::from_ptr(ptr) }.to_bytes();
    std::str::from_utf8(bytes).map_err(|e| {
        Error::invalid(format!(
            "`{name}` is not valid UTF-8 (bad byte at offset {})",
            e.valid_up_to()
        ))
    })
}

/// A call's `options_json` (NULL: the defaults) for a function that neither calls nor lists
/// tools: `format` is refused.
pub fn call_options(ptr: *const c_char) -> Result<crate::client::options::CallOptions, Error> {
    let o = tool_call_options(ptr)?;
    o.refuse_format("this function")?;
    Ok(o)
}

/// A tool call's or tool listing's `options_json` (NULL: the defaults), `format` included,
/// parsed without a tree when it is a plain object of options; otherwise through the tree,
/// whose errors say what is wrong.
pub fn tool_call_options(ptr: *const c_char) -> Result<crate::client::options::CallOptions, Error> {
    use crate::client::options::CallOptions;
    if ptr.is_null() {
        return Ok(CallOptions::default());
    }
    if let Some(parsed) = CallOptions::parse_fast(str_arg(ptr, "options_json")?) {
        return parsed;
    }
    CallOptions::parse(json_arg(ptr, "options_json")?.as_ref())
}

/// An optional JSON argument: NULL gives `None`; malformed JSON names the parameter and where.
pub fn json_arg(ptr: *const c_char, name: &str) -> Result<Option<Value>, Error> {
    if ptr.is_null() {
        return Ok(None);
    }
    value_of(str_arg(ptr, name)?, name).map(Some)
}

/// The tree of a host's JSON text: built in place when it nests little, else on a stack of the
/// library's own — building recurses once per level, and a host thread of 128 KiB overflows
/// some hundred levels down, before serde_json's limit of 128 is reached (tests/c/faults.c).
fn value_of(text: &str, name: &str) -> Result<Value, Error> {
    if crate::protocol::shallow(text.as_bytes()) {
        return serde_json::from_str(text).map_err(|e| bad_json(name, e));
    }
    on_spare_stack(|| serde_json::from_str(text).map_err(|e| bad_json(name, e)))?
}

/// Runs `f` on the library's spare stack (see `runtime::on_spare_stack`), for an entry point
/// whose work recurses with its data; the thread's failure (a panic) is kind `panic`.
pub fn on_spare_stack<R: Send>(f: impl FnOnce() -> R + Send) -> Result<R, Error> {
    crate::runtime::on_spare_stack(f).map_err(|why| Error::new(crate::error::ErrorKind::Panic, why))
}

/// The error for malformed JSON, with a hint for the one case whose serde message is cryptic:
/// a `\uD8xx` escape without its pair, which JSON's grammar allows but Unicode text cannot hold.
fn bad_json(name: &str, e: serde_json::Error) -> Error {
    let msg = e.to_string();
    if msg.contains("hex escape") || msg.contains("surrogate") {
        return Error::invalid(format!(
            "`{name}` is not valid JSON text: it has a \\u escape of a lone UTF-16 surrogate, \
             which is not a Unicode character ({msg})"
        ));
    }
    Error::invalid(format!("`{name}` is not valid JSON: {msg}"))
}

/// An optional JSON object argument, validated but kept as text (NULL or `null`: `None`).
pub fn raw_object_arg<'a>(ptr: *const c_char, name: &str) -> Result<Option<&'a RawValue>, Error> {
    if ptr.is_null() {
        return Ok(None);
    }
    let text = str_arg(ptr, name)?;
    let raw: &RawValue = serde_json::from_str(text).map_err(|e| bad_json(name, e))?;
    // Validating into a RawValue skips over string escapes; a `\uD800`-style escape must still be
    // refused as it is everywhere else, so text that has one gets a full parse.
    if has_surrogate_escape(text) {
        value_of(text, name)?;
    }
    match raw.get().as_bytes().first() {
        Some(b'{') => Ok(Some(raw)),
        Some(b'n') => Ok(None),
        _ => Err(Error::invalid(format!(
            "`{name}` must be a JSON object (got {})",
            raw.get()
        ))),
    }
}

/// Whether `text` has a `\uD800`–`\uDFFF` escape (cheap scan; most text has no `\u` at all).
fn has_surrogate_escape(text: &str) -> bool {
    let b = text.as_bytes();
    // memchr for the backslash: a memmem searcher built per call cost ~1k instructions.
    memchr::memchr_iter(b'\\', b)
        .any(|i| b.get(i + 1) == Some(&b'u') && matches!(b.get(i + 2), Some(b'd' | b'D')))
}

/// A required JSON argument.
pub fn json_required(ptr: *const c_char, name: &str) -> Result<Value, Error> {
    json_arg(ptr, name)?.ok_or_else(|| Error::invalid(format!("`{name}` is NULL")))
}
