//! Era negotiation (the specification's "Lifecycle" and version negotiation): the `server/discover` probe of the 2026-07-28 revision,
//! the fallback to the legacy `initialize` handshake, and the era cache.

use super::request::{Body, Send};
use super::{EraState, Negotiated, Shared};
use crate::error::{Error, ErrorKind, Result};
use crate::protocol;
use crate::protocol::era::Era;
use crate::protocol::{codes, era};
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use tokio::time::Instant;

/// Servers (by signature) already found to be legacy: later connections skip the
/// `server/discover` probe, which a silent legacy server would make them wait for.
static LEGACY_SERVERS: Lazy<Mutex<HashSet<String>>> = Lazy::new(Default::default);

impl Negotiated {
    /// The era negotiation: probe `server/discover`, fall back to
    /// `initialize` on anything that is not positive evidence of a modern server.
    pub(super) async fn negotiate(&self, conn: &Shared, signature: &str) -> Result<Value> {
        let opts = &conn.options;
        let deadline = opts.connect_timeout.map(|c| Instant::now() + c);
        let known_legacy = LEGACY_SERVERS.lock().contains(signature);
        let probed = !opts.modern_versions.is_empty() && !known_legacy;
        if probed {
            let probe_timeout = match opts.connect_timeout {
                Some(c) => opts.discover_timeout.min(c / 2),
                None => opts.discover_timeout,
            };
            let mut version = opts.modern_versions[0].clone();
            for attempt in 0..2 {
                let params = era::stamp_modern_meta(
                    None,
                    &version,
                    &opts.modern_capabilities,
                    &opts.client_info,
                );
                let probe = conn
                    .send_request(Send {
                        method: "server/discover",
                        body: Body::Params(Some(params)),
                        timeout: Some(probe_timeout),
                        cancellable: false,
                        resolves: false,
                        options: None,
                        pausable: true,
                    })
                    .await;
                match probe.and_then(|r| r.value()) {
                    Ok(result) => {
                        let supported = protocol::string_list(result.get("supportedVersions"));
                        if let Some(v) = opts.modern_versions.iter().find(|v| supported.contains(v))
                        {
                            return Ok(self.adopt_modern(conn, v, result));
                        }
                        break; // answers discover but offers no modern version: a legacy advertisement
                    }
                    Err(e)
                        if e.kind == ErrorKind::Rpc
                            && e.code == Some(codes::UNSUPPORTED_PROTOCOL_VERSION) =>
                    {
                        let supported =
                            protocol::string_list(e.data.as_ref().and_then(|d| d.get("supported")));
                        if let Some(v) = opts.modern_versions.iter().find(|v| supported.contains(v))
                        {
                            if attempt == 0 {
                                version = v.clone();
                                continue;
                            }
                        }
                        if !supported.is_empty()
                            && !supported.iter().any(|v| opts.legacy_versions.contains(v))
                        {
                            return Err(Error::protocol(format!(
                                "the server supports protocol versions {supported:?}; this client offers {:?}",
                                opts.modern_versions.iter().chain(opts.legacy_versions.iter()).collect::<Vec<_>>()
                            )));
                        }
                        break;
                    }
                    // Any other JSON-RPC error, or silence: a legacy server.
                    Err(e) if e.kind == ErrorKind::Rpc || e.kind == ErrorKind::Timeout => break,
                    Err(e) => return Err(e),
                }
            }
        }
        if opts.legacy_versions.is_empty() {
            return Err(Error::protocol(format!(
                "the server did not answer server/discover as a {} server, and protocol_versions allows no legacy version",
                opts.modern_versions.join("/")
            )));
        }
        let result = match self.initialize(conn, deadline).await {
            Err(e) if e.kind == ErrorKind::Timeout => Err(conn.connect_timed_out()),
            other => other,
        };
        match result {
            Ok(info) => {
                // Only a probe that failed is evidence; a host that ruled out the modern era is not.
                if probed {
                    LEGACY_SERVERS.lock().insert(signature.to_string());
                }
                Ok(info)
            }
            Err(e) => {
                LEGACY_SERVERS.lock().remove(signature);
                Err(e)
            }
        }
    }

    /// The legacy handshake, within what is left of the connect budget.
    pub(super) async fn initialize(
        &self,
        conn: &Shared,
        deadline: Option<Instant>,
    ) -> Result<Value> {
        let opts = &conn.options;
        let params = json!({
            "protocolVersion": opts.legacy_versions[0],
            "capabilities": opts.legacy_capabilities,
            "clientInfo": opts.client_info,
        });
        let result = conn
            .send_request(Send {
                method: "initialize",
                body: Body::Params(Some(params)),
                timeout: deadline.map(|d| d.saturating_duration_since(Instant::now())),
                cancellable: false,
                resolves: false,
                options: None,
                pausable: true,
            })
            .await?
            .value()?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !opts.legacy_versions.contains(&version) {
            return Err(Error::protocol(format!(
                "the server chose protocol version {version:?}, which this client does not offer (it offers {})",
                opts.legacy_versions.join(", ")
            )));
        }
        *self.write() = Some(EraState {
            era: Era::Legacy {
                version: version.clone(),
            },
            modern_meta: None,
        });
        *conn.host.server_capabilities.write() =
            result.get("capabilities").cloned().unwrap_or(json!({}));
        conn.host.note_legacy_tool_tasks(conn);
        let msg = protocol::encode_notification("notifications/initialized", None);
        crate::log::sent(conn.name(), &msg);
        conn.transport()?.clone().send(msg).await?;
        // The log level the host asked for at connect, when the server logs at all.
        let level = conn.host.log_level.read().clone();
        if let Some(level) = level {
            if conn.host.server_declares(&["logging"]) {
                conn.send_request(Send {
                    method: "logging/setLevel",
                    body: Body::Params(Some(json!({ "level": level }))),
                    timeout: deadline.map(|d| d.saturating_duration_since(Instant::now())),
                    cancellable: true,
                    resolves: false,
                    options: None,
                    pausable: true,
                })
                .await?;
            }
        }
        Ok(json!({
            "name": conn.name(),
            "era": "legacy",
            "protocol_version": version,
            "server_info": result.get("serverInfo").cloned().unwrap_or(json!({})),
            "capabilities": result.get("capabilities").cloned().unwrap_or(json!({})),
            "instructions": result.get("instructions").cloned().unwrap_or(Value::Null),
            "result": result,
        }))
    }

    /// The per-request `_meta` entries of the modern era, serialized once for the tool-call
    /// fast path (again when the host changes the log level).
    pub(super) fn modern_meta_fragment(&self, conn: &Shared, version: &str) -> String {
        let mut fragment = Map::new();
        fragment.insert(era::META_PROTOCOL_VERSION.into(), json!(version));
        fragment.insert(
            era::META_CLIENT_CAPABILITIES.into(),
            conn.options.modern_capabilities.clone(),
        );
        fragment.insert(
            era::META_CLIENT_INFO.into(),
            conn.options.client_info.clone(),
        );
        if let Some(level) = &*conn.host.log_level.read() {
            fragment.insert(era::META_LOG_LEVEL.into(), json!(level));
        }
        let text = Value::Object(fragment).to_string();
        text[1..text.len() - 1].to_string()
    }

    pub(super) fn adopt_modern(&self, conn: &Shared, version: &str, result: Value) -> Value {
        let modern_meta = self.modern_meta_fragment(conn, version);
        *conn.host.server_capabilities.write() =
            result.get("capabilities").cloned().unwrap_or(json!({}));
        *self.write() = Some(EraState {
            era: Era::Modern {
                version: version.to_string(),
            },
            modern_meta: Some(modern_meta),
        });
        let server_info = result
            .get("_meta")
            .and_then(|m| m.get(era::META_SERVER_INFO))
            .or_else(|| result.get("serverInfo"))
            .cloned()
            .unwrap_or(json!({}));
        json!({
            "name": conn.name(),
            "era": "modern",
            "protocol_version": version,
            "server_info": server_info,
            "capabilities": result.get("capabilities").cloned().unwrap_or(json!({})),
            "instructions": result.get("instructions").cloned().unwrap_or(Value::Null),
            "supported_versions": result.get("supportedVersions").cloned().unwrap_or(json!([])),
            "result": result,
        })
    }
}
