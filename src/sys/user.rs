//! Who the process runs as: its effective user, and that user's home directory — `$HOME`, or the
//! password database's (for a host started without `HOME`, as some services are).

use std::ffi::{CStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// The effective user id.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The user's home directory, the one rule for every file the library finds there (the OAuth
/// store, `~/.claude.json` of discovery and of edits): `$HOME` when it is an absolute path, else
/// the password database's. An empty or relative `HOME` is ignored: it would make the working
/// directory's `.claude.json` pass for the user's, and an edit of the user's scope write there.
pub(crate) fn home() -> Option<PathBuf> {
    home_from(std::env::var_os("HOME"), home_from_passwd)
}

/// The rule of [`home`], apart from the environment and the password database, for tests.
fn home_from(env: Option<OsString>, passwd: impl FnOnce() -> Option<PathBuf>) -> Option<PathBuf> {
    match env.map(PathBuf::from) {
        Some(home) if home.is_absolute() => Some(home),
        _ => passwd(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_absolute_home_is_taken() {
        let passwd = || Some(PathBuf::from("/home/from-passwd"));
        let of = |v: &str| home_from(Some(v.into()), passwd);
        assert_eq!(of("/home/u"), Some(PathBuf::from("/home/u")));
        for ignored in ["", ".", "rel", "rel/dir", "./x"] {
            assert_eq!(of(ignored), passwd(), "HOME={ignored:?}");
        }
        assert_eq!(home_from(None, passwd), passwd());
        assert_eq!(home_from(Some("rel".into()), || None), None);
        assert_eq!(
            home_from(Some("/h".into()), || panic!("passwd asked")),
            Some(PathBuf::from("/h"))
        );
    }
}
