//! SIGPIPE, which would kill a host whose write reached a closed pipe or socket. The library
//! never wants it: every write of ours checks for `EPIPE` instead.
//!
//! rustix leaves signal dispositions to the program's runtime (its `runtime` API is not for
//! libraries), so these two are libc's.

/// Ignores SIGPIPE process-wide, unless the host chose a disposition of its own (then its choice
/// stands, and [`block_sigpipe_in_this_thread`] protects our own threads).
pub(crate) fn ignore_default_sigpipe() {
    // SAFETY: a `sigaction` is plain data, valid all zeroes; sigaction only reads `ignore` and
    // writes `current`, both alive for the calls.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_DFL
        {
            let mut ignore: libc::sigaction = std::mem::zeroed();
            ignore.sa_sigaction = libc::SIG_IGN;
            libc::sigemptyset(&mut ignore.sa_mask);
            libc::sigaction(libc::SIGPIPE, &ignore, std::ptr::null_mut());
        }
    }
}

/// Blocks SIGPIPE for the calling thread (one of the library's own).
pub(crate) fn block_sigpipe_in_this_thread() {
    // SAFETY: a `sigset_t` is plain data, valid all zeroes and then emptied; pthread_sigmask
    // only reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}
