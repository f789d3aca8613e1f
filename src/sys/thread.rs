//! The calling thread's stack, so that work which recurses with its input can tell whether it
//! has room (a host's thread may have as little as 128 KiB; koffi's calls do).

/// This thread's stack as (lowest address, highest address), when the system says
/// (`pthread_getattr_np`: glibc and musl have it; rustix does not cover pthreads).
pub(crate) fn stack_bounds() -> Option<(usize, usize)> {
    // SAFETY: `attr` is initialised by pthread_getattr_np before any other use and destroyed
    // once; `addr` and `size` are plain out-values alive for the call.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        ok.then(|| (addr as usize, addr as usize + size))
    }
}
