//! Started calls: the non-blocking form of `call_tool` and `request`, for hosts with their own
//! event loop (and for many calls in flight from one thread).
//!
//! Starting a call sends it and returns its number at once; its outcome arrives later as an event,
//! `{"type": "completion", "call": N, "result": {...}}` or `{..., "error": {"kind", "message",
//! ...}}`, exactly once per started call — also when the connection closes (then before the final
//! `closed` event). Two ways to run one:
//! - the direct way, for the common case (no timer, no tag, no progress): the request is written
//!   from the caller's thread and its answer is turned into the completion event by whoever reads
//!   it, with no task and no runtime wake-up of its own;
//! - everything else runs [`Shared::send_request`] in a runtime task, with every option honoured.

use super::options::CallOptions;
use super::{cache, mrtr, request, Client, EraState, Shared};
use crate::client::options::TaskMode;
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::{self, era};
use crate::protocol::{codes, RawJson};
use crate::queue::Lines;
use crate::queue::Pulled;
use crate::session::cancel::CancelSignal;
use crate::session::pending::{self, Delivered};
use crate::transport::Drive;
use crate::transport::Transport;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::time::Instant;

impl Client {
    /// Writes the calls started with `defer`. Never blocks on the server.
    pub async fn flush(&self) -> Result<()> {
        self.shared.started.flush_deferred(&self.shared).await
    }

    /// Starts `tools/call`; the outcome arrives as a completion event.
    pub async fn start_call_tool(
        &self,
        name: &str,
        arguments: Option<&RawValue>,
        options: &CallOptions,
    ) -> Result<u64> {
        let shared = &self.shared;
        shared.check_open()?;
        let timeout = options.timeout.or(shared.options.tool_timeout);
        let modern = shared.started.is_modern(shared);
        shared.validate_arguments(name, arguments, options)?;
        // A legacy tool call that may be made a task needs the tool list first, and a result
        // to check against an output schema needs the tool's name: both take the task way.
        let legacy_task =
            !modern && shared.host.wants_tool_tasks() && options.task != TaskMode::Never;
        if timeout.is_none()
            && direct_ok(options)
            && !legacy_task
            && !shared.tools.schemas.any_output()
        {
            let replay = shared
                .started
                .may_resume(shared, "tools/call", modern)
                .then(|| {
                    Box::new(Replay {
                        method: "tools/call".into(),
                        tool: Some((name.to_string(), arguments.map(RawValue::to_owned))),
                        params: None,
                        options: options.clone(),
                    }) as pending::Replay
                });
            return shared
                .started
                .start_direct(shared, "tools/call", options.defer, replay, |id, era| {
                    let meta = era.and_then(|e| e.modern_meta.as_deref());
                    request::encode_tool_call(id, name, arguments, None, false, meta)
                })
                .await;
        }
        let name = name.to_string();
        let arguments: Option<Box<RawValue>> = arguments.map(RawValue::to_owned);
        let options = options.clone();
        Ok(shared
            .started
            .start_task(shared, options, move |shared, options| async move {
                let result = shared
                    .checked_tool_call(&name, arguments.as_deref(), timeout, &options, None)
                    .await?;
                crate::model::tool_result_raw(result, options.format)
            }))
    }

    /// Starts any request; the outcome arrives as a completion event. `all_pages` is refused
    /// (a started call is one request; page with `cursor`).
    pub async fn start_request(
        &self,
        method: &str,
        params: Option<Value>,
        options: &CallOptions,
    ) -> Result<u64> {
        let shared = &self.shared;
        shared.check_open()?;
        if options.all_pages {
            return Err(Error::invalid(
                "option `all_pages` is not available for a started request (it is one request): \
                 follow `nextCursor` with the `cursor` param, or use the blocking request",
            ));
        }
        let timeout = options.timeout.or(shared.options.request_timeout);
        // tools/call is checked against schemas and tools/list teaches them, cacheable results
        // may be answered from the cache, and a modern connection's resources/subscribe is
        // the engine's: the task way.
        let engine_work = matches!(
            method,
            "tools/call" | "tools/list" | "resources/subscribe" | "resources/unsubscribe"
        ) || cache::CACHEABLE.contains(&method);
        if timeout.is_none() && direct_ok(options) && !engine_work {
            let modern = shared.started.is_modern(shared);
            let replay = shared.started.may_resume(shared, method, modern).then(|| {
                Box::new(Replay {
                    method: method.to_string(),
                    tool: None,
                    params: params.clone(),
                    options: options.clone(),
                }) as pending::Replay
            });
            let encode = |id, era: Option<&EraState>| {
                shared.encode_params(id, method, params.clone(), false, era, None)
            };
            return shared
                .started
                .start_direct(shared, method, options.defer, replay, encode)
                .await;
        }
        let method = method.to_string();
        let options = options.clone();
        Ok(shared
            .started
            .start_task(shared, options, move |shared, options| async move {
                // Everything a blocking request does (schemas, rounds, tasks).
                let _ = timeout;
                Client { shared }.request(&method, params, &options).await
            }))
    }

    /// Cancels a started call: its completion event carries a `cancelled` error (unless its
    /// answer won the race) and the server is sent `notifications/cancelled`. Returns whether
    /// the call was still in flight.
    pub async fn cancel_call(&self, call: u64) -> Result<bool> {
        let shared = &self.shared;
        if shared.started.fire(call) {
            return Ok(true);
        }
        // A deferred call never written is simply taken back: nothing to tell the server.
        let unsent = shared.started.withdraw(call);
        if !shared.session.pending.forget_ticket(call) {
            return Ok(false);
        }
        shared
            .started
            .ticket_done(shared, call, Err(Error::cancelled_by_host("the call")));
        if !unsent {
            shared
                .session
                .send_cancelled(call, "cancelled by the host")
                .await;
        }
        Ok(true)
    }

    /// A new descriptor, owned by the caller, readable while events wait (and once the
    /// connection is closed): for hosts that poll instead of blocking in `next_event`.
    pub fn event_fd(&self) -> Result<i32> {
        self.shared.listen.events_wanted(&self.shared);
        self.shared
            .events
            .readiness_fd()
            .map_err(|e| Error::transport(format!("cannot create the event descriptor: {e}")))
    }

    /// Resolves once an event may be pullable (see `EventQueue::changed`): for an async
    /// consumer that pulls with a zero wait, as a manager's pump does.
    pub async fn events_changed(&self) {
        self.shared.listen.events_wanted(&self.shared);
        self.shared.events.changed().await;
    }

    /// Waits like `next_event`, then takes up to `max` events at once, as one JSON array.
    pub fn next_events(&self, max: usize, wait: Option<Duration>) -> Pulled {
        self.shared.listen.events_wanted(&self.shared);
        match self.shared.started.drive_for_events(&self.shared, wait) {
            Some(Waited::Ready) => self.shared.events.pull_many(max, Some(Duration::ZERO)),
            Some(Waited::TimedOut) => Pulled::TimedOut,
            None => self.shared.events.pull_many(max, wait),
        }
    }

    /// Waits like `next_events`, then takes up to `max` events that fit in `buf`, one per line
    /// (see `EventQueue::take_lines`), for a host whose loop reads the event descriptor itself.
    pub fn take_events(&self, max: usize, wait: Option<Duration>, buf: &mut [u8]) -> Lines {
        self.shared.listen.events_wanted(&self.shared);
        let wait = match self.shared.started.drive_for_events(&self.shared, wait) {
            Some(Waited::Ready) => Some(Duration::ZERO),
            Some(Waited::TimedOut) => return Lines::TimedOut,
            None => wait,
        };
        self.shared.events.take_lines(max, wait, buf, true)
    }

    /// The host's event loop reads the server's stdout from now on (a new descriptor of it,
    /// owned by the caller) and hands what it reads to [`Client::feed`]. `not_implemented` for a
    /// transport without one (remote servers).
    pub fn stdout_fd(&self) -> Result<i32> {
        self.shared.listen.events_wanted(&self.shared);
        self.shared.transport()?;
        match self.shared.session.host_read() {
            Some(host) => host.host_reader(),
            None => Err(Error::not_implemented(
                "this connection has no stdout for the host to read (a remote server)",
            )),
        }
    }

    /// Delivers a chunk the host read from `stdout_fd` (an empty one: the host stopped reading),
    /// then takes the events waiting, like `take_events` without waiting. The events this
    /// queued are not signalled on the event descriptor (this thread takes them now).
    pub fn feed(&self, data: &[u8], max: usize, buf: &mut [u8]) -> Lines {
        if self.shared.transport().is_err() {
            return Lines::Closed;
        }
        if let Some(host) = self.shared.session.host_read() {
            if data.is_empty() {
                host.host_release();
            } else {
                let _driving = SelfDriving::start();
                host.feed(data);
            }
        }
        self.shared
            .events
            .take_lines(max, Some(Duration::ZERO), buf, true)
    }
}

/// How a host thread's wait for events ended, when it read the server itself.
pub(super) enum Waited {
    Ready,
    TimedOut,
}

/// How long a host thread waiting for events reads before it looks at its deadline again.
const EVENT_DRIVE_SLICE: Duration = Duration::from_millis(20);
/// How long it waits while someone else reads, before it looks whether it may read again.
const EVENT_BUSY_SLICE: Duration = Duration::from_millis(2);

/// Marks this thread as reading the server for its own events, until dropped (also on unwind).
struct SelfDriving;

impl SelfDriving {
    fn start() -> Self {
        crate::queue::SELF_DRIVING.with(|d| d.set(true));
        SelfDriving
    }
}

impl Drop for SelfDriving {
    fn drop(&mut self) {
        crate::queue::SELF_DRIVING.with(|d| d.set(false));
    }
}

/// Whether a started call can take the direct way: nothing that needs a timer or a task.
fn direct_ok(options: &CallOptions) -> bool {
    options.tag.is_none() && !options.progress && options.format == crate::model::Format::Mcp
}

/// What a direct call keeps to resume itself when its answer asks for more (input, a task, a
/// URL elicitation): the request as the host gave it.
struct Replay {
    method: String,
    /// A tool call: the name and the host's raw arguments.
    tool: Option<(String, Option<Box<RawValue>>)>,
    params: Option<Value>,
    options: CallOptions,
}

/// The host's started calls that are not plain requests: those running as tasks (with their
/// own cancel), and those deferred (written with the next call that is not, or `flush`).
#[derive(Default)]
pub(super) struct StartedCalls {
    running: Mutex<HashMap<u64, Arc<CancelSignal>>>,
    deferred: Mutex<Deferred>,
    has_deferred: AtomicBool,
}

impl StartedCalls {
    /// Fires a running call's cancel; whether it was running.
    fn fire(&self, call: u64) -> bool {
        match self.running.lock().get(&call) {
            Some(signal) => {
                signal.fire();
                true
            }
            None => false,
        }
    }

    /// Takes a deferred call back before it was ever written; whether it was there.
    fn withdraw(&self, call: u64) -> bool {
        self.has_deferred.load(Ordering::Acquire) && self.deferred.lock().withdraw(call)
    }

    fn defer(&self, id: u64, message: &[u8]) {
        let mut d = self.deferred.lock();
        d.bytes.extend_from_slice(message);
        d.ids.push(id);
        let end = d.bytes.len();
        d.ends.push(end);
        self.has_deferred.store(true, Ordering::Release);
    }

    /// `message` with the deferred calls' messages before it, and their ids.
    pub(super) fn take_deferred(&self, message: Vec<u8>) -> (Vec<u8>, Vec<u64>) {
        if !self.has_deferred.load(Ordering::Acquire) {
            return (message, Vec::new());
        }
        let mut d = self.deferred.lock();
        self.has_deferred.store(false, Ordering::Release);
        let mut bytes = std::mem::take(&mut d.bytes);
        bytes.extend_from_slice(&message);
        d.ends.clear();
        (bytes, std::mem::take(&mut d.ids))
    }

    /// The connection closed: nothing deferred is written any more.
    pub(super) fn drop_deferred(&self) {
        *self.deferred.lock() = Default::default();
        self.has_deferred.store(false, Ordering::Release);
    }
}

/// Deferred calls: their messages, back to back, and their ids (to fail them if the write does).
#[derive(Default)]
struct Deferred {
    bytes: Vec<u8>,
    ids: Vec<u64>,
    /// Where each call's message ends in `bytes` (parallel to `ids`).
    ends: Vec<usize>,
}

impl Deferred {
    /// Takes call `id` out before it was ever written. Returns whether it was there.
    fn withdraw(&mut self, id: u64) -> bool {
        let Some(i) = self.ids.iter().position(|&x| x == id) else {
            return false;
        };
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        let end = self.ends[i];
        self.bytes.drain(start..end);
        self.ids.remove(i);
        self.ends.remove(i);
        for e in &mut self.ends[i..] {
            *e -= end - start;
        }
        true
    }
}

impl StartedCalls {
    /// A host thread waiting for events while started calls are in flight reads the server's
    /// output itself (as a caller blocked in a call does, see transport/stdio_read.rs): then a
    /// completion reaches it without a runtime thread reading and waking it — one hand-off per
    /// answer instead of two. It also wakes for events queued by others (timers, stderr), through
    /// the queue's pipe. `None` when it did not read (nothing started, not a host thread, or a
    /// transport that cannot be driven): the caller waits the ordinary way.
    pub(super) fn drive_for_events(&self, conn: &Shared, wait: Option<Duration>) -> Option<Waited> {
        if wait == Some(Duration::ZERO) || conn.events.ready() {
            return None;
        }
        let transport = conn.session.driven()?.clone();
        if transport.tickets() == 0 || tokio::runtime::Handle::try_current().is_ok() {
            return None;
        }
        // A blocked read that another thread's event can end needs no pipe to watch: one `read`
        // per turn instead of `poll` and `read`.
        let interruptible = transport.drive_interruptible();
        let wake = if interruptible {
            None
        } else {
            Some(conn.events.wake_fd()?)
        };
        let _context = crate::runtime::handle().enter();
        let deadline = wait.map(|w| Instant::now() + w);
        transport.enter_call(true);
        let _leave = crate::session::outbound::LeaveCall(&*transport, true);
        let _interrupt = interruptible.then(|| {
            let t = transport.clone();
            conn.events
                .interrupt_while(Arc::new(move || t.interrupt_drive()))
        });
        loop {
            if conn.events.ready() {
                return Some(Waited::Ready);
            }
            if wake.is_some() {
                // A byte an edge pull left in the pipe would wake every poll below at once.
                conn.events.clear_stale();
            }
            let now = Instant::now();
            let left = match deadline {
                Some(d) if now >= d => return Some(Waited::TimedOut),
                Some(d) => d - now,
                None => EVENT_DRIVE_SLICE,
            };
            let turn = {
                let _driving = SelfDriving::start();
                transport.drive(left.min(EVENT_DRIVE_SLICE), wake)
            };
            match turn {
                Drive::Turned => {}
                Drive::Busy => conn.events.wait_ready(left.min(EVENT_BUSY_SLICE)),
                Drive::Finished => {
                    // The stream ended: what is left comes the ordinary way.
                    return if conn.events.ready() {
                        Some(Waited::Ready)
                    } else {
                        None
                    };
                }
            }
        }
    }

    /// The direct way: register the call, write it from this thread. A write that cannot finish
    /// now (the server is not reading) finishes in the background, so starting never blocks.
    async fn start_direct(
        &self,
        conn: &Arc<Shared>,
        method: &str,
        defer: bool,
        replay: Option<pending::Replay>,
        encode: impl FnOnce(u64, Option<&EraState>) -> Vec<u8>,
    ) -> Result<u64> {
        let transport = conn.transport()?.clone();
        let (id, message) = {
            let era = conn.era.read();
            let modern = era.as_ref().is_some_and(|e| e.modern_meta.is_some());
            let id = conn.session.pending.register_ticket(modern, replay);
            (id, encode(id, era.as_ref()))
        };
        tracing::debug!(target: "mcplug::client", server = conn.name().unwrap_or(""), id, method, "request");
        // From here something must read for it (the background, or a host thread waiting for
        // events).
        if let Some(d) = conn.session.driven() {
            d.ticket_started();
        }
        if conn.session.is_closed() {
            // `shut` may have failed the call already, with its completion event; exactly one
            // outcome either way.
            return self.start_failed(conn, id, conn.check_open().unwrap_err());
        }
        if defer {
            self.defer(id, &message);
            return Ok(id);
        }
        let (message, deferred) = self.take_deferred(message);
        match self.write_now(conn, &transport, message, deferred).await {
            Ok(()) => Ok(id),
            Err(e) => self.start_failed(conn, id, e),
        }
    }

    /// Writes the deferred calls now. Never blocks on the server.
    pub(super) async fn flush_deferred(&self, conn: &Arc<Shared>) -> Result<()> {
        conn.check_open()?;
        let (message, deferred) = self.take_deferred(Vec::new());
        if message.is_empty() {
            return Ok(());
        }
        let transport = conn.transport()?.clone();
        self.write_now(conn, &transport, message, deferred).await
    }

    /// Writes `message` (which carries the `deferred` calls first): at once if the pipe takes it,
    /// else in the background, failing the deferred calls if that write fails. An immediate
    /// failure is returned (the deferred calls already failed with it).
    async fn write_now(
        &self,
        conn: &Arc<Shared>,
        transport: &Arc<dyn Transport>,
        message: Vec<u8>,
        deferred: Vec<u64>,
    ) -> Result<()> {
        crate::log::sent(conn.name(), &message);
        let mut sending = transport.clone().send(message);
        let first = std::future::poll_fn(|cx| Poll::Ready(sending.as_mut().poll(cx))).await;
        match first {
            Poll::Ready(Ok(())) => Ok(()),
            Poll::Ready(Err(e)) => {
                self.fail_deferred(conn, deferred, &e);
                Err(e)
            }
            Poll::Pending => {
                let shared = conn.clone();
                crate::runtime::spawn(async move {
                    if let Err(e) = sending.await {
                        shared.started.fail_deferred(&shared, deferred, &e);
                    }
                });
                Ok(())
            }
        }
    }

    /// A write carrying deferred calls failed: each completes with the error.
    pub(super) fn fail_deferred(&self, conn: &Shared, ids: Vec<u64>, e: &Error) {
        for id in ids {
            if conn.session.pending.forget_ticket(id) {
                self.ticket_done(
                    conn,
                    id,
                    Err(conn.check_open().err().unwrap_or_else(|| e.clone())),
                );
            }
        }
    }

    /// The start itself failed: the error is the caller's, and no event follows — unless the
    /// call was already completed by someone else (the connection closing), whose event stands.
    fn start_failed(&self, conn: &Shared, id: u64, e: Error) -> Result<u64> {
        if conn.session.pending.forget_ticket(id) {
            if let Some(t) = conn.session.driven() {
                t.ticket_finished();
            }
            Err(conn.check_open().err().unwrap_or(e))
        } else {
            Ok(id)
        }
    }

    /// The task way: a runtime task runs the request with every option; whoever removes the
    /// call from `started` (the task, or `shut`) queues its completion.
    fn start_task<F, Fut>(&self, conn: &Arc<Shared>, options: CallOptions, run: F) -> u64
    where
        F: FnOnce(Arc<Shared>, CallOptions) -> Fut + std::marker::Send + 'static,
        Fut: Future<Output = Result<RawJson>> + std::marker::Send + 'static,
    {
        let call = conn.session.pending.reserve_id();
        self.run_as_task(conn, call, options, run);
        call
    }

    /// Runs started call `call` in a task, with its own cancel; whoever removes it from
    /// `started` (the task, or `shut`) queues its completion.
    fn run_as_task<F, Fut>(&self, conn: &Arc<Shared>, call: u64, mut options: CallOptions, run: F)
    where
        F: FnOnce(Arc<Shared>, CallOptions) -> Fut + std::marker::Send + 'static,
        Fut: Future<Output = Result<RawJson>> + std::marker::Send + 'static,
    {
        let own = options.started_cancel();
        self.running.lock().insert(call, own);
        let shared = conn.clone();
        crate::runtime::spawn(async move {
            let outcome = run(shared.clone(), options).await;
            if shared.started.running.lock().remove(&call).is_some() {
                shared
                    .events
                    .push_text(completion_text(call, &outcome), false);
            }
        });
    }

    /// Whether a direct call of `method` may need another round, and so keeps a replay.
    fn may_resume(&self, conn: &Shared, method: &str, modern: bool) -> bool {
        if modern {
            era::allows_input_required(method) || (method == "tools/call" && conn.options.tasks)
        } else {
            conn.host.url_elicitation
        }
    }

    fn is_modern(&self, conn: &Shared) -> bool {
        conn.era
            .read()
            .as_ref()
            .is_some_and(|e| e.modern_meta.is_some())
    }

    /// A direct call whose answer asks for more: it goes on as a task (`mrtr::call`, given the
    /// answer as its first round), still cancellable by its number.
    fn resume(
        &self,
        conn: &Arc<Shared>,
        call: u64,
        replay: pending::Replay,
        first: Result<RawJson>,
    ) {
        let Ok(replay) = replay.downcast::<Replay>() else {
            conn.events.push_text(completion_text(call, &first), false);
            return;
        };
        let Replay {
            method,
            tool,
            params,
            options,
        } = *replay;
        let timeout = if tool.is_some() {
            options.timeout.or(conn.options.tool_timeout)
        } else {
            options.timeout.or(conn.options.request_timeout)
        };
        self.run_as_task(conn, call, options, move |shared, options| async move {
            let body = match &tool {
                Some((name, arguments)) => mrtr::Call::Tool {
                    name,
                    arguments: arguments.as_deref(),
                },
                None => mrtr::Call::Params(params),
            };
            match body {
                mrtr::Call::Tool { name, arguments } => {
                    shared
                        .checked_tool_call(name, arguments, timeout, &options, Some(first))
                        .await
                }
                body => {
                    shared
                        .rounds
                        .call(&shared, &method, body, timeout, &options, Some(first))
                        .await
                }
            }
        });
    }

    /// A direct call's answer (or failure), taken out of the pending table by the caller.
    pub(super) fn ticket_done(&self, conn: &Shared, id: u64, outcome: Result<RawJson>) {
        if let Some(t) = conn.session.driven() {
            t.ticket_finished();
        }
        conn.events.push_text(completion_text(id, &outcome), false);
    }

    /// Routes an answer from the pending table.
    pub(super) fn ticket_delivered(&self, conn: &Arc<Shared>, delivered: Delivered, id: &RawValue) {
        match delivered {
            Delivered::Replied => {}
            Delivered::Ticket(call, outcome, modern, replay) => {
                // A modern result's type, looked up once: a plain result is the common case.
                let plain = match &outcome {
                    Ok(r) if modern => matches!(
                        era::result_type(r.as_str()).as_deref(),
                        None | Some("complete")
                    ),
                    _ => true,
                };
                let more = replay.is_some()
                    && match &outcome {
                        Ok(_) if modern => !plain,
                        Err(e) => {
                            (e.kind == ErrorKind::Rpc
                                && e.code == Some(codes::URL_ELICITATION_REQUIRED))
                                // -32020: list the tools again and retry (`tool_headers`).
                                || (super::tool_headers::is_header_mismatch(e)
                                    && conn.tools.param_headers(conn).is_some())
                        }
                        _ => false,
                    };
                if let (true, Some(replay)) = (more, replay) {
                    if let Some(t) = conn.session.driven() {
                        t.ticket_finished();
                    }
                    return self.resume(conn, call, replay, outcome);
                }
                let outcome = match outcome {
                    Ok(result) if !plain => request::check_result_type("the started call", result),
                    other => other,
                };
                self.ticket_done(conn, call, outcome)
            }
            Delivered::Unknown => {
                tracing::debug!(id = id.get(), "ignored a response to no pending request")
            }
        }
    }

    /// The connection closed: every started call still in flight completes with `reason`.
    pub(super) fn fail_started(&self, conn: &Shared, tickets: Vec<u64>, reason: &Error) {
        for id in tickets {
            self.ticket_done(conn, id, Err(reason.clone()));
        }
        let mut tasks: Vec<u64> = conn
            .started
            .running
            .lock()
            .drain()
            .map(|(k, _)| k)
            .collect();
        tasks.sort_unstable();
        for call in tasks {
            conn.events
                .push_text(completion_text(call, &Err(reason.clone())), false);
        }
    }
}

/// `{"type":"completion","call":N,"result":...}`, the result copied as the server's text.
pub(crate) fn completion_text(call: u64, outcome: &Result<RawJson>) -> String {
    match outcome {
        Ok(result) => {
            let result = result.as_str();
            let mut out = Vec::with_capacity(result.len() + 48);
            out.extend_from_slice(b"{\"type\":\"completion\",\"call\":");
            protocol::write_u64(&mut out, call);
            out.extend_from_slice(b",\"result\":");
            out.extend_from_slice(result.as_bytes());
            out.push(b'}');
            // SAFETY: ASCII pieces around a str.
            unsafe { String::from_utf8_unchecked(out) }
        }
        Err(e) => {
            let mut event = json!({"type": "completion", "call": call});
            event["error"] = e.to_json()["error"].take();
            event.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deferred_call_can_be_withdrawn() {
        let mut d = Deferred::default();
        for (id, msg) in [(1u64, &b"one\n"[..]), (2, b"two!\n"), (3, b"three\n")] {
            d.bytes.extend_from_slice(msg);
            d.ids.push(id);
            d.ends.push(d.bytes.len());
        }
        assert!(d.withdraw(2));
        assert!(!d.withdraw(2));
        assert_eq!(d.bytes, b"one\nthree\n");
        assert_eq!(d.ids, vec![1, 3]);
        assert!(d.withdraw(1));
        assert_eq!(d.bytes, b"three\n");
        assert_eq!(d.ends, vec![6]);
    }

    #[test]
    fn completion_events_are_json() {
        let ok = completion_text(7, &Ok(RawJson::from_value(&json!({"content": [1]}))));
        let v: Value = serde_json::from_str(&ok).unwrap();
        assert_eq!(
            v,
            json!({"type": "completion", "call": 7, "result": {"content": [1]}})
        );
        let err = completion_text(8, &Err(Error::timeout("late")));
        let v: Value = serde_json::from_str(&err).unwrap();
        assert_eq!(
            v,
            json!({"type": "completion", "call": 8, "error": {"kind": "timeout", "message": "late"}})
        );
    }
}
