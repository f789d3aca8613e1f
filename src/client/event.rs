//! The events a connection gives its host, one typed value each (deltachat's `EventType` is the
//! model). They are serialized only where they leave the engine: when a host pulls them from the
//! connection's queue. An engine consumer — the manager's pump — takes them as values, and reads
//! their fields without parsing text again.
//!
//! The JSON shape of each is the `type` tag (the variant's name in snake_case) and its fields;
//! an absent optional field is left out. These variants are the contract hosts read.

use crate::error::ErrorKind;
use serde::Serialize;
use serde_json::{Map, Value};

/// One event of a connection.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A server's request to the host (sampling, elicitation, roots, ...): answered with
    /// `respond` and this `id`.
    Request {
        id: String,
        method: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<Value>,
    },
    /// The host did not answer request `id` in time: the server got an error.
    RequestExpired { id: String, method: String },
    /// Request `id` is no longer wanted (the call that led to it ended, or the server cancelled
    /// it): whatever the host shows for it can go.
    RequestCancelled {
        id: String,
        method: String,
        reason: String,
    },
    /// A server's notification. `tag`: the host's tag of the call a progress notification is
    /// about; `cancels`: the request event a `notifications/cancelled` withdraws.
    Notification {
        method: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        tag: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cancels: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<Value>,
    },
    /// A line the server wrote to stderr (stdio).
    Stderr { line: String },
    /// A message the client could not act on (its first 4 KiB).
    InvalidMessage { error: String, line: String },
    /// A 2026-07-28 `subscriptions/listen` stream is open; `reopened` after a gap (changes in
    /// between may have been missed).
    Listening {
        subscription: u64,
        notifications: Value,
        reopened: bool,
    },
    /// Something the host should know that is not an error of a call: `reason` is a stable
    /// word (`invalid_schema`, `invalid_tool_headers`, `listen_unsupported`, ...), `about` the
    /// fields that go with it (`tool`, `schema`).
    Warning {
        reason: &'static str,
        message: String,
        #[serde(flatten)]
        about: Map<String, Value>,
    },
    /// OAuth's progress for this connection.
    Auth(crate::auth::AuthEvent),
    /// The queue dropped this many events that needed no answer (it was full).
    Overflow { dropped: u64 },
    /// The connection ended: the last event.
    Closed {
        reason: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        kind: Option<ErrorKind>,
    },
}

impl Event {
    /// A notification with nothing added.
    pub fn notification(method: String, params: Option<Value>) -> Event {
        Event::Notification {
            method,
            tag: None,
            cancels: None,
            params,
        }
    }

    /// A warning with no fields beside its reason and message.
    pub fn warning(reason: &'static str, message: String) -> Event {
        Event::Warning {
            reason,
            message,
            about: Map::new(),
        }
    }

    /// The last event of a connection that ended for `reason` (its kind named unless `closed`).
    pub fn closed(reason: &crate::error::Error) -> Event {
        Event::Closed {
            reason: reason.message.clone(),
            kind: (reason.kind != ErrorKind::Closed).then_some(reason.kind),
        }
    }

    /// Events a full queue may drop: all but the requests, which need an answer.
    pub fn droppable(&self) -> bool {
        !matches!(self, Event::Request { .. })
    }

    /// The JSON text a host pulls.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("an event always serializes")
    }

    /// The JSON object, for a consumer that adds fields (the manager adds `server`).
    pub fn into_object(self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => unreachable!("an event serializes as an object"),
        }
    }

    /// The length of [`Event::to_text`], without building it.
    pub fn text_len(&self) -> usize {
        struct Count(usize);
        impl std::io::Write for Count {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0 += buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut count = Count(0);
        serde_json::to_writer(&mut count, self).expect("an event always serializes");
        count.0
    }
}

/// A connection's events are queued as values for an engine consumer (a manager's pump), and
/// as text for a host.
impl crate::queue::QueueEvent for Event {
    fn overflow(dropped: u64) -> Self {
        Event::Overflow { dropped }
    }
    fn droppable(&self) -> bool {
        Event::droppable(self)
    }
    fn text_len(&self) -> usize {
        Event::text_len(self)
    }
    fn to_text(&self) -> String {
        Event::to_text(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::{EventQueue, Item, Pulled, PulledItem};
    use serde_json::json;
    use std::time::Duration;

    fn shape(e: &Event) -> Value {
        let text = e.to_text();
        assert_eq!(text.len(), e.text_len());
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn each_event_has_the_shape_hosts_read() {
        assert_eq!(
            shape(&Event::Request {
                id: "s1".into(),
                method: "sampling/createMessage".into(),
                params: Some(json!({"x": 1})),
            }),
            json!({"type": "request", "id": "s1", "method": "sampling/createMessage", "params": {"x": 1}})
        );
        assert_eq!(
            shape(&Event::notification("notifications/message".into(), None)),
            json!({"type": "notification", "method": "notifications/message"})
        );
        let mut about = Map::new();
        about.insert("tool".into(), json!("t"));
        assert_eq!(
            shape(&Event::Warning {
                reason: "invalid_schema",
                message: "m".into(),
                about
            }),
            json!({"type": "warning", "reason": "invalid_schema", "message": "m", "tool": "t"})
        );
        assert_eq!(
            shape(&Event::closed(&crate::error::Error::timeout("late"))),
            json!({"type": "closed", "reason": "late", "kind": "timeout"})
        );
        assert_eq!(
            shape(&Event::closed(&crate::error::Error::closed("bye"))),
            json!({"type": "closed", "reason": "bye"})
        );
        assert_eq!(
            shape(&Event::Overflow { dropped: 3 }),
            json!({"type": "overflow", "dropped": 3})
        );
        let auth = Event::Auth(crate::auth::AuthEvent {
            state: "authorized",
            server: Some("s".into()),
            issuer: Some("https://as".into()),
            scope: None,
            expires_at: Some(5),
        });
        assert_eq!(
            shape(&auth),
            json!({"type": "auth", "state": "authorized", "server": "s", "issuer": "https://as", "expires_at": 5})
        );
        assert!(!Event::Request {
            id: "a".into(),
            method: "m".into(),
            params: None
        }
        .droppable());
        assert!(auth.droppable());
    }

    #[test]
    fn a_typed_queue_keeps_values_and_still_gives_hosts_text() {
        let q = EventQueue::<Event>::with_consumer(2, true);
        let stderr = |n: u32| Event::Stderr {
            line: format!("line {n}"),
        };
        let request = Event::Request {
            id: "s1".into(),
            method: "roots/list".into(),
            params: None,
        };
        q.push_event(stderr(1));
        q.push_event(request.clone());
        // Full: the stderr line goes, the request stays, the next pull is the overflow.
        q.push_event(stderr(2));
        let bytes = request.text_len() + stderr(2).text_len();
        assert_eq!(q.bytes_held(), bytes, "counted as the text it would be");
        assert!(matches!(
            q.pull_item(),
            PulledItem::Item(Item::Event(Event::Overflow { dropped: 1 }))
        ));
        match q.pull_item() {
            PulledItem::Item(Item::Event(e)) => assert_eq!(e, request),
            _ => panic!("the request, as a value"),
        }
        // A host pulling from it anyway gets the same text an untyped queue gives.
        let Pulled::Event(text) = q.pull(Some(Duration::ZERO)) else {
            panic!()
        };
        assert_eq!(text, stderr(2).to_text());
        assert_eq!(q.bytes_held(), 0);
        assert!(matches!(q.pull_item(), PulledItem::Empty));
        q.close_with_event(Event::closed(&crate::error::Error::closed("bye")));
        assert!(matches!(
            q.pull_item(),
            PulledItem::Item(Item::Event(Event::Closed { .. }))
        ));
        assert!(matches!(q.pull_item(), PulledItem::Closed));
        // An untyped queue serializes when the event is queued.
        let host = EventQueue::<Event>::new(4);
        host.push_event(stderr(3));
        assert!(
            matches!(host.pull_item(), PulledItem::Item(Item::Text(t)) if t == stderr(3).to_text())
        );
    }
}
