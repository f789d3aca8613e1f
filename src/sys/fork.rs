//! Knowing that this process is a forked copy of the one where the library started.
//!
//! `fork()` copies the host's memory but only the thread that called it: the runtime's workers,
//! the readers of each server and every lock they held are not in the child, while the copied
//! handles still name the parent's servers by pipe, socket and process id. A child that used them
//! would read the parent's answers off a shared pipe, or kill the parent's servers when it closes.
//! So the runtime, when it starts, asks for a mark in every child forked after that
//! (`pthread_atfork`), and the C boundary refuses work in a marked process (`ffi/boundary.rs`).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Once;

/// Set in a child forked after [`watch`]; never cleared (a child of a child is marked too).
static FORKED: AtomicBool = AtomicBool::new(false);
/// The process in which the library started (for the message a child gets).
static STARTED_IN: AtomicU32 = AtomicU32::new(0);
static WATCH: Once = Once::new();

/// Runs in the child right after a fork, before `fork()` returns there: async-signal-safe, it
/// only stores a flag.
extern "C" fn mark_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// From now on, a child forked from this process is marked. Called once the library has threads
/// or state of its own (the runtime's start); later calls do nothing.
pub(crate) fn watch() {
    WATCH.call_once(|| {
        STARTED_IN.store(std::process::id(), Ordering::Relaxed);
        // SAFETY: `mark_child` is a plain `extern "C" fn` that lives as long as the library (it
        // is never unloaded once its runtime ran: the runtime's threads hold its code) and only
        // stores an atomic, which is allowed between fork and exec.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(mark_child)) };
        debug_assert_eq!(rc, 0, "pthread_atfork failed");
    });
}

/// The process the library started in, when this one is a child forked from it after that.
#[inline]
pub(crate) fn forked_from() -> Option<u32> {
    if FORKED.load(Ordering::Relaxed) {
        Some(STARTED_IN.load(Ordering::Relaxed))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_child_forked_after_watch_is_marked_and_the_parent_is_not() {
        super::watch();
        assert_eq!(super::forked_from(), None);
        // SAFETY: the child only reads an atomic and leaves with `_exit`, both async-signal-safe.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ok = super::forked_from() == Some(super::STARTED_IN.load(super::Ordering::Relaxed));
            // SAFETY: `_exit` ends the child without running the parent's atexit handlers.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child made above; `status` is alive for the call.
        let got = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(got, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "status {status}"
        );
        assert_eq!(super::forked_from(), None, "the parent is never marked");
    }
}
