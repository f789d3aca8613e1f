//! The host's event queue: everything a server sends that is not an answer to a host call
//! (notifications, its requests, stderr lines, the end of the connection), a manager's events,
//! the log records — pulled by the host with a blocking, time-limited wait. Every layer hands
//! its host events through one; what an event is, is the layer's ([`QueueEvent`]).
//!
//! Events are serialized when queued, so the host's thread only hands a string over —
//! unless the queue is `typed` (its consumer is the engine: a manager's pump), when they stay
//! values and are serialized only if a host pulls them after all. The queue is
//! bounded: past `max_events`, the oldest events that need no answer are dropped and the next
//! event pulled is an `overflow` event that says how many; requests and completions are never
//! dropped. An event that says what is true now (a manager's `tools_changed` of a server) may
//! carry a key: it replaces the event of the same key still waiting, which leaves its place (the
//! new one goes last), so a storm of changes leaves one event per key behind, not one per change.
//!
//! A host with its own event loop asks for a descriptor ([`EventQueue::readiness_fd`]) instead of
//! blocking: it is readable while events wait. One byte is written to a pipe when the queue stops
//! being empty, and read back by the pull that empties it; once the queue is closed the byte stays,
//! so a poller always learns of the end. A host whose own loop reads the pipe (a Node socket
//! does) takes events with [`EventQueue::take_lines`] in `edge` mode: the pull that empties the
//! queue then leaves the pipe alone (the host has read the byte that woke it), which saves a read
//! that would find nothing per wake-up; a byte it had not read is left over (`stale`), and the
//! next pull that finds nothing, or the library's own wait on the pipe, reads it back.

use parking_lot::{Condvar, Mutex};
use serde_json::Value;
use std::collections::{HashSet, VecDeque};
use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// An event a queue may keep as a value until its text is pulled.
pub trait QueueEvent: Send {
    /// The event that says `dropped` events were dropped to keep the queue bounded.
    fn overflow(dropped: u64) -> Self;
    /// Whether it may be dropped (a request that needs an answer may not).
    fn droppable(&self) -> bool;
    /// The length of its text, counted without building it.
    fn text_len(&self) -> usize;
    /// Its JSON text, as a host pulls it.
    fn to_text(&self) -> String;
}

/// The event of a queue that holds text only (the log records, a manager's events): the one
/// event it makes itself, `{"type": "overflow", "dropped": N}`.
#[derive(Debug, PartialEq, Eq)]
pub struct Overflow(pub u64);

impl QueueEvent for Overflow {
    fn overflow(dropped: u64) -> Self {
        Overflow(dropped)
    }
    fn droppable(&self) -> bool {
        true
    }
    fn text_len(&self) -> usize {
        self.to_text().len()
    }
    fn to_text(&self) -> String {
        format!("{{\"type\":\"overflow\",\"dropped\":{}}}", self.0)
    }
}

thread_local! {
    /// Set while this thread reads the server for the events it waits for (`client/started.rs`).
    pub(crate) static SELF_DRIVING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

pub enum Pulled {
    Event(String),
    TimedOut,
    Closed,
}

/// What [`EventQueue::take_lines`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Lines {
    /// This many bytes of the buffer hold events, each one line.
    Taken(usize),
    /// Nothing taken: the next event needs a buffer of this many bytes.
    TooSmall(usize),
    TimedOut,
    Closed,
}

/// One queued event: its text, or (in a typed queue) the value.
pub enum Item<E> {
    Text(String),
    Event(E),
}

impl<E: QueueEvent> Item<E> {
    /// The length of its text (an event's counted without building it).
    fn text_len(&self) -> usize {
        match self {
            Item::Text(text) => text.len(),
            Item::Event(event) => event.text_len(),
        }
    }

    /// The event's JSON text, as a host pulls it.
    pub fn into_text(self) -> String {
        match self {
            Item::Text(text) => text,
            Item::Event(event) => event.to_text(),
        }
    }
}

/// What [`EventQueue::pull_item`] found.
pub enum PulledItem<E> {
    Item(Item<E>),
    Empty,
    Closed,
}

struct Queued<E> {
    item: Item<E>,
    /// The length of the item's text.
    len: usize,
    droppable: bool,
    /// The key of an event a newer one of the same key replaces (see [`EventQueue::push_latest`]).
    key: Option<Box<str>>,
}

struct State<E> {
    queue: VecDeque<Queued<E>>,
    /// The bytes of the queued events' texts.
    bytes: usize,
    /// The keys of the queued events that have one.
    keyed: HashSet<Box<str>>,
    dropped: u64,
    closed: bool,
    /// The readiness pipe, once a host asked for it, and whether its byte is in it.
    pipe: Option<Pipe>,
    signalled: bool,
    /// An edge pull emptied the queue without reading the pipe: a byte may be left in it.
    stale: bool,
    /// Ends a host thread's blocked read of the server when another thread queues an event (see
    /// `started.rs`), while `interrupt_users` threads drive without watching the pipe.
    interrupt: Option<Interrupt>,
    interrupt_users: usize,
}

/// What ends a host thread's blocked read of the server.
pub type Interrupt = std::sync::Arc<dyn Fn() + Send + Sync>;

/// While alive, events queued by other threads call the interrupt (see
/// [`EventQueue::interrupt_while`]).
pub struct InterruptGuard<'a, E: QueueEvent>(&'a EventQueue<E>);

impl<E: QueueEvent> Drop for InterruptGuard<'_, E> {
    fn drop(&mut self) {
        let mut s = self.0.state.lock();
        s.interrupt_users -= 1;
        if s.interrupt_users == 0 {
            s.interrupt = None;
        }
    }
}

struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

pub struct EventQueue<E: QueueEvent = Overflow> {
    state: Mutex<State<E>>,
    ready: Condvar,
    /// Wakes the one async consumer (a manager's pump) without a descriptor: a manager of 1,000
    /// servers would otherwise hold 3,000 fds for its pumps alone.
    changed: tokio::sync::Notify,
    max: usize,
    /// Events stay values (see [`EventQueue::with_consumer`]).
    typed: bool,
}

impl<E: QueueEvent> State<E> {
    fn has_events(&self) -> bool {
        self.dropped > 0 || !self.queue.is_empty()
    }

    /// Makes the pipe readable if events wait (or the queue is closed), empties it otherwise.
    fn sync_pipe(&mut self) {
        let Some(pipe) = &self.pipe else { return };
        let want = self.closed || self.has_events();
        if want == self.signalled && (want || !self.stale) {
            return;
        }
        if want {
            // A full pipe (impossible with one byte) or a closed reader only means the host
            // stopped watching; nothing to do about either.
            let _ = crate::sys::fd::write(&pipe.write, b"!");
        } else {
            // The host's own loop may have read the byte already (a Node socket reads eagerly);
            // then this finds nothing, which is fine.
            let mut sink = [0u8; 64];
            while crate::sys::fd::read(&pipe.read, &mut sink).is_ok_and(|n| n > 0) {}
            self.stale = false;
        }
        self.signalled = want;
    }

    /// After a pull took events: the pipe follows the queue. In `edge` mode the pull that emptied
    /// it does not read the pipe (the host's loop read the byte that woke it).
    fn after_take(&mut self, edge: bool) {
        if !self.signalled || self.has_events() || self.closed {
            return;
        }
        if edge {
            self.signalled = false;
            self.stale = true;
        } else {
            self.sync_pipe();
        }
    }

    /// The next event without touching the pipe.
    fn pop(&mut self) -> Option<Item<E>> {
        if self.dropped > 0 {
            let dropped = self.dropped;
            self.dropped = 0;
            return Some(Item::Event(E::overflow(dropped)));
        }
        let q = self.queue.pop_front()?;
        self.forget(&q);
        Some(q.item)
    }

    /// The length of the next event's text, if any.
    fn next_len(&self) -> Option<usize> {
        if self.dropped > 0 {
            return Some(E::overflow(self.dropped).text_len());
        }
        self.queue.front().map(|q| q.len)
    }

    /// What the queue counts of an event that left it.
    fn forget(&mut self, gone: &Queued<E>) {
        self.bytes -= gone.len;
        if let Some(key) = &gone.key {
            self.keyed.remove(key);
        }
    }

    fn enqueue(&mut self, item: Item<E>, len: usize, droppable: bool, key: Option<Box<str>>) {
        if let Some(key) = &key {
            if !self.keyed.insert(key.clone()) {
                // The event it replaces leaves its place.
                let pos = self.queue.iter().position(|q| q.key.as_ref() == Some(key));
                let gone = self.queue.remove(pos.expect("a key in `keyed` is queued"));
                self.bytes -= gone.expect("found").len;
            }
        }
        self.bytes += len;
        self.queue.push_back(Queued {
            item,
            len,
            droppable,
            key,
        });
    }
}

/// The most bytes of event text a queue holds (16 MiB): past it, as past `max_events`, the
/// oldest events that need no answer are dropped (an `overflow` event says how many).
const MAX_EVENT_BYTES: usize = 16 << 20;

impl<E: QueueEvent> EventQueue<E> {
    pub fn new(max: usize) -> Self {
        Self::with_consumer(max, false)
    }

    /// A queue whose consumer is the engine (`typed`): events stay values until a host pulls
    /// text.
    pub fn with_consumer(max: usize, typed: bool) -> Self {
        EventQueue {
            typed,
            state: Mutex::new(State {
                queue: VecDeque::new(),
                bytes: 0,
                keyed: HashSet::new(),
                dropped: 0,
                closed: false,
                pipe: None,
                signalled: false,
                stale: false,
                interrupt: None,
                interrupt_users: 0,
            }),
            ready: Condvar::new(),
            changed: tokio::sync::Notify::new(),
            max: max.max(1),
        }
    }

    /// The most events it holds.
    pub fn capacity(&self) -> usize {
        self.max
    }

    /// The bytes of the queued events' texts (for tests of a layer's events).
    #[cfg(test)]
    pub fn bytes_held(&self) -> usize {
        self.state.lock().bytes
    }

    /// Queues a layer's event (a request is never dropped; see [`QueueEvent::droppable`]).
    pub fn push_event(&self, event: E) {
        let droppable = event.droppable();
        let item = self.item_of(event);
        self.push_inner(item, droppable, None, SELF_DRIVING.with(|d| d.get()));
    }

    /// How this queue keeps an event: a value when the engine consumes it, else its text.
    fn item_of(&self, event: E) -> Item<E> {
        if self.typed {
            Item::Event(event)
        } else {
            Item::Text(event.to_text())
        }
    }

    /// Queues an event made as a JSON value (a connection's, with the manager's additions).
    /// `droppable` is false for events that carry a request needing an answer.
    pub fn push(&self, event: &Value, droppable: bool) {
        self.push_text(event.to_string(), droppable);
    }

    /// Queues an event already serialized as a JSON object.
    pub fn push_text(&self, text: String, droppable: bool) {
        self.push_inner(
            Item::Text(text),
            droppable,
            None,
            SELF_DRIVING.with(|d| d.get()),
        );
    }

    /// Queues an event that says what is true now, under `key`: an event of the same key still
    /// waiting is dropped (it said something older), and this one goes last.
    pub fn push_latest(&self, text: String, droppable: bool, key: &str) {
        let key = Some(key.into());
        self.push_inner(
            Item::Text(text),
            droppable,
            key,
            SELF_DRIVING.with(|d| d.get()),
        );
    }

    /// Queues an event and always signals its waiters: for a queue no connection's own thread
    /// consumes (the log records), which the thread-local `SELF_DRIVING` says nothing about.
    pub fn push_text_waking(&self, text: String, droppable: bool) {
        self.push_inner(Item::Text(text), droppable, None, false);
    }

    fn push_inner(
        &self,
        item: Item<E>,
        droppable: bool,
        key: Option<Box<str>>,
        self_driving: bool,
    ) {
        let len = item.text_len();
        let mut s = self.state.lock();
        if s.closed {
            return;
        }
        // Bounded in number and in bytes (a server writing endless stderr lines must not grow a
        // host by hundreds of megabytes): the oldest events that need no answer go first.
        while s.queue.len() >= self.max || s.bytes + len > MAX_EVENT_BYTES {
            if let Some(pos) = s.queue.iter().position(|q| q.droppable) {
                let gone = s.queue.remove(pos).expect("found");
                s.forget(&gone);
                s.dropped += 1;
            } else if droppable {
                s.dropped += 1;
                return;
            } else {
                break; // a request that needs an answer is always kept
            }
        }
        s.enqueue(item, len, droppable, key);
        // The pipe (or the interrupt) wakes a thread that waits for events elsewhere; the thread
        // that is itself reading the server for events (see `started.rs`) is not waiting, and
        // takes them next.
        let mut interrupt = None;
        if !self_driving {
            if !s.signalled {
                s.sync_pipe();
            }
            interrupt = s.interrupt.clone();
        }
        drop(s);
        self.ready.notify_one();
        self.changed.notify_one();
        if let Some(interrupt) = interrupt {
            interrupt();
        }
    }

    /// Resolves once an event was queued (or the queue closed) since the last time it resolved
    /// — or since the queue was made: for one async consumer, which pulls without waiting
    /// until it finds nothing, then awaits this again (a wake-up between the two is kept).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Until the guard is dropped, an event queued by another thread calls `interrupt`: for a
    /// host thread that reads the server for its events and does not watch the pipe meanwhile.
    pub fn interrupt_while(&self, interrupt: Interrupt) -> InterruptGuard<'_, E> {
        let mut s = self.state.lock();
        s.interrupt_users += 1;
        s.interrupt.get_or_insert(interrupt);
        InterruptGuard(self)
    }

    fn interrupt_now(&self) {
        let interrupt = self.state.lock().interrupt.clone();
        if let Some(interrupt) = interrupt {
            interrupt();
        }
    }

    /// A new descriptor, owned by the caller, that is readable while events wait and once the
    /// queue is closed (see the module's documentation).
    pub fn readiness_fd(&self) -> std::io::Result<RawFd> {
        let read = self.wake_fd().ok_or_else(std::io::Error::last_os_error)?;
        // SAFETY: the queue owns `read` and keeps it open while it lives (its pipe is never
        // replaced), and `self` lives through this call.
        let read = unsafe { BorrowedFd::borrow_raw(read) };
        crate::sys::fd::dup_cloexec(read).map(IntoRawFd::into_raw_fd)
    }

    /// Queues the last event and marks the queue closed: once it is drained, every wait returns
    /// `Closed` at once.
    /// `last` is the event's JSON text.
    pub fn close_with(&self, last: Option<String>) {
        self.close_inner(last.map(Item::Text));
    }

    /// [`EventQueue::close_with`] a connection's last event.
    pub fn close_with_event(&self, last: E) {
        self.close_inner(Some(self.item_of(last)));
    }

    fn close_inner(&self, last: Option<Item<E>>) {
        let mut s = self.state.lock();
        if s.closed {
            return;
        }
        if let Some(item) = last {
            let len = item.text_len();
            s.enqueue(item, len, false, None);
        }
        self.mark_closed(s);
    }

    /// Drops every queued event and closes the queue: waiters (and later pulls) get `Closed` at
    /// once. For a handle being freed, whose pump must stop rather than drain.
    pub fn abandon(&self) {
        let mut s = self.state.lock();
        s.queue.clear();
        s.keyed.clear();
        s.bytes = 0;
        s.dropped = 0;
        self.mark_closed(s);
    }

    /// Marks the queue closed and wakes every kind of waiter: the pipe, blocked pulls, the async
    /// consumer, a thread reading the server.
    fn mark_closed(&self, mut s: parking_lot::MutexGuard<'_, State<E>>) {
        s.closed = true;
        s.sync_pipe();
        drop(s);
        self.ready.notify_all();
        self.changed.notify_one();
        self.interrupt_now();
    }

    /// Waits for the next event: `None` waits forever, `Some(0)` only looks.
    pub fn pull(&self, wait: Option<Duration>) -> Pulled {
        let deadline = wait.map(|w| Instant::now() + w);
        let mut s = self.state.lock();
        loop {
            if let Some(text) = Self::take(&mut s) {
                return Pulled::Event(text);
            }
            if s.closed {
                return Pulled::Closed;
            }
            match deadline {
                None => self.ready.wait(&mut s),
                Some(d) => {
                    if Instant::now() >= d || self.ready.wait_until(&mut s, d).timed_out() {
                        // One last look: an event may have arrived with the timeout.
                        if let Some(text) = Self::take(&mut s) {
                            return Pulled::Event(text);
                        }
                        s.sync_pipe();
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

    /// Whether an event (or the end) can be pulled without waiting.
    pub fn ready(&self) -> bool {
        let s = self.state.lock();
        s.closed || s.has_events()
    }

    /// The readiness pipe's own read end (created if needed), for the library's own polls.
    pub fn wake_fd(&self) -> Option<RawFd> {
        let mut s = self.state.lock();
        if s.pipe.is_none() {
            let (read, write) = crate::sys::fd::pipe(true).ok()?;
            s.pipe = Some(Pipe { read, write });
            s.signalled = false;
            s.sync_pipe();
        }
        s.pipe.as_ref().map(|p| p.read.as_raw_fd())
    }

    /// Waits up to `wait` for an event (or the end) to be pullable, without taking it.
    pub fn wait_ready(&self, wait: Duration) {
        let deadline = Instant::now() + wait;
        let mut s = self.state.lock();
        while !(s.closed || s.has_events()) {
            if self.ready.wait_until(&mut s, deadline).timed_out() {
                return;
            }
        }
    }

    /// Waits like [`EventQueue::pull`] for a first event, then takes up to `max` in all without
    /// waiting more; returns them as one JSON array.
    pub fn pull_many(&self, max: usize, wait: Option<Duration>) -> Pulled {
        let first = match self.pull(wait) {
            Pulled::Event(text) => text,
            other => return other,
        };
        let mut s = self.state.lock();
        // Sized for events like the first (completions of one kind of call are): one allocation.
        let more = s.queue.len().min(max.max(1) - 1);
        let mut out = String::with_capacity((first.len() + 1) * (more + 1) + first.len() / 2 + 2);
        out.push('[');
        out.push_str(&first);
        for _ in 1..max.max(1) {
            match Self::take(&mut s) {
                Some(text) => {
                    out.push(',');
                    out.push_str(&text);
                }
                None => break,
            }
        }
        drop(s);
        out.push(']');
        Pulled::Event(out)
    }

    /// The next event, if any; the readiness pipe follows the queue.
    fn take(s: &mut State<E>) -> Option<String> {
        Self::take_item(s).map(Item::into_text)
    }

    fn take_item(s: &mut State<E>) -> Option<Item<E>> {
        let item = s.pop()?;
        s.after_take(false);
        Some(item)
    }

    /// The next event as it was queued, without waiting: for the engine's own consumer.
    pub fn pull_item(&self) -> PulledItem<E> {
        let mut s = self.state.lock();
        match Self::take_item(&mut s) {
            Some(item) => PulledItem::Item(item),
            None if s.closed => PulledItem::Closed,
            None => {
                s.sync_pipe();
                PulledItem::Empty
            }
        }
    }

    /// Waits like [`EventQueue::pull`] for a first event, then takes up to `max` events (0
    /// counts as one) that fit in `buf`, each written as its JSON object and a newline (a newline
    /// inside an event, whitespace in a server's raw result, is written as a space). An event
    /// that does not fit stays queued: if it is the first, nothing is taken and its size with the
    /// newline is returned. `edge`: see the module's documentation.
    pub fn take_lines(
        &self,
        max: usize,
        wait: Option<Duration>,
        buf: &mut [u8],
        edge: bool,
    ) -> Lines {
        let deadline = wait.map(|w| Instant::now() + w);
        let mut s = self.state.lock();
        while !s.has_events() {
            if s.closed {
                return Lines::Closed;
            }
            let timed_out = match deadline {
                None => {
                    self.ready.wait(&mut s);
                    false
                }
                Some(d) => Instant::now() >= d || self.ready.wait_until(&mut s, d).timed_out(),
            };
            if timed_out && !s.has_events() {
                // Nothing: whatever is in the pipe (a byte the host did not read) goes.
                s.sync_pipe();
                return if s.closed {
                    Lines::Closed
                } else {
                    Lines::TimedOut
                };
            }
        }
        let mut used = 0;
        for taken in 0..max.max(1) {
            let Some(len) = s.next_len() else { break };
            if used + len + 1 > buf.len() {
                if taken == 0 {
                    return Lines::TooSmall(len + 1);
                }
                break;
            }
            let text = s.pop().map(Item::into_text).unwrap_or_default();
            let line = &mut buf[used..used + len];
            line.copy_from_slice(text.as_bytes());
            if memchr::memchr(b'\n', line).is_some() {
                line.iter_mut()
                    .filter(|b| **b == b'\n')
                    .for_each(|b| *b = b' ');
            }
            buf[used + len] = b'\n';
            used += len + 1;
        }
        s.after_take(edge);
        Lines::Taken(used)
    }

    /// Reads back a byte an edge pull left in the pipe, for the library's own waits on it.
    pub fn clear_stale(&self) {
        let mut s = self.state.lock();
        if s.stale {
            s.sync_pipe();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::fd::FromRawFd;

    #[test]
    fn overflow_drops_notifications_not_requests() {
        let q = EventQueue::<Overflow>::new(2);
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
        q.close_with(Some(json!({"type": "closed"}).to_string()));
        assert!(matches!(q.pull(None), Pulled::Event(_)));
        assert!(matches!(q.pull(None), Pulled::Closed));
    }

    #[test]
    fn an_event_with_a_key_replaces_the_one_still_waiting() {
        let q = EventQueue::<Overflow>::new(100);
        for n in 0..10_000 {
            q.push(&json!({"type": "notification", "n": n}), true);
            let changed = json!({"type": "resources_changed", "server": "a", "n": n});
            q.push_latest(changed.to_string(), false, "resources_changed/a");
        }
        q.push_latest(
            json!({"type": "resources_changed", "server": "b"}).to_string(),
            false,
            "resources_changed/b",
        );
        let mut seen = Vec::new();
        while let Pulled::Event(e) = q.pull(Some(Duration::ZERO)) {
            seen.push(serde_json::from_str::<Value>(&e).unwrap());
        }
        let changed: Vec<&Value> = seen
            .iter()
            .filter(|e| e["type"] == "resources_changed")
            .collect();
        // One per key, the newest, after the notification that caused it.
        assert_eq!(changed.len(), 2, "{seen:?}");
        assert_eq!(changed[0]["n"], 9_999);
        let at = seen
            .iter()
            .position(|e| e["type"] == "resources_changed")
            .unwrap();
        assert_eq!(seen[at - 1]["type"], "notification");
        assert_eq!(seen[at - 1]["n"], 9_999);
        assert_eq!(changed[1]["server"], "b");
        let s = q.state.lock();
        assert!(s.keyed.is_empty() && s.bytes == 0);
        drop(s);
        // Once taken, a key is new again.
        q.push_latest("{\"n\": 1}".into(), false, "k");
        assert!(matches!(q.pull(Some(Duration::ZERO)), Pulled::Event(_)));
        q.push_latest("{\"n\": 2}".into(), false, "k");
        assert!(matches!(q.pull(Some(Duration::ZERO)), Pulled::Event(e) if e.contains('2')));
    }

    #[test]
    fn the_queue_is_bounded_in_bytes_too() {
        let q = EventQueue::<Overflow>::new(1_000_000);
        let line = "x".repeat(16 << 10);
        for _ in 0..1_500 {
            q.push(&json!({"type": "stderr", "line": line}), true);
        }
        q.push(&json!({"type": "request", "id": "r"}), false);
        let held = q.state.lock().bytes;
        assert!(held <= MAX_EVENT_BYTES + (17 << 10), "{held}");
        let Pulled::Event(first) = q.pull(Some(Duration::ZERO)) else {
            panic!()
        };
        assert!(first.contains("overflow"), "{first}");
        let mut last = String::new();
        while let Pulled::Event(e) = q.pull(Some(Duration::ZERO)) {
            last = e;
        }
        assert!(last.contains("request"), "the request is kept: {last}");
        assert_eq!(q.state.lock().bytes, 0);
    }

    fn readable(fd: &OwnedFd) -> bool {
        crate::sys::fd::wait_ready(fd, crate::sys::fd::Ready::Read, Duration::ZERO)
    }

    /// The host's descriptor, owned by the test.
    fn readiness(q: &EventQueue) -> OwnedFd {
        let fd = q.readiness_fd().unwrap();
        // SAFETY: readiness_fd hands over a new descriptor, owned by nobody else.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    /// The host's loop reads the byte that woke it.
    fn read_byte(fd: &OwnedFd) {
        assert_eq!(crate::sys::fd::read(fd, &mut [0u8; 8]).unwrap(), 1);
    }

    #[test]
    fn the_readiness_fd_follows_the_queue() {
        let q = EventQueue::<Overflow>::new(10);
        q.push(&json!({"n": 0}), true);
        let fd = &readiness(&q);
        assert!(readable(fd), "events queued before the fd was asked for");
        assert!(matches!(q.pull(Some(Duration::ZERO)), Pulled::Event(_)));
        assert!(
            !readable(fd),
            "the pull that empties the queue empties the pipe"
        );
        q.push(&json!({"n": 1}), true);
        q.push(&json!({"n": 2}), true);
        assert!(readable(fd));
        let Pulled::Event(both) = q.pull_many(8, Some(Duration::ZERO)) else {
            panic!()
        };
        let v: Value = serde_json::from_str(&both).unwrap();
        assert_eq!(v, json!([{"n": 1}, {"n": 2}]));
        assert!(!readable(fd));
        assert!(matches!(
            q.pull_many(8, Some(Duration::ZERO)),
            Pulled::TimedOut
        ));
        // A host loop that read the byte itself: the next push still signals.
        q.push(&json!({"n": 3}), true);
        read_byte(fd);
        assert!(matches!(q.pull(Some(Duration::ZERO)), Pulled::Event(_)));
        q.push(&json!({"n": 4}), true);
        assert!(readable(fd));
        assert!(matches!(q.pull(Some(Duration::ZERO)), Pulled::Event(_)));
        q.close_with(None);
        assert!(readable(fd), "a closed queue stays readable");
        assert!(matches!(q.pull(Some(Duration::ZERO)), Pulled::Closed));
        assert!(readable(fd));
    }

    fn lines(q: &EventQueue, max: usize, buf: &mut [u8], edge: bool) -> Lines {
        q.take_lines(max, Some(Duration::ZERO), buf, edge)
    }

    #[test]
    fn lines_take_what_fits_one_event_per_line() {
        let q = EventQueue::<Overflow>::new(10);
        q.push_text(r#"{"n":1}"#.into(), true);
        q.push_text("{\"s\":\n\"a\"}".into(), true); // a newline between tokens
        q.push_text(r#"{"n":3}"#.into(), true);
        let mut small = [0u8; 4];
        assert_eq!(lines(&q, 8, &mut small, false), Lines::TooSmall(8));
        let mut buf = [0u8; 20];
        let Lines::Taken(n) = lines(&q, 8, &mut buf, false) else {
            panic!()
        };
        // The third does not fit after the first two: it stays queued.
        assert_eq!(&buf[..n], b"{\"n\":1}\n{\"s\": \"a\"}\n");
        let Lines::Taken(n) = lines(&q, 8, &mut buf, false) else {
            panic!()
        };
        assert_eq!(&buf[..n], b"{\"n\":3}\n");
        assert_eq!(lines(&q, 8, &mut buf, false), Lines::TimedOut);
        q.push_text(r#"{"n":4}"#.into(), true);
        q.push_text(r#"{"n":5}"#.into(), true);
        let Lines::Taken(n) = lines(&q, 1, &mut buf, false) else {
            panic!()
        };
        assert_eq!(&buf[..n], b"{\"n\":4}\n", "max 1");
        q.close_with(Some(json!({"type": "closed"}).to_string()));
        let mut buf = [0u8; 64];
        let Lines::Taken(n) = lines(&q, 8, &mut buf, false) else {
            panic!()
        };
        assert_eq!(&buf[..n], b"{\"n\":5}\n{\"type\":\"closed\"}\n");
        assert_eq!(lines(&q, 8, &mut buf, false), Lines::Closed);
    }

    #[test]
    fn edge_pulls_leave_the_pipe_to_the_host() {
        let q = EventQueue::<Overflow>::new(10);
        let fd = &readiness(&q);
        let mut buf = [0u8; 64];
        q.push(&json!({"n": 1}), true);
        assert!(readable(fd));
        // The host's loop reads the byte, then takes the event: nothing left to read back.
        read_byte(fd);
        assert!(matches!(lines(&q, 8, &mut buf, true), Lines::Taken(8)));
        assert!(!readable(fd));
        // The next event signals again.
        q.push(&json!({"n": 2}), true);
        assert!(readable(fd));
        // A host that took it without reading the byte: it is left over, and the next pull,
        // finding nothing, reads it back.
        assert!(matches!(lines(&q, 8, &mut buf, true), Lines::Taken(8)));
        assert!(readable(fd), "an edge pull does not read the pipe");
        q.push(&json!({"n": 3}), true);
        assert!(matches!(lines(&q, 8, &mut buf, true), Lines::Taken(8)));
        assert_eq!(lines(&q, 8, &mut buf, true), Lines::TimedOut);
        assert!(!readable(fd), "a pull that finds nothing empties the pipe");
        // The library's own waits clear a left-over byte too.
        q.push(&json!({"n": 4}), true);
        assert!(matches!(lines(&q, 8, &mut buf, true), Lines::Taken(8)));
        assert!(readable(fd));
        q.clear_stale();
        assert!(!readable(fd));
        // A level pull after an edge one still empties the pipe.
        q.push(&json!({"n": 5}), true);
        assert!(matches!(lines(&q, 8, &mut buf, true), Lines::Taken(8)));
        q.push(&json!({"n": 6}), true);
        assert!(matches!(q.pull(Some(Duration::ZERO)), Pulled::Event(_)));
        assert!(!readable(fd));
        q.close_with(None);
        assert!(readable(fd), "a closed queue stays readable");
        assert_eq!(lines(&q, 8, &mut buf, true), Lines::Closed);
        assert!(readable(fd));
    }

    #[test]
    fn events_queued_by_other_threads_interrupt_a_driving_host() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let q = Arc::new(EventQueue::<Overflow>::new(16));
        let calls = Arc::new(AtomicUsize::new(0));
        let count = {
            let calls = calls.clone();
            Arc::new(move || {
                calls.fetch_add(1, Ordering::SeqCst);
            }) as Interrupt
        };
        {
            let _one = q.interrupt_while(count.clone());
            let _two = q.interrupt_while(count.clone());
            let q2 = q.clone();
            std::thread::spawn(move || q2.push(&json!({"type": "log"}), true))
                .join()
                .unwrap();
            assert_eq!(calls.load(Ordering::SeqCst), 1, "another thread's event");
            // The driving thread's own events (it reads them itself) do not interrupt it.
            SELF_DRIVING.with(|d| d.set(true));
            q.push(&json!({"type": "log"}), true);
            SELF_DRIVING.with(|d| d.set(false));
            assert_eq!(calls.load(Ordering::SeqCst), 1);
            drop(_two);
            // One driver left: still interrupted.
            q.push(&json!({"type": "log"}), true);
            assert_eq!(calls.load(Ordering::SeqCst), 2);
        }
        // Nobody drives: nothing to interrupt.
        q.push(&json!({"type": "log"}), true);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let _three = q.interrupt_while(count);
        q.close_with(None);
        assert_eq!(calls.load(Ordering::SeqCst), 3, "closing interrupts too");
    }

    #[test]
    fn a_waiter_wakes_when_an_event_arrives() {
        let q = std::sync::Arc::new(EventQueue::<Overflow>::new(10));
        let q2 = q.clone();
        let t = std::thread::spawn(move || q2.pull(Some(Duration::from_secs(5))));
        std::thread::sleep(Duration::from_millis(20));
        q.push(&json!({"x": 1}), true);
        assert!(matches!(t.join().unwrap(), Pulled::Event(_)));
    }
}
