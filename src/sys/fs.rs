//! Files the library reads and writes for the host — configuration files, the OAuth store —
//! handled so that no file can hang, bloat or corrupt anything:
//! - [`read_regular`] reads regular files only (a FIFO or a device under a config file's name is
//!   refused, not waited on or read without end), within a size cap, its checks on the open
//!   descriptor;
//! - [`write_atomic`] writes a fsync'd temporary file of a name no other writer picks (`O_EXCL`,
//!   `O_NOFOLLOW`: a planted symlink is not followed) and renames it over the target, then
//!   fsyncs the directory: a reader sees the old file or the new one, never a torn or empty one;
//! - [`lock`] takes an advisory `flock(2)` lock across processes and threads (each open is its
//!   own open file description), given up after a timeout rather than hanging.

use rustix::fs::{FlockOperation, OFlags};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `open(2)` flags for [`OpenOptionsExt::custom_flags`] (std sets the access and creation
/// flags itself).
fn flags(f: OFlags) -> i32 {
    f.bits() as i32
}

/// The longest pause between two tries of a held lock.
const LOCK_POLL_MAX: Duration = Duration::from_millis(20);

/// What kind of file a non-regular one is, for errors.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Reads a regular file of at most `cap` bytes; `Ok(None)` when it does not exist. Symlinks
/// are followed (a config file may be one); what they lead to must be a regular file.
pub fn read_regular(path: &Path, cap: u64) -> Result<Option<Vec<u8>>, String> {
    let shown = path.display();
    let mut file = match OpenOptions::new()
        .read(true)
        // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
        .custom_flags(flags(OFlags::CLOEXEC | OFlags::NONBLOCK))
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{shown} cannot be read: {e}")),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("{shown} cannot be inspected: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{shown} is {}, not a regular file; it was not read",
            kind_of(&meta)
        ));
    }
    if meta.len() > cap {
        return Err(format!(
            "{shown} is {} bytes, more than the {cap} bytes read from such a file",
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&mut file)
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown} cannot be read: {e}"))?;
    if bytes.len() as u64 > cap {
        return Err(format!("{shown} grew past {cap} bytes while it was read"));
    }
    Ok(Some(bytes))
}

/// A name for a temporary file beside `target` that no other process or thread picks: the pid
/// tells processes apart, the clock and a counter the writes of one process (`O_EXCL` catches
/// the rest).
pub fn tmp_name(target: &Path, attempt: u32) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = nanos ^ count.rotate_left(40) ^ u64::from(attempt).rotate_left(20);
    let mut name = target.as_os_str().to_os_string();
    name.push(format!(".tmp.{}.{random:016x}", std::process::id()));
    PathBuf::from(name)
}

/// Deletes a temporary file unless it was renamed into place.
struct TmpGuard<'a>(Option<&'a Path>);

impl Drop for TmpGuard<'_> {
    fn drop(&mut self) {
        if let Some(path) = self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Writes `bytes` to `path` atomically with permissions `mode` (exactly: the umask does not
/// narrow them further), see the module's documentation. `path` itself is replaced: a caller
/// that edits what a symlink points to resolves it first ([`resolve`]).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let dir = parent_dir(path);
    let mut attempt = 0;
    let (tmp, mut file) = loop {
        let tmp = tmp_name(path, attempt);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(flags(OFlags::CLOEXEC | OFlags::NOFOLLOW))
            .open(&tmp)
        {
            Ok(file) => break (tmp, file),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 16 => attempt += 1,
            Err(e) => return Err(format!("cannot create {}: {e}", tmp.display())),
        }
    };
    let mut guard = TmpGuard(Some(&tmp));
    let shown = tmp.display();
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set the mode of {shown}: {e}"))?;
    file.write_all(bytes)
        .map_err(|e| format!("cannot write {shown}: {e}"))?;
    file.sync_all()
        .map_err(|e| format!("cannot sync {shown}: {e}"))?;
    drop(file);
    std::fs::rename(&tmp, path)
        .map_err(|e| format!("cannot rename {shown} to {}: {e}", path.display()))?;
    guard.0 = None;
    sync_dir(dir)
}

/// The directory holding `path`, for syncing it: a bare file name (`c.json`, whose parent is
/// the empty path) lives in the working directory.
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Opens `path` for reading without following a symlink in its last component (`O_NOFOLLOW`: it
/// could lead to a file others control) and without waiting on a FIFO (`O_NONBLOCK`). A symlink
/// there is an error for which [`is_symlink_refused`] is true.
pub fn open_no_follow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(flags(OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK))
        .open(path)
}

/// The error of an [`open_no_follow`] that found a symlink (`ELOOP`).
pub fn is_symlink_refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
}

/// Makes a rename or an unlink durable: they live in the directory, not in the file.
pub fn sync_dir(dir: &Path) -> Result<(), String> {
    OpenOptions::new()
        .read(true)
        .custom_flags(flags(OFlags::CLOEXEC | OFlags::DIRECTORY))
        .open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("cannot sync the directory {}: {e}", dir.display()))
}

/// Where an edit of `path` goes: the file a chain of symlinks leads to (an edit replaces that
/// file, and the links stay links), or `path` itself.
pub fn resolve(path: &Path) -> Result<PathBuf, String> {
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&at)
                    .map_err(|e| format!("cannot read the symlink {}: {e}", at.display()))?;
                at = match at.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(at),
        }
    }
    Err(format!("{}: too many levels of symlinks", path.display()))
}

/// Opens (creating it if need be, mode 0600) and locks a lock file, polling
/// `flock(LOCK_EX|LOCK_NB)`: a blocking flock could not be given up after `timeout`. The lock
/// is released when the file is dropped.
pub fn lock(path: &Path, timeout: Duration) -> Result<File, String> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        // O_NONBLOCK: a FIFO planted under the name must not hang the open.
        .custom_flags(flags(OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK))
        .open(path)
        .map_err(|e| format!("cannot open the lock file {}: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot inspect the lock file {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "the lock file {} is not a regular file",
            path.display()
        ));
    }
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(file),
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::WOULDBLOCK) => {}
            Err(err) => {
                let err = io::Error::from(err);
                return Err(format!("cannot lock {}: {err}", path.display()));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(format!(
                "timed out after {:.1} s waiting for the lock {} (another process holds it)",
                timeout.as_secs_f64(),
                path.display()
            ));
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(LOCK_POLL_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mcplug-fsx-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn only_regular_files_within_the_cap_are_read() {
        let d = scratch("read");
        assert_eq!(read_regular(&d.join("none"), 10).unwrap(), None);
        std::fs::write(d.join("f"), b"12345").unwrap();
        assert_eq!(read_regular(&d.join("f"), 10).unwrap().unwrap(), b"12345");
        let e = read_regular(&d.join("f"), 4).unwrap_err();
        assert!(e.contains("more than the 4 bytes"), "{e}");
        let fifo = d.join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = read_regular(&fifo, 10).unwrap_err();
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
        std::os::unix::fs::symlink("/dev/zero", d.join("zero")).unwrap();
        let e = read_regular(&d.join("zero"), 10).unwrap_err();
        assert!(e.contains("character device"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn atomic_writes_keep_the_mode_and_leave_no_temporary_file() {
        let d = scratch("write");
        let f = d.join("c.json");
        write_atomic(&f, b"{}", 0o600).unwrap();
        write_atomic(&f, b"{\"a\":1}", 0o640).unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"{\"a\":1}");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o7777, 0o640);
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        // A symlink chain resolves to the file it leads to.
        std::os::unix::fs::symlink("c.json", d.join("l1")).unwrap();
        std::os::unix::fs::symlink(d.join("l1"), d.join("l2")).unwrap();
        assert_eq!(resolve(&d.join("l2")).unwrap(), d.join("c.json"));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A bare file name lives in the working directory: the write succeeds and says so (its
    /// parent, the empty path, was synced as a directory and failed).
    #[test]
    fn a_bare_file_name_is_written_in_the_working_directory() {
        assert_eq!(parent_dir(Path::new("c.json")), Path::new("."));
        assert_eq!(parent_dir(Path::new("/c.json")), Path::new("/"));
        assert_eq!(parent_dir(Path::new("a/c.json")), Path::new("a"));
        // Through a real write, without changing this process's working directory: the bare
        // name is resolved by a child whose working directory is the scratch one.
        let d = scratch("bare");
        let child = crate::sys::process::fork(|| {
            std::env::set_current_dir(&d).is_ok()
                && write_atomic(Path::new("c.json"), b"{}", 0o600).is_ok()
        })
        .expect("fork");
        assert_eq!(
            child.wait().unwrap(),
            Some(0),
            "the write reported an error"
        );
        assert_eq!(std::fs::read(d.join("c.json")).unwrap(), b"{}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
