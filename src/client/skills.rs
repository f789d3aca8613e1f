//! The skills extension (SEP-2640, `io.modelcontextprotocol/skills`), the client's part.
//!
//! A server that declares the extension lists its skills (`skills/list`, paginated) and answers
//! `skills/get` for one skill's URI. An entry is `{"uri": ".../SKILL.md", "frontmatter": {...},
//! "resources": [{"uri", "digest": "sha256:<hex>", "size"}] | "dynamic"}`. The client holds the
//! last entry it saw for each skill (per connection); nothing is fetched ahead of need — not on
//! connect, not on listing.
//!
//! Loading a skill (`load_skill`) reads its `SKILL.md` with `resources/read` and verifies it
//! against the held entry (fetched with `skills/get` when none is held): the byte length
//! against `size`, the SHA-256 against `digest`, and the YAML frontmatter field by field against
//! the entry's `frontmatter`. Any difference fails the load with `invalid_result` and the content
//! is not returned. A loaded skill's supporting files are read with `read_skill_file`, each
//! verified the same way against the entry the skill was loaded from; a file that entry does
//! not list is refused unread. A `"dynamic"` skill cannot be verified by digest: it loads with
//! `"verified": false` (its frontmatter still compared) and its reads count against the size
//! limit. The per-skill limits of the SEP (512 files, 16 MiB in all) are checked from the entry
//! before anything is read; a skill over them is declined (`denied`).

use super::options::CallOptions;
use super::Client;
use crate::error::{Error, ErrorKind, Result};
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The extension's identifier, under `capabilities.extensions`.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";
/// The most files a skill may list.
const MAX_FILES: usize = 512;
/// The most bytes a skill's files may add up to.
const MAX_BYTES: u64 = 16 * 1024 * 1024;
/// How deep a frontmatter value may nest.
const MAX_DEPTH: usize = 64;
/// The most bytes a frontmatter block may take: a skill's name, description and a few fields
/// are a few hundred bytes; a block of megabytes cost a gigabyte to parse before it was refused.
const MAX_FRONTMATTER_BYTES: usize = 64 << 10;
/// The most YAML nodes (scalars, sequences, mappings) a frontmatter may hold.
const MAX_NODES: usize = 10_000;

/// The skills this connection knows of.
#[derive(Default)]
pub(super) struct Skills {
    /// The last entry seen for each skill (by its `SKILL.md` URI), from a listing or `skills/get`.
    held: Mutex<HashMap<String, Value>>,
    /// The loaded skills, each with the entry it was loaded from.
    loaded: Mutex<HashMap<String, Arc<Entry>>>,
}

/// One skill entry, checked.
#[derive(Debug)]
struct Entry {
    uri: String,
    /// The skill's directory: the URI without `/SKILL.md`.
    root: String,
    frontmatter: Map<String, Value>,
    files: Files,
    /// Bytes read so far for a dynamic skill (bounded by `MAX_BYTES`).
    dynamic_read: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
enum Files {
    Listed(Vec<File>),
    Dynamic,
}

#[derive(Debug, Clone)]
struct File {
    uri: String,
    /// 64 lowercase hex digits.
    sha256: String,
    size: u64,
}

/// Why verification failed: `check` names which (`size`, `digest`, `frontmatter`, `unlisted`).
fn unverified(skill: &str, uri: &str, check: &str, message: String, extra: Value) -> Error {
    let mut e = Error::new(ErrorKind::InvalidResult, message);
    let mut data = json!({"skill": skill, "uri": uri, "check": check});
    if let (Value::Object(d), Value::Object(x)) = (&mut data, extra) {
        d.extend(x);
    }
    e.data = Some(data);
    e
}

impl Entry {
    /// Checks an entry as the SEP defines it; an invalid one is never loaded.
    fn parse(v: &Value) -> std::result::Result<Entry, String> {
        let uri = v
            .get("uri")
            .and_then(Value::as_str)
            .ok_or("its `uri` is missing or not a string")?;
        let root = uri
            .strip_suffix("/SKILL.md")
            .filter(|r| r.contains("://"))
            .ok_or_else(|| format!("its uri {uri:?} is not the URI of a SKILL.md"))?;
        check_path(uri, None).map_err(|why| format!("its uri is not a skill's: {why}"))?;
        let frontmatter = v
            .get("frontmatter")
            .and_then(Value::as_object)
            .ok_or("its `frontmatter` is missing or not an object")?
            .clone();
        let name = frontmatter
            .get("name")
            .and_then(Value::as_str)
            .ok_or("its frontmatter has no `name` string")?;
        let last = root.rsplit('/').next().unwrap_or_default();
        let last = last.rsplit("://").next().unwrap_or_default();
        if last != name {
            return Err(format!(
                "its frontmatter name {name:?} is not the last segment of its path ({last:?})"
            ));
        }
        let files = match v.get("resources") {
            Some(Value::String(s)) if s == "dynamic" => Files::Dynamic,
            Some(Value::Array(items)) => {
                let mut files = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    files.push(File::parse(item).map_err(|e| format!("resources[{i}]: {e}"))?);
                }
                if !files.iter().any(|f| f.uri == uri) {
                    return Err(format!(
                        "its resources do not list its own SKILL.md ({uri:?})"
                    ));
                }
                for f in &files {
                    check_path(&f.uri, Some(root)).map_err(|why| {
                        format!("its resources list a file that is not the skill's: {why}")
                    })?;
                }
                Files::Listed(files)
            }
            Some(other) => {
                return Err(format!(
                    "its `resources` is neither an array nor \"dynamic\" ({other})"
                ))
            }
            None => return Err("it has no `resources`".into()),
        };
        Ok(Entry {
            uri: uri.to_string(),
            root: root.to_string(),
            frontmatter,
            files,
            dynamic_read: Default::default(),
        })
    }

    /// The per-skill limits, checked from the entry alone.
    fn check_limits(&self) -> Result<()> {
        let Files::Listed(files) = &self.files else {
            return Ok(());
        };
        let total: u64 = files.iter().map(|f| f.size).fold(0, u64::saturating_add);
        if files.len() > MAX_FILES || total > MAX_BYTES {
            let mut e = Error::new(
                ErrorKind::Denied,
                format!(
                    "skill {:?} is over the limits of a skill ({} files, {total} bytes; at most {MAX_FILES} files and {MAX_BYTES} bytes): not loaded",
                    self.uri,
                    files.len()
                ),
            );
            e.data = Some(json!({"skill": self.uri, "files": files.len(), "bytes": total}));
            return Err(e);
        }
        Ok(())
    }

    fn listed(&self, uri: &str) -> Option<&File> {
        match &self.files {
            Files::Listed(files) => files.iter().find(|f| f.uri == uri),
            Files::Dynamic => None,
        }
    }

    /// Verifies one file's bytes against this entry; `Ok(true)` when verified, `Ok(false)` for a
    /// dynamic skill (nothing to verify against, the size limit applied instead).
    fn verify(&self, uri: &str, bytes: &[u8]) -> Result<bool> {
        let Files::Listed(_) = &self.files else {
            let before = self
                .dynamic_read
                .fetch_add(bytes.len() as u64, Ordering::AcqRel);
            if before + bytes.len() as u64 > MAX_BYTES {
                return Err(Error::new(
                    ErrorKind::Denied,
                    format!(
                        "dynamic skill {:?}: what was read passed {MAX_BYTES} bytes; not used",
                        self.uri
                    ),
                ));
            }
            return Ok(false);
        };
        let Some(file) = self.listed(uri) else {
            return Err(unverified(
                &self.uri,
                uri,
                "unlisted",
                format!(
                    "{uri:?} is not among the files of skill {:?}: not used",
                    self.uri
                ),
                json!({}),
            ));
        };
        if bytes.len() as u64 != file.size {
            return Err(unverified(
                &self.uri,
                uri,
                "size",
                format!(
                    "{uri:?} is {} bytes, but skill {:?} lists it at {} (stale or tampered; skills/get gives the current entry): not used",
                    bytes.len(),
                    self.uri,
                    file.size
                ),
                json!({"expected": file.size, "actual": bytes.len()}),
            ));
        }
        let actual = sha256_hex(bytes);
        if actual != file.sha256 {
            return Err(unverified(
                &self.uri,
                uri,
                "digest",
                format!(
                    "the SHA-256 of {uri:?} is not the digest skill {:?} lists (stale or tampered; skills/get gives the current entry): not used",
                    self.uri
                ),
                json!({"expected": format!("sha256:{}", file.sha256), "actual": format!("sha256:{actual}")}),
            ));
        }
        Ok(true)
    }

    /// Compares a fetched SKILL.md's frontmatter with the entry's, field by field.
    fn check_frontmatter(&self, text: &str) -> Result<()> {
        let fail = |message: String| {
            unverified(
                &self.uri,
                &self.uri,
                "frontmatter",
                format!(
                    "the frontmatter of {:?} does not match its entry: {message}; not loaded",
                    self.uri
                ),
                json!({"expected": self.frontmatter}),
            )
        };
        let found = frontmatter_of(text).map_err(fail)?;
        for (key, want) in &self.frontmatter {
            match found.get(key) {
                None => return Err(fail(format!("field {key:?} is missing from the file"))),
                Some(got) if !same_value(got, want) => {
                    return Err(fail(format!(
                        "field {key:?} is {got} in the file, {want} in the entry"
                    )))
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = found.keys().find(|k| !self.frontmatter.contains_key(*k)) {
            return Err(fail(format!(
                "the file has field {extra:?}, which the entry does not"
            )));
        }
        Ok(())
    }
}

impl File {
    fn parse(v: &Value) -> std::result::Result<File, String> {
        let uri = v
            .get("uri")
            .and_then(Value::as_str)
            .ok_or("no `uri` string")?;
        let digest = v
            .get("digest")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{uri:?} has no `digest` string"))?;
        let hex = digest
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .ok_or_else(|| {
                format!("{uri:?} has digest {digest:?}, not sha256:<64 lowercase hex digits>")
            })?;
        let size = v
            .get("size")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("{uri:?} has no `size` (a byte count)"))?;
        Ok(File {
            uri: uri.to_string(),
            sha256: hex.to_string(),
            size,
        })
    }
}

/// The one rule of a skill's paths, for its entry and every read: `uri` is inside the directory
/// `root` (`Some`) or the skill's own URI (`root` `None`), and no segment of its path is a dot
/// segment (`.` or `..`) — also written `%2e`, in any case, or made with an encoded slash
/// (`%2f`) or a backslash — which a server may resolve to outside the skill's directory.
/// Refused, not normalized: a URI is sent as the entry lists it. The error names the URI.
fn check_path(uri: &str, root: Option<&str>) -> std::result::Result<(), String> {
    let path = uri.split(['?', '#']).next().unwrap_or_default();
    let path = path.split_once("://").map_or(path, |(_, p)| p);
    let mut decoded = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(at) = rest.find('%') {
        decoded.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3).map(str::to_ascii_lowercase);
        match code.as_deref() {
            Some("2e") => decoded.push('.'),
            Some("2f") | Some("5c") => decoded.push('/'),
            _ => {
                decoded.push('%');
                rest = &rest[at + 1..];
                continue;
            }
        }
        rest = &rest[at + 3..];
    }
    decoded.push_str(rest);
    if decoded
        .split(['/', '\\'])
        .any(|seg| seg == "." || seg == "..")
    {
        return Err(format!(
            "{uri:?} has a dot segment (`.` or `..`, perhaps percent-encoded) in its path, which could leave the skill's directory"
        ));
    }
    if let Some(root) = root {
        if !uri.starts_with(&format!("{root}/")) {
            return Err(format!("{uri:?} is not in the skill's directory {root:?}"));
        }
    }
    Ok(())
}

fn sha256_hex(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Equal as JSON values, numbers by value (`1` and `1.0` are the same number).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

/// What the fuzz target of the frontmatter runs.
pub(crate) fn fuzz_frontmatter(text: &str) {
    let _ = frontmatter_of(text);
}

/// The YAML frontmatter of a SKILL.md (between a first line `---` and the next `---` line), as
/// JSON. Anchors and aliases are refused (an alias can multiply a small text into a huge tree).
fn frontmatter_of(text: &str) -> std::result::Result<Map<String, Value>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end_matches(['\r', '\n']) != "---" {
        return Err("the file does not begin with a `---` frontmatter block".into());
    }
    let start = first.len();
    let mut at = start;
    let mut end = None;
    for line in lines {
        if at - start > MAX_FRONTMATTER_BYTES {
            break; // refused below, before anything is parsed
        }
        if line
            .trim_end_matches(['\r', '\n'])
            .trim_end_matches([' ', '\t'])
            == "---"
        {
            end = Some(at);
            break;
        }
        at += line.len();
    }
    if end.is_none() && at - start > MAX_FRONTMATTER_BYTES {
        return Err(format!(
            "its frontmatter block is larger than {MAX_FRONTMATTER_BYTES} bytes"
        ));
    }
    let yaml = &text[start..end.ok_or("its frontmatter block has no closing `---` line")?];
    if yaml.len() > MAX_FRONTMATTER_BYTES {
        return Err(format!(
            "its frontmatter block is larger than {MAX_FRONTMATTER_BYTES} bytes ({})",
            yaml.len()
        ));
    }
    // A first pass over the events, iterative (the parser's own `load` recurses once per level,
    // and a few hundred bytes of nested block sequences overflow a small host stack): the
    // nesting is bounded and anchors and aliases refused before any tree is built.
    let mut parser = yaml_rust2::parser::Parser::new_from_str(yaml);
    let mut depth = 0usize;
    let mut nodes = 0usize;
    loop {
        let (event, _) = parser
            .next_token()
            .map_err(|e| format!("its frontmatter is not valid YAML ({e})"))?;
        if matches!(
            event,
            yaml_rust2::Event::Scalar(..)
                | yaml_rust2::Event::SequenceStart(..)
                | yaml_rust2::Event::MappingStart(..)
        ) {
            nodes += 1;
            if nodes > MAX_NODES {
                return Err(format!(
                    "its frontmatter has more than {MAX_NODES} YAML nodes"
                ));
            }
        }
        match event {
            yaml_rust2::Event::StreamEnd => break,
            yaml_rust2::Event::Alias(_) => {
                return Err(
                    "its frontmatter uses YAML anchors or aliases, which are not accepted".into(),
                )
            }
            yaml_rust2::Event::Scalar(_, _, anchor, _) if anchor > 0 => {
                return Err(
                    "its frontmatter uses YAML anchors or aliases, which are not accepted".into(),
                )
            }
            yaml_rust2::Event::SequenceStart(anchor, _)
            | yaml_rust2::Event::MappingStart(anchor, _) => {
                if anchor > 0 {
                    return Err(
                        "its frontmatter uses YAML anchors or aliases, which are not accepted"
                            .into(),
                    );
                }
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!("its frontmatter nests deeper than {MAX_DEPTH}"));
                }
            }
            yaml_rust2::Event::SequenceEnd | yaml_rust2::Event::MappingEnd => {
                depth = depth.saturating_sub(1)
            }
            _ => {}
        }
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(yaml)
        .map_err(|e| format!("its frontmatter is not valid YAML ({e})"))?;
    match docs.first().map(|d| yaml_to_json(d, 0)).transpose()? {
        Some(Value::Object(m)) => Ok(m),
        Some(other) => Err(format!("its frontmatter is not a mapping ({other})")),
        None => Err("its frontmatter is empty".into()),
    }
}

fn yaml_to_json(y: &yaml_rust2::Yaml, depth: usize) -> std::result::Result<Value, String> {
    use yaml_rust2::Yaml;
    if depth > MAX_DEPTH {
        return Err(format!("its frontmatter nests deeper than {MAX_DEPTH}"));
    }
    Ok(match y {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => json!(i),
        Yaml::Real(s) => match s.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
            Some(n) => Value::Number(n),
            None => Value::String(s.clone()),
        },
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| yaml_to_json(i, depth + 1))
                .collect::<std::result::Result<_, _>>()?,
        ),
        Yaml::Hash(h) => {
            let mut m = Map::new();
            for (k, v) in h {
                let key = match k {
                    Yaml::String(s) | Yaml::Real(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    Yaml::Null => "null".into(),
                    _ => return Err("its frontmatter has a key that is not a scalar".into()),
                };
                m.insert(key, yaml_to_json(v, depth + 1)?);
            }
            Value::Object(m)
        }
        Yaml::Alias(_) | Yaml::BadValue => {
            return Err("its frontmatter has a value that cannot be read".into())
        }
    })
}

/// The bytes of one `resources/read` result's content for `uri`, and how it came (`text` or
/// `blob`) with its `mimeType`.
fn content_of(result: &Value, uri: &str) -> Result<(Vec<u8>, Value)> {
    let contents = result
        .get("contents")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            Error::protocol(format!("resources/read of {uri:?}: no `contents` array"))
        })?;
    let item = contents
        .iter()
        .find(|c| c.get("uri").and_then(Value::as_str) == Some(uri))
        .or_else(|| contents.first())
        .ok_or_else(|| Error::protocol(format!("resources/read of {uri:?}: empty `contents`")))?;
    let mut shown = Map::new();
    shown.insert("uri".into(), json!(uri));
    if let Some(m) = item.get("mimeType") {
        shown.insert("mimeType".into(), m.clone());
    }
    if let Some(t) = item.get("text").and_then(Value::as_str) {
        shown.insert("text".into(), json!(t));
        return Ok((t.as_bytes().to_vec(), Value::Object(shown)));
    }
    if let Some(b) = item.get("blob").and_then(Value::as_str) {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| {
                Error::protocol(format!(
                    "resources/read of {uri:?}: `blob` is not base64 ({e})"
                ))
            })?;
        shown.insert("blob".into(), json!(b));
        return Ok((bytes, Value::Object(shown)));
    }
    Err(Error::protocol(format!(
        "resources/read of {uri:?}: the content has neither `text` nor `blob`"
    )))
}

/// A file of a skill named by the host: a URI, or a path relative to the skill's directory.
fn resolve(entry: &Entry, file: &str) -> Result<String> {
    if file.contains("://") {
        return Ok(file.to_string());
    }
    let mut parts = Vec::new();
    for seg in file.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                return Err(Error::invalid(format!(
                "file {file:?}: `..` may not leave the skill's directory; name files inside {:?}",
                entry.root
            )))
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        return Err(Error::invalid(format!("file {file:?} names no file")));
    }
    Ok(format!("{}/{}", entry.root, parts.join("/")))
}

impl Client {
    /// Refuses when the server did not declare the skills extension.
    fn check_skills(&self) -> Result<()> {
        if self
            .shared
            .host
            .server_declares(&["extensions", SKILLS_EXTENSION])
        {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::NotFound,
            format!("the server does not declare the skills extension ({SKILLS_EXTENSION} under capabilities.extensions)"),
        ))
    }

    /// `skills/list`, every page: `{"skills": [...]}`, the entries as the server sent them. Each
    /// becomes the held entry of its skill; nothing is read.
    pub async fn list_skills(&self, options: &CallOptions) -> Result<Value> {
        self.check_skills()?;
        let all = self
            .list_all("skills/list", "skills", None, options)
            .await?;
        if let Some(Value::Array(entries)) = all.get("skills") {
            let mut held = self.shared.skills.held.lock();
            for e in entries {
                if let Some(uri) = e.get("uri").and_then(Value::as_str) {
                    held.insert(uri.to_string(), e.clone());
                }
            }
        }
        Ok(all)
    }

    /// `skills/get`: the entry of one skill (listed or not), held from now on.
    pub async fn get_skill(&self, uri: &str, options: &CallOptions) -> Result<Value> {
        self.check_skills()?;
        let result = self
            .request("skills/get", Some(json!({"uri": uri})), options)
            .await?
            .value()?;
        let entry = result
            .get("skill")
            .filter(|s| s.is_object())
            .cloned()
            .ok_or_else(|| {
                Error::protocol(format!(
                    "skills/get of {uri:?}: no `skill` object in the result"
                ))
            })?;
        self.shared
            .skills
            .held
            .lock()
            .insert(uri.to_string(), entry.clone());
        Ok(entry)
    }

    /// Loads a skill: its `SKILL.md`, read now and verified against the held entry (`skills/get`
    /// first when none is held). Returns `{"uri", "name", "frontmatter", "text", "verified",
    /// "files": [uri, ...] | "dynamic"}`; a file that fails verification is `invalid_result`
    /// (`data`: `{"skill", "uri", "check": "size"|"digest"|"frontmatter", ...}`), an invalid
    /// entry `protocol`, a skill over the limits `denied`.
    pub async fn load_skill(&self, uri: &str, options: &CallOptions) -> Result<Value> {
        self.check_skills()?;
        let held = self.shared.skills.held.lock().get(uri).cloned();
        let raw = match held {
            Some(e) => e,
            None => self.get_skill(uri, options).await?,
        };
        let entry = Entry::parse(&raw).map_err(|why| {
            let mut e = Error::protocol(format!(
                "the entry of skill {uri:?} is invalid: {why}; not loaded"
            ));
            e.data = Some(json!({"skill": uri, "entry": raw}));
            e
        })?;
        if entry.uri != uri {
            return Err(Error::protocol(format!(
                "the entry held for skill {uri:?} is for {:?}",
                entry.uri
            )));
        }
        entry.check_limits()?;
        let read = self
            .request("resources/read", Some(json!({"uri": uri})), options)
            .await?
            .value()?;
        let (bytes, _) = content_of(&read, uri)?;
        let verified = entry.verify(uri, &bytes)?;
        let text = String::from_utf8(bytes).map_err(|_| {
            unverified(
                uri,
                uri,
                "frontmatter",
                format!("{uri:?} is not UTF-8 text: not loaded"),
                json!({}),
            )
        })?;
        entry.check_frontmatter(&text)?;
        let files = match &entry.files {
            Files::Listed(f) => Value::Array(f.iter().map(|f| json!(f.uri)).collect()),
            Files::Dynamic => json!("dynamic"),
        };
        let out = json!({
            "uri": uri,
            "name": entry.frontmatter.get("name"),
            "frontmatter": entry.frontmatter,
            "text": text,
            "verified": verified,
            "files": files,
        });
        self.shared
            .skills
            .loaded
            .lock()
            .insert(uri.to_string(), Arc::new(entry));
        Ok(out)
    }

    /// Reads one file of a loaded skill (`file`: its URI, or a path relative to the skill's
    /// directory), verified against the entry the skill was loaded from: `{"uri", "mimeType",
    /// "text" | "blob", "verified"}`. A file that entry does not list is refused unread.
    pub async fn read_skill_file(
        &self,
        skill: &str,
        file: &str,
        options: &CallOptions,
    ) -> Result<Value> {
        self.check_skills()?;
        let entry = self
            .shared
            .skills
            .loaded
            .lock()
            .get(skill)
            .cloned()
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NotFound,
                    format!("skill {skill:?} is not loaded on this connection: load it first"),
                )
            })?;
        let uri = resolve(&entry, file)?;
        check_path(&uri, Some(&entry.root)).map_err(|why| {
            Error::invalid(format!("{why}: not a file of skill {skill:?}; not read"))
        })?;
        if matches!(entry.files, Files::Listed(_)) && entry.listed(&uri).is_none() {
            // Refused before anything is read: the entry is the whole skill.
            entry.verify(&uri, &[])?;
        }
        let read = self
            .request("resources/read", Some(json!({"uri": uri})), options)
            .await?
            .value()?;
        let (bytes, mut shown) = content_of(&read, &uri)?;
        let verified = entry.verify(&uri, &bytes)?;
        shown["verified"] = json!(verified);
        Ok(shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKILL: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nSkill body.\n";
    const FORMS: &str = "Supporting content.\n";

    #[test]
    fn a_large_frontmatter_is_refused_before_it_is_parsed() {
        // 15 MiB of frontmatter (closed, and never closed), and many small nodes.
        let big = format!(
            "---\nname: demo\ndescription: {}\n---\nbody\n",
            "x".repeat(15 << 20)
        );
        let open = format!("---\nname: demo\n{}", "k: v\n".repeat(3 << 20));
        let many = format!("---\nname: demo\nl: [{}]\n---\n", "1,".repeat(20_000));
        let started = std::time::Instant::now();
        for (text, says) in [
            (&big, "larger than"),
            (&open, "larger than"),
            (&many, "YAML nodes"),
        ] {
            let e = frontmatter_of(text).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        let ok = "---\nname: demo\ndescription: fine\n---\nbody\n";
        assert!(frontmatter_of(ok).is_ok());
    }

    #[test]
    fn deep_frontmatter_is_refused_without_recursing_on_a_small_stack() {
        let deep_block = format!("---\nname: x\na:\n{}x\n---\n", "- ".repeat(5000));
        let deep_flow = format!(
            "---\nname: x\na: {}{}\n---\n",
            "[".repeat(5000),
            "]".repeat(5000)
        );
        let shallow = format!("---\nname: x\na:\n{}x\n---\n", "- ".repeat(10));
        let got = std::thread::Builder::new()
            .stack_size(128 << 10)
            .spawn(move || {
                (
                    frontmatter_of(&deep_block).unwrap_err(),
                    frontmatter_of(&deep_flow).unwrap_err(),
                    frontmatter_of(&shallow).is_ok(),
                )
            })
            .unwrap()
            .join()
            .expect("no stack overflow");
        assert!(got.0.contains("nests deeper than 64"), "{}", got.0);
        assert!(
            got.1.contains("nests deeper than 64") || got.1.contains("not valid YAML"),
            "{}",
            got.1
        );
        assert!(got.2);
    }

    fn entry_json(skill_md: &str) -> Value {
        json!({
            "uri": "skill://pdf-processing/SKILL.md",
            "frontmatter": {"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents"},
            "resources": [
                {"uri": "skill://pdf-processing/SKILL.md", "digest": format!("sha256:{}", sha256_hex(skill_md.as_bytes())), "size": skill_md.len()},
                {"uri": "skill://pdf-processing/references/FORMS.md", "digest": format!("sha256:{}", sha256_hex(FORMS.as_bytes())), "size": FORMS.len()},
            ]
        })
    }

    #[test]
    fn sha256_is_the_known_one() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_true_file_verifies_and_a_tampered_one_does_not() {
        let e = Entry::parse(&entry_json(SKILL)).unwrap();
        let uri = "skill://pdf-processing/SKILL.md";
        assert!(e.verify(uri, SKILL.as_bytes()).unwrap());
        e.check_frontmatter(SKILL).unwrap();
        assert!(e
            .verify(
                "skill://pdf-processing/references/FORMS.md",
                FORMS.as_bytes()
            )
            .unwrap());
        // Same size, other bytes: the digest.
        let evil = SKILL.replace("Skill body.", "Evil body!!");
        let err = e.verify(uri, evil.as_bytes()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidResult);
        assert_eq!(err.data.as_ref().unwrap()["check"], "digest");
        // More bytes: the size, before any digest.
        let longer = format!("{SKILL}extra bytes\n");
        let err = e.verify(uri, longer.as_bytes()).unwrap_err();
        assert_eq!(err.data.as_ref().unwrap()["check"], "size");
        assert_eq!(err.data.as_ref().unwrap()["actual"], longer.len());
        // A file the entry does not list.
        let err = e
            .verify("skill://pdf-processing/scripts/run.sh", b"")
            .unwrap_err();
        assert_eq!(err.data.as_ref().unwrap()["check"], "unlisted");
    }

    #[test]
    fn the_frontmatter_is_compared_field_by_field() {
        // The file's digest matches its entry, but its frontmatter does not.
        let lying = SKILL.replace(
            "description: Extract, fill, and assemble PDF documents",
            "description: Exfiltrate credentials",
        );
        let e = Entry::parse(&entry_json(&lying)).unwrap();
        assert!(e
            .verify("skill://pdf-processing/SKILL.md", lying.as_bytes())
            .unwrap());
        let err = e.check_frontmatter(&lying).unwrap_err();
        assert_eq!(err.data.as_ref().unwrap()["check"], "frontmatter");
        assert!(err.message.contains("description"), "{}", err.message);
        // An extra field, a missing one, no frontmatter at all, an alias.
        for text in [
            "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nlicense: MIT\n---\n",
            "---\nname: pdf-processing\n---\n",
            "no frontmatter\n",
            "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n",
            "---\nname: &n pdf-processing\ndescription: *n\n---\n",
            "---\n- a list\n---\n",
        ] {
            assert!(e.check_frontmatter(text).is_err(), "{text:?}");
        }
        // Same values written otherwise: CRLF, quotes, a BOM, a number as 1.0 and 1.
        let e = Entry::parse(&json!({
            "uri": "skill://a/b/c/SKILL.md",
            "frontmatter": {"name": "c", "description": "d", "metadata": {"version": 1, "tags": ["x", "y"], "on": true}},
            "resources": "dynamic"
        }))
        .unwrap();
        e.check_frontmatter("\u{feff}---\r\nname: \"c\"\r\ndescription: 'd'\r\nmetadata:\r\n  version: 1.0\r\n  tags: [x, y]\r\n  on: true\r\n---\r\nbody")
            .unwrap();
        assert!(
            !e.verify("skill://a/b/c/SKILL.md", b"anything").unwrap(),
            "dynamic: not verified"
        );
    }

    #[test]
    fn invalid_entries_are_named() {
        let bad = |v: Value, why: &str| {
            let e = Entry::parse(&v).expect_err(&v.to_string());
            assert!(e.contains(why), "{v}: {e}");
        };
        let mut v = entry_json(SKILL);
        v.as_object_mut().unwrap().remove("resources");
        bad(v, "no `resources`");
        let mut v = entry_json(SKILL);
        v["resources"] = json!("static");
        bad(v, "neither an array");
        let mut v = entry_json(SKILL);
        v["resources"][0]["digest"] = json!("sha256:ABC");
        bad(v, "64 lowercase hex");
        let mut v = entry_json(SKILL);
        v["resources"][1]["size"] = json!(-1);
        bad(v, "size");
        let mut v = entry_json(SKILL);
        v["resources"].as_array_mut().unwrap().remove(0);
        bad(v, "own SKILL.md");
        let mut v = entry_json(SKILL);
        v["resources"][1]["uri"] = json!("skill://other/x.md");
        bad(v, "not in the skill's directory");
        let mut v = entry_json(SKILL);
        v["frontmatter"]["name"] = json!("other");
        bad(v, "last segment");
        let mut v = entry_json(SKILL);
        v["uri"] = json!("skill://pdf-processing/README.md");
        bad(v, "not the URI of a SKILL.md");
    }

    #[test]
    fn limits_and_paths() {
        let mut v = entry_json(SKILL);
        v["resources"][1]["size"] = json!(MAX_BYTES);
        let e = Entry::parse(&v).unwrap();
        assert_eq!(e.check_limits().unwrap_err().kind, ErrorKind::Denied);
        let e = Entry::parse(&entry_json(SKILL)).unwrap();
        e.check_limits().unwrap();
        assert_eq!(
            resolve(&e, "references/FORMS.md").unwrap(),
            "skill://pdf-processing/references/FORMS.md"
        );
        assert_eq!(
            resolve(&e, "./references//FORMS.md").unwrap(),
            "skill://pdf-processing/references/FORMS.md"
        );
        assert!(resolve(&e, "../other/SKILL.md").is_err());
        assert!(resolve(&e, "").is_err());
    }

    #[test]
    fn dot_segments_never_leave_the_skill_directory() {
        // In the entry: a listed file, the skill's own URI.
        for escaping in [
            "skill://pdf-processing/../other/secret.md",
            "skill://pdf-processing/./x/../../other/secret.md",
            "skill://pdf-processing/%2e%2e/other/secret.md",
            "skill://pdf-processing/%2E%2e/other/secret.md",
            "skill://pdf-processing/x%2f..%2f..%2fetc/passwd",
            "skill://pdf-processing/x%2F%2E%2E%2Fsecret",
            "skill://pdf-processing/..\\secret",
        ] {
            let mut v = entry_json(SKILL);
            v["resources"][1]["uri"] = json!(escaping);
            let e = Entry::parse(&v).expect_err(escaping);
            assert!(e.contains("dot segment"), "{escaping}: {e}");
            assert!(e.contains(&format!("{escaping:?}")), "names the URI: {e}");
        }
        let mut v = entry_json(SKILL);
        v["uri"] = json!("skill://a/../pdf-processing/SKILL.md");
        v["resources"][0]["uri"] = v["uri"].clone();
        v["resources"].as_array_mut().unwrap().truncate(1);
        assert!(Entry::parse(&v).unwrap_err().contains("dot segment"));
        // In a read, by the same rule.
        let e = Entry::parse(&entry_json(SKILL)).unwrap();
        let read = "skill://pdf-processing/../../etc/passwd";
        let uri = resolve(&e, read).unwrap();
        let err = check_path(&uri, Some(&e.root)).unwrap_err();
        assert!(err.contains("dot segment") && err.contains(read), "{err}");
        assert!(check_path("skill://pdf-processing/%2e%2E/x", Some(&e.root)).is_err());
        // Names with dots that are not dot segments are files like any other.
        check_path("skill://pdf-processing/a..b/.hidden/x.md", Some(&e.root)).unwrap();
        check_path("skill://pdf-processing/100%25/x.md", Some(&e.root)).unwrap();
        assert!(
            check_path("skill://pdf-processing-evil/x.md", Some(&e.root))
                .unwrap_err()
                .contains("not in the skill's directory")
        );
    }
}
