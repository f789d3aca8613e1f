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
    let cwd = cwd_option(s("cwd")?)?;
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

/// The `cwd` option of an edit: the one given, else the current directory.
fn cwd_option(given: Option<String>) -> Result<PathBuf, Error> {
    match given {
        Some(c) => Ok(PathBuf::from(c)),
        None => std::env::current_dir().map_err(|e| {
            Error::invalid(format!(
                "no `cwd` option and the current directory is unknown: {e}"
            ))
        }),
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

/// The keys of Claude Code's project-server choices in `.claude/settings.local.json`.
const ENABLED: &str = "enabledMcpjsonServers";
const DISABLED: &str = "disabledMcpjsonServers";
const ENABLE_ALL: &str = "enableAllProjectMcpServers";

/// `<cwd>/.claude/settings.local.json`, where Claude Code writes a project's choices; `keys`:
/// the options the function reads (any other is refused, naming it).
fn local_settings(o: &Value, keys: &[&str]) -> Result<Target, Error> {
    let Some(obj) = o.as_object() else {
        return Err(Error::invalid(format!(
            "`options_json` must be a JSON object (got {o})"
        )));
    };
    if let Some(k) = obj.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(crate::shape::unknown_option(k, &[keys]));
    }
    let cwd = match o.get("cwd") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.clone()),
        Some(v) => {
            return Err(Error::invalid(format!(
                "option `cwd` must be a string (got {v})"
            )))
        }
    };
    let cwd = cwd_option(cwd)?;
    Ok(Target {
        scope: "local settings".into(),
        file: cwd.join(".claude").join("settings.local.json"),
        path: Vec::new(),
    })
}

/// The names of a string array at `key` of the settings (created empty when absent).
fn names_mut<'a>(
    root: &'a mut Map<String, Value>,
    key: &str,
    file: &Path,
) -> Result<&'a mut Vec<Value>, Error> {
    let v = root.entry(key).or_insert_with(|| json!([]));
    if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) {
        return Err(Error::new(
            ErrorKind::Config,
            format!(
                "{}: `{key}` must be an array of server names (it is {v}); fix or remove it first",
                file.display()
            ),
        ));
    }
    Ok(v.as_array_mut().expect("checked: an array"))
}

/// Writes a choice of Claude Code's project-server dialog for server `name` as the dialog writes
/// it: `"yes"` adds it to `enabledMcpjsonServers` (and takes it out of
/// `disabledMcpjsonServers`), `"yes_all"` does that and sets `enableAllProjectMcpServers`, `"no"`
/// adds it to `disabledMcpjsonServers` (and takes it out of `enabledMcpjsonServers`). Options:
/// `name`, `choice`, `cwd`. Returns `{"file", "name", "choice", "enabledMcpjsonServers",
/// "disabledMcpjsonServers", "enableAllProjectMcpServers"}` as the file now has them.
pub fn approve_project_server(o: &Value) -> Result<Value, Error> {
    let name = name_of(o)?;
    let choice = match o.get("choice").and_then(Value::as_str) {
        Some(c @ ("yes" | "yes_all" | "no")) => c.to_string(),
        None if o.get("choice").is_none() => "yes".to_string(),
        _ => {
            return Err(Error::invalid(format!(
                "option `choice` must be \"yes\", \"yes_all\" or \"no\" (got {})",
                o.get("choice").unwrap_or(&Value::Null)
            )))
        }
    };
    let t = local_settings(o, &["name", "choice", "cwd"])?;
    edit(&t, |root, _| {
        let file = t.file.display().to_string();
        let Some(root) = root.as_object_mut() else {
            return Err(Error::new(
                ErrorKind::Config,
                format!("{file} is not a JSON object"),
            ));
        };
        let (add, drop) = if choice == "no" {
            (DISABLED, ENABLED)
        } else {
            (ENABLED, DISABLED)
        };
        names_mut(root, drop, &t.file)?.retain(|n| n.as_str() != Some(name.as_str()));
        let list = names_mut(root, add, &t.file)?;
        if !list.iter().any(|n| n.as_str() == Some(name.as_str())) {
            list.push(json!(name));
        }
        if choice == "yes_all" {
            root.insert(ENABLE_ALL.into(), json!(true));
        }
        let state = |k: &str| root.get(k).cloned().unwrap_or(Value::Null);
        Ok((
            json!({"file": file, "name": name, "choice": choice,
                   ENABLED: state(ENABLED), DISABLED: state(DISABLED), ENABLE_ALL: state(ENABLE_ALL)}),
            true,
        ))
    })
}

/// Forgets every choice made for the project's servers, as Claude Code's
/// `reset-project-choices`: `enabledMcpjsonServers`, `disabledMcpjsonServers` and
/// `enableAllProjectMcpServers` leave `<cwd>/.claude/settings.local.json` (the rest stays).
/// Options: `cwd`. Returns `{"file", "reset": [the keys removed]}`.
pub fn reset_project_choices(o: &Value) -> Result<Value, Error> {
    let t = local_settings(o, &["cwd"])?;
    edit(&t, |root, existed| {
        let file = t.file.display().to_string();
        if !existed {
            return Ok((json!({"file": file, "reset": []}), false));
        }
        let Some(root) = root.as_object_mut() else {
            return Err(Error::new(
                ErrorKind::Config,
                format!("{file} is not a JSON object"),
            ));
        };
        let reset: Vec<&str> = [ENABLED, DISABLED, ENABLE_ALL]
            .into_iter()
            .filter(|k| root.shift_remove(*k).is_some())
            .collect();
        let write = !reset.is_empty();
        Ok((json!({"file": file, "reset": reset}), write))
    })
}

#[cfg(test)]
mod approval_tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mcplug-approval-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn choices_are_written_as_claude_codes_dialog_writes_them_and_reset() {
        let d = dir("choices");
        let file = d.join(".claude/settings.local.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            r#"{"permissions": {"allow": ["Bash"]}, "disabledMcpjsonServers": ["a"]}"#,
        )
        .unwrap();
        let cwd = d.display().to_string();
        let r = approve_project_server(&json!({"name": "a", "cwd": cwd})).unwrap();
        assert_eq!(r["enabledMcpjsonServers"], json!(["a"]));
        assert_eq!(
            r["disabledMcpjsonServers"],
            json!([]),
            "yes takes it out of the rejected"
        );
        approve_project_server(&json!({"name": "b", "choice": "no", "cwd": cwd})).unwrap();
        let r =
            approve_project_server(&json!({"name": "c", "choice": "yes_all", "cwd": cwd})).unwrap();
        assert_eq!(r["enableAllProjectMcpServers"], true);
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            written["permissions"]["allow"],
            json!(["Bash"]),
            "the rest of the file stays"
        );
        assert_eq!(written["enabledMcpjsonServers"], json!(["a", "c"]));
        assert_eq!(written["disabledMcpjsonServers"], json!(["b"]));
        let r = reset_project_choices(&json!({"cwd": cwd})).unwrap();
        assert_eq!(
            r["reset"],
            json!([
                "enabledMcpjsonServers",
                "disabledMcpjsonServers",
                "enableAllProjectMcpServers"
            ])
        );
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(written, json!({"permissions": {"allow": ["Bash"]}}));
        let e = approve_project_server(&json!({"name": "a", "choice": "maybe", "cwd": cwd}))
            .unwrap_err();
        assert!(e.message.contains("\"yes\", \"yes_all\" or \"no\""), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
