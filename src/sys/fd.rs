//! Descriptors: pipes, reads and writes straight to the kernel (no buffering, no runtime
//! between the caller and the system call), their flags, and waiting for readiness.

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::{Mode, OFlags};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// A pipe takes a write of at most this many bytes whole or not at all (`PIPE_BUF`).
pub(crate) const PIPE_BUF: usize = rustix::pipe::PIPE_BUF;

/// A pipe, close-on-exec (and non-blocking at both ends when `nonblocking`): its read end, then
/// its write end.
pub(crate) fn pipe(nonblocking: bool) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut flags = rustix::pipe::PipeFlags::CLOEXEC;
    if nonblocking {
        flags |= rustix::pipe::PipeFlags::NONBLOCK;
    }
    Ok(rustix::pipe::pipe_with(flags)?)
}

/// One `read(2)` into `buf`: the count, 0 at the end of the stream. `Interrupted` and
/// `WouldBlock` come back as errors for the caller to handle.
pub(crate) fn read(fd: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    Ok(rustix::io::read(fd, buf)?)
}

/// One `read(2)` into `buf`'s spare capacity (never zeroed first), which then holds what was
/// read after what it held: the count, 0 at the end of the stream.
pub(crate) fn read_spare(fd: impl AsFd, buf: &mut Vec<u8>) -> io::Result<usize> {
    Ok(rustix::io::read(fd, rustix::buffer::spare_capacity(buf))?)
}

/// One `write(2)` of `buf`: the count written.
pub(crate) fn write(fd: impl AsFd, buf: &[u8]) -> io::Result<usize> {
    Ok(rustix::io::write(fd, buf)?)
}

/// Sets or clears `O_NONBLOCK` on the open file description `fd` names.
pub(crate) fn set_nonblocking(fd: impl AsFd, on: bool) -> io::Result<()> {
    let fd = fd.as_fd();
    let flags = rustix::fs::fcntl_getfl(fd)?;
    let wanted = if on {
        flags | OFlags::NONBLOCK
    } else {
        flags - OFlags::NONBLOCK
    };
    if wanted != flags {
        rustix::fs::fcntl_setfl(fd, wanted)?;
    }
    Ok(())
}

/// A new descriptor (close-on-exec) of what `fd` names, owned by the caller.
pub(crate) fn dup_cloexec(fd: impl AsFd) -> io::Result<OwnedFd> {
    Ok(rustix::io::fcntl_dupfd_cloexec(fd, 0)?)
}

/// A new descriptor (close-on-exec) of what the host's descriptor number `fd` names, or why
/// that number is no open descriptor.
pub(crate) fn dup_number(fd: i32) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(
            rustix::io::Errno::BADF.raw_os_error(),
        ));
    }
    // SAFETY: the borrow lives only for the duplicating call; a number that names no open
    // descriptor makes `fcntl` fail with EBADF, it is never used otherwise.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    dup_cloexec(borrowed)
}

/// What a wait is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ready {
    /// Data to read, or the end of the stream (`POLLIN`).
    Read,
    /// Room to write (`POLLOUT`).
    Write,
}

impl Ready {
    fn flags(self) -> PollFlags {
        match self {
            Ready::Read => PollFlags::IN,
            Ready::Write => PollFlags::OUT,
        }
    }
}

/// `poll(2)`'s timeout: `None` (no limit) for a wait too long to express.
fn timeout(wait: Duration) -> Option<Timespec> {
    Timespec::try_from(wait).ok()
}

/// Waits up to `wait` for `fd` to be ready for `what` (or in error, or hung up): whether it is.
/// An interrupted wait reports not ready; the caller's loop looks again.
pub(crate) fn wait_ready(fd: impl AsFd, what: Ready, wait: Duration) -> bool {
    let mut fds = [PollFd::from_borrowed_fd(fd.as_fd(), what.flags())];
    matches!(rustix::event::poll(&mut fds, timeout(wait).as_ref()), Ok(n) if n > 0)
}

/// Waits up to `wait` for `first` to be readable, or `also` (when given) to be: whether `first`
/// is. (`also` only ends the wait: a host's wake-up descriptor, say.)
pub(crate) fn wait_readable(
    first: BorrowedFd<'_>,
    also: Option<BorrowedFd<'_>>,
    wait: Duration,
) -> bool {
    let wait = timeout(wait);
    let mut fds = [
        PollFd::from_borrowed_fd(first, PollFlags::IN),
        PollFd::from_borrowed_fd(also.unwrap_or(first), PollFlags::IN),
    ];
    let count = if also.is_some() { 2 } else { 1 };
    matches!(rustix::event::poll(&mut fds[..count], wait.as_ref()), Ok(n) if n > 0)
        && !fds[0].revents().is_empty()
}

/// The `/proc/self/fd` path of a descriptor: opening it makes a new open file description of
/// what the descriptor names (for a pipe, one whose flags are its own), which a duplicate is not.
pub(crate) struct ProcPath(CString);

impl ProcPath {
    pub(crate) fn of(fd: BorrowedFd<'_>) -> Self {
        ProcPath(
            CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a path"),
        )
    }

    /// Opens it, close-on-exec and non-blocking (opening a pipe must not wait for its other end),
    /// for writing or for reading.
    pub(crate) fn open(&self, write: bool) -> io::Result<OwnedFd> {
        let access = if write {
            OFlags::WRONLY
        } else {
            OFlags::RDONLY
        };
        Ok(rustix::fs::open(
            self.0.as_c_str(),
            access | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }
}

/// Whether both descriptors name the same pipe.
pub(crate) fn same_pipe(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    match (rustix::fs::fstat(a), rustix::fs::fstat(b)) {
        (Ok(x), Ok(y)) => {
            rustix::fs::FileType::from_raw_mode(x.st_mode) == rustix::fs::FileType::Fifo
                && x.st_ino == y.st_ino
                && x.st_dev == y.st_dev
        }
        _ => false,
    }
}

/// `/dev/null` opened for reading: a descriptor held in reserve, to be given up when the process
/// has none left.
pub(crate) fn open_dev_null() -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        c"/dev/null",
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Whether an error says the process (`EMFILE`) or the system (`ENFILE`) has no descriptor free.
pub(crate) fn out_of_descriptors(e: &io::Error) -> bool {
    let code = e.raw_os_error();
    code == Some(rustix::io::Errno::MFILE.raw_os_error())
        || code == Some(rustix::io::Errno::NFILE.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_reports_the_first_descriptor_only() {
        let (r1, w1) = pipe(true).unwrap();
        let (r2, w2) = pipe(true).unwrap();
        let zero = Duration::ZERO;
        assert!(!wait_readable(r1.as_fd(), Some(r2.as_fd()), zero));
        assert_eq!(write(&w2, b"x").unwrap(), 1);
        assert!(
            !wait_readable(r1.as_fd(), Some(r2.as_fd()), zero),
            "only `also` is ready"
        );
        assert_eq!(write(&w1, b"y").unwrap(), 1);
        assert!(wait_readable(r1.as_fd(), None, zero));
        assert!(wait_ready(&r1, Ready::Read, zero));
        assert!(wait_ready(&w1, Ready::Write, zero));
        let mut buf = Vec::with_capacity(8);
        buf.push(b'a');
        assert_eq!(read_spare(&r1, &mut buf).unwrap(), 1);
        assert_eq!(buf, b"ay");
        let e = read(&r1, &mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        drop(w1);
        assert!(wait_readable(r1.as_fd(), None, zero), "the end is readable");
        assert_eq!(read(&r1, &mut [0u8; 4]).unwrap(), 0);
    }

    #[test]
    fn a_pipe_reopened_through_proc_is_the_same_pipe_with_flags_of_its_own() {
        let (r, w) = pipe(true).unwrap();
        let other = ProcPath::of(r.as_fd()).open(false).unwrap();
        assert!(same_pipe(r.as_fd(), other.as_fd()));
        let (r2, _w2) = pipe(false).unwrap();
        assert!(!same_pipe(r.as_fd(), r2.as_fd()));
        set_nonblocking(&other, false).unwrap();
        assert!(!rustix::fs::fcntl_getfl(&other)
            .unwrap()
            .contains(OFlags::NONBLOCK));
        assert!(rustix::fs::fcntl_getfl(&r)
            .unwrap()
            .contains(OFlags::NONBLOCK));
        let copy = dup_cloexec(&w).unwrap();
        assert_eq!(write(&copy, b"z").unwrap(), 1);
        let mut b = [0u8; 2];
        assert_eq!(read(&other, &mut b).unwrap(), 1);
        assert_eq!(b[0], b'z');
    }
}
