//! Editing (C8): add or remove one server in a scope's file, keeping everything else in it.
//!
//! The file is read as a `serde_json::Value` with the crate's `preserve_order` feature, so keys
//! keep their order and unknown content stays as it was; it is written back pretty-printed (two
//! spaces, as Claude Code writes these files) atomically (`sys::fs::write_atomic`: a unique temporary
//! file renamed over the original) with the original's permissions, 0600 for a new file
//! (`~/.claude.json` holds tokens). Each read-modify-write holds a lock shared by every edit of
//! that file, from any thread or process, so none is lost; a symlinked file is edited at its
//! target. A file that is not valid JSON, not a regular file, or larger than
//! [`MAX_CONFIG_BYTES`] is never overwritten: the edit fails saying why.

use super::entry;
use super::text;
use crate::error::{Error, ErrorKind};
use serde_json::{json, Map, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

struct Target {
    scope: String,
    file: PathBuf,
    /// Object keys from the root down to the servers object.
    path: Vec<String>,
}

fn target(o: &Value) -> Result<Target, Error> {
    let s = |k: &str| -> Result<Option<String>, Error> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(v)) => Ok(Some(v.clone())),
            Some(v) => Err(Error::invalid(format!(
                "option `{k}` must be a string (got {v})"
            ))),
        }
    };
    let scope = s("scope")?.ok_or_else(|| {
        Error::invalid("option `scope` is required: \"user\", \"local\" or \"project\"")
    })?;
    let home = super::home_option(s("home")?.as_deref())?;
    let cwd = match s("cwd")? {
        Some(c) => PathBuf::from(c),
        None => std::env::current_dir().map_err(|e| {
            Error::invalid(format!(
                "no `cwd` option and the current directory is unknown: {e}"
            ))
        })?,
    };
    let mcp = "mcpServers".to_string();
    match scope.as_str() {
        "user" => Ok(Target { scope, file: home.join(".claude.json"), path: vec![mcp] }),
        "local" => Ok(Target {
            scope,
            file: home.join(".claude.json"),
            path: vec!["projects".into(), cwd.display().to_string(), mcp],
        }),
        "project" => Ok(Target { scope, file: cwd.join(".mcp.json"), path: vec![mcp] }),
        other => Err(Error::invalid(format!(
            "option `scope`: {other:?} cannot be edited here; the editable scopes are \"user\" \
             (~/.claude.json), \"local\" (~/.claude.json projects[<cwd>]) and \"project\" (<cwd>/.mcp.json)"
        ))),
    }
}

fn name_of(o: &Value) -> Result<String, Error> {
    let name = o
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid("option `name` (a string) is required"))?;
    entry::check_name(name).map_err(Error::invalid)?;
    Ok(name.to_string())
}

/// The most bytes read from a configuration file (`~/.claude.json` also holds Claude Code's
/// history, so it may be large; not without end).
pub(crate) const MAX_CONFIG_BYTES: u64 = 64 << 20;

/// How long an edit waits for another one (of this process or another) to finish.
const EDIT_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The file's content (an empty object when it does not exist yet) and whether it existed.
fn load(file: &Path) -> Result<(Value, bool), Error> {
    let config = |m: String| Error::new(ErrorKind::Config, m);
    let Some(bytes) = crate::sys::fs::read_regular(file, MAX_CONFIG_BYTES).map_err(config)? else {
        return Ok((json!({}), false));
    };
    let t = String::from_utf8(bytes).map_err(|e| {
        config(format!(
            "{} is not UTF-8 text (a bad byte at offset {}); the file was left untouched",
            file.display(),
            e.utf8_error().valid_up_to()
        ))
    })?;
    let (v, _) = text::parse(&file.display().to_string(), &t, false)
        .map_err(|e| config(format!("{e}; the file was left untouched")))?;
    if !v.is_object() {
        return Err(config(format!(
            "{} does not hold a JSON object; the file was left untouched",
            file.display()
        )));
    }
    Ok((v, true))
}

fn store(file: &Path, v: &Value) -> Result<(), Error> {
    let mut text = serde_json::to_string_pretty(v)
        .map_err(|e| Error::new(ErrorKind::Config, e.to_string()))?;
    text.push('\n');
    // The original's permissions; a new file is private (entries hold tokens).
    let mode = std::fs::metadata(file)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o600);
    crate::sys::fs::write_atomic(file, text.as_bytes(), mode)
        .map_err(|e| Error::new(ErrorKind::Config, e))
}

/// One read-modify-write of a scope's file, under a lock shared with every other edit (threads
/// and processes): `f` gets the content and whether the file existed, and says what to return
/// and whether to write. A symlinked file is edited at its target (the link stays a link).
fn edit<R>(
    t: &Target,
    f: impl FnOnce(&mut Value, bool) -> Result<(R, bool), Error>,
) -> Result<R, Error> {
    let config = |m: String| Error::new(ErrorKind::Config, m);
    let file = crate::sys::fs::resolve(&t.file).map_err(config)?;
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| {
        config(format!(
            "cannot create the directory of {}: {e}",
            file.display()
        ))
    })?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let _lock = crate::sys::fs::lock(&dir.join(format!(".{name}.mcplug-lock")), EDIT_LOCK_TIMEOUT)
        .map_err(config)?;
    let (mut root, existed) = load(&file)?;
    let (r, write) = f(&mut root, existed)?;
    if write {
        store(&file, &root)?;
    }
    Ok(r)
}

/// The servers object along `path`, created (as objects) where missing when `create`.
fn servers_mut<'a>(
    root: &'a mut Value,
    path: &[String],
    file: &Path,
    create: bool,
) -> Result<Option<&'a mut Map<String, Value>>, Error> {
    let mut v = root;
    for (i, k) in path.iter().enumerate() {
        let obj = v.as_object_mut().ok_or_else(|| {
            Error::new(
                ErrorKind::Config,
                format!(
                    "{}: `{}` is not an object; the file was left untouched",
                    file.display(),
                    path[..i].join(".")
                ),
            )
        })?;
        if !obj.contains_key(k) {
            if !create {
                return Ok(None);
            }
            obj.insert(k.clone(), json!({}));
        }
        v = obj.get_mut(k).expect("just checked");
    }
    let at = path.join(".");
    v.as_object_mut().map(Some).ok_or_else(|| {
        Error::new(
            ErrorKind::Config,
            format!(
                "{}: `{at}` is not an object; the file was left untouched",
                file.display()
            ),
        )
    })
}

/// Adds a server to a scope's file. Options: `scope` ("user", "local", "project"), `name`,
/// `config` (the entry, checked as the merge checks it), `home`, `cwd`, `replace` (false: an
/// existing entry of that name is an error). Returns `{"file", "scope", "name", "created",
/// "replaced"}`.
pub fn add_server(o: &Value) -> Result<Value, Error> {
    let t = target(o)?;
    let name = name_of(o)?;
    let config = o
        .get("config")
        .ok_or_else(|| Error::invalid("option `config` (the server entry) is required"))?;
    if let Err(e) = entry::validate(config) {
        return Err(Error::invalid(format!(
            "option `config` is not a valid server entry: {}: {}",
            text::JsonPath::of_keys(&["config"]).join(&e.at),
            e.message
        )));
    }
    let replace = match o.get("replace") {
        None => false,
        Some(v) => crate::shape::bool_of("replace", v)?.unwrap_or(false),
    };
    edit(&t, |root, existed| {
        let servers = servers_mut(root, &t.path, &t.file, true)?.expect("created");
        let replaced = servers.contains_key(&name);
        if replaced && !replace {
            return Err(Error::new(
                ErrorKind::Config,
                format!("{} already has a server named {name:?} in the {} scope; pass \"replace\": true to overwrite it", t.file.display(), t.scope),
            ));
        }
        servers.insert(name.clone(), config.clone());
        Ok((
            json!({"file": t.file.display().to_string(), "scope": t.scope, "name": name, "created": !existed, "replaced": replaced}),
            true,
        ))
    })
}

/// Removes a server from a scope's file. Options: `scope`, `name`, `home`, `cwd`. Returns
/// `{"file", "scope", "name", "removed": <the entry>}`; `not_found` if the file has no such server.
pub fn remove_server(o: &Value) -> Result<Value, Error> {
    let t = target(o)?;
    let name = match o.get("name").and_then(Value::as_str) {
        Some(n) => n.to_string(),
        None => return Err(Error::invalid("option `name` (a string) is required")),
    };
    let not_found = || {
        Error::new(
            ErrorKind::NotFound,
            format!(
                "no server named {name:?} in the {} scope ({})",
                t.scope,
                t.file.display()
            ),
        )
    };
    edit(&t, |root, existed| {
        if !existed {
            return Err(not_found());
        }
        let Some(servers) = servers_mut(root, &t.path, &t.file, false)? else {
            return Err(not_found());
        };
        // shift_remove keeps the order of the other keys (IndexMap's plain remove would swap).
        let Some(removed) = servers.shift_remove(&name) else {
            return Err(not_found());
        };
        Ok((
            json!({"file": t.file.display().to_string(), "scope": t.scope, "name": name, "removed": removed}),
            true,
        ))
    })
}
