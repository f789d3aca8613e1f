//! The OAuth credential store: client registrations, tokens and the like, one JSON record per key.
//!
//! Several processes may share one directory (two CLI instances refreshing one rotating refresh
//! token), so every read-modify-write runs under an exclusive cross-process lock and re-reads the
//! record once the lock is held, and every write is atomic (a temporary file renamed over the
//! target). The caller puts its compare-and-swap inside the closure of [`Store::update`]: the
//! loser of a refresh race then sees the winner's token instead of wiping it.
//!
//! Layout of a directory store, for a key `k` and `h` = the first 32 hex digits of SHA-256(`k`):
//! - `<dir>/h.json`: `{"key": k, "record": <record>}` (the key is kept so that a hash collision
//!   or a tampered file is refused rather than handing out someone else's tokens);
//! - `<dir>/h.lock`: the file that `flock(2)` locks; never deleted, since a process may be
//!   waiting on it (a new file under the same name would lock nothing);
//! - `<dir>/h.json.tmp.<pid>.<random>`: a write in progress, renamed over `h.json`.
//!
//! Hashing keeps file names short and free of any character a key may hold. Files are mode 0600
//! in a 0700 directory, and a record file that others could read is refused, not used.
//! Errors name the path and what failed, never a record's contents: those are tokens.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{self, DirBuilder, File};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use serde_json::{Map, Value};

/// How long `update` waits for another process to release a key's lock. A holder only reads,
/// runs the caller's closure and writes one small file, so 10 s means it is stuck or gone
/// astray; failing beats hanging a CLI forever.
const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// The process-wide memory store, so that every connection of a process that asked for
/// `"memory"` sees the tokens another one obtained.
static MEMORY: Lazy<Arc<Mutex<HashMap<String, Value>>>> = Lazy::new(Default::default);

/// Why the store failed. `unusable_record`: the record file itself cannot be used (not JSON, the
/// wrong shape, not a regular file, a symbolic link, not ours, open to others, another key's) —
/// no later read will do better, so removing it ([`Store::remove`], logout) is the way out; the
/// other failures are the store's (its directory, a lock, the disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    pub message: String,
    pub unusable_record: bool,
}

impl StoreError {
    fn record(message: String) -> StoreError {
        StoreError {
            message,
            unusable_record: true,
        }
    }
}

impl From<String> for StoreError {
    fn from(message: String) -> StoreError {
        StoreError {
            message,
            unusable_record: false,
        }
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Where OAuth records are kept.
#[derive(Clone)]
pub enum Store {
    /// Records in this process only; gone when it exits.
    Memory(Arc<Mutex<HashMap<String, Value>>>),
    /// One file per key in this directory, shared with other processes.
    Dir(PathBuf),
}

/// Shows where the store lives, never what it holds (tokens must not reach logs).
impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::Memory(_) => f.write_str("Store::Memory"),
            Store::Dir(dir) => f.debug_tuple("Store::Dir").field(dir).finish(),
        }
    }
}

impl Store {
    #[cfg(test)]
    /// `spec`: None → the default directory: $XDG_STATE_HOME/mcplug/auth if XDG_STATE_HOME is
    /// set and absolute (the XDG rule: a relative one is ignored), else
    /// $HOME/.local/state/mcplug/auth (an error when neither can be found); Some("memory") → the
    /// one process-wide memory store (a directory of that name is still reachable as
    /// "./memory"); Some(path) → that directory (absolute or relative, made absolute now so
    /// that a later change of the working directory does not move the store). Creates the
    /// directory (and missing parents) with mode 0700; an existing directory that is group- or
    /// world-accessible is tightened to 0700 if we own it, else an error.
    pub fn open(spec: Option<&str>) -> Result<Store, String> {
        let store = Store::locate(spec)?;
        if let Store::Dir(dir) = &store {
            prepare_dir(dir)?;
        }
        Ok(store)
    }

    /// Like [`Store::open`], without creating the directory yet: it is made (0700) by the first
    /// write. A connection that never needs authorization leaves nothing on disk.
    pub fn locate(spec: Option<&str>) -> Result<Store, String> {
        let dir = match spec {
            Some("memory") => return Ok(Store::Memory(MEMORY.clone())),
            Some("") => return Err("the auth store path is empty".to_string()),
            Some(path) => std::path::absolute(path)
                .map_err(|e| format!("cannot resolve the auth store path {path}: {e}"))?,
            None => default_dir()?,
        };
        Ok(Store::Dir(dir))
    }

    #[cfg(test)]
    /// A fresh private memory store (tests, and hosts that want no persistence).
    pub fn private_memory() -> Store {
        Store::Memory(Arc::default())
    }

    /// Takes no lock: writes are atomic renames, so a reader sees the old file or the new one,
    /// never half of one.
    pub fn read(&self, key: &str) -> Result<Option<Value>, StoreError> {
        match self {
            Store::Memory(map) => Ok(map.lock().get(key).cloned()),
            Store::Dir(dir) => Ok(read_file(&record_path(dir, key), Some(key))?.map(|(_, v)| v)),
        }
    }

    /// Read-modify-write under the lock: `f` gets the current record (re-read after the lock was
    /// taken, so it sees what another process just wrote) and returns the new one (None deletes
    /// it). Returns what `f` returned. When `f` returns the record unchanged nothing is written
    /// (the usual outcome of a lost compare-and-swap). The file lock waits at most 10 s.
    ///
    /// `f` runs while the lock is held: it must not use this store for the same key (the memory
    /// store would deadlock, a directory store would time out), and should be quick.
    pub fn update<F>(&self, key: &str, f: F) -> Result<Option<Value>, StoreError>
    where
        F: FnOnce(Option<Value>) -> Option<Value>,
    {
        self.update_within(key, LOCK_TIMEOUT, f)
    }

    /// [`Store::update`] with the lock timeout as a parameter, so tests need not wait 10 s.
    fn update_within<F>(
        &self,
        key: &str,
        timeout: Duration,
        f: F,
    ) -> Result<Option<Value>, StoreError>
    where
        F: FnOnce(Option<Value>) -> Option<Value>,
    {
        match self {
            Store::Memory(map) => {
                // The mutex is held across `f`: that is what makes the update atomic here.
                let mut map = map.lock();
                let new = f(map.get(key).cloned());
                match &new {
                    Some(v) => map.insert(key.to_string(), v.clone()),
                    None => map.remove(key),
                };
                Ok(new)
            }
            Store::Dir(dir) => {
                prepare_dir(dir)?;
                let stem = file_stem(key);
                // Dropping the file closes it, which releases the lock, also when `f` panics.
                let _lock = crate::sys::fs::lock(&dir.join(format!("{stem}.lock")), timeout)?;
                let path = dir.join(format!("{stem}.json"));
                let current = read_file(&path, Some(key))?.map(|(_, v)| v);
                let new = f(current.clone());
                if new != current {
                    match &new {
                        Some(record) => write_file(&path, key, record)?,
                        None => remove_file(dir, &path)?,
                    }
                }
                Ok(new)
            }
        }
    }

    /// Removes `key`'s record whatever it holds, without reading it — also one that cannot be
    /// used (not JSON, not a regular file, a symbolic link: the link itself goes, never what it
    /// leads to): logout, the way out of such a record. Whether there was one. Runs under the
    /// key's lock, so that it does not race an update; a store directory that does not exist
    /// holds nothing and is not created.
    pub fn remove(&self, key: &str) -> Result<bool, StoreError> {
        match self {
            Store::Memory(map) => Ok(map.lock().remove(key).is_some()),
            Store::Dir(dir) => {
                let path = record_path(dir, key);
                if !exists_no_follow(&path)? {
                    return Ok(false);
                }
                prepare_dir(dir)?;
                let _lock = crate::sys::fs::lock(
                    &dir.join(format!("{}.lock", file_stem(key))),
                    LOCK_TIMEOUT,
                )?;
                if !exists_no_follow(&path)? {
                    return Ok(false);
                }
                let is_dir = fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
                let removed = if is_dir {
                    // Not a record anyone wrote: whatever was put under its name goes with it
                    // (std's remove_dir_all follows no symlink inside).
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
                match removed {
                    Ok(()) => crate::sys::fs::sync_dir(dir)?,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
                    Err(e) => {
                        return Err(format!(
                            "cannot remove the auth record {}: {e}",
                            path.display()
                        )
                        .into())
                    }
                }
                Ok(true)
            }
        }
    }

    /// Holds `key`'s `name` lock (`<stem>.<name>.lock`, beside the record's own) until the
    /// guard is dropped, waiting at most 10 s: for work that spans more than one `update`
    /// (a refresh: read the token, ask the server, write the new one), so that another process
    /// waits and then reads the winner's token instead of spending a rotated refresh token.
    /// The memory store gives a guard that holds nothing (one process: its callers serialize
    /// such work themselves).
    pub fn exclusive(&self, key: &str, name: &str) -> Result<Exclusive, StoreError> {
        match self {
            Store::Memory(_) => Ok(Exclusive(None)),
            Store::Dir(dir) => {
                prepare_dir(dir)?;
                let path = dir.join(format!("{}.{name}.lock", file_stem(key)));
                Ok(crate::sys::fs::lock(&path, LOCK_TIMEOUT).map(|f| Exclusive(Some(f)))?)
            }
        }
    }

    #[cfg(test)]
    /// Every key whose record exists (for logout of all, listing), sorted. A file that cannot be
    /// read is an error naming it, not skipped: skipping it would leave its tokens behind a
    /// "logout of all".
    pub fn keys(&self) -> Result<Vec<String>, String> {
        let mut keys: Vec<String> = match self {
            Store::Memory(map) => map.lock().keys().cloned().collect(),
            Store::Dir(dir) => {
                let entries = fs::read_dir(dir)
                    .map_err(|e| format!("cannot list the auth store {}: {e}", dir.display()))?;
                let mut keys = Vec::new();
                for entry in entries {
                    let entry = entry.map_err(|e| {
                        format!("cannot list the auth store {}: {e}", dir.display())
                    })?;
                    let name = entry.file_name();
                    let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                        continue;
                    };
                    if stem.len() != 32 || !stem.bytes().all(|b| b.is_ascii_hexdigit()) {
                        continue;
                    }
                    let path = entry.path();
                    // Deleted since the listing: it no longer exists, so it is no key.
                    if let Some((key, _)) = read_file(&path, None).map_err(|e| e.message)? {
                        if file_stem(&key) != stem {
                            return Err(format!(
                                "{} holds a record whose key does not match the file name \
                                 (tampered or misplaced file); refusing it",
                                path.display()
                            ));
                        }
                        keys.push(key);
                    }
                }
                keys
            }
        };
        keys.sort();
        Ok(keys)
    }

    #[cfg(test)]
    /// Where the store lives (None for memory), for docs/errors.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Store::Memory(_) => None,
            Store::Dir(dir) => Some(dir),
        }
    }
}

/// A lock of [`Store::exclusive`], released when dropped (closing the file releases the flock).
pub struct Exclusive(#[allow(dead_code)] Option<File>);

/// The default directory, from the environment of the process.
fn default_dir() -> Result<PathBuf, String> {
    state_dir(std::env::var_os("XDG_STATE_HOME"), crate::sys::user::home)
}

/// The rule of [`Store::open`] for `None`, apart from the environment so that it can be tested
/// without touching process-wide state. `home` is only asked when XDG_STATE_HOME does not do.
fn state_dir(
    xdg: Option<OsString>,
    home: impl FnOnce() -> Option<PathBuf>,
) -> Result<PathBuf, String> {
    if let Some(xdg) = xdg.map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Ok(xdg.join("mcplug").join("auth"));
    }
    match home() {
        Some(home) => Ok(home
            .join(".local")
            .join("state")
            .join("mcplug")
            .join("auth")),
        None => Err(
            "cannot find the default auth store directory: neither XDG_STATE_HOME nor HOME \
                     is an absolute path, and the user database has no home directory"
                .to_string(),
        ),
    }
}

/// Creates the directory if need be and makes sure only we can get into it: the files hold
/// tokens, and a directory others can write lets them swap files under us.
fn prepare_dir(dir: &Path) -> Result<(), String> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            format!(
                "cannot create the auth store directory {}: {e}",
                dir.display()
            )
        })?;
    let meta = fs::metadata(dir).map_err(|e| {
        format!(
            "cannot inspect the auth store directory {}: {e}",
            dir.display()
        )
    })?;
    if !meta.is_dir() {
        return Err(format!(
            "the auth store {} is not a directory",
            dir.display()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        if meta.uid() != crate::sys::user::euid() {
            return Err(format!(
                "the auth store directory {} has mode {mode:04o} (open to group or others) and is \
                 owned by uid {}, not by us: refusing to keep tokens there",
                dir.display(),
                meta.uid()
            ));
        }
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|e| {
            format!(
                "cannot restrict the auth store directory {} to mode 0700: {e}",
                dir.display()
            )
        })?;
    }
    Ok(())
}

/// The first 32 hex digits of SHA-256(`key`): 128 bits make a collision practically
/// impossible, and the stored key catches one anyway.
fn file_stem(key: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    let mut stem = String::with_capacity(32);
    for b in &digest.as_ref()[..16] {
        stem.push(HEX[usize::from(b >> 4)] as char);
        stem.push(HEX[usize::from(b & 0xf)] as char);
    }
    stem
}

fn record_path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{}.json", file_stem(key)))
}

/// Reads a record file: `Ok(None)` when it does not exist, else its key and record. With
/// `expect` the stored key must be that one. The checks run on the open descriptor (fstat), so
/// the file cannot be swapped between check and read.
fn read_file(path: &Path, expect: Option<&str>) -> Result<Option<(String, Value)>, StoreError> {
    let unusable = StoreError::record;
    let shown = path.display();
    let mut file = match crate::sys::fs::open_no_follow(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if crate::sys::fs::is_symlink_refused(&e) => {
            return Err(unusable(format!(
                "refusing the auth record {shown}: it is a symbolic link"
            )))
        }
        // Not ours to open (mode 000, another owner's file in our directory): unusable too.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return Err(unusable(format!(
                "cannot open the auth record {shown}: {e}"
            )))
        }
        Err(e) => return Err(format!("cannot open the auth record {shown}: {e}").into()),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot inspect the auth record {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(unusable(format!(
            "refusing the auth record {shown}: it is not a regular file"
        )));
    }
    if meta.uid() != crate::sys::user::euid() {
        return Err(unusable(format!(
            "refusing the auth record {shown}: it is owned by uid {}, not by us (uid {})",
            meta.uid(),
            crate::sys::user::euid()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(unusable(format!(
            "refusing the auth record {shown}: its mode {mode:04o} lets group or others access it \
             (its tokens may have leaked; remove it and log in again, or chmod 600 it)"
        )));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the auth record {shown}: {e}"))?;
    // Only the position of a syntax error is reported: serde_json's messages may quote text.
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
        unusable(format!(
            "the auth record {shown} is corrupt (not JSON: error at line {} column {}); \
             it was left in place",
            e.line(),
            e.column()
        ))
    })?;
    let Value::Object(mut object) = value else {
        return Err(unusable(format!(
            "the auth record {shown} is corrupt (not a JSON object)"
        )));
    };
    let key = match object.remove("key") {
        Some(Value::String(key)) => key,
        _ => {
            return Err(unusable(format!(
                "the auth record {shown} is corrupt (no \"key\" string)"
            )))
        }
    };
    if expect.is_some_and(|want| want != key) {
        return Err(unusable(format!(
            "the auth record {shown} belongs to another key (hash collision or tampered file); \
             refusing it"
        )));
    }
    let Some(record) = object.remove("record") else {
        return Err(unusable(format!(
            "the auth record {shown} is corrupt (no \"record\")"
        )));
    };
    Ok(Some((key, record)))
}

/// Whether something (of any kind, a dangling symlink included) is at `path`.
fn exists_no_follow(path: &Path) -> Result<bool, StoreError> {
    match fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(format!("cannot inspect the auth record {}: {e}", path.display()).into()),
    }
}

/// Writes the record atomically (see `sys::fs::write_atomic`): a crash leaves the old record or
/// the new one, never a torn file or a rename the disk forgot.
fn write_file(path: &Path, key: &str, record: &Value) -> Result<(), String> {
    let mut object = Map::new();
    object.insert("key".to_string(), Value::String(key.to_string()));
    object.insert("record".to_string(), record.clone());
    let mut bytes = serde_json::to_vec(&Value::Object(object))
        .map_err(|e| format!("cannot encode the auth record for {}: {e}", path.display()))?;
    bytes.push(b'\n');
    crate::sys::fs::write_atomic(path, &bytes, 0o600)
}

/// Deletes a record; one already gone is fine (the outcome asked for).
fn remove_file(dir: &Path, path: &Path) -> Result<(), String> {
    match fs::remove_file(path) {
        Ok(()) => crate::sys::fs::sync_dir(dir),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!(
            "cannot remove the auth record {}: {e}",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Barrier;
    use std::time::Instant;

    /// A directory under the system's temporary directory, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            static N: AtomicU64 = AtomicU64::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!(
                "mcplug-store-test-{}-{name}-{n}",
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&path);
            TempDir(path)
        }

        fn store(&self) -> Store {
            Store::open(Some(self.0.to_str().unwrap())).unwrap()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn mode_of(path: &Path) -> u32 {
        fs::metadata(path).unwrap().mode() & 0o7777
    }

    fn dir_names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn round_trip(store: &Store) {
        let a = "srv|https://as.example";
        let b = "other key with spaces / and \"quotes\"";
        assert_eq!(store.read(a).unwrap(), None);
        assert_eq!(store.keys().unwrap(), Vec::<String>::new());

        let rec = json!({"client_id": "abc", "tokens": {"access_token": "t1"}});
        let got = store.update(a, |cur| {
            assert_eq!(cur, None);
            Some(rec.clone())
        });
        assert_eq!(got.unwrap(), Some(rec.clone()));
        assert_eq!(store.read(a).unwrap(), Some(rec.clone()));
        store
            .update(b, |_| Some(json!({"needs_auth_at": 17})))
            .unwrap();
        assert_eq!(store.keys().unwrap(), vec![b.to_string(), a.to_string()]);

        let got = store.update(a, |cur| {
            assert_eq!(cur, Some(rec.clone()));
            None
        });
        assert_eq!(got.unwrap(), None);
        assert_eq!(store.read(a).unwrap(), None);
        assert_eq!(store.keys().unwrap(), vec![b.to_string()]);
        // Deleting what does not exist is no error.
        assert_eq!(store.update(a, |_| None).unwrap(), None);
    }

    #[test]
    fn dir_round_trip_delete_and_keys() {
        let tmp = TempDir::new("roundtrip");
        let store = tmp.store();
        assert_eq!(store.path(), Some(tmp.0.as_path()));
        round_trip(&store);
        // The file holds the key and the record, key first.
        let key = "srv|https://as.example";
        store.update(key, |_| Some(json!({"x": 1}))).unwrap();
        let text = fs::read_to_string(record_path(&tmp.0, key)).unwrap();
        assert_eq!(
            text,
            "{\"key\":\"srv|https://as.example\",\"record\":{\"x\":1}}\n"
        );
        // Another handle on the same directory sees the same records.
        assert_eq!(tmp.store().read(key).unwrap(), Some(json!({"x": 1})));
    }

    #[test]
    fn memory_round_trip_and_sharing() {
        let private = Store::private_memory();
        assert_eq!(private.path(), None);
        round_trip(&private);
        assert!(Store::private_memory().keys().unwrap().is_empty());

        // Every open of "memory" is the one process-wide store.
        let key = "memory-sharing-test|unique";
        let one = Store::open(Some("memory")).unwrap();
        let two = Store::open(Some("memory")).unwrap();
        one.update(key, |_| Some(json!(1))).unwrap();
        assert_eq!(two.read(key).unwrap(), Some(json!(1)));
        assert_eq!(private.read(key).unwrap(), None);
        two.update(key, |_| None).unwrap();
        assert_eq!(one.read(key).unwrap(), None);
    }

    #[test]
    fn dir_and_file_permissions() {
        let tmp = TempDir::new("perms");
        // Missing parents are created too, all 0700.
        let nested = tmp.0.join("a").join("b");
        let store = Store::open(Some(nested.to_str().unwrap())).unwrap();
        assert_eq!(mode_of(&tmp.0), 0o700);
        assert_eq!(mode_of(&nested), 0o700);
        store.update("k", |_| Some(json!({"t": "secret"}))).unwrap();
        let file = record_path(&nested, "k");
        assert_eq!(mode_of(&file), 0o600);
        let lock = nested.join(format!("{}.lock", file_stem("k")));
        assert_eq!(mode_of(&lock), 0o600);

        // An existing directory open to others is tightened.
        fs::set_permissions(&nested, fs::Permissions::from_mode(0o755)).unwrap();
        Store::open(Some(nested.to_str().unwrap())).unwrap();
        assert_eq!(mode_of(&nested), 0o700);
    }

    #[test]
    fn open_file_is_refused() {
        let tmp = TempDir::new("openfile");
        let store = tmp.store();
        store.update("k", |_| Some(json!({"t": "secret"}))).unwrap();
        let file = record_path(&tmp.0, "k");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        let err = store.read("k").unwrap_err().message;
        assert!(err.contains(&file.display().to_string()), "{err}");
        assert!(err.contains("0644"), "{err}");
        assert!(!err.contains("secret"), "{err}");
        // An update must not use (or overwrite) it either.
        assert!(store.update("k", |_| Some(json!(2))).is_err());
        assert!(store.keys().is_err());
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(store.read("k").unwrap(), Some(json!({"t": "secret"})));
    }

    #[test]
    fn symlink_is_refused() {
        let tmp = TempDir::new("symlink");
        let store = tmp.store();
        let elsewhere = tmp.0.join("elsewhere");
        fs::write(&elsewhere, "{\"key\":\"k\",\"record\":1}").unwrap();
        fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, record_path(&tmp.0, "k")).unwrap();
        let err = store.read("k").unwrap_err().message;
        assert!(err.contains("symbolic link"), "{err}");
    }

    #[test]
    fn tmp_file_is_gone_after_update() {
        let tmp = TempDir::new("tmpgone");
        let store = tmp.store();
        store.update("k", |_| Some(json!(1))).unwrap();
        store.update("k", |_| Some(json!(2))).unwrap();
        let stem = file_stem("k");
        assert_eq!(
            dir_names(&tmp.0),
            vec![format!("{stem}.json"), format!("{stem}.lock")]
        );
        store.update("k", |_| None).unwrap();
        assert_eq!(dir_names(&tmp.0), vec![format!("{stem}.lock")]);
    }

    #[test]
    fn leftover_tmp_file_does_not_disturb() {
        let tmp = TempDir::new("leftover");
        let store = tmp.store();
        store.update("k", |_| Some(json!({"v": "good"}))).unwrap();
        // What a writer that died between create and rename leaves behind.
        let path = record_path(&tmp.0, "k");
        let leftover = PathBuf::from(format!("{}.tmp.999999.00000000deadbeef", path.display()));
        fs::write(&leftover, "{\"key\":\"k\",\"rec").unwrap();
        fs::set_permissions(&leftover, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(store.read("k").unwrap(), Some(json!({"v": "good"})));
        assert_eq!(store.keys().unwrap(), vec!["k".to_string()]);
        store.update("k", |_| Some(json!({"v": "newer"}))).unwrap();
        assert_eq!(store.read("k").unwrap(), Some(json!({"v": "newer"})));
    }

    #[test]
    fn corrupt_file_is_an_error_and_kept() {
        let tmp = TempDir::new("corrupt");
        let store = tmp.store();
        let path = record_path(&tmp.0, "k");
        let text = "{\"key\":\"k\",\"record\":{\"access_token\":\"secret";
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let err = store.read("k").unwrap_err().message;
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(!err.contains("secret"), "{err}");
        assert!(store.update("k", |_| None).is_err());
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
    }

    /// Every kind of record that cannot be used is one (the connection says to log out), and
    /// `remove` takes it away without reading it or following it; what a symlink led to stays.
    #[test]
    fn an_unusable_record_is_removed_without_being_read() {
        let tmp = TempDir::new("unusable");
        let store = tmp.store();
        let path = record_path(&tmp.0, "k");
        let outside = tmp.0.join("outside.json");
        let plant = |what: &str| match what {
            "not JSON" => fs::write(&path, "{\"key\":\"k\",\"rec").unwrap(),
            "not an object" => fs::write(&path, "[1,2]").unwrap(),
            "no key" => fs::write(&path, "{\"record\":{}}").unwrap(),
            "another key" => fs::write(&path, "{\"key\":\"x\",\"record\":{}}").unwrap(),
            "open to others" => fs::write(&path, "{\"key\":\"k\",\"record\":{}}").unwrap(),
            "a directory" => {
                fs::create_dir(&path).unwrap();
                fs::write(path.join("inside"), "x").unwrap();
            }
            "a FIFO" => rustix::fs::mknodat(
                rustix::fs::CWD,
                &path,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )
            .unwrap(),
            "a symlink" => {
                fs::write(&outside, "{\"key\":\"k\",\"record\":{\"t\":1}}").unwrap();
                fs::set_permissions(&outside, fs::Permissions::from_mode(0o600)).unwrap();
                std::os::unix::fs::symlink(&outside, &path).unwrap();
            }
            "a dangling symlink" => {
                std::os::unix::fs::symlink(tmp.0.join("nowhere"), &path).unwrap()
            }
            other => unreachable!("{other}"),
        };
        let kinds = [
            "not JSON",
            "not an object",
            "no key",
            "another key",
            "open to others",
            "a directory",
            "a FIFO",
            "a symlink",
            "a dangling symlink",
        ];
        for what in kinds {
            plant(what);
            if fs::symlink_metadata(&path).unwrap().file_type().is_file() {
                fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).ok();
                if what == "open to others" {
                    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
                }
            }
            let err = store.read("k").unwrap_err();
            assert!(err.unusable_record, "{what}: {err:?}");
            assert!(
                store.update("k", |_| None).unwrap_err().unusable_record,
                "{what}"
            );
            assert_eq!(store.remove("k"), Ok(true), "{what}");
            assert!(fs::symlink_metadata(&path).is_err(), "{what}: still there");
            assert_eq!(store.read("k"), Ok(None), "{what}");
            assert_eq!(store.remove("k"), Ok(false), "{what}");
        }
        assert!(outside.is_file(), "what the symlink led to was removed");
        // A usable record goes the same way; nothing at all is no error.
        store.update("k", |_| Some(json!({"t": 1}))).unwrap();
        assert_eq!(store.remove("k"), Ok(true));
        assert_eq!(store.read("k"), Ok(None));
        let absent = Store::Dir(tmp.0.join("never-made"));
        assert_eq!(absent.remove("k"), Ok(false));
        assert!(
            !tmp.0.join("never-made").exists(),
            "remove created the directory"
        );
        let memory = Store::private_memory();
        memory.update("k", |_| Some(json!(1))).unwrap();
        assert_eq!(memory.remove("k"), Ok(true));
        assert_eq!(memory.remove("k"), Ok(false));
    }

    #[test]
    fn a_store_failure_is_not_the_record_s() {
        let tmp = TempDir::new("lockfail");
        let store = tmp.store();
        store.update("k", |_| Some(json!(1))).unwrap();
        // A lock file that is a directory: the store's trouble, not the record's.
        let lock = tmp.0.join(format!("{}.lock", file_stem("k")));
        fs::remove_file(&lock).unwrap();
        fs::create_dir(&lock).unwrap();
        let err = store.update("k", |_| Some(json!(2))).unwrap_err();
        assert!(!err.unusable_record, "{err:?}");
    }

    #[test]
    fn foreign_key_in_file_is_refused() {
        let tmp = TempDir::new("foreign");
        let store = tmp.store();
        store
            .update("victim", |_| Some(json!({"t": "theirs"})))
            .unwrap();
        // As if "victim"'s file sat under the name of "k" (a collision or tampering).
        fs::rename(record_path(&tmp.0, "victim"), record_path(&tmp.0, "k")).unwrap();
        let err = store.read("k").unwrap_err().message;
        assert!(err.contains("another key"), "{err}");
        assert!(!err.contains("theirs"), "{err}");
        assert!(store.keys().unwrap_err().contains("does not match"));
    }

    #[test]
    fn lock_timeout_names_the_lock_file() {
        let tmp = TempDir::new("timeout");
        let store = tmp.store();
        let lock_path = tmp.0.join(format!("{}.lock", file_stem("k")));
        let holder = crate::sys::fs::lock(&lock_path, Duration::from_secs(1)).unwrap();
        let start = Instant::now();
        let err = store
            .update_within("k", Duration::from_millis(150), |_| Some(json!(1)))
            .unwrap_err()
            .message;
        assert!(start.elapsed() >= Duration::from_millis(150));
        assert!(err.contains(&lock_path.display().to_string()), "{err}");
        assert_eq!(store.read("k").unwrap(), None);
        drop(holder);
        store.update("k", |_| Some(json!(1))).unwrap();
    }

    #[test]
    fn cross_process_lock_sees_the_other_write() {
        let tmp = TempDir::new("fork");
        let store = tmp.store();
        // Everything lazily set up (ring's CPU detection) is done before fork, so the child
        // never waits on a once-lock another thread of the harness held at fork time.
        assert_eq!(store.read("k").unwrap(), None);

        let (rd, wr) = crate::sys::fd::pipe(false).unwrap();
        let child = crate::sys::process::fork(|| {
            store
                .update("k", |_| {
                    // The lock is held here: tell the parent.
                    let told = crate::sys::fd::write(&wr, &[1]).is_ok_and(|n| n == 1);
                    std::thread::sleep(Duration::from_millis(300));
                    told.then(|| json!({"n": 1}))
                })
                .is_ok_and(|v| v == Some(json!({"n": 1})))
        })
        .expect("fork");
        drop(wr);
        let n = loop {
            match crate::sys::fd::read(&rd, &mut [0u8; 1]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        drop(rd);
        if !matches!(n, Ok(1)) {
            let status = child.wait();
            panic!("the child never took the lock (read {n:?}, exit {status:?})");
        }
        let start = Instant::now();
        let got = store.update("k", |cur| {
            let n = cur.as_ref().and_then(|v| v["n"].as_i64()).unwrap_or(0);
            Some(json!({"n": n + 1}))
        });
        let waited = start.elapsed();
        assert_eq!(child.wait().unwrap(), Some(0), "the child failed");
        assert_eq!(got.unwrap(), Some(json!({"n": 2})));
        assert_eq!(store.read("k").unwrap(), Some(json!({"n": 2})));
        assert!(
            waited >= Duration::from_millis(100),
            "the parent did not wait: {waited:?}"
        );
    }

    /// Two refreshers racing with the same refresh token: each replaces the record only if it
    /// still holds the token it refreshed with. Exactly one wins, and the loser sees (and keeps)
    /// the winner's record.
    fn compare_and_swap_race(store: &Store) {
        let key = "srv|https://as.example";
        store
            .update(key, |_| Some(json!({"refresh": "r0"})))
            .unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = ["r1-a", "r1-b"]
            .into_iter()
            .map(|new| {
                let (store, barrier) = (store.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let mut won = false;
                    let got = store
                        .update(key, |cur| {
                            // Widen the window in which an unlocked store would let both in.
                            std::thread::sleep(Duration::from_millis(50));
                            if cur.as_ref().is_some_and(|c| c["refresh"] == "r0") {
                                won = true;
                                Some(json!({"refresh": new}))
                            } else {
                                cur
                            }
                        })
                        .unwrap();
                    (won, got)
                })
            })
            .collect();
        let results: Vec<(bool, Option<Value>)> =
            threads.into_iter().map(|t| t.join().unwrap()).collect();
        let final_value = store.read(key).unwrap();
        assert_eq!(
            results.iter().filter(|(won, _)| *won).count(),
            1,
            "{results:?}"
        );
        for (_, got) in &results {
            assert_eq!(got, &final_value, "{results:?}");
        }
        let refresh = final_value.as_ref().unwrap()["refresh"].as_str().unwrap();
        assert!(refresh == "r1-a" || refresh == "r1-b", "{refresh}");
    }

    #[test]
    fn compare_and_swap_race_dir() {
        let tmp = TempDir::new("cas");
        compare_and_swap_race(&tmp.store());
    }

    #[test]
    fn compare_and_swap_race_memory() {
        compare_and_swap_race(&Store::private_memory());
    }

    #[test]
    fn default_dir_uses_xdg_state_home() {
        // The only test that touches the environment; the lock keeps any later one serial.
        static ENV: Mutex<()> = parking_lot::const_mutex(());
        let _env = ENV.lock();

        /// Puts XDG_STATE_HOME back, even when an assertion fails.
        struct Restore(Option<OsString>);
        impl Drop for Restore {
            fn drop(&mut self) {
                match self.0.take() {
                    Some(v) => std::env::set_var("XDG_STATE_HOME", v),
                    None => std::env::remove_var("XDG_STATE_HOME"),
                }
            }
        }
        let _restore = Restore(std::env::var_os("XDG_STATE_HOME"));

        let tmp = TempDir::new("xdg");
        std::env::set_var("XDG_STATE_HOME", &tmp.0);
        let store = Store::open(None).unwrap();
        let want = tmp.0.join("mcplug").join("auth");
        assert_eq!(store.path(), Some(want.as_path()));
        assert_eq!(mode_of(&want), 0o700);
        store.update("k", |_| Some(json!(1))).unwrap();
        assert!(record_path(&want, "k").is_file());
    }

    #[test]
    fn default_dir_falls_back_to_home() {
        let home = || Some(PathBuf::from("/home/u"));
        let from_home = PathBuf::from("/home/u/.local/state/mcplug/auth");
        assert_eq!(state_dir(None, home).unwrap(), from_home);
        assert_eq!(
            state_dir(Some("rel/state".into()), home).unwrap(),
            from_home
        );
        assert_eq!(state_dir(Some("".into()), home).unwrap(), from_home);
        assert_eq!(
            state_dir(Some("/xdg".into()), || panic!("HOME asked")).unwrap(),
            PathBuf::from("/xdg/mcplug/auth")
        );
        assert!(state_dir(None, || None).is_err());
    }
}
