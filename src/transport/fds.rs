//! A transport over two descriptors the host hands over: one to read the peer's lines from and
//! one to write ours to (a served process's stdin and stdout, for `mcplug serve` over stdio; a
//! pair of pipes or a socket a host gives `mcplug_manager_serve`). Newline-delimited JSON-RPC,
//! as the stdio transport of every revision frames it.
//!
//! Both descriptors are duplicated (the host's stay its own) and each side has a thread of its
//! own doing plain blocking reads and writes: a descriptor the process shares with others (a
//! terminal's stdin) is never switched to non-blocking behind their backs. The reading thread
//! waits in `poll` on the descriptor and on a wake-up pipe, so that `close` ends it at once; the
//! writing thread takes messages in order from a queue, each acknowledged when written whole.

use super::{BoxFuture, Inbound, Transport};
use crate::error::Error;
use crate::sys;
use parking_lot::Mutex;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Weak};
use std::time::Duration;
use tokio::sync::oneshot;

type Outgoing = (Vec<u8>, oneshot::Sender<Result<(), Error>>);

pub(crate) struct FdTransport {
    /// The writing thread's queue; `None` once closed.
    out: Mutex<Option<mpsc::Sender<Outgoing>>>,
    /// Written to end the reading thread's wait.
    wake: Mutex<Option<OwnedFd>>,
    closed: Arc<AtomicBool>,
    /// Lets the reading thread begin (`start`).
    begin: Mutex<Option<mpsc::Sender<()>>>,
}

impl FdTransport {
    /// Reads lines from `read` and writes to `write` (each duplicated), delivering what it reads
    /// to `sink` once [`FdTransport::start`] is called — after the session has its transport, so
    /// that a request already waiting in the descriptor is not answered into nothing; a line
    /// longer than `max_line` bytes ends the connection.
    pub(crate) fn open(
        read: impl AsFd,
        write: impl AsFd,
        max_line: usize,
        sink: Weak<dyn Inbound>,
    ) -> Result<Arc<FdTransport>, Error> {
        let dup = |fd: std::os::fd::BorrowedFd<'_>, which: &str| {
            sys::fd::dup_cloexec(fd)
                .map_err(|e| Error::invalid(format!("the {which} descriptor cannot be used: {e}")))
        };
        let input = dup(read.as_fd(), "read")?;
        let output = dup(write.as_fd(), "write")?;
        let (wake_read, wake_write) = sys::fd::pipe(false)
            .map_err(|e| Error::transport(format!("a wake-up pipe could not be made: {e}")))?;
        let closed = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<Outgoing>();
        std::thread::Builder::new()
            .name("mcplug-fds-write".into())
            .spawn(move || write_loop(output, rx))
            .map_err(|e| Error::transport(format!("a writing thread could not start: {e}")))?;
        let reader_closed = closed.clone();
        let (begin, begun) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("mcplug-fds-read".into())
            .spawn(move || {
                // Never started (the transport was dropped): nothing is read.
                if begun.recv().is_ok() {
                    read_loop(input, wake_read, max_line, sink, reader_closed)
                }
            })
            .map_err(|e| Error::transport(format!("a reading thread could not start: {e}")))?;
        Ok(Arc::new(FdTransport {
            out: Mutex::new(Some(tx)),
            wake: Mutex::new(Some(wake_write)),
            closed,
            begin: Mutex::new(Some(begin)),
        }))
    }

    /// Begins reading (once; later calls do nothing).
    pub(crate) fn start(&self) {
        if let Some(begin) = self.begin.lock().take() {
            let _ = begin.send(());
        }
    }
}

fn write_loop(output: OwnedFd, rx: mpsc::Receiver<Outgoing>) {
    while let Ok((message, ack)) = rx.recv() {
        let mut at = 0;
        let outcome = loop {
            if at == message.len() {
                break Ok(());
            }
            match sys::fd::write(&output, &message[at..]) {
                Ok(0) => break Err(Error::closed("the peer closed its end")),
                Ok(n) => at += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(Error::closed(format!("writing to the peer failed: {e}"))),
            }
        };
        let failed = outcome.is_err();
        let _ = ack.send(outcome);
        if failed {
            return;
        }
    }
}

fn read_loop(
    input: OwnedFd,
    wake: OwnedFd,
    max_line: usize,
    sink: Weak<dyn Inbound>,
    closed: Arc<AtomicBool>,
) {
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let end = loop {
        if closed.load(Ordering::SeqCst) {
            return;
        }
        if !sys::fd::wait_readable(input.as_fd(), Some(wake.as_fd()), Duration::from_secs(3600)) {
            continue;
        }
        let n = match sys::fd::read(&input, &mut chunk) {
            Ok(0) => break Error::closed("the peer closed its end"),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => break Error::closed(format!("reading from the peer failed: {e}")),
        };
        let mut start = 0;
        let data = &chunk[..n];
        while let Some(nl) = memchr::memchr(b'\n', &data[start..]) {
            pending.extend_from_slice(&data[start..start + nl]);
            start += nl + 1;
            let line = std::mem::take(&mut pending);
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Some(sink) = sink.upgrade() else { return };
            sink.message(line);
        }
        pending.extend_from_slice(&data[start..]);
        if pending.len() > max_line {
            break Error::protocol(format!(
                "the peer sent a line over {max_line} bytes without its end"
            ));
        }
    };
    if !closed.swap(true, Ordering::SeqCst) {
        if let Some(sink) = sink.upgrade() {
            sink.closed(end);
        }
    }
}

impl Transport for FdTransport {
    fn send(self: Arc<Self>, message: Vec<u8>) -> BoxFuture<'static, Result<(), Error>> {
        Box::pin(async move {
            let (ack, written) = oneshot::channel();
            let queued = match &*self.out.lock() {
                Some(out) => out.send((message, ack)).is_ok(),
                None => false,
            };
            if !queued {
                return Err(Error::closed("the connection is closed"));
            }
            written
                .await
                .unwrap_or_else(|_| Err(Error::closed("the connection is closed")))
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.closed.store(true, Ordering::SeqCst);
        // A reading thread never started ends without reading.
        self.begin.lock().take();
        // The writing thread ends when its queue does (after what is queued is written).
        self.out.lock().take();
        if let Some(wake) = self.wake.lock().take() {
            let _ = sys::fd::write(&wake, b"x");
        }
        Box::pin(async {})
    }
}

impl Drop for FdTransport {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(wake) = self.wake.lock().take() {
            let _ = sys::fd::write(&wake, b"x");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc as std_mpsc;

    /// Records what the transport delivers.
    struct Sink(Mutex<std_mpsc::Sender<Result<String, String>>>);

    impl Inbound for Sink {
        fn message(self: Arc<Self>, line: &[u8]) {
            let _ = self.0.lock().send(Ok(String::from_utf8_lossy(line).into()));
        }
        fn stderr(self: Arc<Self>, _line: String) {}
        fn request_failed(self: Arc<Self>, _id: &str, _error: Error) {}
        fn closed(self: Arc<Self>, error: Error) {
            let _ = self.0.lock().send(Err(error.message));
        }
    }

    fn read_all(fd: &OwnedFd, want: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while out.len() < want {
            let n = sys::fd::read(fd, &mut buf).unwrap();
            assert!(n > 0, "the transport's end closed early");
            out.extend_from_slice(&buf[..n]);
        }
        out
    }

    #[test]
    fn nothing_is_read_before_start_and_what_waited_comes_after() {
        let (in_read, in_write) = sys::fd::pipe(false).unwrap();
        let (_out_read, out_write) = sys::fd::pipe(false).unwrap();
        let (tx, rx) = std_mpsc::channel();
        let sink = Arc::new(Sink(Mutex::new(tx)));
        let weak = Arc::downgrade(&sink) as Weak<dyn Inbound>;
        // The peer's first line is there before the transport is.
        sys::fd::write(&in_write, b"{\"first\":1}\n").unwrap();
        let t = FdTransport::open(&in_read, &out_write, 64, weak).unwrap();
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        t.start();
        let got = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(got, Ok("{\"first\":1}".to_string()));
    }

    #[tokio::test]
    async fn lines_in_and_out_and_the_end_of_the_peer() {
        let (in_read, in_write) = sys::fd::pipe(false).unwrap();
        let (out_read, out_write) = sys::fd::pipe(false).unwrap();
        let (tx, rx) = std_mpsc::channel();
        let sink = Arc::new(Sink(Mutex::new(tx)));
        let weak = Arc::downgrade(&sink) as Weak<dyn Inbound>;
        let t = FdTransport::open(&in_read, &out_write, 64, weak).unwrap();
        t.start();
        drop((in_read, out_write)); // the transport holds its own duplicates

        // Lines split across writes, CRLF, blank lines.
        sys::fd::write(&in_write, b"{\"a\":1}\r\n\n{\"b\"").unwrap();
        sys::fd::write(&in_write, b":2}\n").unwrap();
        let got = |rx: &std_mpsc::Receiver<_>| rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(got(&rx), Ok("{\"a\":1}".to_string()));
        assert_eq!(got(&rx), Ok("{\"b\":2}".to_string()));

        t.clone().send(b"{\"x\":1}\n".to_vec()).await.unwrap();
        t.clone().send(b"{\"y\":2}\n".to_vec()).await.unwrap();
        assert_eq!(read_all(&out_read, 16), b"{\"x\":1}\n{\"y\":2}\n");

        // A line without its end past the limit ends the connection.
        sys::fd::write(&in_write, &[b'x'; 100]).unwrap();
        let end = got(&rx).unwrap_err();
        assert!(end.contains("over 64 bytes"), "{end}");
    }

    #[tokio::test]
    async fn the_peers_eof_is_the_end_and_close_ends_the_threads() {
        let (in_read, in_write) = sys::fd::pipe(false).unwrap();
        let (_out_read, out_write) = sys::fd::pipe(false).unwrap();
        let (tx, rx) = std_mpsc::channel();
        let sink = Arc::new(Sink(Mutex::new(tx)));
        let weak = Arc::downgrade(&sink) as Weak<dyn Inbound>;
        let t = FdTransport::open(&in_read, &out_write, 1 << 20, weak).unwrap();
        t.start();
        drop(in_write);
        let end = rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap()
            .unwrap_err();
        assert_eq!(end, "the peer closed its end");
        t.close().await;
        assert!(t.clone().send(b"{}\n".to_vec()).await.is_err());

        // close while the peer is silent: the reading thread leaves at once, saying nothing.
        let (in_read, _in_write) = sys::fd::pipe(false).unwrap();
        let (tx, rx) = std_mpsc::channel();
        let sink = Arc::new(Sink(Mutex::new(tx)));
        let weak = Arc::downgrade(&sink) as Weak<dyn Inbound>;
        let t = FdTransport::open(&in_read, &out_write, 1 << 20, weak).unwrap();
        t.start();
        t.close().await;
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    }
}
