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
