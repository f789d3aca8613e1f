//! The manager's own events, one typed value each, serialized where they enter the host's queue.
//! (Its connections' events come to the host too, as [`crate::client::Event`]s with the
//! server's name added: see `lifecycle.rs`.)

use serde::Serialize;
use serde_json::{Map, Value};

/// One event of the manager's own.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ManagerEvent {
    /// A server's state changed; `status` is what `status()` gives for it (state, transport,
    /// tools, error, attempt, ...).
    State {
        server: String,
        #[serde(flatten)]
        status: Map<String, Value>,
    },
    /// A server left the configuration.
    Removed {
        server: String,
    },
    /// A server's tools changed: its tools now, and the whole pool's names.
    ToolsChanged {
        server: String,
        tools: Vec<Value>,
        pool: Vec<Value>,
    },
    /// A server's resources (or prompts) changed; the notification that said so came first.
    ResourcesChanged {
        server: String,
    },
    PromptsChanged {
        server: String,
    },
    /// Something the host should know that is not an error of a call (`relist_failed`).
    Warning {
        server: String,
        reason: &'static str,
        message: String,
    },
    /// A call of an in-process server's tool, for the host to answer with this `id`.
    Request {
        server: String,
        id: String,
        method: &'static str,
        params: Value,
    },
    /// The call `id` no longer wants the host's answer.
    RequestCancelled {
        server: String,
        id: String,
    },
    /// An authorization the host started is waiting for the user (`url`, `redirect_uri`, ...).
    Auth {
        server: String,
        state: &'static str,
        #[serde(flatten)]
        about: Map<String, Value>,
    },
    /// The manager was closed: the last event.
    Closed {
        reason: String,
    },
}

impl ManagerEvent {
    /// Events a full queue may drop: only those that a later event or `status()` makes up for.
    pub fn droppable(&self) -> bool {
        matches!(
            self,
            ManagerEvent::Removed { .. } | ManagerEvent::Warning { .. }
        )
    }

    /// The key under which a newer event of the same server replaces this one while it waits
    /// in the queue: what the tools, resources or prompts of a server are now says all the older
    /// ones said (a storm of `list_changed` leaves one event per server and kind).
    pub fn latest_key(&self) -> Option<String> {
        match self {
            ManagerEvent::ToolsChanged { server, .. } => Some(format!("tools_changed/{server}")),
            ManagerEvent::ResourcesChanged { server } => {
                Some(format!("resources_changed/{server}"))
            }
            ManagerEvent::PromptsChanged { server } => Some(format!("prompts_changed/{server}")),
            _ => None,
        }
    }

    /// The JSON text a host reads.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("an event always serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    impl ManagerEvent {
        fn to_value(&self) -> Value {
            serde_json::from_str(&self.to_text()).unwrap()
        }
    }

    #[test]
    fn each_event_has_the_shape_hosts_read() {
        let mut status = Map::new();
        status.insert("state".into(), json!("connected"));
        status.insert("tools".into(), json!(["a"]));
        assert_eq!(
            ManagerEvent::State {
                server: "s".into(),
                status
            }
            .to_value(),
            json!({"type": "state", "server": "s", "state": "connected", "tools": ["a"]})
        );
        assert_eq!(
            ManagerEvent::ToolsChanged {
                server: "s".into(),
                tools: vec![json!("a")],
                pool: vec![json!("mcp__s__a")]
            }
            .to_value(),
            json!({"type": "tools_changed", "server": "s", "tools": ["a"], "pool": ["mcp__s__a"]})
        );
        assert_eq!(
            ManagerEvent::Request {
                server: "h".into(),
                id: "m1".into(),
                method: "tools/call",
                params: json!({"name": "t", "arguments": {}})
            }
            .to_value(),
            json!({"type": "request", "server": "h", "id": "m1", "method": "tools/call",
                   "params": {"name": "t", "arguments": {}}})
        );
        let mut about = Map::new();
        about.insert("url".into(), json!("https://as/authorize"));
        assert_eq!(
            ManagerEvent::Auth {
                server: "s".into(),
                state: "authorizing",
                about
            }
            .to_value(),
            json!({"type": "auth", "server": "s", "state": "authorizing", "url": "https://as/authorize"})
        );
        assert_eq!(
            ManagerEvent::PromptsChanged { server: "s".into() }.to_value(),
            json!({"type": "prompts_changed", "server": "s"})
        );
        assert!(ManagerEvent::Removed { server: "s".into() }.droppable());
        assert!(!ManagerEvent::Closed { reason: "r".into() }.droppable());
        let changed = |server: &str| ManagerEvent::ResourcesChanged {
            server: server.into(),
        };
        assert_eq!(changed("a").latest_key(), changed("a").latest_key());
        assert_ne!(changed("a").latest_key(), changed("b").latest_key());
        assert_ne!(
            changed("a").latest_key(),
            ManagerEvent::PromptsChanged { server: "a".into() }.latest_key()
        );
        assert_eq!(
            ManagerEvent::Removed { server: "a".into() }.latest_key(),
            None
        );
    }
}
