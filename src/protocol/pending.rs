//! The pending-request table: many requests in flight on one connection, from many threads.
//!
//! Ids come from a counter that only grows, so an id is never reused while (or after) its request
//! is pending; a response whose id is not in the table (late, after a timeout or a cancel, or
//! simply unknown) is ignored.

use super::RawJson;
use crate::error::Error;
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

type Waiting = HashMap<u64, oneshot::Sender<Outcome>, BuildHasherDefault<IdHasher>>;

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
        self.waiting.lock().insert(id, tx);
        (id, rx)
    }

    /// Forgets a request (timed out, cancelled, or its send failed). Returns whether it was pending.
    pub fn forget(&self, id: u64) -> bool {
        self.waiting.lock().remove(&id).is_some()
    }

    /// Delivers an answer. Returns false when no request with that id is pending (a late or
    /// unknown response), which the caller ignores.
    pub fn complete(&self, id: &RawValue, outcome: Outcome) -> bool {
        let Ok(id) = id.get().parse::<u64>() else {
            return false;
        };
        let sender = self.waiting.lock().remove(&id);
        match sender {
            Some(tx) => {
                // The waiter may have just given up (timeout/cancel); nothing is lost then.
                let _ = tx.send(outcome);
                true
            }
            None => false,
        }
    }

    /// Fails every pending request at once with `error` (the connection died or was closed).
    pub fn fail_all(&self, error: &Error) {
        let drained: Vec<_> = self.waiting.lock().drain().collect();
        for (_, tx) in drained {
            let _ = tx.send(Err(error.clone()));
        }
    }

    pub fn len(&self) -> usize {
        self.waiting.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
            !t.complete(&raw(json!(a)), ok()),
            "a late response is ignored"
        );
        drop(rx_a);
        assert!(t.complete(&raw(json!(b)), ok()));
        assert!(!t.complete(&raw(json!("not-a-number")), ok()));
        let (c, _) = t.register();
        assert!(c > b, "ids only grow");
    }

    #[test]
    fn fail_all_reaches_every_waiter() {
        let t = PendingTable::new();
        let (_, mut r1) = t.register();
        let (_, mut r2) = t.register();
        t.fail_all(&Error::closed("gone"));
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
