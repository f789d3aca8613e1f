//! mcplug: an MCP (Model Context Protocol) client for any program, behind a small C ABI.
//!
//! Layers, top to bottom (data flows one way):
//! - `auth` (the crate's own; [`AuthOptions`] and [`logout`] re-exported): OAuth;
//! - [`config`]: MCP server configuration (Claude Code's scopes, policy, other hosts' files);
//! - [`ffi`]: the C ABI — translation only (pointers, strings, status codes, panic boundary);
//! - [`manager`]: many servers — states, batched connects, one tool pool, reconnects;
//! - [`client`]: one server — era negotiation, requests, timeouts, cancellation, events;
//! - `protocol` (the crate's own): JSON-RPC framing, the pending-request table, era rules;
//! - `transport` (the crate's own; its contract re-exported here): bytes to messages and back
//!   (stdio, Streamable HTTP, HTTP+SSE, WebSocket);
//! - [`runtime`]: the one private tokio runtime;
//! - `sys`: the platform layer — everything that talks to the OS below std (Linux).

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub(crate) mod auth;
pub mod client;
pub mod config;
pub mod error;
pub mod ffi;
#[doc(hidden)]
pub mod fuzzing;
pub mod log;
pub mod manager;
pub mod model;
pub(crate) mod protocol;
pub mod queue;
pub(crate) mod redact;
pub mod runtime;
pub mod server;
pub(crate) mod session;
pub(crate) mod shape;
pub(crate) mod sys;
pub(crate) mod transport;

// The engine's own modules (auth, protocol, transport) are the crate's; what a Rust host needs
// of them is named here.
pub use auth::{logout, AuthEvent, AuthOptions};
pub use client::options::{CallOptions, ConnectOptions, ServerSpec};
pub use client::Client;
pub use error::{Error, ErrorKind, Result};
/// What a transport of the host's own implements, for [`Client::connect_with`].
pub use transport::{
    BoxFuture, Drive, Driven, DrivenRequest, HostRead, Inbound, RequestShape, Transport,
};

/// The library's version (the crate version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
