//! The host's event queue: everything a server sends that is not an answer to a host call
//! (notifications, its requests, stderr lines, the end of the connection), pulled by the host
//! with a blocking, time-limited wait.
//!
//! Events are serialized when queued, so the host's thread only hands a string over. The queue is
//! bounded: past `max_events`, the oldest events that need no answer are dropped and the next
//! event pulled is an `overflow` event that says how many; requests are never dropped.

use parking_lot::{Condvar, Mutex};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub enum Pulled {
    Event(String),
    TimedOut,
    Closed,
}

struct Queued {
    text: String,
    droppable: bool,
}

struct State {
    queue: VecDeque<Queued>,
    dropped: u64,
    closed: bool,
}

pub struct EventQueue {
    state: Mutex<State>,
    ready: Condvar,
    max: usize,
}

impl EventQueue {
    pub fn new(max: usize) -> Self {
        EventQueue {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dropped: 0,
                closed: false,
            }),
            ready: Condvar::new(),
            max: max.max(1),
        }
    }

    /// Queues an event. `droppable` is false for events that carry a request needing an answer.
    pub fn push(&self, event: &Value, droppable: bool) {
        let text = event.to_string();
        let mut s = self.state.lock();
        if s.closed {
            return;
        }
        if s.queue.len() >= self.max {
            if let Some(pos) = s.queue.iter().position(|q| q.droppable) {
                s.queue.remove(pos);
                s.dropped += 1;
            } else if droppable {
                s.dropped += 1;
                return;
            }
        }
        s.queue.push_back(Queued { text, droppable });
        drop(s);
        self.ready.notify_one();
    }

    /// Queues the last event and marks the queue closed: once it is drained, every wait returns
    /// `Closed` at once.
    pub fn close_with(&self, last: Option<&Value>) {
        let mut s = self.state.lock();
        if s.closed {
            return;
        }
        if let Some(event) = last {
            s.queue.push_back(Queued {
                text: event.to_string(),
                droppable: false,
            });
        }
        s.closed = true;
        drop(s);
        self.ready.notify_all();
    }

    /// Drops every queued event and closes the queue: waiters (and later pulls) get `Closed` at
    /// once. For a handle being freed, whose pump must stop rather than drain.
    pub fn abandon(&self) {
        let mut s = self.state.lock();
        s.queue.clear();
        s.dropped = 0;
        s.closed = true;
        drop(s);
        self.ready.notify_all();
    }

    /// Waits for the next event: `None` waits forever, `Some(0)` only looks.
    pub fn pull(&self, wait: Option<Duration>) -> Pulled {
        let deadline = wait.map(|w| Instant::now() + w);
        let mut s = self.state.lock();
        loop {
            if s.dropped > 0 {
                let n = s.dropped;
                s.dropped = 0;
                return Pulled::Event(json!({"type": "overflow", "dropped": n}).to_string());
            }
            if let Some(q) = s.queue.pop_front() {
                return Pulled::Event(q.text);
            }
            if s.closed {
                return Pulled::Closed;
            }
            match deadline {
                None => self.ready.wait(&mut s),
                Some(d) => {
                    if Instant::now() >= d || self.ready.wait_until(&mut s, d).timed_out() {
                        // One last look: an event may have arrived with the timeout.
                        if let Some(q) = s.queue.pop_front() {
                            return Pulled::Event(q.text);
                        }
                        return if s.closed {
                            Pulled::Closed
                        } else {
                            Pulled::TimedOut
                        };
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_drops_notifications_not_requests() {
        let q = EventQueue::new(2);
        q.push(&json!({"type": "request", "id": "a"}), false);
        q.push(&json!({"type": "notification", "n": 1}), true);
        q.push(&json!({"type": "notification", "n": 2}), true);
        let Pulled::Event(first) = q.pull(Some(Duration::ZERO)) else {
            panic!()
        };
        assert!(
            first.contains("overflow") && first.contains("\"dropped\":1"),
            "{first}"
        );
        let Pulled::Event(e) = q.pull(Some(Duration::ZERO)) else {
            panic!()
        };
        assert!(e.contains("request"));
        let Pulled::Event(e) = q.pull(Some(Duration::ZERO)) else {
            panic!()
        };
        assert!(e.contains("\"n\":2"));
        assert!(matches!(
            q.pull(Some(Duration::from_millis(5))),
            Pulled::TimedOut
        ));
        q.close_with(Some(&json!({"type": "closed"})));
        assert!(matches!(q.pull(None), Pulled::Event(_)));
        assert!(matches!(q.pull(None), Pulled::Closed));
    }

    #[test]
    fn a_waiter_wakes_when_an_event_arrives() {
        let q = std::sync::Arc::new(EventQueue::new(10));
        let q2 = q.clone();
        let t = std::thread::spawn(move || q2.pull(Some(Duration::from_secs(5))));
        std::thread::sleep(Duration::from_millis(20));
        q.push(&json!({"x": 1}), true);
        assert!(matches!(t.join().unwrap(), Pulled::Event(_)));
    }
}
