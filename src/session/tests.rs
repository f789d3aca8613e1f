//! The session core on its own, over the in-memory transport: a test role plays the *server*
//! (its peer a client, which the test plays message by message), so these checks hold for the
//! role the client does not exercise — requests to the peer with their timer, cancel, progress
//! and pause; the peer's requests and notifications dispatched; answers that cannot be read; the
//! end of the connection.

use super::cancel::{CancelSignal, Cancels};
use super::inbound::{self, Dispatch};
use super::outbound::Request;
use super::pending::Delivered;
use super::{Peer, ProgressRoute, Session};
use crate::error::{Error, ErrorKind};
use crate::protocol::{self, RawJson};
use crate::transport::credentials::Obtaining;
use crate::transport::memory::{self, MemoryServer};
use crate::transport::Inbound;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// A server role that records what the core hands it and answers `ping` itself.
struct Role {
    session: Session,
    requests: Mutex<Vec<(Value, String)>>,
    notifications: Mutex<Vec<(String, Option<String>)>>,
    invalid: Mutex<Vec<String>>,
}

impl Dispatch for Role {
    fn session(&self) -> &Session {
        &self.session
    }
    fn request(self: &Arc<Self>, id: Value, method: String, _params: Option<Value>) {
        if method == "ping" {
            self.session.reply(id.clone(), Ok(json!({})));
        }
        self.requests.lock().push((id, method));
    }
    fn notification(&self, method: String, _params: Option<Value>, tag: Option<&str>) {
        self.notifications
            .lock()
            .push((method, tag.map(str::to_string)));
    }
    fn delivered(self: &Arc<Self>, delivered: Delivered, _id: &RawValue) {
        assert!(
            !matches!(delivered, Delivered::Ticket(..)),
            "this role starts no calls"
        );
    }
    fn invalid(&self, _line: &[u8], reason: String) {
        self.invalid.lock().push(reason);
    }
}

impl Inbound for Role {
    fn message(self: Arc<Self>, line: &[u8]) {
        inbound::message(&self, line)
    }
    fn answer(self: Arc<Self>, line: &[u8], id: &str) -> bool {
        inbound::answer(&self, line, id)
    }
    fn stderr(self: Arc<Self>, _line: String) {}
    fn request_failed(self: Arc<Self>, id: &str, error: Error) {
        inbound::failed(&self, id, error)
    }
    fn closed(self: Arc<Self>, error: Error) {
        self.session.shut(&error);
    }
}

/// A server-role session and its peer (the test).
fn pair() -> (Arc<Role>, MemoryServer) {
    let (make, peer) = memory::pair();
    let role = Arc::new(Role {
        session: Session::new(Some("downstream"), Peer::Client),
        requests: Mutex::default(),
        notifications: Mutex::default(),
        invalid: Mutex::default(),
    });
    let sink = Arc::downgrade(&role) as std::sync::Weak<dyn Inbound>;
    role.session.set_transport(make(sink));
    (role, peer)
}

fn no_cancels() -> Cancels {
    Cancels {
        tag: None,
        own: None,
    }
}

/// A request of `method`, encoded as the server role would, with `timeout`.
fn request<'a>(
    session: &Session,
    method: &'a str,
    timeout: Option<Duration>,
    cancels: &'a Cancels,
) -> Request<'a> {
    let (id, answer) = session.pending.register();
    Request {
        id,
        answer,
        method,
        message: protocol::Outgoing::request(id, method, 0).finish(),
        shape: None,
        timeout,
        max_total: None,
        cancellable: true,
        cancels,
        progress: None,
        pause: None,
        caller: None,
    }
}

#[tokio::test]
async fn a_request_to_the_peer_gets_its_answer() {
    let (role, mut peer) = pair();
    let cancels = no_cancels();
    let req = request(&role.session, "roots/list", None, &cancels);
    let answering = async {
        let asked = peer.next().await;
        assert_eq!(asked["method"], "roots/list");
        peer.answer(&asked, json!({"roots": []}));
    };
    let (result, ()) = tokio::join!(role.session.request(req), answering);
    let result: RawJson = result.map_err(Error::from).unwrap();
    assert_eq!(result.value().unwrap(), json!({"roots": []}));
}

#[tokio::test]
async fn a_silent_peer_times_out_and_is_told() {
    let (role, mut peer) = pair();
    let cancels = no_cancels();
    let req = request(
        &role.session,
        "sampling/createMessage",
        Some(Duration::from_millis(50)),
        &cancels,
    );
    let e = Error::from(role.session.request(req).await.unwrap_err());
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert!(
        e.message
            .contains("the client was sent notifications/cancelled"),
        "{}",
        e.message
    );
    let asked = peer.next().await;
    let cancelled = peer.next().await;
    assert_eq!(cancelled["method"], "notifications/cancelled");
    assert_eq!(cancelled["params"]["requestId"], asked["id"]);
    // A late answer is ignored.
    peer.answer(&asked, json!({}));
    assert!(role.invalid.lock().is_empty());
}

#[tokio::test]
async fn progress_restarts_the_timer_and_reaches_the_role_with_its_tag() {
    let (role, mut peer) = pair();
    let cancels = no_cancels();
    let mut req = request(
        &role.session,
        "tools/call",
        Some(Duration::from_millis(150)),
        &cancels,
    );
    req.progress = Some(ProgressRoute {
        tag: Some("t1".into()),
        reset: Some(Arc::new(Notify::new())),
    });
    let token = req.id;
    let answering = async {
        let asked = peer.next().await;
        // Four beats 100 ms apart: 400 ms in all, each within the 150 ms timer.
        for n in 0..4 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            peer.send(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": n}}));
        }
        peer.answer(&asked, json!({"done": true}));
    };
    let (result, ()) = tokio::join!(role.session.request(req), answering);
    assert!(result.is_ok(), "the timer started again on each beat");
    let seen = role.notifications.lock().clone();
    assert_eq!(seen.len(), 4);
    assert!(seen
        .iter()
        .all(|(m, t)| m == "notifications/progress" && t.as_deref() == Some("t1")));
    assert!(
        role.session.progress.lock().is_empty(),
        "the route went with the request"
    );
}

#[tokio::test]
async fn a_cancel_ends_the_wait_and_tells_the_peer() {
    let (role, mut peer) = pair();
    let signal = CancelSignal::new();
    let cancels = Cancels {
        tag: None,
        own: Some(signal.clone()),
    };
    let req = request(&role.session, "elicitation/create", None, &cancels);
    let cancelling = async {
        let asked = peer.next().await;
        signal.fire();
        let told = peer.next().await;
        assert_eq!(told["method"], "notifications/cancelled");
        assert_eq!(told["params"]["requestId"], asked["id"]);
    };
    let (result, ()) = tokio::join!(role.session.request(req), cancelling);
    assert_eq!(Error::from(result.unwrap_err()).kind, ErrorKind::Cancelled);
}

#[tokio::test]
async fn a_paused_timer_does_not_count_the_time_credentials_were_obtained() {
    let (role, mut peer) = pair();
    let cancels = no_cancels();
    let obtaining = Obtaining::default();
    let mut req = request(
        &role.session,
        "initialize",
        Some(Duration::from_millis(100)),
        &cancels,
    );
    req.pause = Some(&obtaining);
    let answering = async {
        let asked = peer.next().await;
        {
            let _login = obtaining.enter();
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        peer.answer(&asked, json!({}));
    };
    let (result, ()) = tokio::join!(role.session.request(req), answering);
    assert!(
        result.is_ok(),
        "300 ms in all, but only 50 ms of it counted"
    );
}

#[tokio::test]
async fn the_peers_requests_and_notifications_reach_the_role() {
    let (role, mut peer) = pair();
    peer.send(json!({"jsonrpc": "2.0", "id": "a", "method": "ping"}));
    let pong = peer.next().await;
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": "a", "result": {}}));
    // A batch, one message at a time; progress for no request of ours has no tag.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 99}},
    ]);
    Arc::clone(&role).message(batch.to_string().as_bytes());
    assert_eq!(
        role.requests.lock()[1],
        (json!(7), "tools/list".to_string())
    );
    assert_eq!(
        role.notifications.lock()[0],
        ("notifications/progress".to_string(), None)
    );
    // Params that cannot be read (too deep to build) are answered for the role, naming what
    // we are.
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{{"x":{}{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    Arc::clone(&role).message(deep.as_bytes());
    let refused = peer.next().await;
    assert_eq!(refused["id"], 8);
    assert_eq!(refused["error"]["code"], -32602);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("the server could not read"),
        "{message}"
    );
}

#[tokio::test]
async fn an_answer_that_cannot_be_read_fails_its_request_at_once() {
    let (role, mut peer) = pair();
    let cancels = no_cancels();
    let req = request(&role.session, "roots/list", None, &cancels);
    let answering = async {
        let asked = peer.next().await;
        let mut line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"t\":\"",
            asked["id"]
        )
        .into_bytes();
        line.extend_from_slice(b"\xff\"}}");
        Arc::clone(&role).message(&line);
    };
    let (result, ()) = tokio::join!(role.session.request(req), answering);
    let e = Error::from(result.unwrap_err());
    assert_eq!(e.kind, ErrorKind::Protocol, "{}", e.message);
    assert!(e.message.contains("the client's answer could not be read"));
    assert_eq!(role.invalid.lock().len(), 1);
}

#[tokio::test]
async fn the_end_of_the_connection_fails_every_waiting_request() {
    let (role, mut peer) = pair();
    let cancels = no_cancels();
    let a = request(&role.session, "roots/list", None, &cancels);
    let b = request(&role.session, "sampling/createMessage", None, &cancels);
    let hanging_up = async {
        peer.next().await;
        peer.next().await;
        peer.hang_up("the client went away");
    };
    let (ra, rb, ()) = tokio::join!(role.session.request(a), role.session.request(b), hanging_up);
    for r in [ra, rb] {
        let e = Error::from(r.unwrap_err());
        assert_eq!(e.kind, ErrorKind::Closed);
        assert_eq!(e.message, "the client went away");
    }
    assert!(role.session.check_open().is_err());
    let cancels = no_cancels();
    let late = request(&role.session, "ping", None, &cancels);
    assert!(role.session.request(late).await.is_err());
}
