//! What the host set on a connection after connect, and what the engine must know of the server
//! to serve it: the roots answered automatically, the log level asked of the server, the server's
//! capabilities (tasks, logging, channels), and the tools a legacy server wants called as tasks.
//!
//! Also the one capability check that a server's request (legacy) and an input request of an
//! `InputRequiredResult` (modern) both pass before they reach the host.

use super::options::{CallOptions, ConnectOptions};
use super::request::{Body, Send};
use super::Shared;
use crate::client::options::{parse_log_level, parse_roots};
use crate::error::{Error, Result};
use crate::protocol;
use crate::protocol::codes;
use crate::protocol::era::Era;
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};
use std::collections::HashMap;

#[derive(Default)]
pub(super) struct HostState {
    /// The roots answered to `roots/list` without asking the host (`None`: ask the host).
    pub(super) roots: RwLock<Option<Value>>,
    /// The log level the host asked for; in the modern era it rides every request's `_meta`.
    pub(super) log_level: RwLock<Option<String>>,
    /// The server's capabilities, from `initialize` or `server/discover`.
    pub(super) server_capabilities: RwLock<Value>,
    /// Legacy tasks: each listed tool's `execution.taskSupport`, once tools were listed.
    pub(super) tool_tasks: Mutex<Option<HashMap<String, String>>>,
    /// Tasks this client runs for a legacy server (task-augmented sampling and elicitation).
    pub(super) hosted: super::hosted_tasks::Store,
    /// Set once at connect: a legacy server that runs tool calls as tasks, and `tasks` is on.
    pub(super) legacy_tool_tasks: std::sync::atomic::AtomicBool,
    /// From the options, looked at on every call: a -32042 error may be resolved.
    pub(super) url_elicitation: bool,
}

/// Why a server's request cannot go to the host: the JSON-RPC error the server gets (legacy), or
/// the message of the call's error (modern).
pub(super) struct Refusal {
    pub(super) code: i64,
    pub(super) message: String,
}

impl HostState {
    pub(super) fn new(options: &ConnectOptions) -> Self {
        HostState {
            roots: RwLock::new(options.roots.clone()),
            log_level: RwLock::new(options.log_level.clone()),
            url_elicitation: options.elicitation_url(),
            ..Default::default()
        }
    }

    /// The server declared `capabilities.<path...>`.
    pub(super) fn server_declares(&self, path: &[&str]) -> bool {
        crate::protocol::declares(&self.server_capabilities.read(), path)
    }

    /// Records the `execution.taskSupport` of listed tools (a full list replaces what was known).
    pub(super) fn remember_tools(&self, tools: &[Value], complete: bool) {
        let mut known = self.tool_tasks.lock();
        let map = match (&mut *known, complete) {
            (Some(map), false) => map,
            (slot, _) => slot.insert(HashMap::new()),
        };
        for tool in tools {
            if let Some(name) = tool.get("name").and_then(Value::as_str) {
                let support = tool
                    .get("execution")
                    .and_then(|e| e.get("taskSupport"))
                    .and_then(Value::as_str)
                    .unwrap_or("forbidden");
                map.insert(name.to_string(), support.to_string());
            }
        }
    }
}

impl HostState {
    /// Whether the host may be handed `method` with `params`, by what the client declared; roots
    /// the host set are answered here (`Ok(Some(result))`).
    pub(super) fn admit_host_request(
        &self,
        conn: &Shared,
        method: &str,
        params: Option<&Value>,
    ) -> std::result::Result<Option<Value>, Refusal> {
        let opts = &conn.options;
        let not_declared = |capability: &str| {
            Refusal {
            code: codes::METHOD_NOT_FOUND,
            message: format!(
                "Method not found: {method} (this client did not declare the {capability} capability)"
            ),
        }
        };
        match method {
            "roots/list" => {
                if let Some(roots) = &*self.roots.read() {
                    return Ok(Some(json!({ "roots": roots })));
                }
                if !opts.declares("roots") {
                    return Err(not_declared("roots"));
                }
            }
            "sampling/createMessage" => {
                if !opts.declares("sampling") {
                    return Err(not_declared("sampling"));
                }
                let uses_tools = params
                    .is_some_and(|p| p.get("tools").is_some() || p.get("toolChoice").is_some());
                if uses_tools && !opts.declares_sub("sampling", "tools") {
                    return Err(Refusal {
                        code: codes::INVALID_PARAMS,
                        message: "sampling/createMessage with `tools`: this client did not declare sampling.tools".into(),
                    });
                }
            }
            "elicitation/create" => {
                if !opts.declares("elicitation") {
                    return Err(not_declared("elicitation"));
                }
                let mode = params
                    .and_then(|p| p.get("mode"))
                    .and_then(Value::as_str)
                    .unwrap_or("form");
                let supported = match mode {
                    "form" => opts.elicitation_form(),
                    "url" => opts.elicitation_url(),
                    _ => false,
                };
                if !supported {
                    return Err(Refusal {
                        code: codes::INVALID_PARAMS,
                        message: format!(
                            "elicitation/create in {mode:?} mode: this client did not declare elicitation.{mode}"
                        ),
                    });
                }
            }
            _ => {
                return Err(Refusal {
                    code: codes::METHOD_NOT_FOUND,
                    message: format!("Method not found: {method}"),
                })
            }
        }
        Ok(None)
    }

    /// Replaces the roots answered automatically (`null`: ask the host again) and, in the legacy
    /// era, tells the server when `roots.listChanged` was declared.
    pub(super) async fn set_roots(&self, conn: &Shared, roots: &Value) -> Result<Value> {
        conn.check_open()?;
        if !conn.options.declares("roots") {
            return Err(Error::invalid(
                "this connection did not declare the roots capability: give `roots` (or `capabilities.roots`) at connect",
            ));
        }
        let roots = match roots {
            Value::Null => None,
            Value::Object(m) if m.contains_key("roots") => match &m["roots"] {
                Value::Null => None,
                list => Some(parse_roots(list, "`roots_json`.roots")?),
            },
            list => Some(parse_roots(list, "`roots_json`")?),
        };
        *self.roots.write() = roots;
        let legacy = matches!(
            conn.era.read().as_ref().map(|s| &s.era),
            Some(Era::Legacy { .. })
        );
        let notified = legacy && conn.options.roots_list_changed();
        if notified {
            let msg = protocol::encode_notification("notifications/roots/list_changed", None);
            crate::log::sent(conn.name(), &msg);
            conn.transport()?.clone().send(msg).await?;
        }
        Ok(json!({ "notified": notified }))
    }

    /// The log level asked of the server: `logging/setLevel` in the legacy era; in the modern
    /// era, remembered and sent in every request's `_meta` from now on.
    pub(super) async fn set_log_level(
        &self,
        conn: &Shared,
        level: &Value,
        options: &CallOptions,
    ) -> Result<Value> {
        conn.check_open()?;
        let level = parse_log_level(level, "`level`")?;
        let era = conn.era.read().as_ref().map(|s| s.era.clone());
        match era {
            Some(Era::Modern { version }) => {
                *self.log_level.write() = Some(level.clone());
                let fragment = conn.era.modern_meta_fragment(conn, &version);
                if let Some(state) = conn.era.write().as_mut() {
                    state.modern_meta = Some(fragment);
                }
                Ok(json!({ "level": level, "sent": "per request" }))
            }
            _ => {
                let timeout = options.timeout.or(conn.options.request_timeout);
                conn.send_request(Send {
                    method: "logging/setLevel",
                    body: Body::Params(Some(json!({ "level": level }))),
                    timeout,
                    cancellable: true,
                    resolves: false,
                    options: Some(options),
                    pausable: false,
                })
                .await?;
                *self.log_level.write() = Some(level.clone());
                Ok(json!({ "level": level, "sent": "logging/setLevel" }))
            }
        }
    }

    /// Channel notifications (Claude Code's `claude/channel`) reach the host only from a server
    /// that declared them, as Claude Code does: anything else could inject messages unasked.
    pub(super) fn admits_notification(&self, method: &str) -> bool {
        match method {
            "notifications/claude/channel" => {
                self.server_declares(&["experimental", "claude/channel"])
            }
            "notifications/claude/channel/permission" => {
                self.server_declares(&["experimental", "claude/channel/permission"])
            }
            _ => true,
        }
    }
}
