//! The client's side of custom headers from tool parameters (SEP-2243), on a Streamable HTTP
//! connection of the 2026-07-28 era: `tools/list` results are screened (a tool whose
//! `x-mcp-header` annotations are invalid is dropped, with a `warning` event), a call of a
//! dropped tool is refused, and a call the server rejects with -32020 (its headers do not match
//! the tool's current schema, or the client never saw the tool listed) lists the tools again
//! and goes out once more. The headers themselves are written by the HTTP transport from what
//! is learned here (`transport/param_headers.rs`). Other transports and the legacy era ignore
//! the annotation, as the spec allows.

use super::event::Event;
use super::options::CallOptions;
use super::{Client, Shared, ToolCatalog};
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::era::Era;
use crate::protocol::RawJson;
use crate::transport::param_headers::ParamHeaders;
use serde_json::json;
use serde_json::value::RawValue;
use std::sync::Arc;

/// -32020: the HTTP headers do not match the request body (`HeaderMismatch`).
pub(super) const HEADER_MISMATCH: i64 = -32020;

/// Whether a call failed because the server found its headers wrong.
pub(super) fn is_header_mismatch(e: &Error) -> bool {
    e.kind == ErrorKind::Rpc && e.code == Some(HEADER_MISMATCH)
}

impl ToolCatalog {
    /// What the connection learned of the tools' header parameters, when it mirrors them
    /// (Streamable HTTP, 2026-07-28 era).
    pub(super) fn param_headers(&self, conn: &Shared) -> Option<&ParamHeaders> {
        let known = self.headers.as_deref()?;
        let modern = matches!(
            conn.era.read().as_ref().map(|s| &s.era),
            Some(Era::Modern { .. })
        );
        modern.then_some(known)
    }

    /// A `tools/list` result as the host gets it (`complete`: the whole list, not one page):
    /// untouched, or without the tools whose `x-mcp-header` annotations are invalid, each
    /// reported once (until a listing drops it for another reason) by an event `{"type": "warning", "reason": "invalid_tool_headers", "tool",
    /// "message"}`.
    pub(super) fn screen_tools(&self, conn: &Shared, listing: RawJson, complete: bool) -> RawJson {
        let Some(known) = self.param_headers(conn) else {
            return listing;
        };
        let Some((kept, dropped)) = known.screen(listing.as_str(), complete) else {
            return listing;
        };
        for d in dropped.into_iter().filter(|d| d.fresh) {
            let message = format!(
                "tool {:?} was left out of tools/list: its x-mcp-header annotations are invalid ({})",
                d.tool, d.reason
            );
            let mut about = serde_json::Map::new();
            about.insert("tool".into(), serde_json::Value::String(d.tool));
            conn.events.push_event(Event::Warning {
                reason: "invalid_tool_headers",
                message,
                about,
            });
        }
        match RawValue::from_string(kept) {
            Ok(raw) => RawJson::copy_of(&raw),
            Err(_) => listing,
        }
    }

    /// Refuses a call of a tool that was left out of `tools/list` for invalid annotations.
    pub(super) fn check_tool_headers(&self, conn: &Shared, tool: &str) -> Result<()> {
        let Some(known) = self.param_headers(conn) else {
            return Ok(());
        };
        match known.rejected(tool) {
            None => Ok(()),
            Some(reason) => {
                let mut e = Error::invalid(format!(
                    "tool {tool:?} cannot be called: it was left out of tools/list because its x-mcp-header annotations are invalid ({reason})"
                ));
                e.data = Some(json!({"tool": tool, "reason": reason}));
                Err(e)
            }
        }
    }

    /// Whether a tool call that failed with `error` is to be retried after listing the tools
    /// again (the server's -32020 on a connection that mirrors header parameters).
    pub(super) fn retries_on_headers(&self, conn: &Shared, method: &str, error: &Error) -> bool {
        method == "tools/call" && is_header_mismatch(error) && self.param_headers(conn).is_some()
    }

    /// Lists every tool again (the schemas and header parameters learned as `list_tools`
    /// learns them), so that a retried call carries the headers of the current schemas.
    pub(super) async fn relist_for_headers(
        &self,
        conn: &Arc<Shared>,
        options: &CallOptions,
    ) -> Result<()> {
        let list_options = CallOptions {
            tag: options.tag.clone(),
            own_cancel: options.own_cancel.clone(),
            ..Default::default()
        };
        let client = Client {
            shared: conn.clone(),
        };
        client.list_tools(&list_options).await.map(|_| ())
    }
}
