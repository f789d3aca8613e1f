//! Processes: the servers the library starts (bound to our life, signalled as a group, watched
//! through a pidfd), and which thread we are on.

use rustix::process::Pid;
use std::io;
use std::os::fd::OwnedFd;
use std::process::{Child, Command};

pub(crate) use rustix::process::Signal;

/// A process id (positive: `Pid::from_raw` asserts that in a debug build, so it is checked first).
fn pid(raw: i32) -> io::Result<Pid> {
    match (raw > 0).then(|| Pid::from_raw(raw)).flatten() {
        Some(pid) => Ok(pid),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{raw} is not a process id"),
        )),
    }
}

/// Sends `signal` to the process group `pgid` (a server spawned as its group's leader, with what
/// it started: `npx` and shell wrappers leave grandchildren otherwise).
pub(crate) fn signal_group(pgid: i32, signal: Signal) -> io::Result<()> {
    Ok(rustix::process::kill_process_group(pid(pgid)?, signal)?)
}

/// Whether any process of group `pgid` is left.
pub(crate) fn group_alive(pgid: i32) -> bool {
    pid(pgid).is_ok_and(|p| rustix::process::test_kill_process_group(p).is_ok())
}

/// Whether process `raw` exists (a zombie not yet reaped does).
#[cfg(test)]
pub(crate) fn alive(raw: i32) -> bool {
    pid(raw).is_ok_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// A pidfd of our own child (Linux 5.3): readable once it ends. The child must not be reaped
/// before the descriptor is made (a reaped pid can name another process).
pub(crate) fn pidfd(child: &Child) -> io::Result<OwnedFd> {
    Ok(rustix::process::pidfd_open(
        Pid::from_child(child),
        rustix::process::PidfdFlags::empty(),
    )?)
}

/// Makes the process `cmd` starts die with us: the kernel sends it SIGKILL when the thread that
/// forked it ends (`PR_SET_PDEATHSIG`), so a host that dies, however it dies, leaves no server.
/// A child whose parent died before it asked exits at once.
pub(crate) fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the child between fork and exec, and makes only
    // async-signal-safe system calls (prctl, getppid, _exit); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            if rustix::process::getppid() != Some(parent) {
                // SAFETY: _exit ends the child at once, running nothing of the parent's.
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Whether this is the process's main thread (which lives as long as the process).
pub(crate) fn on_main_thread() -> bool {
    rustix::thread::gettid() == rustix::process::getpid()
}

/// A child process made by [`fork`], for tests that need a second process sharing our state.
#[cfg(test)]
pub(crate) struct Forked(Pid);

/// Forks: the child runs `child` and exits 0 if it returned true, 1 otherwise (never returning
/// into the caller, whatever happens).
///
/// Only for tests: the child of a multi-threaded process may run nothing that waits on a lock
/// another thread held at the fork, so set up what `child` uses before.
#[cfg(test)]
pub(crate) fn fork(child: impl FnOnce() -> bool) -> io::Result<Forked> {
    // SAFETY: fork has no preconditions; the child below runs only `child` and then _exit.
    let raw = unsafe { libc::fork() };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    if raw == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child));
        // SAFETY: ends the child at once, running none of the parent's exit handlers.
        unsafe { libc::_exit(if matches!(ok, Ok(true)) { 0 } else { 1 }) };
    }
    Ok(Forked(pid(raw)?))
}

#[cfg(test)]
impl Forked {
    /// Waits for the child: its exit code, or `None` when a signal ended it.
    pub(crate) fn wait(self) -> io::Result<Option<i32>> {
        loop {
            match rustix::process::waitpid(Some(self.0), rustix::process::WaitOptions::empty()) {
                Ok(Some((_, status))) => return Ok(status.exit_status()),
                Ok(None) => continue,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_pid_but_a_positive_one_is_signalled() {
        for raw in [0, -1, -4242] {
            assert!(signal_group(raw, Signal::KILL).is_err(), "{raw}");
            assert!(!group_alive(raw) && !alive(raw), "{raw}");
        }
        assert!(alive(std::process::id() as i32));
    }
}
