//! mcplug: an MCP (Model Context Protocol) client for any program, behind a small C ABI.
//!
//! Layers, top to bottom (data flows one way):
//! - [`config`]: MCP server configuration (Claude Code's scopes, policy, other hosts' files);
//! - [`ffi`]: the C ABI — translation only (pointers, strings, status codes, panic boundary);
//! - [`manager`]: many servers — states, batched connects, one tool pool, reconnects;
//! - [`client`]: one server — era negotiation, requests, timeouts, cancellation, events;
//! - [`protocol`]: JSON-RPC framing, the pending-request table, era rules;
//! - [`transport`]: bytes to messages and back (stdio);
//! - [`runtime`]: the one private tokio runtime;
//! - `sys`: the platform layer — everything that talks to the OS below std (Linux).

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod auth;
pub mod client;
pub mod config;
pub mod error;
pub mod ffi;
#[doc(hidden)]
pub mod fuzzing;
pub mod log;
pub mod manager;
pub mod protocol;
pub(crate) mod redact;
pub mod runtime;
pub(crate) mod sys;
pub mod transport;

pub use client::options::{CallOptions, ConnectOptions, ServerSpec};
pub use client::Client;
pub use error::{Error, ErrorKind, Result};

/// The library's version (the crate version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
