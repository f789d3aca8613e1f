//! The library's log records for the host: a process-wide capture, pulled like events.

use super::boundary::{ffi_boundary, ffi_boundary_quiet, json_arg};
use super::client::event_wait;
use super::mcplug_status;
use crate::error::{Error, ErrorKind};
use crate::queue::Pulled;
use std::ffi::c_char;

/// Starts taking the library's log records (or changes the filter of the capture running): from
/// now on the records that match go to one process-wide queue the host pulls with
/// `mcplug_log_next_events`, and no longer to stderr (`MCPLUG_LOG`).
///
/// `options_json` (NULL for defaults): `filter` (tracing's EnvFilter syntax: `"debug"`, the
/// default, `"warn,mcplug::wire=trace"`; the targets are `mcplug::client` for connects, requests
/// and ends, `mcplug::wire` for every message, and the modules' own paths) and `max_records`
/// (10000: past it the oldest records go and an `{"type": "overflow", "dropped"}` record says how
/// many; a running capture keeps its own). `out` is `{"filter", "max_records"}`. A filter that cannot be read, or an unknown
/// option, is `MCPLUG_INVALID_ARGUMENT`. Each record is `{"type": "log", "level", "target",
/// "message", "fields", "time_ms", "thread"}`; none carries a secret of the configuration (an
/// entry's `env` or `headers`, a token), and URLs have their secrets masked.
#[no_mangle]
pub unsafe extern "C" fn mcplug_log_capture(
    options_json: *const c_char,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        let options = json_arg(options_json, "options_json")?;
        let (filter, max) = crate::log::capture_options(options.as_ref())?;
        let max = crate::log::capture(&filter, max)?;
        Ok(serde_json::json!({"filter": filter, "max_records": max}).to_string())
    })
}

/// Ends the capture: the records go back to `MCPLUG_LOG` (stderr, or nowhere), and a pull
/// returns `MCPLUG_CLOSED` once the records already queued are taken. `out` is
/// `{"released": true}`, or `false` when no capture was running.
#[no_mangle]
pub unsafe extern "C" fn mcplug_log_release(out: *mut *mut c_char) -> mcplug_status {
    ffi_boundary!(out, {
        Ok(serde_json::json!({"released": crate::log::release()}).to_string())
    })
}

/// Waits up to `timeout_ms` (-1: until one comes or the capture ends) for a log record, then
/// takes up to `max_records` (0 counts as one) without waiting more: `out` is a JSON array.
/// `MCPLUG_TIMEOUT` when none came; `MCPLUG_CLOSED` when no capture is running (or it ended and
/// every record was taken).
#[no_mangle]
pub unsafe extern "C" fn mcplug_log_next_events(
    max_records: u32,
    timeout_ms: i32,
    out: *mut *mut c_char,
) -> mcplug_status {
    ffi_boundary!(out, {
        match crate::log::next_records(max_records as usize, event_wait(timeout_ms))? {
            Pulled::Event(text) => Ok(text),
            Pulled::TimedOut => Err(Error::timeout(format!(
                "no log record within {timeout_ms} ms"
            ))),
            Pulled::Closed => Err(Error::new(
                ErrorKind::Closed,
                "the log capture ended and every record was taken",
            )),
        }
    })
}

/// A new descriptor (the caller closes it) that is readable while log records wait and once the
/// capture ended: for an event loop that polls, then pulls with `timeout_ms` 0.
/// `MCPLUG_CLOSED` when no capture is running.
#[no_mangle]
pub unsafe extern "C" fn mcplug_log_event_fd(fd: *mut i32, out: *mut *mut c_char) -> mcplug_status {
    ffi_boundary_quiet!(out, {
        if fd.is_null() {
            return Err(Error::invalid(
                "`fd` (the descriptor out-parameter) is NULL",
            ));
        }
        let n = crate::log::records_fd()?;
        // SAFETY: `fd` is not NULL (checked above) and valid for one write (the contract).
        unsafe { *fd = n };
        Ok(())
    })
}
