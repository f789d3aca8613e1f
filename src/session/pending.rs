//! The pending-request table: many requests in flight on one connection, from many threads.
//!
//! Ids come from a counter that only grows, so an id is never reused while (or after) its request
//! is pending; a response whose id is not in the table (late, after a timeout or a cancel, or
//! simply unknown) is ignored.

use crate::error::Error;
use crate::protocol::RawJson;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::oneshot;

pub type Outcome = Result<RawJson, Error>;

/// Ids are sequential numbers we chose: they are their own hash.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Who waits for an answer: a caller blocked on its channel, or a started call (a ticket) whose
/// answer is handed back to the connection, which queues it as a completion event.
enum Waiter {
    Reply(oneshot::Sender<Outcome>),
    /// `modern`: the result's `resultType` must be looked at (2026-07-28 era); `replay`: what
    /// the connection needs to resume the call if its answer asks for more (its own type).
    Ticket {
        modern: bool,
        replay: Option<Replay>,
    },
}

/// A started call's request, kept by the connection in case the answer asks for another round.
pub type Replay = Box<dyn std::any::Any + Send>;

/// What became of an answer.
pub enum Delivered {
    /// A waiting caller got it.
    Replied,
    /// A started call's answer (and whether it is of the modern era): the connection queues
    /// it for the host.
    Ticket(u64, Outcome, bool, Option<Replay>),
    /// No request with that id is pending (late, after a timeout or a cancel, or unknown).
    Unknown,
}

type Waiting = HashMap<u64, Waiter, BuildHasherDefault<IdHasher>>;

#[derive(Default)]
pub struct PendingTable {
    next_id: AtomicU64,
    waiting: Mutex<Waiting>,
}

impl PendingTable {
    pub fn new() -> Self {
        PendingTable {
            next_id: AtomicU64::new(1),
            waiting: Mutex::new(Waiting::default()),
        }
    }

    /// Reserves a fresh id and the receiver its answer will arrive on.
    pub fn register(&self) -> (u64, oneshot::Receiver<Outcome>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().insert(id, Waiter::Reply(tx));
        (id, rx)
    }

    /// Reserves a fresh id for a started call: its answer comes back from [`PendingTable::complete`]
    /// as [`Delivered::Ticket`] (or from [`PendingTable::fail_all`]).
    pub fn register_ticket(&self, modern: bool, replay: Option<Replay>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.waiting
            .lock()
            .insert(id, Waiter::Ticket { modern, replay });
        id
    }

    /// A fresh number from the same sequence, never sent: it names a started call that runs as a
    /// task (so that call numbers and request ids never collide).
    pub fn reserve_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Forgets a request (timed out, cancelled, or its send failed). Returns whether it was pending.
    pub fn forget(&self, id: u64) -> bool {
        self.waiting.lock().remove(&id).is_some()
    }

    /// Forgets a started call (cancelled, or its send failed); never touches a blocked caller's
    /// request. Returns whether it was pending.
    pub fn forget_ticket(&self, id: u64) -> bool {
        let mut waiting = self.waiting.lock();
        if matches!(waiting.get(&id), Some(Waiter::Ticket { .. })) {
            waiting.remove(&id);
            true
        } else {
            false
        }
    }

    /// Delivers an answer to whoever waits for it.
    pub fn complete(&self, id: &RawValue, outcome: Outcome) -> Delivered {
        let Ok(id) = id.get().parse::<u64>() else {
            return Delivered::Unknown;
        };
        let waiter = self.waiting.lock().remove(&id);
        match waiter {
            Some(Waiter::Reply(tx)) => {
                // The waiter may have just given up (timeout/cancel); nothing is lost then.
                let _ = tx.send(outcome);
                Delivered::Replied
            }
            Some(Waiter::Ticket { modern, replay }) => {
                Delivered::Ticket(id, outcome, modern, replay)
            }
            None => Delivered::Unknown,
        }
    }

    /// Fails every pending request at once with `error` (the connection died or was closed).
    /// Returns the started calls (tickets) among them, which the caller must complete.
    pub fn fail_all(&self, error: &Error) -> Vec<u64> {
        let drained: Vec<_> = self.waiting.lock().drain().collect();
        let mut tickets = Vec::new();
        for (id, waiter) in drained {
            match waiter {
                Waiter::Reply(tx) => {
                    let _ = tx.send(Err(error.clone()));
                }
                Waiter::Ticket { .. } => tickets.push(id),
            }
        }
        tickets.sort_unstable();
        tickets
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.waiting.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(v: serde_json::Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&v).unwrap()
    }
    fn ok() -> Outcome {
        Ok(RawJson::from_value(&json!({})))
    }

    #[test]
    fn ids_are_unique_and_late_answers_ignored() {
        let t = PendingTable::new();
        let (a, rx_a) = t.register();
        let (b, _rx_b) = t.register();
        assert_ne!(a, b);
        assert!(t.forget(a));
        assert!(
            matches!(t.complete(&raw(json!(a)), ok()), Delivered::Unknown),
            "a late response is ignored"
        );
        drop(rx_a);
        assert!(matches!(
            t.complete(&raw(json!(b)), ok()),
            Delivered::Replied
        ));
        assert!(matches!(
            t.complete(&raw(json!("not-a-number")), ok()),
            Delivered::Unknown
        ));
        let (c, _) = t.register();
        assert!(c > b, "ids only grow");
        let d = t.register_ticket(true, None);
        assert!(d > c);
        assert!(
            matches!(t.complete(&raw(json!(d)), ok()), Delivered::Ticket(n, Ok(_), true, None) if n == d)
        );
        assert!(t.reserve_id() > d);
    }

    #[test]
    fn fail_all_reaches_every_waiter() {
        let t = PendingTable::new();
        let (_, mut r1) = t.register();
        let (_, mut r2) = t.register();
        let ticket = t.register_ticket(false, None);
        assert_eq!(t.fail_all(&Error::closed("gone")), vec![ticket]);
        assert!(t.is_empty());
        assert_eq!(
            r1.try_recv().unwrap().unwrap_err().kind,
            crate::error::ErrorKind::Closed
        );
        assert_eq!(
            r2.try_recv().unwrap().unwrap_err().kind,
            crate::error::ErrorKind::Closed
        );
    }
}
