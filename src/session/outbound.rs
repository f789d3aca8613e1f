//! One request to the peer, and the one way of waiting for its answer.
//!
//! Whoever waits — a host thread that reads the transport itself while it waits (so that no
//! runtime thread has to wake it), a task parked on the answer channel, a handshake whose timer
//! does not count the time credentials were being obtained — goes through one loop: each turn ends
//! with *why* it woke (the answer, the timer, a cancel, progress, a turn of the transport), and
//! each reason is handled in one place. How a turn waits is the only thing that differs.

use super::cancel::Cancels;
use super::pending::Outcome;
use super::{ProgressRoute, Session};
use crate::error::{Error, ErrorKind};
use crate::protocol::RawJson;
use crate::transport::credentials::Obtaining;
use crate::transport::{Drive, Driven, DrivenRequest, RequestShape};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

/// How long a caller driving the transport blocks at a time before it looks at its timer and
/// its cancel again.
const DRIVE_SLICE: Duration = Duration::from_millis(20);

/// One request, its id and answer channel reserved ([`super::pending::PendingTable::register`])
/// and its message encoded by the role.
pub(crate) struct Request<'a> {
    pub(crate) id: u64,
    pub(crate) answer: oneshot::Receiver<Outcome>,
    pub(crate) method: &'a str,
    pub(crate) message: Vec<u8>,
    /// What a transport that routes by it needs to know of a tool call (see `RequestShape`).
    pub(crate) shape: Option<RequestShape>,
    pub(crate) timeout: Option<Duration>,
    /// A bound on the whole wait however often progress starts the timer again.
    pub(crate) max_total: Option<Duration>,
    /// May the request be cancelled with `notifications/cancelled`? (Never `initialize`.)
    pub(crate) cancellable: bool,
    pub(crate) cancels: &'a Cancels,
    /// The request's progress route, when it asked for progress; with `reset`, each progress
    /// notification starts its timer again.
    pub(crate) progress: Option<ProgressRoute>,
    /// A handshake's: its timer does not count the time these credentials were being obtained
    /// (a login that waits on a person), and starts again, whole, after it.
    pub(crate) pause: Option<&'a Obtaining>,
    /// Who it is made for, when not this process's own host: a served client (`mcplug serve`),
    /// named in the log beside the request.
    pub(crate) caller: Option<&'a str>,
}

/// Why a request failed: `unsent` when its message never went out (the role then fails what
/// it sent with it).
pub(crate) struct Failed {
    pub(crate) error: Error,
    pub(crate) unsent: bool,
}

impl From<Error> for Failed {
    fn from(error: Error) -> Self {
        Failed {
            error,
            unsent: false,
        }
    }
}

/// Why a turn of the wait ended.
enum Woke {
    Answer(Outcome),
    /// The answer channel closed without an answer: the connection ended.
    Lost,
    /// The timer ran out.
    Timer,
    /// The host cancelled.
    Cancel,
    /// Progress came for a request whose timer starts again on it.
    Progress,
    /// The transport turned, or its baton came back: look again.
    Turned,
    /// The transport cannot be driven any more: wait on the channel.
    Undriven,
}

/// The request's timer: its deadline, moved by progress and by the obtaining of credentials,
/// never past the bound on the whole wait.
struct Timer<'a> {
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    hard: Option<Instant>,
    /// A pausable timer's start: moved past each obtaining of credentials.
    start: Instant,
    pause: Option<&'a Obtaining>,
}

impl Timer<'_> {
    fn restart(&mut self) {
        if let Some(t) = self.timeout {
            let d = Instant::now() + t;
            self.deadline = Some(self.hard.map_or(d, |h| d.min(h)));
        }
    }

    /// The timer ran out at `now`: where it ends instead when credentials were being obtained
    /// since it started (see `Obtaining::extended`), or `None`: it has run out.
    fn paused(&mut self, now: Instant) -> Option<Instant> {
        let (timeout, pause) = (self.timeout?, self.pause?);
        let later = pause.extended(self.start, timeout, now)?;
        self.start = later - timeout;
        Some(later)
    }
}

impl Session {
    /// Sends one request and waits for its answer, its timer, or a cancel.
    pub(crate) async fn request(&self, req: Request<'_>) -> std::result::Result<RawJson, Failed> {
        // Registered after the end: nothing would ever answer it.
        if self.is_closed() {
            self.pending.forget(req.id);
            return Err(self.answer_lost().into());
        }
        let Request {
            id,
            mut answer,
            method,
            message,
            shape,
            timeout,
            max_total,
            cancellable,
            cancels,
            progress,
            pause,
            caller,
        } = req;
        let reset = progress.as_ref().and_then(|p| p.reset.clone());
        // The route goes however the wait ends.
        let _route = progress.map(|route| {
            self.progress.lock().insert(id.to_string(), route);
            Routed(self, id)
        });
        let start = Instant::now();
        let hard = max_total.map(|m| start + m);
        let mut timer = Timer {
            timeout,
            deadline: timeout.map(|t| {
                let d = start + t;
                hard.map_or(d, |h| d.min(h))
            }),
            hard,
            start,
            pause: pause.filter(|_| timeout.is_some()),
        };
        // `caller` is recorded only when there is one.
        tracing::debug!(target: "mcplug::client", server = self.name().unwrap_or(""), id, method, caller, "request");
        crate::log::sent(self.name(), &message);
        // On a host thread, read the transport ourselves while we wait (see
        // transport/stdio_read.rs, transport/http/direct.rs): then no runtime thread has to
        // wake us for the answer.
        let driven = self.driven();
        let can_drive = reset.is_none() && crate::runtime::on_host_thread() && driven.is_some();
        // The send counts against the same timer and cancel: a peer that stopped reading must
        // not hold a caller past its timeout. A message that fits the pipe goes out at once from
        // this thread, with no send future, timer or cancel to race against it.
        if !driven.is_some_and(|d| d.send_now(&message)) {
            let transport = match self.transport() {
                Ok(t) => t.clone(),
                Err(e) => {
                    // Nothing will answer it: its entry goes now.
                    self.pending.forget(id);
                    return Err(e.into());
                }
            };
            let driver = driven.filter(|_| can_drive);
            self.send(
                transport,
                driver,
                message,
                id,
                shape,
                &timer,
                cancels,
                method,
                cancellable,
            )
            .await?;
        }
        if let Some(d) = driven {
            d.enter_call(can_drive);
        }
        let _leave = driven.map(|d| LeaveCall(&**d, can_drive));
        let mut driver = driven.filter(|_| can_drive);
        // A cancel from another thread ends this thread's blocked read at once. (Nothing to do,
        // and nothing to allocate, for a call that nothing can cancel.)
        let _interrupt = driver
            .filter(|d| cancels.any() && d.drive_interruptible())
            .map(|d| {
                let t = d.clone();
                cancels.interrupt_while(Arc::new(move || t.interrupt_drive()))
            });
        loop {
            let woke = match driver {
                Some(d) => match drive_turn(d, &mut answer, timer.deadline, cancels) {
                    Turn::Woke(woke) => woke,
                    // Let whatever encloses this call (a connect's own timer and cancel) look
                    // at its own futures between turns.
                    Turn::Yield => {
                        tokio::task::yield_now().await;
                        Woke::Turned
                    }
                    Turn::Busy => {
                        let baton = d.baton().expect("a drivable transport has a baton");
                        tokio::select! {
                            biased;
                            r = &mut answer => r.map_or(Woke::Lost, Woke::Answer),
                            _ = baton.notified() => Woke::Turned,
                            // Only a request with a timer needs to wake for it; the driver
                            // hands over the baton whenever it leaves.
                            _ = sleep_until_opt(timer.deadline) => Woke::Turned,
                            _ = cancels.fired() => Woke::Turned,
                        }
                    }
                },
                None => tokio::select! {
                    biased;
                    r = &mut answer => r.map_or(Woke::Lost, Woke::Answer),
                    _ = sleep_until_opt(timer.deadline) => Woke::Timer,
                    _ = cancels.fired() => Woke::Cancel,
                    _ = notified_opt(reset.as_deref()) => Woke::Progress,
                },
            };
            match woke {
                Woke::Answer(r) => return r.map_err(Failed::from),
                Woke::Lost => return Err(self.answer_lost().into()),
                Woke::Timer => {
                    if let Some(later) = timer.paused(Instant::now()) {
                        tracing::debug!(target: "mcplug::client", server = self.name().unwrap_or(""),
                            method, "the timer starts again: credentials were being obtained");
                        timer.deadline = Some(later);
                        continue;
                    }
                    match self.timed_out(id, method, timeout, cancellable).await {
                        Some(e) => return Err(e.into()),
                        // The answer won the race; take it on the next turn.
                        None => timer.deadline = None,
                    }
                }
                Woke::Cancel => {
                    if let Some(e) = self.cancelled_by_host(id, method, cancellable).await {
                        return Err(e.into());
                    }
                }
                Woke::Progress => timer.restart(),
                Woke::Turned => {}
                Woke::Undriven => driver = None,
            }
        }
    }

    /// Writes the request, under its timer and cancel. A write that cannot finish in time is
    /// left to finish in the background (never a partial line), and the peer is then told to
    /// drop the request.
    #[allow(clippy::too_many_arguments)]
    async fn send(
        &self,
        transport: Arc<dyn crate::transport::Transport>,
        driver: Option<&Arc<dyn Driven>>,
        message: Vec<u8>,
        id: u64,
        shape: Option<RequestShape>,
        timer: &Timer<'_>,
        cancels: &Cancels,
        method: &str,
        cancellable: bool,
    ) -> std::result::Result<(), Failed> {
        let mut sending = match driver {
            Some(d) => d.clone().send_driven(message, DrivenRequest { id, shape }),
            None => transport.clone().send(message),
        };
        let sent = tokio::select! {
            r = &mut sending => Some(r),
            _ = sleep_until_opt(timer.deadline) => None,
            _ = cancels.fired() => None,
        };
        match sent {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => {
                self.pending.forget(id);
                let error = if e.kind == ErrorKind::Closed {
                    // The pipe broke because the peer is gone: its exit status and last stderr
                    // lines, which the transport is gathering, say more than EPIPE.
                    self.close_reason_soon(e).await
                } else {
                    self.check_open().err().unwrap_or(e)
                };
                Err(Failed {
                    error,
                    unsent: true,
                })
            }
            None => {
                self.pending.forget(id);
                crate::runtime::spawn(async move {
                    if sending.await.is_ok() && cancellable {
                        let msg =
                            super::cancelled_notice(id, "timed out or cancelled while sending");
                        crate::log::sent(None, &msg);
                        let _ = transport.send(msg).await;
                    }
                });
                Err(if cancels.is_fired() {
                    Error::cancelled_by_host(method)
                } else {
                    Error::timeout(format!(
                        "{method} timed out after {} ms while still being sent (the {} is not reading its input)",
                        timer.timeout.map(|t| t.as_millis()).unwrap_or_default(),
                        self.peer().as_str()
                    ))
                }
                .into())
            }
        }
    }

    /// Why a request's answer channel closed without an answer: the connection's end.
    fn answer_lost(&self) -> Error {
        self.check_open()
            .err()
            .unwrap_or_else(|| Error::closed("the connection is closed"))
    }

    /// The request's timer ran out: forget it and tell the peer. `None` when its answer won the
    /// race (it is then in the channel).
    async fn timed_out(
        &self,
        id: u64,
        method: &str,
        timeout: Option<Duration>,
        cancellable: bool,
    ) -> Option<Error> {
        if !self.pending.forget(id) {
            return None;
        }
        let limit = timeout.map(|t| t.as_millis()).unwrap_or_default();
        if cancellable {
            self.send_cancelled(id, "timeout").await;
        }
        Some(Error::timeout(if cancellable {
            format!(
                "{method} timed out after {limit} ms (the {} was sent notifications/cancelled)",
                self.peer().as_str()
            )
        } else {
            format!("{method} timed out after {limit} ms")
        }))
    }

    /// The host cancelled: forget the request and tell the peer. `None` when its answer won the
    /// race.
    async fn cancelled_by_host(&self, id: u64, method: &str, cancellable: bool) -> Option<Error> {
        if !self.pending.forget(id) {
            return None;
        }
        if cancellable {
            self.send_cancelled(id, "cancelled by the host").await;
        }
        Some(Error::cancelled_by_host(method))
    }
}

/// What a turn of a host thread that reads the transport itself came to.
enum Turn {
    Woke(Woke),
    /// It read: yield, then look again.
    Yield,
    /// Another caller reads: wait for its baton (or the answer, the timer, a cancel).
    Busy,
}

/// One turn of a host thread that reads the transport itself: the answer if it is there, the
/// timer and the cancel looked at, else one slice of reading. Not a future of its own: the hot
/// path's turn costs no state machine.
#[inline]
fn drive_turn(
    d: &Arc<dyn Driven>,
    answer: &mut oneshot::Receiver<Outcome>,
    deadline: Option<Instant>,
    cancels: &Cancels,
) -> Turn {
    match answer.try_recv() {
        Ok(r) => return Turn::Woke(Woke::Answer(r)),
        Err(oneshot::error::TryRecvError::Closed) => return Turn::Woke(Woke::Lost),
        Err(oneshot::error::TryRecvError::Empty) => {}
    }
    let now = Instant::now();
    if deadline.is_some_and(|d| now >= d) {
        return Turn::Woke(Woke::Timer);
    }
    if cancels.is_fired() {
        return Turn::Woke(Woke::Cancel);
    }
    let slice = deadline.map_or(DRIVE_SLICE, |d| {
        d.saturating_duration_since(now).min(DRIVE_SLICE)
    });
    match d.drive(slice, None) {
        Drive::Turned => Turn::Yield,
        Drive::Busy => Turn::Busy,
        Drive::Finished => Turn::Woke(Woke::Undriven),
    }
}

/// A request's progress route, removed however its wait ends.
struct Routed<'a>(&'a Session, u64);

impl Drop for Routed<'_> {
    fn drop(&mut self) {
        self.0.progress.lock().remove(&self.1.to_string());
    }
}

/// Leaves the transport's set of waiting callers however the wait ends.
pub(crate) struct LeaveCall<'a>(pub(crate) &'a dyn Driven, pub(crate) bool);

impl Drop for LeaveCall<'_> {
    fn drop(&mut self) {
        self.0.leave_call(self.1);
    }
}

pub(crate) async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn notified_opt(n: Option<&Notify>) {
    match n {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}

/// For the callers that do not care whether the message went out.
impl From<Failed> for Error {
    fn from(f: Failed) -> Self {
        f.error
    }
}
