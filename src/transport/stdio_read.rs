//! The read side of a stdio server's stdout, shared by a background task and by the callers
//! waiting for answers (a leader/follower scheme).
//!
//! Why: when a runtime worker reads the answer and then wakes the host thread that waits for it,
//! every call pays a second thread's wake-up (epoll, scheduler, futex) on top of the pipe round
//! trip. Here a waiting caller reads the pipe itself, on its own thread: it blocks in `read` (the
//! waker of `stdio_wake` ends the read at the caller's turn's end; where that is not available it
//! polls first) and delivers every line — its own answer and anyone else's — until its answer has
//! come. One caller drives at a time (the others wait for their answer or for the baton); when
//! nobody waits, the background task owns the pipe (registered with the runtime's reactor), so
//! notifications, server requests and the end of the stream are never missed. The background task
//! steps aside (deregisters) as soon as it sees a caller, and takes over again once no caller has
//! been seen for a moment, so back-to-back calls never wake it.
//!
//! A host with its own event loop (Node) may take the pipe over ([`SharedReader::host_take`]):
//! its loop reads stdout and hands every chunk to [`SharedReader::feed`], so an answer reaches
//! the host's thread without a runtime thread reading it and waking that thread. Nobody else
//! reads then; callers waiting for answers get them from the host's feeding. When the host stops
//! (end of stream, error, close) it says so, and the background reads again (the end of the
//! stream is found again by a read that returns 0).

use super::stdio_wake::Blocked;
use super::{Drive, Inbound};
use crate::error::Error;
use crate::sys;
use parking_lot::Mutex;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Weak;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::Notify;

/// How often the background task looks whether callers have stopped driving.
const LOOK_BACK_EVERY: Duration = Duration::from_millis(10);
const READ_CHUNK: usize = 64 << 10;
/// A reader that left this recently is expected back: started calls do not wake the background.
const REREAD_WINDOW: Duration = Duration::from_millis(2);

pub(crate) struct SharedReader {
    fd: OwnedFd,
    /// A blocking description of the same pipe, for the lone caller's `read` (see
    /// `stdio_wake`); `None` where /proc cannot give one (the caller polls first then).
    blocked: Option<std::sync::Arc<Blocked>>,
    /// Held by whoever reads; never across an `.await`.
    state: Mutex<ReadState>,
    /// Callers currently waiting for an answer on this connection.
    waiters: AtomicUsize,
    /// Those of them that can read for themselves (host threads).
    drivers: AtomicUsize,
    /// Tells a caller waiting alone that it is its turn to read.
    baton: Notify,
    /// Tells the background task that a second caller arrived.
    wake_background: Notify,
    /// The background task owns the pipe now (it need not be woken for new callers).
    background_active: AtomicBool,
    /// Started calls in flight: not waiters (nobody blocks on them), but someone must read.
    tickets: AtomicUsize,
    /// When a caller that could read last left (ns since `epoch`): a host thread that pulls
    /// events in a loop leaves and comes back within microseconds, and should not hand the pipe
    /// to the background (a runtime thread's wake-up) each time.
    driver_left: AtomicU64,
    epoch: std::time::Instant,
    finished: AtomicBool,
    /// The host's own loop reads stdout (see `host_take`): nobody else reads.
    host: AtomicBool,
    sink: Weak<dyn Inbound>,
    max: usize,
}

struct ReadState {
    /// What one `read` may fill: READ_CHUNK of capacity, never zeroed (its pages are touched only
    /// as reads fill them; zeroing them all cost a cold start 15 page faults). Empty between reads.
    chunk: Vec<u8>,
    /// The start of a line that has not ended yet.
    partial: Vec<u8>,
}

/// Why the stream ended, for the transport to describe.
pub(crate) type End = Error;

struct FdRef(RawFd);

impl AsRawFd for FdRef {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl SharedReader {
    pub(crate) fn new(fd: OwnedFd, sink: Weak<dyn Inbound>, max: usize) -> Self {
        // Only the runtime's reactor and the polls below wait on this description. (Failing,
        // which a pipe's does not, would only make a read wait for data.)
        let _ = sys::fd::set_nonblocking(&fd, true);
        SharedReader {
            blocked: Blocked::open(fd.as_fd()),
            fd,
            state: Mutex::new(ReadState {
                chunk: Vec::with_capacity(READ_CHUNK),
                partial: Vec::new(),
            }),
            waiters: AtomicUsize::new(0),
            drivers: AtomicUsize::new(0),
            baton: Notify::new(),
            wake_background: Notify::new(),
            background_active: AtomicBool::new(false),
            tickets: AtomicUsize::new(0),
            driver_left: AtomicU64::new(0),
            epoch: std::time::Instant::now(),
            finished: AtomicBool::new(false),
            host: AtomicBool::new(false),
            sink,
            max,
        }
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub(crate) fn baton(&self) -> &Notify {
        &self.baton
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// A caller starts waiting for an answer.
    /// A caller starts waiting for an answer; `can_drive` when it can read for itself.
    pub(crate) fn enter(&self, can_drive: bool) {
        if can_drive {
            self.drivers.fetch_add(1, Ordering::SeqCst);
        }
        let waiting = self.waiters.fetch_add(1, Ordering::SeqCst) + 1;
        if waiting <= 2 && !self.lone_driver() {
            // From now on the background reads for everyone.
            self.wake_background();
        }
    }

    /// A caller got its answer (or gave up). If one is left, either it reads for itself (it can
    /// drive) or the background reads for it.
    pub(crate) fn leave(&self, could_drive: bool) {
        if could_drive {
            self.driver_left.store(self.now_ns(), Ordering::Relaxed);
            self.drivers.fetch_sub(1, Ordering::SeqCst);
        }
        match self.waiters.fetch_sub(1, Ordering::SeqCst) {
            2 => {
                if self.lone_driver() {
                    self.baton.notify_one();
                } else {
                    self.wake_background();
                }
            }
            // The last caller left while started calls are in flight: the background reads
            // for them from now on — unless it was a reader, likely to come back at once (then
            // the background's look-back covers a reader that does not).
            1 if !could_drive && self.tickets.load(Ordering::SeqCst) > 0 => self.wake_background(),
            _ => {}
        }
    }

    /// A started call is in flight: if no caller reads, the background must.
    pub(crate) fn ticket_started(&self) {
        self.tickets.fetch_add(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) == 0 && !self.reader_just_left() {
            self.wake_background();
        }
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A caller that could read left less than `REREAD_WINDOW` ago.
    fn reader_just_left(&self) -> bool {
        let left = self.driver_left.load(Ordering::Relaxed);
        left != 0 && self.now_ns().saturating_sub(left) < REREAD_WINDOW.as_nanos() as u64
    }

    pub(crate) fn ticket_finished(&self) {
        self.tickets.fetch_sub(1, Ordering::SeqCst);
    }

    /// Started calls in flight.
    pub(crate) fn tickets(&self) -> usize {
        self.tickets.load(Ordering::SeqCst)
    }

    /// Makes sure the background task reads, without waking a runtime thread for nothing when
    /// it already does (a started call per message would otherwise cost a wake-up each).
    fn wake_background(&self) {
        if !self.background_active.load(Ordering::SeqCst) && !self.host.load(Ordering::SeqCst) {
            self.wake_background.notify_one();
        }
    }

    /// Exactly one caller waits, and it can read for itself.
    fn lone_driver(&self) -> bool {
        self.waiters.load(Ordering::SeqCst) == 1 && self.drivers.load(Ordering::SeqCst) == 1
    }

    /// One turn for a waiting caller. Only a caller that waits alone (and can) drives: it reads
    /// stdout for up to `wait` (a blocking read the waker ends, or poll then read when the host's
    /// wake descriptor `also` must be watched too) and delivers what came. With several callers the
    /// background task reads (one runtime thread serving them all beats a relay of callers
    /// handing the pipe to each other). Returns the end of the stream when it saw it. `also` must
    /// stay open until this returns.
    pub(crate) fn drive(&self, wait: Duration, also: Option<RawFd>) -> (Drive, Option<End>) {
        if self.is_finished() {
            return (Drive::Finished, None);
        }
        if !self.lone_driver() || self.host.load(Ordering::SeqCst) {
            return (Drive::Busy, None);
        }
        let Some(mut state) = self.state.try_lock() else {
            return (Drive::Busy, None);
        };
        let blocking = self
            .blocked
            .as_ref()
            .filter(|b| also.is_none() && !wait.is_zero() && b.begin(wait));
        let outcome = match blocking {
            // Read as a blocking client does: one system call that returns with the data; the
            // waker ends it at `wait` if nothing comes.
            Some(blocked) => {
                let outcome = self.read_from(blocked.fd(), &mut state, false);
                blocked.end();
                outcome
            }
            None => {
                let also = also.map(|fd| {
                    // SAFETY: the caller's descriptor stays open through this call (see
                    // `drive`'s contract); it is only polled.
                    unsafe { BorrowedFd::borrow_raw(fd) }
                });
                if !sys::fd::wait_readable(self.fd.as_fd(), also, wait) {
                    return (Drive::Turned, None);
                }
                // One read: poll is level-triggered, so what is left is found on the next turn,
                // and the caller whose answer just came does not pay for a read that finds the
                // pipe empty.
                self.read_some(&mut state, false)
            }
        };
        match outcome {
            None => (Drive::Turned, None),
            Some(end) => {
                drop(state);
                (Drive::Finished, self.claim_end(end))
            }
        }
    }

    /// Whether a blocked turn of [`SharedReader::drive`] can be ended from another thread.
    pub(crate) fn interruptible(&self) -> bool {
        self.blocked.as_ref().is_some_and(|b| b.usable())
    }

    /// Ends the blocked turn of [`SharedReader::drive`] now, or the next one at once: the wake
    /// byte goes into the pipe whether or not the reader has started its `read` yet.
    pub(crate) fn interrupt(&self) {
        if let Some(b) = &self.blocked {
            b.wake_now();
        }
    }

    /// The background reader: it owns the pipe (registered with the reactor) unless exactly one
    /// caller waits and can read for itself. Returns the end of the stream, or `None` when a
    /// caller saw it first (and reported it).
    pub(crate) async fn background(&self) -> Option<End> {
        loop {
            // Nobody waits, but a caller that read for itself left a moment ago: it is likely to
            // be back at once (a host taking its events and starting the next calls), and taking
            // the pipe meanwhile would cost a registration, a hand-back and wake-ups for nothing.
            let expected_back = self.waiters.load(Ordering::SeqCst) == 0 && self.reader_just_left();
            if !self.lone_driver() && !self.host.load(Ordering::SeqCst) && !expected_back {
                // SAFETY: the descriptor is owned by `self`, which outlives this registration (it
                // is dropped at the end of this block).
                let registered = unsafe {
                    AsyncFd::register_with_interest(FdRef(self.fd.as_raw_fd()), Interest::READABLE)
                };
                let afd = match registered {
                    Ok(a) => {
                        self.background_active.store(true, Ordering::SeqCst);
                        a
                    }
                    Err(e) => {
                        return self.background_end(Error::transport(format!(
                            "cannot watch the server's stdout: {e}"
                        )))
                    }
                };
                loop {
                    if self.is_finished() {
                        break;
                    }
                    if self.host.load(Ordering::SeqCst) {
                        // The host's loop reads from now on (`host_take` waits for this).
                        self.background_active.store(false, Ordering::SeqCst);
                        break;
                    }
                    if self.lone_driver() {
                        // Step aside, and make sure the lone caller knows it is its turn. A
                        // caller arriving meanwhile saw the flag still set and did not wake us:
                        // look again after clearing it (both sides use SeqCst for this).
                        self.background_active.store(false, Ordering::SeqCst);
                        if !self.lone_driver() {
                            self.background_active.store(true, Ordering::SeqCst);
                            continue;
                        }
                        self.baton.notify_one();
                        break;
                    }
                    let mut guard = tokio::select! {
                        // The order is fixed (no random pick per message).
                        biased;
                        g = afd.readable() => match g {
                            Ok(g) => g,
                            Err(e) => return self.background_end(Error::transport(format!("watching the server's stdout failed: {e}"))),
                        },
                        _ = self.wake_background.notified() => continue,
                    };
                    // `Some(outcome)` when we could read; the lock is never held across an await.
                    let turn = self
                        .state
                        .try_lock()
                        .map(|mut state| self.read_some(&mut state, true));
                    match turn {
                        Some(None) => guard.clear_ready(),
                        Some(Some(end)) => return self.background_end(end),
                        // A lone caller is finishing its turn; it gives the pipe back at once.
                        None => tokio::time::sleep(Duration::from_millis(1)).await,
                    }
                }
                drop(afd);
            }
            if self.is_finished() {
                // A caller saw the end and reported it; this task (and its hold on the pipe) ends.
                return None;
            }
            if self.host.load(Ordering::SeqCst) {
                // Until the host stops reading (`host_release` wakes us); no look-back timer.
                self.wake_background.notified().await;
                continue;
            }
            let look_back = if expected_back {
                REREAD_WINDOW
            } else {
                LOOK_BACK_EVERY
            };
            tokio::select! {
                _ = tokio::time::sleep(look_back) => {}
                _ = self.wake_background.notified() => {}
            }
        }
    }

    /// The host's loop reads stdout from now on and hands each chunk to [`SharedReader::feed`].
    /// Returns once nobody else can read (the background stepped aside, a caller's turn ended),
    /// so that no byte is read out of order.
    pub(crate) fn host_take(&self) -> Result<(), Error> {
        if self.is_finished() {
            return Err(Error::closed("the server's stdout has ended"));
        }
        self.host.store(true, Ordering::SeqCst);
        self.wake_background.notify_one();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        loop {
            {
                // Waits for a read in progress (the background's, or a caller's turn).
                let _state = self.state.lock();
                if !self.background_active.load(Ordering::SeqCst) {
                    return Ok(());
                }
            }
            if std::time::Instant::now() > deadline {
                self.host_release();
                return Err(Error::transport(
                    "the library's reader of the server's stdout did not step aside",
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// The host stopped reading (the end of the stream, an error, or it closes): the background
    /// (or a waiting caller) reads again.
    pub(crate) fn host_release(&self) {
        if self.host.swap(false, Ordering::SeqCst) {
            self.wake_background.notify_one();
            self.baton.notify_one();
        }
    }

    /// Delivers a chunk the host's loop read from stdout (in order). `Some` when the stream
    /// cannot go on (a message over the size limit).
    pub(crate) fn feed(&self, data: &[u8]) -> Option<End> {
        if self.is_finished() {
            return None;
        }
        let mut state = self.state.lock();
        let end = self.consume(&mut state, data)?;
        drop(state);
        self.claim_end(end)
    }

    fn background_end(&self, end: End) -> Option<End> {
        self.claim_end(end)
    }

    /// The first to see the end of the stream reports it; everyone else just stops.
    fn claim_end(&self, end: End) -> Option<End> {
        if self.finished.swap(true, Ordering::AcqRel) {
            None
        } else {
            Some(end)
        }
    }

    /// Reads once, or with `drain` until the pipe is empty (the reactor's readiness is edge-
    /// triggered; a short read says it is empty), delivering every complete line. `Some` at the end of the stream or on a fatal
    /// error.
    fn read_some(&self, state: &mut ReadState, drain: bool) -> Option<End> {
        self.read_from(self.fd.as_fd(), state, drain)
    }

    /// [`SharedReader::read_some`] from `fd` (the non-blocking descriptor, or the blocking one).
    fn read_from(&self, fd: BorrowedFd<'_>, state: &mut ReadState, drain: bool) -> Option<End> {
        let ReadState { chunk, partial } = state;
        loop {
            let room = chunk.capacity();
            let n = match sys::fd::read_spare(fd, chunk) {
                Ok(0) => return Some(Error::closed("the server closed its stdout")),
                Ok(n) => n,
                Err(err) => {
                    return match err.kind() {
                        std::io::ErrorKind::WouldBlock => None,
                        std::io::ErrorKind::Interrupted => continue,
                        _ => Some(Error::transport(format!(
                            "reading the server's stdout failed: {err}"
                        ))),
                    }
                }
            };
            let end = self.lines(partial, chunk);
            chunk.clear();
            if end.is_some() {
                return end;
            }
            // A pipe's read returns all it holds up to the size asked for: a short read left it
            // empty, and whatever the server writes next is a new readiness edge. Reading again
            // would only find EAGAIN (one syscall per answer).
            if !drain || n < room {
                return None;
            }
        }
    }

    /// Delivers every complete line of `data` (after what `partial` holds) and keeps the rest.
    fn lines(&self, partial: &mut Vec<u8>, data: &[u8]) -> Option<End> {
        // The waker's bytes, wherever they landed (even inside a line the server is writing).
        match self.blocked.as_ref().and_then(|b| b.strip(data)) {
            Some(kept) => self.split_lines(partial, &kept),
            None => self.split_lines(partial, data),
        }
    }

    fn split_lines(&self, partial: &mut Vec<u8>, mut data: &[u8]) -> Option<End> {
        while let Some(i) = memchr::memchr(b'\n', data) {
            if partial.len() + i > self.max {
                return Some(self.too_big());
            }
            if partial.is_empty() {
                self.deliver(&data[..i]);
            } else {
                partial.extend_from_slice(&data[..i]);
                self.deliver(partial);
                partial.clear();
                if partial.capacity() > (1 << 20) {
                    partial.shrink_to(64 << 10);
                }
            }
            data = &data[i + 1..];
        }
        if partial.len() + data.len() > self.max {
            return Some(self.too_big());
        }
        partial.extend_from_slice(data);
        None
    }

    fn consume(&self, state: &mut ReadState, data: &[u8]) -> Option<End> {
        self.lines(&mut state.partial, data)
    }

    fn too_big(&self) -> Error {
        Error::transport(format!(
            "the server sent a message larger than max_message_bytes ({} bytes); \
             the connection was closed because the rest of the stream cannot be trusted",
            self.max
        ))
    }

    fn deliver(&self, line: &[u8]) {
        let line = match line.last() {
            Some(b'\r') => &line[..line.len() - 1],
            _ => line,
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        if let Some(sink) = self.sink.upgrade() {
            sink.message(line);
        }
    }
}
