//! The direct path of the Streamable HTTP transport: a request of the 2026-07-28 era whose
//! caller (a host thread blocked in a call) waits for its answer is POSTed and read by that
//! caller, on its own thread, over an HTTP/1.1 keep-alive connection of the transport's own —
//! plain, or TLS for `https` (see `link`: rustls over the same non-blocking socket, sessions
//! resumed from the store the general path shares).
//!
//! Why: on the general path (reqwest on the runtime) every call hops to the runtime's worker and
//! back — an eventfd write to wake the worker, its epoll wake-ups, a futex pair to wake the
//! caller — and pays for reqwest's layers (URL re-parsing, redirect and retry policies, the
//! pool's bookkeeping), about 120k instructions and 3.4 context switches per call against
//! peer-bench's server. Here the caller writes the POST, polls the socket between the turns of
//! its wait (its timer and its cancel are looked at between turns, as with stdio's
//! `stdio_read`), parses the response (head with `httparse`, body framing, SSE events) and
//! delivers every message to the connection itself, until its answer has come.
//!
//! Only where nothing is lost: `http` and `https` URLs without userinfo, not through a proxy
//! (a proxied URL goes through reqwest), and modern requests only (no session, no resumption: a
//! broken stream is the request's failure, and closing it is the cancellation). Everything
//! else — the legacy era, started calls, callers on runtime threads — takes the general path.
//! So does a request whose TLS failed before its answer (a certificate refused, an alert), and
//! every later one: the general path's error says why, with what was trusted.
//!
//! A host name is never looked up on the caller's thread (a lookup can take seconds and no
//! deadline ends it): a runtime thread looks it up, requests take the general path until its
//! addresses are known, and they are looked up again in the background before they go stale.
//!
//! Connections: a response stream is read on after the answer only when its end is already
//! there; otherwise the connection is kept aside with its unread end, and taken again by a
//! later request once that end has arrived (looked at without blocking), or closed after
//! `DRAIN`. Idle connections are given up after `IDLE_CONNECTION` (as on the general path), and
//! one idle for a while is checked for a close by the server before it is used again.

mod link;
mod response;

use super::HttpTransport;
use crate::error::Error;
use crate::sys::{self, fd::Ready};
use crate::transport::remote::{self, Outgoing};
use link::{Link, TlsTo};
use parking_lot::Mutex;
use reqwest::header::HeaderMap;
use reqwest::StatusCode;
pub use response::fuzz_response;
use response::{Framing, Parsed, Payload, Reading, Sse, OVER_LIMIT};
use std::io::ErrorKind as IoKind;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// How long the addresses of a host name are used before it is looked up again.
const RESOLVED_FOR: Duration = Duration::from_secs(60);
/// Addresses this old are looked up again in the background, while still used.
const REFRESH_AFTER: Duration = Duration::from_secs(45);
/// Idle connections kept for later requests.
const MAX_IDLE: usize = 64;
/// A connection idle longer than this is checked for a close by the server before reuse.
const CHECK_AFTER: Duration = Duration::from_millis(100);
/// How long a connection whose response stream has not ended yet is kept for its end.
const DRAIN: Duration = Duration::from_secs(1);
/// The largest response head accepted.
const MAX_HEAD: usize = 64 << 10;
/// The part of an error body kept for the message, and how long it is waited for.
const MAX_ERROR_BODY: usize = 64 << 10;
const ERROR_BODY_WAIT: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 16 << 10;

/// The direct path of one transport (see the module's doc).
pub(super) struct Direct {
    url: reqwest::Url,
    /// `POST <path> HTTP/1.1`, host, user agent, the entry's headers, accept and content type:
    /// the part of every request head that never changes.
    head: Vec<u8>,
    pool: Mutex<Vec<Conn>>,
    /// The exchanges being driven by their callers, one per waiting thread.
    driven: Mutex<Vec<Arc<Driven>>>,
    /// Cleared when the server redirects: requests then go by the general path.
    enabled: AtomicBool,
    /// The addresses of the URL's host, and when they were looked up (a runtime thread looks
    /// them up: a lookup can take seconds, and no deadline could end it on a host's thread).
    resolved: Arc<Mutex<Option<Resolved>>>,
    /// A lookup is under way.
    resolving: Arc<AtomicBool>,
    /// The URL's host is an IP address: its addresses, no lookup needed.
    literal: Option<Vec<SocketAddr>>,
    /// For an `https` URL: the TLS of its connections.
    tls: Option<TlsTo>,
}

/// A host's addresses, and when they were looked up.
type Resolved = (Vec<SocketAddr>, Instant);

struct Conn {
    sock: Link,
    since: Instant,
    /// The reading state, kept for its buffer; with `pending`, the unread end of the last
    /// response (its answer came before its end did).
    reading: Reading,
    pending: bool,
}

pub(super) struct Driven {
    thread: ThreadId,
    id: String,
    cancelled: AtomicBool,
    exchange: Mutex<Exchange>,
}

impl Direct {
    /// The direct path for `url`, when it can serve it (see the module's doc).
    /// `proxied`: the URL goes through a proxy (then reqwest's path takes it); `trust`: the
    /// TLS configuration of an `https` URL.
    pub(super) fn new(
        url: &reqwest::Url,
        headers: &HeaderMap,
        proxied: bool,
        trust: &crate::transport::tls::Trust,
    ) -> Option<Direct> {
        let tls = match url.scheme() {
            "http" => None,
            "https" => Some(TlsTo::new(url, trust.config.clone())?),
            _ => return None,
        };
        if !url.username().is_empty()
            || url.password().is_some()
            || url.host_str().is_none()
            || proxied
        {
            return None;
        }
        for framing in [
            "content-length",
            "transfer-encoding",
            "connection",
            "expect",
        ] {
            if headers.contains_key(framing) {
                return None;
            }
        }
        let mut head = Vec::with_capacity(256);
        head.extend_from_slice(b"POST ");
        head.extend_from_slice(url.path().as_bytes());
        if let Some(q) = url.query() {
            head.push(b'?');
            head.extend_from_slice(q.as_bytes());
        }
        head.extend_from_slice(b" HTTP/1.1\r\n");
        let mut line = |name: &[u8], value: &[u8]| {
            head.extend_from_slice(name);
            head.extend_from_slice(b": ");
            head.extend_from_slice(value);
            head.extend_from_slice(b"\r\n");
        };
        if !headers.contains_key("host") {
            let host = url.host_str().unwrap_or_default();
            match url.port() {
                Some(port) => line(b"host", format!("{host}:{port}").as_bytes()),
                None => line(b"host", host.as_bytes()),
            }
        }
        for (name, value) in headers {
            line(name.as_str().as_bytes(), value.as_bytes());
        }
        if !headers.contains_key("user-agent") {
            line(
                b"user-agent",
                concat!("mcplug/", env!("CARGO_PKG_VERSION")).as_bytes(),
            );
        }
        line(b"accept", super::ACCEPT_BOTH.as_bytes());
        line(b"content-type", b"application/json");
        let host = url.host_str().unwrap_or_default();
        let literal = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .ok()
            .and_then(|_| url.socket_addrs(|| None).ok());
        Some(Direct {
            url: url.clone(),
            head,
            pool: Mutex::new(Vec::new()),
            driven: Mutex::new(Vec::new()),
            enabled: AtomicBool::new(true),
            resolved: Arc::new(Mutex::new(None)),
            resolving: Arc::new(AtomicBool::new(false)),
            literal,
            tls,
        })
    }

    /// Starts the exchange of one modern request for the calling thread, which drives it.
    /// `extra` are the request's own header lines (`name: value\r\n` each).
    pub(super) fn start(
        &self,
        t: &HttpTransport,
        line: &[u8],
        out: Outgoing,
        id: String,
        extra: &[u8],
    ) {
        let mut request = Vec::with_capacity(self.head.len() + extra.len() + line.len() + 32);
        request.extend_from_slice(&self.head);
        request.extend_from_slice(extra);
        request.extend_from_slice(b"content-length: ");
        crate::protocol::write_u64(&mut request, line.len() as u64);
        request.extend_from_slice(b"\r\n\r\n");
        let body_at = request.len();
        request.extend_from_slice(line);
        let mut exchange = Exchange {
            id: id.clone(),
            out,
            request,
            body_at,
            written: 0,
            sent: false,
            sock: None,
            reused: false,
            connecting: None,
            reading: Reading::new(),
            status: 0,
            payload: Payload::Json(Vec::new()),
            answered: false,
            finished: false,
            error_deadline: None,
        };
        if let Some((sock, reading)) = self.checkout() {
            exchange.sock = Some(sock);
            exchange.reading = reading;
            exchange.reused = true;
            // Small requests go out at once; a write that cannot finish goes on in `drive`.
            exchange.write(t);
        }
        let thread = std::thread::current().id();
        let driven = Arc::new(Driven {
            thread,
            id,
            cancelled: AtomicBool::new(false),
            exchange: Mutex::new(exchange),
        });
        let mut all = self.driven.lock();
        // A caller that left without `leave` (it failed before waiting) leaves nothing behind.
        all.retain(|d| d.thread != thread);
        all.push(driven);
    }

    pub(super) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub(super) fn disable(&self) {
        self.enabled.store(false, Ordering::Relaxed);
        self.pool.lock().clear();
    }

    fn mine(&self) -> Option<Arc<Driven>> {
        let thread = std::thread::current().id();
        self.driven
            .lock()
            .iter()
            .find(|d| d.thread == thread)
            .cloned()
    }

    /// One turn of the calling thread's exchange: `false` when it has none that is still going
    /// (its answer came, it failed, or the answer comes another way).
    pub(super) fn drive(&self, t: &HttpTransport, wait: Duration) -> bool {
        let Some(driven) = self.mine() else {
            return false;
        };
        let mut exchange = driven.exchange.lock();
        if exchange.finished || driven.cancelled.load(Ordering::Acquire) {
            return false;
        }
        exchange.turn(t, wait);
        true
    }

    /// The calling thread stopped waiting: its connection goes back to the pool when its
    /// response was read (or its end is still to come); an exchange left unanswered is closed,
    /// which for a modern request is its cancellation.
    pub(super) fn leave(&self) {
        let thread = std::thread::current().id();
        let driven = {
            let mut all = self.driven.lock();
            let Some(i) = all.iter().position(|d| d.thread == thread) else {
                return;
            };
            all.swap_remove(i)
        };
        let mut exchange = driven.exchange.lock();
        // A connection whose request was not all written (the server answered early) cannot
        // take another one.
        if !exchange.finished || driven.cancelled.load(Ordering::Acquire) || !exchange.sent {
            return;
        }
        let Some(sock) = exchange.sock.take() else {
            return;
        };
        let mut reading = std::mem::replace(&mut exchange.reading, Reading::new());
        drop(exchange);
        let pending = match reading.framing {
            Framing::Done if reading.keep_alive && reading.unread().is_empty() => false,
            Framing::Done | Framing::Close | Framing::Head => return,
            _ if !reading.keep_alive => return,
            _ => true,
        };
        if !pending {
            reading.reset();
        }
        let mut pool = self.pool.lock();
        if pool.len() < MAX_IDLE {
            pool.push(Conn {
                sock,
                since: Instant::now(),
                reading,
                pending,
            });
        }
    }

    /// A modern request was given up (`notifications/cancelled`): closing its stream is the
    /// cancellation. Whether it was one of the direct path's.
    pub(super) fn cancel(&self, id: &str) -> bool {
        let driven = {
            let mut all = self.driven.lock();
            let Some(i) = all.iter().position(|d| d.id == id) else {
                return false;
            };
            all.swap_remove(i)
        };
        driven.cancelled.store(true, Ordering::Release);
        if let Some(mut exchange) = driven.exchange.try_lock() {
            exchange.sock = None;
        }
        true
    }

    /// Closes everything (the transport is closing).
    pub(super) fn close(&self) {
        let all = std::mem::take(&mut *self.driven.lock());
        for driven in all {
            driven.cancelled.store(true, Ordering::Release);
            if let Some(mut exchange) = driven.exchange.try_lock() {
                exchange.sock = None;
            }
        }
        self.pool.lock().clear();
    }

    /// A kept-alive connection to use (the unread end of its last response read first), with
    /// its reading state (for the buffer).
    fn checkout(&self) -> Option<(Link, Reading)> {
        let mut pool = self.pool.lock();
        let now = Instant::now();
        let mut i = pool.len();
        while i > 0 {
            i -= 1;
            let age = now.saturating_duration_since(pool[i].since);
            if age >= remote::IDLE_CONNECTION {
                pool.swap_remove(i);
                continue;
            }
            let conn = &mut pool[i];
            if conn.pending {
                match conn.reading.finish_now(&mut conn.sock) {
                    Some(true) => {
                        conn.pending = false;
                        conn.reading.reset();
                    }
                    Some(false) if age < DRAIN => continue,
                    _ => {
                        pool.swap_remove(i);
                        continue;
                    }
                }
            } else if age >= CHECK_AFTER && pool[i].sock.closed_by_peer() {
                pool.swap_remove(i);
                continue;
            }
            let conn = pool.swap_remove(i);
            return Some((conn.sock, conn.reading));
        }
        None
    }

    /// Whether the host's addresses are at hand, so that a request can go the direct way
    /// without a lookup on the caller's thread. A host name not looked up yet (or long ago) is
    /// looked up on a runtime thread meanwhile; until then requests go by the general path.
    pub(super) fn addresses_ready(&self) -> bool {
        if self.literal.is_some() {
            return true;
        }
        let age = self.resolved.lock().as_ref().map(|(_, at)| at.elapsed());
        if age.is_none_or(|a| a >= REFRESH_AFTER) {
            self.look_up();
        }
        age.is_some_and(|a| a < RESOLVED_FOR)
    }

    /// Looks the host name up on a runtime thread (one lookup at a time).
    fn look_up(&self) {
        if self.resolving.swap(true, Ordering::SeqCst) {
            return;
        }
        let (url, resolved, resolving) = (
            self.url.clone(),
            self.resolved.clone(),
            self.resolving.clone(),
        );
        crate::runtime::spawn(async move {
            let found = tokio::task::spawn_blocking(move || url.socket_addrs(|| None)).await;
            if let Ok(Ok(addrs)) = found {
                if !addrs.is_empty() {
                    *resolved.lock() = Some((addrs, Instant::now()));
                }
            }
            resolving.store(false, Ordering::SeqCst);
        });
    }

    /// The host and port to connect to, as [`Direct::addresses_ready`] found them.
    fn addresses(&self) -> std::io::Result<Vec<SocketAddr>> {
        if let Some(addrs) = &self.literal {
            return Ok(addrs.clone());
        }
        match &*self.resolved.lock() {
            Some((addrs, _)) => Ok(addrs.clone()),
            None => Err(std::io::Error::other(
                "the host name has not been looked up",
            )),
        }
    }

    fn forget_addresses(&self) {
        *self.resolved.lock() = None;
    }
}

struct Connecting {
    addrs: Vec<SocketAddr>,
    next: usize,
    deadline: Instant,
    error: Option<std::io::Error>,
    /// The socket whose connect is under way.
    pending: Option<TcpStream>,
    /// The connection whose TLS handshake is under way.
    handshaking: Option<Link>,
}

pub(super) struct Exchange {
    id: String,
    out: Outgoing,
    request: Vec<u8>,
    /// Where the message starts in `request`.
    body_at: usize,
    written: usize,
    /// All of the request went out (with TLS: through the session too).
    sent: bool,
    sock: Option<Link>,
    /// The connection came from the pool.
    reused: bool,
    connecting: Option<Connecting>,
    reading: Reading,
    status: u16,
    payload: Payload,
    /// The answer was delivered: what is left is read for the connection's sake.
    answered: bool,
    /// Nothing more comes for the caller (answered, failed, or the answer comes elsewhere).
    finished: bool,
    error_deadline: Option<Instant>,
}

impl Exchange {
    fn fail(&mut self, t: &HttpTransport, e: Error) {
        self.finished = true;
        self.sock = None;
        t.direct_failed(&self.id, e);
    }

    fn io_failed(&mut self, t: &HttpTransport, e: &dyn std::fmt::Display) {
        let e = Error::transport(format!(
            "POST ({}) {} failed: {e}",
            self.out.method(),
            t.url()
        ));
        self.fail(t, e);
    }

    /// One turn: as far as it gets without blocking, with at most one wait of up to `wait`.
    fn turn(&mut self, t: &HttpTransport, wait: Duration) {
        let mut waited = false;
        loop {
            if self.finished {
                return;
            }
            if t.is_closed() {
                self.finished = true;
                self.sock = None;
                return;
            }
            if let Some(d) = self.error_deadline {
                if Instant::now() >= d {
                    // What came of the error body within its time is enough for the message.
                    let body = match std::mem::replace(&mut self.payload, Payload::Drop) {
                        Payload::Json(b) => b,
                        _ => Vec::new(),
                    };
                    self.sock = None;
                    self.status_done(t, body);
                    return;
                }
            }
            if self.sock.is_none() {
                if !self.connect(t, if waited { Duration::ZERO } else { wait }) {
                    return;
                }
                waited = true;
                continue;
            }
            if !self.sent {
                if self.write(t) {
                    continue;
                }
                if waited || self.finished {
                    return;
                }
                if let Some(link) = &self.sock {
                    sys::fd::wait_ready(link.sock(), Ready::Write, wait);
                }
                waited = true;
                continue;
            }
            // Read: what is buffered first, then the socket.
            if self.process(t, false).is_some() {
                continue;
            }
            if self.finished || waited {
                return;
            }
            let Some(link) = &mut self.sock else { return };
            if !sys::fd::wait_ready(link.sock(), Ready::Read, wait) {
                return;
            }
            waited = true;
            self.reading.compact();
            match link.recv(&mut self.reading.buf) {
                Ok(0) if self.again_fresh() => {}
                Ok(0) => {
                    if self.process(t, true).is_none() && !self.finished {
                        self.io_failed(t, &"the server closed the connection before the answer");
                    }
                    return;
                }
                Ok(_) => {}
                Err(e) if matches!(e.kind(), IoKind::WouldBlock | IoKind::Interrupted) => {}
                Err(_) if self.again_fresh() => {}
                Err(e) if link::is_tls(&e) && self.untouched() => {
                    self.hand_over(t);
                    return;
                }
                Err(e) => {
                    self.io_failed(t, &e);
                    return;
                }
            }
        }
    }

    /// A kept-alive connection the server closed before a byte of its response (it restarted,
    /// or its idle time-out crossed the request): the request goes again, once, on a new
    /// connection — as curl and browsers do. A connection idle for long is checked before reuse
    /// (`CHECK_AFTER`); this covers a close within that time, and a close that crossed the
    /// check. Whether it did (else the end is the exchange's failure).
    fn again_fresh(&mut self) -> bool {
        if !self.reused || !self.untouched() || !self.sent {
            return false;
        }
        self.sock = None;
        self.reused = false;
        self.written = 0;
        self.sent = false;
        self.reading.reset();
        true
    }

    /// Not a byte of the response has come.
    fn untouched(&self) -> bool {
        matches!(self.reading.framing, Framing::Head) && self.reading.unread().is_empty()
    }

    /// The request goes by the general path instead, and so does every later one: the server
    /// redirected it, or its TLS refused the connection before a byte of an answer (then the
    /// general path's error says why, with what was trusted).
    fn hand_over(&mut self, t: &HttpTransport) {
        self.finished = true;
        self.sock = None;
        self.connecting = None;
        let out = self.out.clone();
        t.direct_handed_over(&self.request[self.body_at..], out, self.id.clone());
    }

    /// Writes what is left of the request; `false` when the socket takes no more now (or the
    /// write failed: then the exchange is finished, or goes on with a new connection when a
    /// kept-alive one turned out closed before any of it was written).
    fn write(&mut self, t: &HttpTransport) -> bool {
        let Some(link) = self.sock.as_mut() else {
            return false;
        };
        loop {
            let r = if self.written == self.request.len() {
                match link.flush() {
                    Ok(true) => {
                        self.sent = true;
                        return true;
                    }
                    Ok(false) => return false,
                    Err(e) => Err(e),
                }
            } else {
                link.send(&self.request[self.written..])
            };
            match r {
                Ok(n) => self.written += n,
                Err(e) if e.kind() == IoKind::WouldBlock => return false,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(_) if self.reused && self.written == 0 => {
                    // Nothing of the request reached the server: a fresh connection is safe.
                    self.sock = None;
                    self.reused = false;
                    self.written = 0;
                    return false;
                }
                Err(e) => {
                    self.io_failed(t, &e);
                    return false;
                }
            }
        }
    }

    /// Opens a connection (and its TLS session, for `https`), waiting up to `wait`: `true` when
    /// the turn should go on, `false` to end it (not connected yet, or failed).
    fn connect(&mut self, t: &HttpTransport, wait: Duration) -> bool {
        if self.connecting.is_none() {
            let addrs = match t.direct().map(Direct::addresses) {
                Some(Ok(a)) if !a.is_empty() => a,
                Some(Err(e)) => {
                    self.io_failed(t, &e);
                    return false;
                }
                _ => {
                    self.io_failed(t, &"the host name has no address");
                    return false;
                }
            };
            self.connecting = Some(Connecting {
                addrs,
                next: 0,
                deadline: Instant::now() + t.limits().connect_timeout,
                error: None,
                pending: None,
                handshaking: None,
            });
        }
        let c = self.connecting.as_mut().expect("set");
        let now = Instant::now();
        if now >= c.deadline {
            let e = Error::transport(format!(
                "POST ({}) {}: connecting timed out (after {} ms)",
                self.out.method(),
                t.url(),
                t.limits().connect_timeout.as_millis()
            ));
            self.fail(t, e);
            return false;
        }
        if let Some(link) = &mut c.handshaking {
            match link.handshake() {
                Ok(None) => {
                    let link = c.handshaking.take().expect("set");
                    self.connected(t, link);
                    return true;
                }
                Ok(Some(ready)) => {
                    return sys::fd::wait_ready(link.sock(), ready, wait.min(c.deadline - now));
                }
                Err(e) if link::is_tls(&e) => {
                    self.hand_over(t);
                    return false;
                }
                Err(e) => {
                    // This address failed; the next one is tried.
                    c.handshaking = None;
                    c.error = Some(e);
                    return true;
                }
            }
        }
        if c.pending.is_none() {
            let Some(addr) = c.addrs.get(c.next).copied() else {
                let e = c
                    .error
                    .take()
                    .unwrap_or_else(|| std::io::Error::other("no address to connect to"));
                if let Some(direct) = t.direct() {
                    direct.forget_addresses();
                }
                self.io_failed(t, &format!("connecting failed: {e}"));
                return false;
            };
            c.next += 1;
            match start_connect(addr) {
                Ok(sock) => c.pending = Some(sock),
                Err(e) => {
                    c.error = Some(e);
                    return true;
                }
            }
        }
        let sock = c.pending.as_ref().expect("set");
        if !sys::fd::wait_ready(sock, Ready::Write, wait.min(c.deadline - now)) {
            return false;
        }
        let sock = c.pending.take().expect("set");
        if let Err(e) = sock.take_error().and_then(|e| match e {
            Some(e) => Err(e),
            None => sock.set_nodelay(true),
        }) {
            c.error = Some(e);
            return true;
        }
        match t.direct().and_then(|d| d.tls.as_ref()) {
            None => self.connected(t, Link::plain(sock)),
            Some(to) => match Link::tls(sock, to) {
                // Its ClientHello goes out on the next look.
                Ok(link) => c.handshaking = Some(link),
                Err(_) => {
                    self.hand_over(t);
                    return false;
                }
            },
        }
        true
    }

    /// The connection is open (its TLS handshake done): the request starts out on it.
    fn connected(&mut self, t: &HttpTransport, link: Link) {
        tracing::debug!(
            target: "mcplug::transport",
            "{}: a direct connection ({})",
            t.url(),
            link.describe()
        );
        self.connecting = None;
        self.sock = Some(link);
        self.write(t);
    }

    /// Handles what is buffered. `Some(())` when it made progress worth another look, `None`
    /// when more bytes are needed (or the exchange finished).
    fn process(&mut self, t: &HttpTransport, eof: bool) -> Option<()> {
        if let Framing::Head = self.reading.framing {
            match self.reading.head() {
                Ok(Parsed::More) => {
                    if eof {
                        let why = if self.reading.unread().is_empty() {
                            "the server closed the connection before answering"
                        } else {
                            "the server closed the connection in the middle of the response head"
                        };
                        self.io_failed(t, &why);
                    }
                    return None;
                }
                Ok(Parsed::Head(status, kind)) => self.headed(t, status, &kind)?,
                Err(e) => {
                    self.io_failed(t, &e);
                    return None;
                }
            }
        }
        let limit = t.limits().max_message_bytes;
        let ended = match &mut self.payload {
            Payload::Drop => self.reading.body(None, eof),
            Payload::Json(body) => {
                let r = self.reading.body(Some(body), eof);
                let cap = if self.status >= 300 {
                    MAX_ERROR_BODY
                } else {
                    limit
                };
                if body.len() > cap {
                    if self.status >= 300 {
                        body.truncate(MAX_ERROR_BODY);
                        let body = std::mem::take(body);
                        self.status_done(t, body);
                        return None;
                    }
                    let e = remote::too_large(&self.what(t), limit);
                    self.fail(t, e);
                    return None;
                }
                r
            }
            Payload::Sse(_) => {
                let mut decoded = Vec::new();
                let r = self.reading.body(Some(&mut decoded), eof);
                if !decoded.is_empty() {
                    self.events(t, &decoded)?;
                }
                r
            }
        };
        match ended {
            Ok(false) => None,
            Ok(true) => {
                self.ended(t);
                None
            }
            Err(e) => {
                if self.answered {
                    self.finished = true;
                    self.sock = None;
                } else {
                    self.io_failed(t, &e);
                }
                None
            }
        }
    }

    fn what(&self, t: &HttpTransport) -> String {
        format!("the answer to {} from {}", self.out.method(), t.url())
    }

    /// The head came: how its body is read. `None` when the exchange is over.
    fn headed(&mut self, t: &HttpTransport, status: u16, kind: &str) -> Option<()> {
        self.status = status;
        if matches!(status, 301 | 302 | 303 | 307 | 308) {
            // Not handled here: the general path follows the redirect.
            self.hand_over(t);
            return None;
        }
        if crate::transport::credentials::is_challenge(status) && t.judges_challenges() {
            // The credentials judge it, on the runtime (see `direct_challenged`).
            self.finished = true;
            self.sock = None;
            let out = self.out.clone();
            t.direct_challenged(&self.request[self.body_at..], out, self.id.clone());
            return None;
        }
        if !(200..300).contains(&status) {
            self.payload = Payload::Json(Vec::new());
            self.error_deadline = Some(Instant::now() + ERROR_BODY_WAIT);
            return Some(());
        }
        match kind {
            "application/json" => {
                if let Framing::Length(n) = self.reading.framing {
                    let limit = t.limits().max_message_bytes;
                    if n as usize > limit {
                        let e = remote::too_large(&self.what(t), limit);
                        self.fail(t, e);
                        return None;
                    }
                }
                self.payload = Payload::Json(Vec::new());
            }
            "text/event-stream" => self.payload = Payload::Sse(Sse::default()),
            _ if status == 202 || matches!(self.reading.framing, Framing::Done) => {
                // No body: the answer comes another way, under the caller's timer.
                self.payload = Payload::Drop;
                self.answered = true;
                self.finished = true;
            }
            _ => {
                let kind = if kind.is_empty() { "none" } else { kind };
                let e = Error::transport(format!(
                    "POST {} ({}) answered with Content-Type {kind:?}; expected application/json or text/event-stream",
                    t.url(),
                    self.out.method()
                ));
                self.fail(t, e);
                return None;
            }
        }
        Some(())
    }

    /// The events of a response stream: each goes to the connection; the answer ends the wait.
    fn events(&mut self, t: &HttpTransport, decoded: &[u8]) -> Option<()> {
        let Payload::Sse(sse) = &mut self.payload else {
            return Some(());
        };
        let limit = t.limits().max_message_bytes;
        let bound = limit.saturating_add(limit / 8 + 1024);
        let id = &self.id;
        let mut too_large = false;
        let r = sse.feed(decoded, bound, &mut |data| {
            if data.len() > limit {
                too_large = true;
                return true;
            }
            if data.iter().all(u8::is_ascii_whitespace) {
                return false; // a priming event, or a keep-alive
            }
            t.direct_answer(data, id)
        });
        match r {
            Err(e) if e == OVER_LIMIT => too_large = true,
            Err(e) => {
                let e = Error::transport(format!("the SSE stream of {} broke: {e}", self.what(t)));
                self.fail(t, e);
                return None;
            }
            Ok(true) if !too_large => {
                self.answered = true;
                self.finished = true;
                self.payload = Payload::Drop;
                // Read on what is buffered: the stream's end often came with the answer.
                let _ = self.reading.body(None, false);
                return None;
            }
            Ok(_) => {}
        }
        if too_large {
            let e = remote::too_large(&format!("an SSE event of {}", self.what(t)), limit);
            self.fail(t, e);
            return None;
        }
        Some(())
    }

    /// The body ended.
    fn ended(&mut self, t: &HttpTransport) {
        if self.answered {
            self.finished = true;
            return;
        }
        match std::mem::replace(&mut self.payload, Payload::Drop) {
            Payload::Json(body) if self.status >= 300 => self.status_done(t, body),
            Payload::Json(body) => {
                self.answered = true;
                self.finished = true;
                if self.status == 202 && body.iter().all(u8::is_ascii_whitespace) {
                    return; // the answer comes on another stream
                }
                if !t.direct_answer(&body, &self.id) {
                    let e = t.unanswered(&body, &self.out, &self.id);
                    t.direct_failed(&self.id, e);
                }
            }
            _ => {
                let e = Error::transport(format!(
                    "the response stream of {} from POST {} ended before the answer (the server ended it)",
                    self.out.method(),
                    t.url()
                ));
                self.fail(t, e);
            }
        }
    }

    /// An HTTP error status with its body (or what came of it).
    fn status_done(&mut self, t: &HttpTransport, body: Vec<u8>) {
        self.finished = true;
        if !matches!(self.reading.framing, Framing::Done) {
            self.sock = None;
        } else {
            // The connection stays usable: the caller's leave puts it back.
            self.answered = true;
        }
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_GATEWAY);
        if let Err(e) = t.status_answer(status, &body, &self.out, &self.id) {
            t.direct_failed(&self.id, e);
        }
    }
}

/// Starts a connect to `addr` without blocking.
fn start_connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_nonblocking(true)?;
    match socket.connect(&SockAddr::from(addr)) {
        Ok(()) => {}
        Err(e) if sys::net::connect_in_progress(&e) => {}
        Err(e) => return Err(e),
    }
    Ok(socket.into())
}

#[cfg(test)]
mod tests;
