//! The library's logs: `tracing`, compiled in and off until `MCPLUG_LOG` asks for them.
//!
//! `MCPLUG_LOG` takes `tracing-subscriber`'s EnvFilter syntax (`debug`, `mcplug::wire=trace`,
//! `warn,mcplug::client=debug`); records go to stderr, one line each. Read once, when the library
//! first connects or starts its runtime. With it unset every log point is one relaxed load of
//! tracing's global level (no subscriber is installed).
//!
//! Targets:
//! - `mcplug::client` (debug): a connect (the server's name and transport, a remote URL with its
//!   secrets masked — never a stdio server's arguments or environment), its outcome, each
//!   request's method and id, the end of a connection and why;
//! - `mcplug::wire` (trace): every message sent and received, as text, URL secrets masked;
//! - the modules' own paths (`mcplug::transport::http`, ...) for what they notice.
//!
//! What a config holds for the server (`env` values, `headers`, tokens) is never logged: the
//! messages on the wire do not carry it, and the connect record names only what is safe.
//!
//! A record is one line on stderr: a control character in it (a server's CR, a newline in its
//! error message, C1 controls — ESC tracing already shows as `\x1b`) is shown escaped, as
//! [`for_terminal`] shows it, so a server's text can neither redraw the person's terminal nor
//! forge a record of its own.
//!
//! A host can take the records instead ([`capture`]): from then on they go, as JSON objects
//! `{"type": "log", "level", "target", "message", "fields", "time_ms", "thread"}`, to one
//! process-wide queue the host pulls (bounded like an event queue: past it the oldest go, and an
//! `{"type": "overflow", "dropped"}` record says how many), under the host's filter, and not to
//! stderr; [`release`] hands them back to `MCPLUG_LOG`. The subscriber is installed the first
//! time either asks for records: a process that never does pays one relaxed load per log point.

use crate::error::{Error, ErrorKind};
use crate::queue::{EventQueue, Pulled};
use once_cell::sync::OnceCell;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

/// The environment variable of the filter.
pub const LOG_ENV: &str = "MCPLUG_LOG";

/// The records a capture queue holds by default before the oldest go.
const DEFAULT_MAX_RECORDS: usize = 10_000;

/// The installed subscriber's filter, and `MCPLUG_LOG`'s own (what [`release`] goes back to).
struct Installed {
    filter: reload::Handle<EnvFilter, Registry>,
    env: Option<String>,
}

static INSTALLED: OnceCell<Installed> = OnceCell::new();

/// The host's capture queue, and whether the capture runs. A released capture keeps its
/// (closed) queue here, so that the records it still holds are taken before a pull says closed.
static CAPTURE: Mutex<Option<Capture>> = Mutex::new(None);

struct Capture {
    queue: Arc<EventQueue>,
    running: bool,
}

/// The running capture's queue, if one runs.
fn running() -> Option<Arc<EventQueue>> {
    CAPTURE
        .lock()
        .as_ref()
        .filter(|c| c.running)
        .map(|c| c.queue.clone())
}

/// `MCPLUG_LOG`, when it is set to a filter this library can read (`report`: name one it cannot
/// on stderr).
fn env_spec(report: bool) -> Option<String> {
    let spec = std::env::var(LOG_ENV).ok()?;
    if spec.trim().is_empty() {
        return None;
    }
    match EnvFilter::try_new(&spec) {
        Ok(_) => Some(spec),
        Err(e) => {
            if report {
                eprintln!("mcplug: {LOG_ENV}={spec:?} is not a filter ({e}); logging stays off");
            }
            None
        }
    }
}

/// The subscriber, installed the first time: `MCPLUG_LOG`'s filter (or none), records to
/// stderr as lines — or, while a host captures them, to its queue instead.
fn install() -> &'static Installed {
    INSTALLED.get_or_init(|| {
        let env = env_spec(false);
        let (filter, handle) = reload::Layer::new(EnvFilter::new(env.as_deref().unwrap_or("off")));
        let stderr = tracing_subscriber::fmt::layer()
            .with_writer(|| -> Box<dyn std::io::Write> {
                if running().is_some() {
                    Box::new(std::io::sink())
                } else {
                    Box::new(Lines(std::io::stderr()))
                }
            })
            .with_ansi(false)
            .with_target(true)
            .with_thread_names(true);
        let subscriber = Registry::default().with(filter).with(stderr).with(Captured);
        // A host that is itself a Rust program with its own subscriber keeps it: this library
        // has its own copy of tracing, so this global is ours alone.
        let _ = tracing::subscriber::set_global_default(subscriber);
        Installed {
            filter: handle,
            env,
        }
    })
}

/// Installs the subscriber when `MCPLUG_LOG` asks for records (read once; later calls do
/// nothing).
pub fn init() {
    static CHECKED: OnceCell<()> = OnceCell::new();
    CHECKED.get_or_init(|| {
        if env_spec(true).is_some() {
            install();
        }
    });
}

/// A capture's options: `filter` (EnvFilter syntax, "debug" by default) and `max_records`
/// (10,000 by default, at least 1). An unknown option is refused by name.
pub fn capture_options(value: Option<&Value>) -> Result<(String, usize), Error> {
    const KNOWN: &[&str] = &["filter", "max_records"];
    let mut filter = "debug".to_string();
    let mut max = DEFAULT_MAX_RECORDS;
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok((filter, max));
    };
    let Some(map) = value.as_object() else {
        return Err(Error::invalid(format!(
            "the log capture options must be a JSON object (got {value})"
        )));
    };
    for (key, v) in map {
        match key.as_str() {
            "filter" => {
                filter = v
                    .as_str()
                    .ok_or_else(|| Error::invalid(format!("`filter` must be a string (got {v})")))?
                    .to_string()
            }
            "max_records" => {
                max = v
                    .as_u64()
                    .filter(|n| (1..=1_000_000).contains(n))
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "`max_records` must be an integer from 1 to 1000000 (got {v})"
                        ))
                    })? as usize
            }
            other => return Err(crate::shape::unknown_option(other, &[KNOWN])),
        }
    }
    Ok((filter, max))
}

/// Starts (or changes the filter of) the host's capture: records matching `filter` (EnvFilter
/// syntax) go to the capture queue, which holds at most `max_records` (a running capture keeps
/// its own bound), and no longer to stderr. Returns the queue's bound.
pub fn capture(filter: &str, max_records: usize) -> Result<usize, Error> {
    let parsed = EnvFilter::try_new(filter).map_err(|e| {
        Error::invalid(format!(
            "`filter` {filter:?} is not a log filter ({e}); e.g. \"debug\" or \"warn,mcplug::wire=trace\""
        ))
    })?;
    let installed = install();
    let bound = {
        let mut slot = CAPTURE.lock();
        match slot.as_ref() {
            Some(c) if c.running => c.queue.capacity(),
            _ => {
                *slot = Some(Capture {
                    queue: Arc::new(EventQueue::new(max_records)),
                    running: true,
                });
                max_records
            }
        }
    };
    installed.filter.reload(parsed).map_err(|e| {
        Error::new(
            ErrorKind::Transport,
            format!("cannot set the log filter: {e}"),
        )
    })?;
    Ok(bound)
}

/// Ends the capture: the queue closes (waiting pulls return closed once it is drained) and the
/// records go back to `MCPLUG_LOG` (stderr, or nowhere). False when none was running.
pub fn release() -> bool {
    let queue = {
        let mut slot = CAPTURE.lock();
        match slot.as_mut() {
            Some(c) if c.running => {
                c.running = false;
                c.queue.clone()
            }
            _ => return false,
        }
    };
    if let Some(installed) = INSTALLED.get() {
        let _ = installed
            .filter
            .reload(EnvFilter::new(installed.env.as_deref().unwrap_or("off")));
    }
    queue.close_with(None);
    true
}

/// The capture queue (the one released last, once none runs), or `closed` when the host never
/// took records.
fn queue() -> Result<Arc<EventQueue>, Error> {
    let queue = CAPTURE.lock().as_ref().map(|c| c.queue.clone());
    queue.ok_or_else(|| {
        Error::new(
            ErrorKind::Closed,
            "no log capture is running (start one with mcplug_log_capture)",
        )
    })
}

/// Waits up to `wait` (None: for ever) for a record, then takes up to `max`: a JSON array.
pub fn next_records(max: usize, wait: Option<Duration>) -> Result<Pulled, Error> {
    Ok(queue()?.pull_many(max, wait))
}

/// A new descriptor, owned by the caller, readable while records wait (and once the capture
/// ended).
pub fn records_fd() -> Result<i32, Error> {
    queue()?
        .readiness_fd()
        .map_err(|e| Error::transport(format!("cannot create the log descriptor: {e}")))
}

/// The layer that turns each record into a JSON object on the capture queue.
struct Captured;

impl<S: tracing::Subscriber> Layer<S> for Captured {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let Some(queue) = running() else {
            return;
        };
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let time_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let record = json!({
            "type": "log",
            "level": meta.level().as_str().to_ascii_lowercase(),
            "target": meta.target(),
            "message": fields.message,
            "fields": fields.rest,
            "time_ms": time_ms,
            "thread": std::thread::current().name().unwrap_or(""),
        });
        queue.push_text_waking(record.to_string(), true);
    }
}

/// A record's fields: its message apart, the others by name.
#[derive(Default)]
struct Fields {
    message: String,
    rest: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
        } else {
            self.rest.insert(field.name().to_string(), value);
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, json!(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, json!(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, json!(value));
    }
}

/// Text as a person's terminal should get it: every control character — C0 but `\n` and `\t`,
/// DEL, C1 — shown escaped as Rust writes it (`\u{1b}`, `\u{d}`, `\u{9b}`), so text a server
/// or a configuration wrote cannot move the cursor, retitle or clear the terminal, write the
/// clipboard (OSC 52) or overwrite a line with CR. Borrowed when there is nothing to escape.
pub fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    escape_controls(text, &['\n', '\t'])
}

/// `text` with every control character but those in `keep` escaped.
fn escape_controls<'a>(text: &'a str, keep: &[char]) -> std::borrow::Cow<'a, str> {
    let escaped = |c: char| c.is_control() && !keep.contains(&c);
    if !text.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Stderr for the records: each is written whole, one line, its control characters (a newline
/// inside it too) escaped; the line's own end is kept.
struct Lines<W: std::io::Write>(W);

impl<W: std::io::Write> std::io::Write for Lines<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (body, end) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (&*text, ""),
        };
        let line = escape_controls(body, &['\t']);
        self.0.write_all(line.as_bytes())?;
        self.0.write_all(end.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// A message this connection sent (`mcplug::wire`, trace).
pub fn sent(server: Option<&str>, message: &[u8]) {
    if tracing::enabled!(target: "mcplug::wire", tracing::Level::TRACE) {
        wire(server, "->", message);
    }
}

/// A message this connection received (`mcplug::wire`, trace).
pub fn received(server: Option<&str>, message: &[u8]) {
    if tracing::enabled!(target: "mcplug::wire", tracing::Level::TRACE) {
        wire(server, "<-", message);
    }
}

#[cold]
fn wire(server: Option<&str>, way: &str, message: &[u8]) {
    let text = String::from_utf8_lossy(message);
    let text = crate::redact::urls(text.trim_end());
    tracing::trace!(target: "mcplug::wire", server = server.unwrap_or(""), "{way} {text}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn text_for_a_terminal_has_no_control_character_but_newline_and_tab() {
        let hostile = "a\x1b]0;title\x07b\x1b]52;c;ZXZpbA==\x07\r\x1b[2Jc\u{9b}31md\x7f\te\nf";
        let shown = for_terminal(hostile);
        assert_eq!(
            shown,
            "a\\u{1b}]0;title\\u{7}b\\u{1b}]52;c;ZXZpbA==\\u{7}\\u{d}\\u{1b}[2Jc\\u{9b}31md\\u{7f}\te\nf"
        );
        assert!(!shown
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'));
        assert!(matches!(
            for_terminal("plain ✓ text\n"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_record_on_stderr_is_one_line_whatever_its_text() {
        let mut out = Lines(Vec::new());
        let record =
            "DEBUG mcplug::client: connect failed: bad\r\x1b[2Kforged\nINFO fake: x\u{9b}\t.\n";
        out.write_all(record.as_bytes()).unwrap();
        let text = String::from_utf8(out.0).unwrap();
        assert_eq!(
            text,
            "DEBUG mcplug::client: connect failed: bad\\u{d}\\u{1b}[2Kforged\\u{a}INFO fake: x\\u{9b}\t.\n"
        );
    }
}
