//! One connection of the direct path: its socket, and for an `https` URL the TLS over it
//! (rustls, driven without blocking: records are read and written as far as the socket allows,
//! and the caller waits on the socket for what the TLS wants next).
//!
//! The TLS configuration is the transport's own trust (`transport::tls`), shared with the
//! general path: the same roots and client certificate, and the same session store, so a new
//! connection to a server already met resumes its session instead of a full handshake.

use super::READ_CHUNK;
use crate::sys::{self, fd::Ready, net::NoSignal};
use rustls::pki_types::ServerName;
use std::io::{self, BufRead, ErrorKind as IoKind, Write};
use std::net::TcpStream;
use std::sync::Arc;

/// What an `https` direct path needs to open its TLS sessions.
pub(super) struct TlsTo {
    pub(super) config: Arc<rustls::ClientConfig>,
    pub(super) name: ServerName<'static>,
}

impl TlsTo {
    /// The TLS of `url` (an `https` one) with the configuration `config`.
    pub(super) fn new(url: &reqwest::Url, config: Arc<rustls::ClientConfig>) -> Option<TlsTo> {
        let host = url.host_str()?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let name = match bare.parse::<std::net::IpAddr>() {
            Ok(ip) => ServerName::IpAddress(ip.into()),
            Err(_) => ServerName::try_from(host.to_string()).ok()?,
        };
        Some(TlsTo { config, name })
    }
}

/// Sends the records the session holds, as far as the socket takes them: whether all went.
fn send_records(tls: &mut rustls::ClientConnection, sock: &TcpStream) -> io::Result<bool> {
    while tls.wants_write() {
        match tls.write_tls(&mut NoSignal(sock)) {
            Ok(_) => {}
            Err(e) if e.kind() == IoKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == IoKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

pub(super) struct Link {
    sock: TcpStream,
    tls: Option<Box<rustls::ClientConnection>>,
}

/// A TLS failure (the certificate refused, an alert), as an I/O error that keeps it: see
/// [`is_tls`].
fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(IoKind::InvalidData, e)
}

/// Whether an I/O error of a link is a TLS failure (not the socket's).
pub(super) fn is_tls(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

impl Link {
    pub(super) fn plain(sock: TcpStream) -> Link {
        Link { sock, tls: None }
    }

    /// A connected socket with a TLS session starting over it (its ClientHello is queued).
    pub(super) fn tls(sock: TcpStream, to: &TlsTo) -> io::Result<Link> {
        let conn =
            rustls::ClientConnection::new(to.config.clone(), to.name.clone()).map_err(tls_error)?;
        Ok(Link {
            sock,
            tls: Some(Box::new(conn)),
        })
    }

    pub(super) fn sock(&self) -> &TcpStream {
        &self.sock
    }

    /// Drives the TLS handshake as far as it goes without blocking: `None` when it is done
    /// (or there is none), else what to wait for on the socket.
    pub(super) fn handshake(&mut self) -> io::Result<Option<Ready>> {
        let Some(tls) = &mut self.tls else {
            return Ok(None);
        };
        loop {
            if !send_records(tls, &self.sock)? {
                return Ok(Some(Ready::Write));
            }
            if !tls.is_handshaking() {
                return Ok(None);
            }
            match tls.read_tls(&mut NoSignal(&self.sock)) {
                Ok(0) => {
                    return Err(io::Error::new(
                        IoKind::UnexpectedEof,
                        "the server closed the connection during the TLS handshake",
                    ))
                }
                Ok(_) => {
                    if let Err(e) = tls.process_new_packets() {
                        // The alert it queued tells the server why.
                        let _ = send_records(tls, &self.sock);
                        return Err(tls_error(e));
                    }
                }
                Err(e) if e.kind() == IoKind::WouldBlock => return Ok(Some(Ready::Read)),
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// What the connection is, for the log: `plain`, or the TLS version and whether the
    /// session was resumed.
    pub(super) fn describe(&self) -> String {
        let Some(tls) = &self.tls else {
            return "plain".into();
        };
        let version = match tls.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLS 1.3".to_string(),
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLS 1.2".to_string(),
            Some(v) => format!("{v:?}"),
            None => "TLS".into(),
        };
        match tls.handshake_kind() {
            Some(rustls::HandshakeKind::Resumed) => format!("{version}, session resumed"),
            _ => format!("{version}, full handshake"),
        }
    }

    /// Sends as much of `data` as the connection takes now: the count taken (with TLS, taken
    /// into the session and sent as far as the socket allows: see [`Link::flush`]).
    pub(super) fn send(&mut self, data: &[u8]) -> io::Result<usize> {
        let Some(tls) = &mut self.tls else {
            return (&self.sock).write(data);
        };
        let n = tls.writer().write(data)?;
        self.flush()?;
        if n == 0 {
            return Err(IoKind::WouldBlock.into());
        }
        Ok(n)
    }

    /// Sends what the TLS session holds: whether all of it went (`false`: the socket takes no
    /// more now). Plain connections hold nothing.
    pub(super) fn flush(&mut self) -> io::Result<bool> {
        match &mut self.tls {
            Some(tls) => send_records(tls, &self.sock),
            None => Ok(true),
        }
    }

    /// Reads what has come into `buf`'s spare room (decrypted, with TLS): the count, 0 at the
    /// end of the stream; `WouldBlock` when nothing has.
    pub(super) fn recv(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let Some(tls) = &mut self.tls else {
            buf.reserve(READ_CHUNK);
            return sys::net::recv_spare(&self.sock, buf);
        };
        // The plaintext of what was read before has all been taken: read, then decrypt.
        loop {
            if tls.read_tls(&mut NoSignal(&self.sock))? == 0 {
                // A stream ended without close_notify ends like a plain one: the body's
                // framing says whether it was whole (as for plain HTTP).
                return Ok(0);
            }
            let state = tls.process_new_packets().map_err(tls_error)?;
            let n = state.plaintext_bytes_to_read();
            let closed = state.peer_has_closed();
            // What the session wants to say (a key update's answer) goes when it can.
            send_records(tls, &self.sock)?;
            if n > 0 {
                buf.reserve(n);
                let mut reader = tls.reader();
                loop {
                    let chunk = match reader.fill_buf() {
                        Ok(c) if !c.is_empty() => c,
                        _ => break,
                    };
                    let k = chunk.len();
                    buf.extend_from_slice(chunk);
                    reader.consume(k);
                }
                return Ok(n);
            }
            if closed {
                return Ok(0);
            }
        }
    }

    /// Whether the server closed (or wrote on) an idle connection: then it cannot take a
    /// request. With TLS, what is waiting is read first: session tickets and key updates leave
    /// the connection usable; data, an alert, close_notify or the end do not.
    pub(super) fn closed_by_peer(&mut self) -> bool {
        if !sys::net::closed_by_peer(&self.sock) {
            return false;
        }
        let Some(tls) = &mut self.tls else {
            return true;
        };
        loop {
            match tls.read_tls(&mut NoSignal(&self.sock)) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == IoKind::WouldBlock => break,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(_) => return true,
            }
        }
        match tls.process_new_packets() {
            Ok(state) => state.peer_has_closed() || state.plaintext_bytes_to_read() > 0,
            Err(_) => true,
        }
    }
}
