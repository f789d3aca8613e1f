//! Sockets, for the direct HTTP path (which drives its own non-blocking sockets).

use std::io;
use std::net::TcpStream;

use rustix::net::RecvFlags;

/// Whether the server closed (or wrote on) an idle connection: then it cannot take a request.
/// A peek that would block means the connection is idle and open.
pub(crate) fn closed_by_peer(sock: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    !matches!(
        rustix::net::recv(sock, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT),
        Err(rustix::io::Errno::WOULDBLOCK)
    )
}

/// One `recv(2)` into `buf`'s spare capacity, which then holds what came after what it held:
/// the count, 0 at the end of the stream.
pub(crate) fn recv_spare(sock: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let (n, _) = rustix::net::recv(
        sock,
        rustix::buffer::spare_capacity(buf),
        RecvFlags::empty(),
    )?;
    Ok(n)
}

/// Whether a non-blocking connect's error only says it goes on (`EINPROGRESS`).
pub(crate) fn connect_in_progress(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::INPROGRESS.raw_os_error())
}

/// A socket as `Read` and `Write` for a TLS library driving it: each write is one `send(2)`
/// with `MSG_NOSIGNAL` (a write to a connection the server closed is an `EPIPE`, never a
/// SIGPIPE in the host's thread), each read one `recv(2)`.
pub(crate) struct NoSignal<'a>(pub(crate) &'a TcpStream);

impl io::Read for NoSignal<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(rustix::net::recv(self.0, buf, RecvFlags::empty())?.0)
    }
}

impl io::Write for NoSignal<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(rustix::net::send(
            self.0,
            buf,
            rustix::net::SendFlags::NOSIGNAL,
        )?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
