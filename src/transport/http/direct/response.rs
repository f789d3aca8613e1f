//! Reading one HTTP response on the direct path: the head (`httparse`), the body's framing
//! (length, chunked, to the end), and the SSE events of a stream (`sse-stream`, fed the body as
//! it arrives), each bounded by the message limit.

use super::{Link, MAX_HEAD, READ_CHUNK};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::io::ErrorKind as IoKind;
use std::sync::Arc;

/// How a response body is delimited, and how far it has been read.
#[derive(Debug)]
pub(super) enum Framing {
    /// The head is not complete yet.
    Head,
    Length(u64),
    /// Chunked: the size line of the next chunk is due.
    ChunkSize,
    /// Chunked: this much of the current chunk's data is left (then its CRLF).
    ChunkData(u64),
    ChunkEnd,
    Trailers,
    /// Up to the end of the stream.
    Close,
    Done,
}

/// One response being read off a connection.
pub(super) struct Reading {
    pub(super) buf: Vec<u8>,
    /// Where the unread part of `buf` starts.
    pub(super) at: usize,
    pub(super) framing: Framing,
    pub(super) keep_alive: bool,
}

pub(super) enum Parsed {
    /// The head: status, content type (lower case, no parameters), whether the connection
    /// stays open.
    Head(u16, String),
    More,
}

impl Reading {
    pub(super) fn new() -> Reading {
        Reading {
            buf: Vec::new(),
            at: 0,
            framing: Framing::Head,
            keep_alive: true,
        }
    }

    /// Ready for the next response on the same connection (the buffer is kept).
    pub(super) fn reset(&mut self) {
        self.buf.clear();
        self.at = 0;
        self.framing = Framing::Head;
        self.keep_alive = true;
    }

    pub(super) fn unread(&self) -> &[u8] {
        &self.buf[self.at..]
    }

    pub(super) fn compact(&mut self) {
        if self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        } else if self.at > READ_CHUNK {
            self.buf.drain(..self.at);
            self.at = 0;
        }
    }

    /// Parses the response head when it is all there (1xx heads are skipped).
    pub(super) fn head(&mut self) -> Result<Parsed, String> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut resp = httparse::Response::new(&mut headers);
            let n = match resp.parse(&self.buf[self.at..]) {
                Ok(httparse::Status::Complete(n)) => n,
                Ok(httparse::Status::Partial) if self.buf.len() - self.at > MAX_HEAD => {
                    return Err("the response head is too large".into())
                }
                Ok(httparse::Status::Partial) => return Ok(Parsed::More),
                Err(e) => return Err(format!("invalid HTTP response: {e}")),
            };
            let status = resp.code.unwrap_or(0);
            let http10 = resp.version == Some(0);
            let mut length: Option<u64> = None;
            let mut chunked = false;
            let mut close = http10;
            let mut kind = String::new();
            for h in resp.headers.iter() {
                let value = std::str::from_utf8(h.value).unwrap_or("").trim();
                if h.name.eq_ignore_ascii_case("content-type") {
                    kind = value
                        .split(';')
                        .next()
                        .unwrap_or("")
                        .trim()
                        .to_ascii_lowercase();
                } else if h.name.eq_ignore_ascii_case("content-length") {
                    let n = value
                        .parse::<u64>()
                        .map_err(|_| format!("invalid Content-Length {value:?}"))?;
                    if length.is_some_and(|l| l != n) {
                        return Err("conflicting Content-Length headers".into());
                    }
                    length = Some(n);
                } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = value
                        .rsplit(',')
                        .next()
                        .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
                    if !chunked {
                        close = true;
                    }
                } else if h.name.eq_ignore_ascii_case("connection") {
                    for token in value.split(',') {
                        if token.trim().eq_ignore_ascii_case("close") {
                            close = true;
                        } else if token.trim().eq_ignore_ascii_case("keep-alive") && http10 {
                            close = false;
                        }
                    }
                }
            }
            self.at += n;
            if (100..200).contains(&status) {
                if status == 101 {
                    return Err("the server switched protocols".into());
                }
                continue;
            }
            self.keep_alive = !close;
            self.framing = if status == 204 || status == 304 {
                Framing::Length(0)
            } else if chunked {
                Framing::ChunkSize
            } else if let Some(n) = length {
                Framing::Length(n)
            } else {
                self.keep_alive = false;
                Framing::Close
            };
            if let Framing::Length(0) = self.framing {
                self.framing = Framing::Done;
            }
            return Ok(Parsed::Head(status, kind));
        }
    }

    /// Moves the body bytes that are there into `out` (`None`: dropped); `Ok(true)` once the
    /// body has ended.
    pub(super) fn body(
        &mut self,
        mut out: Option<&mut Vec<u8>>,
        eof: bool,
    ) -> Result<bool, String> {
        loop {
            let unread = &self.buf[self.at..];
            match self.framing {
                Framing::Head => return Ok(false),
                Framing::Done => return Ok(true),
                Framing::Close => {
                    if let Some(out) = out.as_deref_mut() {
                        out.extend_from_slice(unread);
                    }
                    self.at = self.buf.len();
                    if eof {
                        self.framing = Framing::Done;
                    }
                    return Ok(eof);
                }
                Framing::Length(left) | Framing::ChunkData(left) => {
                    let n = (unread.len() as u64).min(left) as usize;
                    if let Some(out) = out.as_deref_mut() {
                        out.extend_from_slice(&unread[..n]);
                    }
                    self.at += n;
                    let left = left - n as u64;
                    self.framing = match (&self.framing, left) {
                        (Framing::Length(_), 0) => Framing::Done,
                        (Framing::Length(_), l) => Framing::Length(l),
                        (_, 0) => Framing::ChunkEnd,
                        (_, l) => Framing::ChunkData(l),
                    };
                    if left > 0 {
                        return if eof {
                            Err("the response body ended early".into())
                        } else {
                            Ok(false)
                        };
                    }
                }
                Framing::ChunkSize => match httparse::parse_chunk_size(unread) {
                    Ok(httparse::Status::Complete((n, 0))) => {
                        self.at += n;
                        self.framing = Framing::Trailers;
                    }
                    Ok(httparse::Status::Complete((n, size))) => {
                        self.at += n;
                        self.framing = Framing::ChunkData(size);
                    }
                    Ok(httparse::Status::Partial) => return self.more(eof),
                    Err(_) => return Err("invalid chunk size in the response body".into()),
                },
                Framing::ChunkEnd => {
                    if unread.len() < 2 {
                        return self.more(eof);
                    }
                    if &unread[..2] != b"\r\n" {
                        return Err("invalid chunk end in the response body".into());
                    }
                    self.at += 2;
                    self.framing = Framing::ChunkSize;
                }
                Framing::Trailers => match unread.windows(2).position(|w| w == b"\r\n") {
                    Some(0) => {
                        self.at += 2;
                        self.framing = Framing::Done;
                    }
                    Some(i) => self.at += i + 2,
                    None => return self.more(eof),
                },
            }
        }
    }

    pub(super) fn more(&self, eof: bool) -> Result<bool, String> {
        if eof {
            Err("the response body ended early".into())
        } else {
            Ok(false)
        }
    }

    /// Reads on a kept connection's unread response end without blocking: `Some(true)` once
    /// it ended (the connection can take a request), `Some(false)` while it has not, `None`
    /// when the connection is of no more use.
    pub(super) fn finish_now(&mut self, link: &mut Link) -> Option<bool> {
        loop {
            match self.body(None, false) {
                Ok(true) => return self.unread().is_empty().then_some(true),
                Ok(false) => {}
                Err(_) => return None,
            }
            self.compact();
            match link.recv(&mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) if e.kind() == IoKind::WouldBlock => return Some(false),
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }
}

/// What the body of the response is read as.
pub(super) enum Payload {
    /// A JSON body (the answer), or an error body.
    Json(Vec<u8>),
    Sse(Sse),
    /// After the answer: read to the end, for the connection's sake.
    Drop,
}

pub(super) const OVER_LIMIT: &str = "over the message limit";

/// The SSE events of a decoded body: `sse-stream`'s parser (the one the general path reads
/// with), fed the bytes as they arrive and polled without waiting, so an event comes out as soon
/// as its blank line is in.
pub(super) struct Sse {
    pub(super) fed: Arc<Mutex<VecDeque<bytes::Bytes>>>,
    pub(super) stream: std::pin::Pin<Box<sse_stream::SseStream<FedBody>>>,
    /// Bytes since the last event, against the message limit (the parser keeps an event's
    /// lines until it ends).
    pub(super) since_event: usize,
}

impl Default for Sse {
    fn default() -> Self {
        let fed = Arc::new(Mutex::new(VecDeque::new()));
        Sse {
            stream: Box::pin(sse_stream::SseStream::new(FedBody(fed.clone()))),
            fed,
            since_event: 0,
        }
    }
}

/// The body `Sse` feeds its parser: the chunks handed in so far; "not yet" when they are taken.
pub(super) struct FedBody(Arc<Mutex<VecDeque<bytes::Bytes>>>);

impl http_body::Body for FedBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        match self.0.lock().pop_front() {
            Some(chunk) => std::task::Poll::Ready(Some(Ok(http_body::Frame::data(chunk)))),
            None => std::task::Poll::Pending,
        }
    }
}

impl Sse {
    /// Feeds decoded body bytes; `event` gets the data of each complete event and says whether
    /// it was the one awaited (then `Ok(true)`, and what follows it stays unread). An error when
    /// an event grows past `bound` bytes or the stream is not SSE.
    pub(super) fn feed(
        &mut self,
        bytes: &[u8],
        bound: usize,
        event: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<bool, String> {
        use futures_util::Stream;
        if !bytes.is_empty() {
            self.since_event += bytes.len();
            self.fed
                .lock()
                .push_back(bytes::Bytes::copy_from_slice(bytes));
        }
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            match self.stream.as_mut().poll_next(&mut cx) {
                std::task::Poll::Ready(Some(Ok(sse))) => {
                    // What is still unparsed belongs to the events after this one.
                    self.since_event = self.fed.lock().iter().map(|b| b.len()).sum();
                    let Some(data) = sse.data else { continue };
                    if event(data.as_bytes()) {
                        return Ok(true);
                    }
                }
                std::task::Poll::Ready(Some(Err(e))) => return Err(e.to_string()),
                std::task::Poll::Ready(None) | std::task::Poll::Pending => break,
            }
        }
        if self.since_event > bound {
            return Err(OVER_LIMIT.to_string());
        }
        Ok(false)
    }
}

/// What the fuzz target of the direct path's response reading runs: the bytes after the first
/// come in pieces of (the first byte % 64 + 1) bytes.
pub fn fuzz_response(data: &[u8]) {
    let step = data.first().map_or(1, |b| usize::from(*b % 64) + 1);
    let input = data.get(1..).unwrap_or_default();
    let mut r = Reading::new();
    let mut sse: Option<Sse> = None;
    let mut out = Vec::new();
    for chunk in input.chunks(step) {
        r.buf.extend_from_slice(chunk);
        if let Framing::Head = r.framing {
            match r.head() {
                Ok(Parsed::More) => continue,
                Ok(Parsed::Head(_, kind)) => {
                    if kind == "text/event-stream" {
                        sse = Some(Sse::default());
                    }
                }
                Err(_) => return,
            }
        }
        out.clear();
        match r.body(Some(&mut out), false) {
            Ok(ended) => {
                if let Some(s) = sse.as_mut() {
                    if s.feed(&out, 1 << 20, &mut |_| false).is_err() {
                        return;
                    }
                }
                if ended {
                    return;
                }
            }
            Err(_) => return,
        }
        r.compact();
    }
    let _ = r.body(Some(&mut out), true);
}
