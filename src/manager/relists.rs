//! A server's tools re-listed after `notifications/tools/list_changed` (or a listen stream
//! opened again), coalesced: one re-list in flight per server, at most one queued after it,
//! whatever the number of notifications. A notification while one runs only marks that another
//! is wanted (its list may predate the change); the one that runs next lists once for them all.

use parking_lot::Mutex;

#[derive(Default)]
pub(super) struct Relists {
    slot: Mutex<Slot>,
}

#[derive(Default)]
struct Slot {
    running: bool,
    /// The generation of the re-list wanted after the running one (the newest asked for).
    queued: Option<u64>,
}

impl Relists {
    /// A re-list of generation `gen` is wanted: true when none runs and the caller is to run it
    /// (under a [`Running`]), false when it was queued behind the one running.
    pub fn want(&self, gen: u64) -> bool {
        let mut slot = self.slot.lock();
        if slot.running {
            slot.queued = Some(gen);
            false
        } else {
            slot.running = true;
            true
        }
    }
}

/// The runner's turn, from a `want` that said to run until [`Running::next`] finds nothing
/// queued. Dropped before that (a panic, a runtime shutting down drops the task), it ends the
/// turn: nothing stays marked running for ever.
pub(super) struct Running<'a> {
    relists: &'a Relists,
    over: bool,
}

impl<'a> Running<'a> {
    pub fn new(relists: &'a Relists) -> Self {
        Running {
            relists,
            over: false,
        }
    }

    /// A re-list ended: the generation of the one queued meanwhile (run it, then ask again),
    /// or `None` when none was (the turn is over: the next `want` runs at once).
    pub fn next(&mut self) -> Option<u64> {
        let mut slot = self.relists.slot.lock();
        let next = slot.queued.take();
        slot.running = next.is_some();
        self.over = next.is_none();
        next
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if !self.over {
            let mut slot = self.relists.slot.lock();
            slot.running = false;
            slot.queued = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn many_wants_while_one_runs_make_one_more_run() {
        let r = Relists::default();
        assert!(r.want(1));
        let mut turn = Running::new(&r);
        for _ in 0..20_000 {
            assert!(!r.want(1));
        }
        assert_eq!(turn.next(), Some(1));
        assert_eq!(turn.next(), None);
        drop(turn);
        // Idle again: the next want runs at once, and the old turn's end changed nothing.
        assert!(r.want(2));
        assert!(!r.want(2));
        let mut turn = Running::new(&r);
        assert_eq!(turn.next(), Some(2));
        assert_eq!(turn.next(), None);
    }

    #[test]
    fn the_queued_run_is_of_the_newest_generation() {
        let r = Relists::default();
        assert!(r.want(1));
        let mut turn = Running::new(&r);
        assert!(!r.want(1));
        assert!(!r.want(2));
        assert_eq!(turn.next(), Some(2));
        assert_eq!(turn.next(), None);
    }

    #[test]
    fn a_runner_that_ends_early_leaves_nothing_running() {
        let r = Relists::default();
        assert!(r.want(1));
        let turn = Running::new(&r);
        assert!(!r.want(1));
        drop(turn);
        assert!(r.want(1));
    }

    /// As the manager runs them: a storm of wants from other threads, each want that says so
    /// starting a runner, while each run takes a while, makes a few runs, never one per want,
    /// and never two at once.
    #[test]
    fn a_storm_from_many_threads_is_coalesced() {
        let r = Arc::new(Relists::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let at_once = Arc::new(AtomicUsize::new(0));
        let runners = Arc::new(Mutex::new(Vec::new()));
        let storms: Vec<_> = (0..4)
            .map(|_| {
                let (r, runs, at_once, runners) =
                    (r.clone(), runs.clone(), at_once.clone(), runners.clone());
                std::thread::spawn(move || {
                    for _ in 0..5_000 {
                        if !r.want(1) {
                            continue;
                        }
                        let (r, runs, at_once) = (r.clone(), runs.clone(), at_once.clone());
                        runners.lock().push(std::thread::spawn(move || {
                            let mut turn = Running::new(&r);
                            loop {
                                assert_eq!(at_once.fetch_add(1, Ordering::SeqCst), 0);
                                runs.fetch_add(1, Ordering::SeqCst);
                                std::thread::sleep(std::time::Duration::from_millis(20));
                                at_once.fetch_sub(1, Ordering::SeqCst);
                                if turn.next().is_none() {
                                    break;
                                }
                            }
                        }));
                    }
                })
            })
            .collect();
        for t in storms {
            t.join().unwrap();
        }
        loop {
            let Some(t) = runners.lock().pop() else { break };
            t.join().unwrap();
        }
        let runs = runs.load(Ordering::SeqCst);
        assert!((1..=10).contains(&runs), "{runs} runs for 20,000 wants");
        assert!(r.want(1), "idle after the storm");
    }
}
