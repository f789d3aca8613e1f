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

use once_cell::sync::OnceCell;

/// The environment variable of the filter.
pub const LOG_ENV: &str = "MCPLUG_LOG";

/// Installs the stderr subscriber when `MCPLUG_LOG` is set (once; later calls do nothing).
pub fn init() {
    static DONE: OnceCell<()> = OnceCell::new();
    DONE.get_or_init(|| {
        let Ok(spec) = std::env::var(LOG_ENV) else {
            return;
        };
        if spec.trim().is_empty() {
            return;
        }
        match tracing_subscriber::EnvFilter::try_new(&spec) {
            Ok(filter) => {
                let subscriber = tracing_subscriber::fmt()
                    .with_env_filter(filter)
                    .with_writer(std::io::stderr)
                    .with_ansi(false)
                    .with_target(true)
                    .with_thread_names(true)
                    .finish();
                // A host that is itself a Rust program with its own subscriber keeps it: this
                // library has its own copy of tracing, so this global is ours alone.
                let _ = tracing::subscriber::set_global_default(subscriber);
            }
            Err(e) => {
                eprintln!("mcplug: {LOG_ENV}={spec:?} is not a filter ({e}); logging stays off")
            }
        }
    });
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
