//! Wakes a caller blocked in `read` on a stdio server's stdout when its turn is up.
//!
//! Why: a caller that waits alone for its answer reads the pipe itself (see `stdio_read`). Were it
//! to `poll` first and then `read`, every call would pay a third system call; a plain blocking
//! `read` is what a hand-written client does, and costs about a sixth less CPU per call. But a
//! blocking `read` of a pipe has no timeout, and the caller must come back at its deadline, when
//! the host cancels it, and at least every drive slice. So it says until when it reads
//! ([`Blocked`]), and this module's one thread wakes it then: it writes one byte into the
//! pipe, opened afresh through `/proc/self/fd` (holding a write end open would hide the end of the
//! server's output). The byte is 0xFF, which valid UTF-8 — and so JSON text — never contains:
//! the reader drops it wherever it lands, even inside a line the server is still writing.
//!
//! In steady traffic the waker's thread is not woken per call: a caller's deadline is later than
//! the one the thread already sleeps until, so announcing it is two atomic operations. The thread
//! wakes about once per drive slice, finds nobody due, and sleeps again.

use crate::sys::fd::{self, ProcPath};
use once_cell::sync::Lazy;
use parking_lot::{Condvar, Mutex};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The byte written to wake a reader; it never occurs in UTF-8.
pub(crate) const WAKE_BYTE: u8 = 0xFF;
/// After a failed wake (no descriptor free, say), try again this much later.
const RETRY: Duration = Duration::from_millis(1);

/// What a reader that blocks shares with the waker.
pub(crate) struct Blocked {
    /// A second, blocking description of the pipe's read end (the reader's own is non-blocking,
    /// for the runtime's reactor). Owned here, so that the waker, which opens the pipe for
    /// writing through its number, never opens a number reused by something else.
    fd: OwnedFd,
    path: ProcPath,
    /// Until when the reader reads (ns on the waker's clock); 0 when it does not.
    until: AtomicU64,
    /// Wake bytes written and not yet seen by the reader (it drops them from what it reads).
    pub(crate) in_flight: AtomicUsize,
}

impl Blocked {
    /// A blocking description of the pipe whose read end is `read_fd`, if this system lets us
    /// both open it and open it for writing through /proc (else the reader polls, as before).
    pub(crate) fn open(read_fd: BorrowedFd<'_>) -> Option<Arc<Blocked>> {
        // Non-blocking for the open only: opening a pipe for reading would wait for a writer.
        let fd = ProcPath::of(read_fd).open(false).ok()?;
        if !fd::same_pipe(read_fd, fd.as_fd()) || fd::set_nonblocking(&fd, false).is_err() {
            return None;
        }
        let blocked = Blocked {
            path: ProcPath::of(fd.as_fd()),
            fd,
            until: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        };
        drop(blocked.path.open(true).ok()?);
        let blocked = Arc::new(blocked);
        watch(&blocked);
        Some(blocked)
    }

    /// The blocking descriptor to read from.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The reader is about to block for at most `wait`; false when no waker can end the read
    /// (its thread could not be started): then the reader must not block.
    #[must_use]
    pub(crate) fn begin(&self, wait: Duration) -> bool {
        if !waker_running() {
            return false;
        }
        let until = WAKER.now_ns().saturating_add(wait.as_nanos() as u64).max(1);
        self.until.store(until, Ordering::SeqCst);
        // Only a deadline earlier than the one the thread sleeps until needs to tell it.
        if until < WAKER.next.load(Ordering::SeqCst) {
            WAKER.tell();
        }
        true
    }

    /// The reader's `read` returned.
    pub(crate) fn end(&self) {
        self.until.store(0, Ordering::SeqCst);
    }

    /// Whether a reader may block on this description (the waker's thread runs, or can start).
    pub(crate) fn usable(&self) -> bool {
        waker_running()
    }

    /// Wakes the reader now, from any thread (the host's events, a cancel). With no blocked read
    /// the byte waits in the pipe and ends the next `read` at once; the reader drops it either way.
    pub(crate) fn wake_now(&self) {
        let _ = self.wake();
    }

    /// Writes the wake byte through a write end opened for it alone; an error when it could not
    /// (then the reader is either not blocked — a full pipe has data to read — or the waker tries
    /// again shortly).
    fn wake(&self) -> std::io::Result<()> {
        let writer = self.path.open(true)?;
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        match fd::write(&writer, &[WAKE_BYTE]) {
            Ok(1) => Ok(()),
            written => {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                Err(written
                    .err()
                    .unwrap_or_else(|| std::io::Error::other("the wake byte was not written")))
            }
        }
    }

    /// Drops the wake bytes from `data`; `None` when there were none (the common case: no wake
    /// in flight costs one atomic load).
    pub(crate) fn strip(&self, data: &[u8]) -> Option<Vec<u8>> {
        if self.in_flight.load(Ordering::SeqCst) == 0 {
            return None;
        }
        memchr::memchr(WAKE_BYTE, data)?;
        let kept: Vec<u8> = data.iter().copied().filter(|&b| b != WAKE_BYTE).collect();
        let seen = data.len() - kept.len();
        let _ = self
            .in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_sub(seen))
            });
        Some(kept)
    }
}

struct Waker {
    epoch: Instant,
    /// The readers that may block (weakly: a closed connection's entry goes at the next look).
    readers: Mutex<Vec<Weak<Blocked>>>,
    /// When the waker's thread wakes next (ns); `u64::MAX` while it looks, so that a reader
    /// blocking meanwhile always tells it (no deadline is lost between its look and its sleep).
    next: AtomicU64,
    /// Set (under the lock) by a reader whose deadline is earlier than `next`.
    told: Mutex<bool>,
    tell: Condvar,
    /// Whether the thread runs (started at the first blocking read; its start can fail).
    running: std::sync::OnceLock<bool>,
    /// A descriptor kept open to be given up when the process has none left: a wake must not
    /// fail for want of one (the blocked caller would then miss its deadline).
    spare: Mutex<Option<OwnedFd>>,
}

static WAKER: Lazy<Waker> = Lazy::new(|| Waker {
    epoch: Instant::now(),
    readers: Mutex::new(Vec::new()),
    next: AtomicU64::new(u64::MAX),
    told: Mutex::new(false),
    tell: Condvar::new(),
    running: std::sync::OnceLock::new(),
    spare: Mutex::new(open_spare()),
});

fn open_spare() -> Option<OwnedFd> {
    fd::open_dev_null().ok()
}

impl Waker {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A reader's deadline is earlier than the one the thread sleeps until.
    fn tell(&self) {
        *self.told.lock() = true;
        self.tell.notify_one();
    }

    /// Wakes `b`'s read; when the process is out of descriptors, with the spare one.
    fn wake(&self, b: &Blocked) -> bool {
        match b.wake() {
            Ok(()) => return true,
            Err(e) if fd::out_of_descriptors(&e) => {}
            Err(_) => return false,
        }
        let mut spare = self.spare.lock();
        if spare.take().is_none() {
            return false;
        }
        let woken = b.wake().is_ok();
        *spare = open_spare();
        woken
    }

    /// The waker's thread: its own, not the runtime's, so that a caller's deadline holds even
    /// when every runtime thread is busy.
    fn run(&self) {
        loop {
            *self.told.lock() = false;
            self.next.store(u64::MAX, Ordering::SeqCst);
            let now = self.now_ns();
            let mut earliest = u64::MAX;
            let due: Vec<Arc<Blocked>> = {
                let mut readers = self.readers.lock();
                readers.retain(|w| w.strong_count() > 0);
                readers
                    .iter()
                    .filter_map(Weak::upgrade)
                    .filter(|b| {
                        let until = b.until.load(Ordering::SeqCst);
                        if until > now {
                            earliest = earliest.min(until);
                        }
                        until != 0 && until <= now
                    })
                    .collect()
            };
            for b in due {
                let until = b.until.load(Ordering::SeqCst);
                if until == 0 || until > now {
                    continue;
                }
                if self.wake(&b) {
                    // This read is woken; a newer one (the reader came back meanwhile) keeps its own.
                    let _ = b
                        .until
                        .compare_exchange(until, 0, Ordering::SeqCst, Ordering::SeqCst);
                } else {
                    earliest = earliest.min(now + RETRY.as_nanos() as u64);
                }
            }
            let mut told = self.told.lock();
            self.next.store(earliest, Ordering::SeqCst);
            if *told {
                continue;
            }
            if earliest == u64::MAX {
                self.tell.wait(&mut told);
            } else {
                let at = self.epoch + Duration::from_nanos(earliest);
                self.tell.wait_until(&mut told, at);
            }
        }
    }
}

/// Lets `blocked`'s reader block: the waker looks after it from now on (until it is dropped).
fn watch(blocked: &Arc<Blocked>) {
    let mut readers = WAKER.readers.lock();
    // Closed connections' entries go here too: the thread may never run (no read ever blocked,
    // as with a host that reads stdout itself), and each would keep its allocation.
    readers.retain(|w| w.strong_count() > 0);
    readers.push(Arc::downgrade(blocked));
}

/// Starts the waker's thread the first time a reader blocks (not when a server is spawned: its
/// first request goes out first). False when it cannot run: the reader polls instead.
fn waker_running() -> bool {
    *WAKER.running.get_or_init(|| {
        std::thread::Builder::new()
            .name("mcplug-stdio-waker".into())
            .stack_size(64 << 10)
            .spawn(|| WAKER.run())
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> (OwnedFd, OwnedFd) {
        fd::pipe(false).unwrap()
    }

    /// One read of the blocking description: the count.
    fn read(b: &Blocked, buf: &mut [u8]) -> usize {
        fd::read(b.fd(), buf).unwrap()
    }

    #[test]
    fn wake_bytes_are_dropped_only_while_in_flight() {
        let (r, _w) = pipe();
        let b = Blocked::open(r.as_fd()).expect("a pipe can be reopened through /proc");
        let data = [b'{', WAKE_BYTE, b'}', b'\n'];
        // None in flight: the data is passed as it is (a server's own 0xFF is its error to report).
        assert!(b.strip(&data).is_none());
        b.in_flight.store(2, Ordering::SeqCst);
        assert!(b.strip(b"{}\n").is_none(), "no wake byte: nothing to copy");
        assert_eq!(b.strip(&data).as_deref(), Some(&b"{}\n"[..]));
        assert_eq!(b.in_flight.load(Ordering::SeqCst), 1);
        assert_eq!(b.strip(&[WAKE_BYTE, WAKE_BYTE]).as_deref(), Some(&b""[..]));
        assert_eq!(b.in_flight.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn closed_readers_leave_the_wakers_list() {
        let before = WAKER.readers.lock().len();
        for _ in 0..50 {
            let (r, _w) = pipe();
            drop(Blocked::open(r.as_fd()).expect("a pipe can be reopened through /proc"));
        }
        // Other tests may hold a reader or two meanwhile; 50 dropped ones must not stay.
        assert!(WAKER.readers.lock().len() <= before + 3);
    }

    #[test]
    fn another_thread_ends_a_blocked_read_at_once() {
        let (r, _w) = pipe();
        let b = Blocked::open(r.as_fd()).expect("a pipe can be reopened through /proc");
        assert!(b.usable());
        let t = Instant::now();
        assert!(b.begin(Duration::from_secs(10)));
        let other = {
            let b = b.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                b.wake_now();
            })
        };
        let mut buf = [0u8; 16];
        let n = read(&b, &mut buf);
        b.end();
        other.join().unwrap();
        assert_eq!(n, 1);
        assert_eq!(b.strip(&buf[..1]).as_deref(), Some(&b""[..]));
        // Well before the 10 s deadline (the waker's thread would end it only then).
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        // Woken before the read began: the byte waits in the pipe and ends the read at once.
        b.wake_now();
        assert!(b.begin(Duration::from_secs(10)));
        let n = read(&b, &mut buf);
        b.end();
        assert_eq!(n, 1);
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_blocked_read_of_a_pipe_is_woken_at_its_deadline() {
        let (r, w) = pipe();
        let b = Blocked::open(r.as_fd()).expect("a pipe can be reopened through /proc");
        let t = Instant::now();
        assert!(b.begin(Duration::from_millis(30)));
        let mut buf = [0u8; 16];
        let n = read(&b, &mut buf);
        b.end();
        assert_eq!(n, 1);
        assert_eq!(buf[0], WAKE_BYTE);
        assert!(
            t.elapsed() >= Duration::from_millis(30),
            "woken early: {:?}",
            t.elapsed()
        );
        assert_eq!(b.strip(&buf[..1]).as_deref(), Some(&b""[..]));
        // The server's data still comes through the blocking descriptor, and its end too: the
        // waker holds no write end open.
        assert_eq!(fd::write(&w, b"{}\n").unwrap(), 3);
        drop(w);
        assert!(b.begin(Duration::from_secs(5)));
        let n = read(&b, &mut buf);
        assert_eq!(&buf[..n], b"{}\n");
        let n = read(&b, &mut buf);
        b.end();
        assert_eq!(n, 0, "the end of the stream");
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
