//! Cancellation by tag: a blocking call that carries `tag` can be cancelled from any other thread
//! with `mcplug_cancel(tag)`. The registry is process-wide, because a tag is what the host knows.
//!
//! Cancel tokens: a tag reaches only a call that has entered the library, so a binding whose call
//! waits in a queue before it enters (libuv's threadpool, an executor) had to cancel again and
//! again until it had. A token is made by the engine before the call is queued
//! ([`token_new`]), named in the call's options (`cancel_token`), and cancelled at any time
//! ([`token_cancel`]): a call that enters with a cancelled token ends `cancelled` at once, one
//! already running is cancelled as by its tag. The binding frees it after the call
//! ([`token_free`]).

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

pub struct CancelSignal {
    fired: AtomicBool,
    notify: Notify,
    /// Ends the blocked read of the host thread that drives this call (see `request.rs`).
    interrupt: parking_lot::Mutex<Option<crate::queue::Interrupt>>,
}

impl CancelSignal {
    /// A signal of its own, fired directly (a started call's cancel), not through a tag.
    pub fn new() -> Arc<CancelSignal> {
        Arc::new(CancelSignal {
            fired: AtomicBool::new(false),
            notify: Notify::new(),
            interrupt: parking_lot::Mutex::new(None),
        })
    }

    pub fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        self.notify.notify_waiters();
        let interrupt = self.interrupt.lock().clone();
        if let Some(interrupt) = interrupt {
            interrupt();
        }
    }

    pub fn is_fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }
    /// Resolves once the signal fires (at once if it already has).
    pub async fn fired(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_fired() {
                return;
            }
            notified.await;
        }
    }
}

/// What can cancel one request: the host's tag, a signal of the call's own, or both.
#[derive(Default)]
pub struct Cancels {
    pub tag: Option<CancelGuard>,
    pub own: Option<Arc<CancelSignal>>,
}

impl Cancels {
    /// Whether anything can cancel the request at all (most calls carry neither a tag nor a
    /// signal of their own).
    pub fn any(&self) -> bool {
        self.tag.is_some() || self.own.is_some()
    }

    pub fn is_fired(&self) -> bool {
        self.tag.as_ref().is_some_and(|g| g.signal.is_fired())
            || self.own.as_ref().is_some_and(|s| s.is_fired())
    }

    /// Resolves once either fires; never when there is neither.
    pub async fn fired(&self) {
        match (&self.tag, &self.own) {
            (None, None) => std::future::pending().await,
            (Some(g), None) => g.signal.fired().await,
            (None, Some(s)) => s.fired().await,
            (Some(g), Some(s)) => tokio::select! {
                _ = g.signal.fired() => {}
                _ = s.fired() => {}
            },
        }
    }
}

impl Cancels {
    /// Until the guard is dropped, firing either signal also calls `interrupt`: for a host
    /// thread blocked reading the server for this call's answer, which would otherwise see the
    /// cancel only at the end of its drive slice.
    pub fn interrupt_while(&self, interrupt: crate::queue::Interrupt) -> InterruptOnCancel<'_> {
        for signal in self.signals() {
            *signal.interrupt.lock() = Some(interrupt.clone());
        }
        InterruptOnCancel(self)
    }

    fn signals(&self) -> impl Iterator<Item = &CancelSignal> {
        let tag = self.tag.as_ref().map(|g| &*g.signal);
        tag.into_iter().chain(self.own.as_deref())
    }
}

/// See [`Cancels::interrupt_while`].
pub struct InterruptOnCancel<'a>(&'a Cancels);

impl Drop for InterruptOnCancel<'_> {
    fn drop(&mut self) {
        for signal in self.0.signals() {
            *signal.interrupt.lock() = None;
        }
    }
}

/// tag -> the calls in flight with it (each keyed, so a finished call removes only itself).
type Registry = HashMap<String, Vec<(u64, Arc<CancelSignal>)>>;
static REGISTRY: Lazy<Mutex<Registry>> = Lazy::new(Default::default);
static NEXT: AtomicU64 = AtomicU64::new(1);

/// Registered while a tagged call runs; unregisters itself when dropped.
pub struct CancelGuard {
    tag: String,
    key: u64,
    pub signal: Arc<CancelSignal>,
}

pub fn register(tag: &str) -> CancelGuard {
    let signal = CancelSignal::new();
    let key = NEXT.fetch_add(1, Ordering::Relaxed);
    REGISTRY
        .lock()
        .entry(tag.to_string())
        .or_default()
        .push((key, signal.clone()));
    CancelGuard {
        tag: tag.to_string(),
        key,
        signal,
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        let mut reg = REGISTRY.lock();
        if let Some(list) = reg.get_mut(&self.tag) {
            list.retain(|(k, _)| *k != self.key);
            if list.is_empty() {
                reg.remove(&self.tag);
            }
        }
    }
}

/// Cancels every in-flight call carrying `tag`. Returns how many were found.
pub fn cancel(tag: &str) -> usize {
    let signals: Vec<Arc<CancelSignal>> = REGISTRY
        .lock()
        .get(tag)
        .map(|l| l.iter().map(|(_, s)| s.clone()).collect())
        .unwrap_or_default();
    for s in &signals {
        s.fire();
    }
    signals.len()
}

/// The cancel tokens not yet freed.
static TOKENS: Lazy<Mutex<HashMap<u64, Arc<CancelSignal>>>> = Lazy::new(Default::default);
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// A new cancel token (never 0, never reused in the process).
pub fn token_new() -> u64 {
    let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
    TOKENS.lock().insert(token, CancelSignal::new());
    token
}

/// The signal of a token, for a call that names it; `None` when there is no such token (never
/// made, or freed).
pub fn token_signal(token: u64) -> Option<Arc<CancelSignal>> {
    TOKENS.lock().get(&token).cloned()
}

/// Cancels the calls of a token, those running and those still to enter; whether it exists.
pub fn token_cancel(token: u64) -> bool {
    let signal = TOKENS.lock().get(&token).cloned();
    signal.map(|s| s.fire()).is_some()
}

/// Forgets a token (a call that holds its signal keeps it); whether it existed.
pub fn token_free(token: u64) -> bool {
    TOKENS.lock().remove(&token).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_cancels_before_the_call_enters_and_after() {
        let token = token_new();
        assert_ne!(token, 0);
        let early = token_signal(token).expect("made");
        assert!(!early.is_fired());
        assert!(token_cancel(token));
        // A call entering now finds it cancelled.
        assert!(token_signal(token).expect("still there").is_fired());
        assert!(early.is_fired());
        assert!(token_free(token));
        assert!(token_signal(token).is_none());
        assert!(!token_cancel(token), "a freed token is not found");
        assert!(!token_free(token));
    }

    #[test]
    fn cancel_reaches_registered_calls_only() {
        let g = register("unit-tag-1");
        assert_eq!(cancel("unit-tag-unknown"), 0);
        assert_eq!(cancel("unit-tag-1"), 1);
        assert!(g.signal.is_fired());
        drop(g);
        assert_eq!(cancel("unit-tag-1"), 0, "a finished call is forgotten");
    }

    #[test]
    fn a_cancel_interrupts_the_thread_that_drives_the_call() {
        use std::sync::atomic::AtomicUsize;
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = {
            let calls = calls.clone();
            Arc::new(move || {
                calls.fetch_add(1, Ordering::SeqCst);
            }) as crate::queue::Interrupt
        };
        let own = CancelSignal::new();
        let cancels = Cancels {
            tag: Some(register("unit-tag-interrupt")),
            own: Some(own.clone()),
        };
        {
            let _driving = cancels.interrupt_while(counted);
            assert_eq!(cancel("unit-tag-interrupt"), 1);
            assert_eq!(calls.load(Ordering::SeqCst), 1, "the tag's cancel");
            own.fire();
            assert_eq!(calls.load(Ordering::SeqCst), 2, "the call's own cancel");
        }
        // Nobody drives any more: a later fire interrupts nothing.
        own.fire();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
