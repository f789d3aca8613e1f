//! Who the process runs as: its effective user, and that user's home directory from the password
//! database (for a host started without `HOME`, as some services are).

use std::ffi::{CStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// The effective user id.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The effective user's home directory as the password database has it (`getpwuid_r`), if it is
/// an absolute path. rustix has no password database: libc's is the one every program shares
/// (NSS included).
pub(crate) fn home_from_passwd() -> Option<PathBuf> {
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: a `passwd` is plain data (pointers and integers); all zeroes is a valid value,
        // and getpwuid_r overwrites it.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `pwd`, `buf` and `found` outlive the call, and `buf.len()` is the size of `buf`.
        let rc = unsafe {
            libc::getpwuid_r(
                euid(),
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 || found.is_null() || pwd.pw_dir.is_null() {
            return None;
        }
        // SAFETY: on success `pw_dir` points to a NUL-terminated string inside `buf`, alive here.
        let dir = unsafe { CStr::from_ptr(pwd.pw_dir) }.to_bytes().to_vec();
        let dir = PathBuf::from(OsString::from_vec(dir));
        return dir.is_absolute().then_some(dir);
    }
}
