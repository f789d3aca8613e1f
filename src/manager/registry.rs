//! The official MCP registry (FEATURES M9), as Claude Code uses it: a trust mark, never a gate.
//!
//! With the manager option `registry` (`true`: `https://registry.modelcontextprotocol.io`, or a
//! sub-registry's base URL), the manager's first `connect` starts one background fetch of
//! `GET {base}/v0.1/servers?version=latest&limit=100`, pages followed by `metadata.nextCursor`,
//! each request bounded by [`REQUEST_TIMEOUT`]; nothing waits for it. What it learns is kept in a
//! disk cache (`$XDG_CACHE_HOME/mcplug/registry/`, else `~/.cache/mcplug/registry/`), and the next
//! fetch asks only for what changed since (`updated_since`). With
//! `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` set, there is no request (the cache still counts).
//!
//! A configured server is known to the registry when its URL, normalized as Claude Code
//! normalizes it (no query or fragment, no trailing slash, the scheme and host in lower case, no
//! default port), is one of an entry's `remotes[].url` — or fits one with `{variables}` — or when
//! its command runs a package an entry lists (`npx <npm package>`, `uvx <PyPI package>`,
//! `docker run <OCI image>` against `packages[]`'s `registryType` and `identifier`). The mark,
//! `{name, status, match, ...}`, is on the server's status and on its pool entries.

use crate::error::Error;
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The official registry's base URL (`registry: true`).
pub const OFFICIAL: &str = "https://registry.modelcontextprotocol.io";
/// Each page's request, as Claude Code's prefetch (5 s).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// A page larger than this is refused (the official pages of 100 entries are far smaller).
const MAX_PAGE_BYTES: usize = 16 << 20;
/// Pages followed at most in one fetch (100,000 entries at 100 a page).
const MAX_PAGES: usize = 1000;
/// The environment variable that turns off Claude Code's non-essential requests.
pub const DISABLE_ENV: &str = "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC";
/// The `_meta` key of the official registry's own data about an entry.
const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";
const CACHE_VERSION: u64 = 1;

/// What the registry says of one server (the latest version of it), as much as matching and
/// the mark need.
#[derive(Debug, Clone, PartialEq)]
struct Known {
    version: Option<String>,
    status: String,
    status_message: Option<String>,
    /// `remotes[].url`, normalized.
    urls: Vec<String>,
    /// `packages[]`: (`registryType`, normalized `identifier`).
    packages: Vec<(String, String)>,
}

/// What the cache and the matches are made from: every known entry by name.
#[derive(Debug, Default)]
struct Index {
    known: BTreeMap<String, Known>,
    /// Normalized URL → entry name.
    urls: HashMap<String, String>,
    /// URL templates (`{tenant}`) → entry name.
    templates: Vec<(String, String)>,
    packages: HashMap<(String, String), String>,
}

impl Index {
    fn new(known: BTreeMap<String, Known>) -> Index {
        let mut index = Index::default();
        for (name, k) in &known {
            for url in &k.urls {
                if url.contains('{') {
                    index.templates.push((url.clone(), name.clone()));
                } else {
                    index
                        .urls
                        .entry(url.clone())
                        .or_insert_with(|| name.clone());
                }
            }
            for p in &k.packages {
                index
                    .packages
                    .entry(p.clone())
                    .or_insert_with(|| name.clone());
            }
        }
        index.known = known;
        index
    }

    /// The entry that knows this server's configuration entry, and how it matched.
    fn find(&self, entry: &Value) -> Option<(&str, &Known, &'static str)> {
        let hit = |name: &str, how| {
            self.known
                .get_key_value(name)
                .map(|(n, k)| (n.as_str(), k, how))
        };
        if let Some(url) = entry.get("url").and_then(Value::as_str) {
            let url = normalize_url(url)?;
            if let Some(name) = self.urls.get(&url) {
                return hit(name, "url");
            }
            return self
                .templates
                .iter()
                .find(|(t, _)| template_matches(t, &url))
                .and_then(|(_, name)| hit(name, "url_template"));
        }
        let command = entry.get("command").and_then(Value::as_str)?;
        let args: Vec<&str> = entry
            .get("args")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let package = package_of(command, &args)?;
        self.packages
            .get(&package)
            .and_then(|name| hit(name, "package"))
    }
}

/// The state of the registry as the manager's status shows it.
#[derive(Debug, Clone)]
struct Progress {
    state: &'static str,
    fetched_at: Option<String>,
    error: Option<String>,
}

/// One manager's registry: its index, its cache file, and its one fetch.
#[derive(Debug)]
pub struct Registry {
    base: String,
    cache: Option<PathBuf>,
    index: RwLock<Arc<Index>>,
    progress: Mutex<Progress>,
    started: AtomicBool,
    changed: tokio::sync::Notify,
}

impl Registry {
    /// The registry at `base` (an http or https URL; a trailing slash is dropped).
    pub fn new(base: &str) -> Result<Registry, Error> {
        let parsed = reqwest::Url::parse(base).map_err(|e| {
            Error::invalid(format!(
                "manager option `registry` must be true or an http(s) URL (got {base:?}: {e})"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(Error::invalid(format!(
                "manager option `registry` must be true or an http(s) URL (got {base:?})"
            )));
        }
        let base = base.trim_end_matches('/').to_string();
        let cache = cache_dir().map(|d| d.join(cache_name(&base)));
        Ok(Registry {
            base,
            cache,
            index: RwLock::new(Arc::new(Index::default())),
            progress: Mutex::new(Progress {
                state: "idle",
                fetched_at: None,
                error: None,
            }),
            started: AtomicBool::new(false),
            changed: tokio::sync::Notify::new(),
        })
    }

    /// Starts the one fetch of this manager, in the background (a later call does nothing).
    pub fn start(self: &Arc<Self>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        self.progress.lock().state = "loading";
        let me = self.clone();
        crate::runtime::spawn(async move {
            tokio::select! {
                _ = me.run() => {}
                _ = shutdown.wait_for(|closed| *closed) => {
                    me.settle("failed", Some("the manager closed first".into()));
                }
            }
        });
    }

    async fn run(&self) {
        // What an earlier fetch learned counts at once, before the request.
        let cached = self.cache.as_deref().and_then(read_cache);
        if let Some((known, at)) = &cached {
            *self.index.write() = Arc::new(Index::new(known.clone()));
            self.progress.lock().fetched_at = Some(at.clone());
        }
        if std::env::var_os(DISABLE_ENV).is_some_and(|v| !v.is_empty()) {
            tracing::debug!(target: "mcplug::registry", "{DISABLE_ENV} is set: no request");
            self.settle("skipped", None);
            return;
        }
        let started_at = crate::client::hosted_tasks::iso8601_now();
        let since = cached.as_ref().map(|(_, at)| at.clone());
        match fetch(&self.base, since.as_deref()).await {
            Ok(found) => {
                let mut known = cached.map(|(k, _)| k).unwrap_or_default();
                known.extend(found);
                if let Some(file) = &self.cache {
                    if let Err(e) = write_cache(file, &self.base, &known, &started_at) {
                        tracing::warn!(target: "mcplug::registry", "cannot keep the registry's cache: {e}");
                    }
                }
                *self.index.write() = Arc::new(Index::new(known));
                self.progress.lock().fetched_at = Some(started_at);
                self.settle("ready", None);
            }
            Err(e) => {
                tracing::debug!(target: "mcplug::registry", "registry {}: {e}", self.base);
                self.settle("failed", Some(e));
            }
        }
    }

    fn settle(&self, state: &'static str, error: Option<String>) {
        {
            let mut p = self.progress.lock();
            if p.state != "loading" {
                return;
            }
            p.state = state;
            p.error = error;
        }
        self.changed.notify_waiters();
    }

    /// The mark of a server with this configuration entry, when the registry knows it.
    pub fn mark(&self, entry: &Value) -> Option<Value> {
        let index = self.index.read().clone();
        let (name, k, how) = index.find(entry)?;
        let mut v = json!({"name": name, "status": k.status, "match": how});
        if let Some(version) = &k.version {
            v["version"] = json!(version);
        }
        if let Some(m) = &k.status_message {
            v["statusMessage"] = json!(m);
        }
        Some(v)
    }

    /// `{url, state: "loading"|"ready"|"failed"|"skipped", servers, fetched_at?, error?}`.
    pub fn status(&self) -> Value {
        let p = self.progress.lock().clone();
        let mut v = json!({
            "url": self.base,
            "state": p.state,
            "servers": self.index.read().known.len(),
        });
        if let Some(at) = p.fetched_at {
            v["fetched_at"] = json!(at);
        }
        if let Some(e) = p.error {
            v["error"] = json!(e);
        }
        v
    }

    /// Waits until the fetch has ended (or `timeout`); whether it had.
    pub async fn settled(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            if self.progress.lock().state != "loading" {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return false;
            }
        }
    }
}

/// Every page of the registry (those changed since `since` when given), by entry name.
async fn fetch(base: &str, since: Option<&str>) -> Result<BTreeMap<String, Known>, String> {
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    let mut out = BTreeMap::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut url = reqwest::Url::parse(&format!("{base}/v0.1/servers"))
            .map_err(|e| format!("{base}: {e}"))?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("version", "latest")
                .append_pair("limit", "100");
            if let Some(since) = since {
                q.append_pair("updated_since", since);
            }
            if let Some(c) = &cursor {
                q.append_pair("cursor", c);
            }
        }
        let page = page(&http, url.as_str()).await?;
        let servers = page
            .get("servers")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{url}: the page has no `servers` array"))?;
        for item in servers {
            if let Some((name, k)) = known(item) {
                out.insert(name, k);
            }
        }
        match page["metadata"]["nextCursor"].as_str() {
            Some(next) if !next.is_empty() && cursor.as_deref() != Some(next) => {
                cursor = Some(next.to_string())
            }
            _ => return Ok(out),
        }
    }
    Err(format!("more than {MAX_PAGES} pages: stopped"))
}

async fn page(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let mut resp = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("{url}: {}", describe(&e)))?;
    if !resp.status().is_success() {
        return Err(format!("{url}: HTTP {}", resp.status().as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("{url}: {}", describe(&e)))?
    {
        if body.len() + chunk.len() > MAX_PAGE_BYTES {
            return Err(format!("{url}: a page over {MAX_PAGE_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
}

fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("timed out after {} s", REQUEST_TIMEOUT.as_secs())
    } else if e.is_connect() {
        "cannot connect".to_string()
    } else {
        e.to_string()
    }
}

/// One `servers[]` item of a page (`{server: <server.json>, _meta}`), as much as is kept.
fn known(item: &Value) -> Option<(String, Known)> {
    let server = item.get("server").unwrap_or(item);
    let name = server.get("name")?.as_str()?.to_string();
    let official = &item["_meta"][OFFICIAL_META];
    let urls = server
        .get("remotes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("url")?.as_str())
        .filter_map(normalize_url)
        .collect();
    let packages = server
        .get("packages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let kind = p.get("registryType")?.as_str()?;
            let id = p.get("identifier")?.as_str()?;
            normalize_package(kind, id).map(|id| (kind.to_ascii_lowercase(), id))
        })
        .collect();
    Some((
        name,
        Known {
            version: server
                .get("version")
                .and_then(Value::as_str)
                .map(str::to_string),
            status: official["status"].as_str().unwrap_or("active").to_string(),
            status_message: official["statusMessage"].as_str().map(str::to_string),
            urls,
            packages,
        },
    ))
}

/// A URL as Claude Code compares them: no query or fragment, no trailing slash, the scheme and
/// host in lower case, no default port. `{variables}` of a template are kept as they are.
pub fn normalize_url(url: &str) -> Option<String> {
    let url = url.trim();
    let url = url.split(['?', '#']).next()?;
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    // Credentials are never part of what is compared.
    let authority = authority.rsplit('@').next()?;
    let mut host = authority.to_ascii_lowercase();
    let default = if scheme == "https" { ":443" } else { ":80" };
    if let Some(h) = host.strip_suffix(default) {
        host = h.to_string();
    }
    if host.is_empty() {
        return None;
    }
    let path = path.trim_end_matches('/');
    Some(format!("{scheme}://{host}{path}"))
}

/// Whether a normalized URL fits a normalized template: each `{name}` stands for one or more
/// characters other than `/`.
fn template_matches(template: &str, url: &str) -> bool {
    fn go(t: &[u8], u: &[u8]) -> bool {
        match t.first() {
            None => u.is_empty(),
            Some(b'{') => {
                let Some(close) = t.iter().position(|&c| c == b'}') else {
                    return t == u;
                };
                let rest = &t[close + 1..];
                (1..=u.len())
                    .take_while(|&n| u[n - 1] != b'/')
                    .any(|n| go(rest, &u[n..]))
            }
            Some(&c) => u.first() == Some(&c) && go(&t[1..], &u[1..]),
        }
    }
    go(template.as_bytes(), url.as_bytes())
}

/// The package a stdio command runs: `npx [-y] <pkg>[@version]`, `uvx [--from] <pkg>[==v]`,
/// `docker|podman run [flags] <image>[:tag]`.
fn package_of(command: &str, args: &[&str]) -> Option<(String, String)> {
    let program = Path::new(command).file_name()?.to_str()?;
    let program = program.strip_suffix(".cmd").unwrap_or(program);
    match program {
        "npx" | "bunx" | "pnpx" => {
            let mut it = args.iter();
            while let Some(a) = it.next() {
                match *a {
                    "-p" | "--package" => return npm(it.next()?),
                    a if a.starts_with("--package=") => return npm(&a["--package=".len()..]),
                    a if a.starts_with('-') => continue,
                    a => return npm(a),
                }
            }
            None
        }
        "uvx" => {
            let mut it = args.iter();
            while let Some(a) = it.next() {
                match *a {
                    "--from" => return pypi(it.next()?),
                    a if a.starts_with("--from=") => return pypi(&a["--from=".len()..]),
                    // Options of uv that take a value.
                    "--with" | "--python" | "-p" | "--index" | "--index-url"
                    | "--extra-index-url" => {
                        it.next();
                    }
                    a if a.starts_with('-') => continue,
                    a => return pypi(a),
                }
            }
            None
        }
        "docker" | "podman" => {
            let mut it = args.iter().skip_while(|a| **a != "run");
            it.next()?;
            const SWITCHES: &[&str] = &[
                "-i",
                "-t",
                "-it",
                "-ti",
                "-d",
                "--rm",
                "--init",
                "--privileged",
                "--interactive",
                "--tty",
                "--detach",
                "-q",
                "--quiet",
                "--read-only",
            ];
            while let Some(a) = it.next() {
                if SWITCHES.contains(a) || (a.starts_with('-') && a.contains('=')) {
                    continue;
                }
                if a.starts_with('-') {
                    it.next();
                    continue;
                }
                return Some(("oci".into(), normalize_package("oci", a)?));
            }
            None
        }
        _ => None,
    }
}

fn npm(spec: &str) -> Option<(String, String)> {
    Some(("npm".into(), normalize_package("npm", spec)?))
}

fn pypi(spec: &str) -> Option<(String, String)> {
    Some(("pypi".into(), normalize_package("pypi", spec)?))
}

/// A package identifier without its version, in the form names compare in: npm names as they
/// are, PyPI names as PEP 503 normalizes them, OCI images without the default registry, the
/// `library/` namespace, a tag or a digest.
fn normalize_package(kind: &str, spec: &str) -> Option<String> {
    let spec = spec.trim();
    let out = match kind.to_ascii_lowercase().as_str() {
        "npm" => {
            // `@scope/name@1.2.3` or `name@1.2.3`.
            let at = spec
                .char_indices()
                .skip(1)
                .find(|(_, c)| *c == '@')
                .map_or(spec.len(), |(i, _)| i);
            spec[..at].to_string()
        }
        "pypi" => {
            let end = spec
                .find(|c: char| "=<>!~[@; ".contains(c))
                .unwrap_or(spec.len());
            let mut name = String::new();
            for c in spec[..end].chars() {
                let c = if "-_.".contains(c) {
                    '-'
                } else {
                    c.to_ascii_lowercase()
                };
                if !(c == '-' && name.ends_with('-')) {
                    name.push(c);
                }
            }
            name
        }
        "oci" => {
            let spec = spec.split('@').next().unwrap_or(spec);
            let last_slash = spec.rfind('/').map_or(0, |i| i + 1);
            let spec = match spec[last_slash..].rfind(':') {
                Some(i) => &spec[..last_slash + i],
                None => spec,
            };
            let spec = spec
                .strip_prefix("docker.io/")
                .or_else(|| spec.strip_prefix("index.docker.io/"))
                .unwrap_or(spec);
            spec.strip_prefix("library/")
                .unwrap_or(spec)
                .to_ascii_lowercase()
        }
        _ => spec.to_string(),
    };
    (!out.is_empty()).then_some(out)
}

/// `$XDG_CACHE_HOME/mcplug/registry`, else `~/.cache/mcplug/registry`.
fn cache_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Some(x.join("mcplug").join("registry"));
    }
    crate::sys::user::home().map(|h| h.join(".cache").join("mcplug").join("registry"))
}

/// The cache file of a base URL: its host and path in characters any file system takes.
fn cache_name(base: &str) -> String {
    let rest = base.split_once("://").map_or(base, |(_, r)| r);
    let safe: String = rest
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.json")
}

fn read_cache(file: &Path) -> Option<(BTreeMap<String, Known>, String)> {
    let text = std::fs::read(file).ok()?;
    let v: Value = serde_json::from_slice(&text).ok()?;
    if v["version"] != CACHE_VERSION {
        return None;
    }
    let at = v["fetched_at"].as_str()?.to_string();
    let mut known = BTreeMap::new();
    for (name, k) in v["servers"].as_object()? {
        let strings = |key: &str| -> Vec<String> {
            k[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        };
        let packages = k["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p[0].as_str()?.to_string(), p[1].as_str()?.to_string())))
            .collect();
        known.insert(
            name.clone(),
            Known {
                version: k["version"].as_str().map(str::to_string),
                status: k["status"].as_str().unwrap_or("active").to_string(),
                status_message: k["statusMessage"].as_str().map(str::to_string),
                urls: strings("urls"),
                packages,
            },
        );
    }
    Some((known, at))
}

fn write_cache(
    file: &Path,
    base: &str,
    known: &BTreeMap<String, Known>,
    at: &str,
) -> Result<(), String> {
    let mut servers = Map::new();
    for (name, k) in known {
        let mut v = json!({"status": k.status, "urls": k.urls, "packages": k.packages.iter().map(|(t, i)| json!([t, i])).collect::<Vec<_>>()});
        if let Some(version) = &k.version {
            v["version"] = json!(version);
        }
        if let Some(m) = &k.status_message {
            v["statusMessage"] = json!(m);
        }
        servers.insert(name.clone(), v);
    }
    let doc = json!({"version": CACHE_VERSION, "url": base, "fetched_at": at, "servers": servers});
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    crate::sys::fs::write_atomic(file, doc.to_string().as_bytes(), 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_normalize_as_claude_code_compares_them() {
        for (given, want) in [
            (
                "https://MCP.Example.com:443/mcp/?x=1#f",
                Some("https://mcp.example.com/mcp"),
            ),
            ("HTTP://h:80/", Some("http://h")),
            ("https://h:8443/a/", Some("https://h:8443/a")),
            ("https://user:pw@h/a", Some("https://h/a")),
            ("ftp://h/a", None),
            ("not a url", None),
        ] {
            assert_eq!(normalize_url(given).as_deref(), want, "{given}");
        }
    }

    #[test]
    fn templates_take_one_segment_per_variable() {
        let t = normalize_url("https://{tenant}.example.com/mcp/{region}").unwrap();
        assert!(template_matches(&t, "https://acme.example.com/mcp/eu"));
        assert!(!template_matches(&t, "https://acme.example.com/mcp/eu/x"));
        assert!(!template_matches(&t, "https://.example.com/mcp/eu"));
        assert!(!template_matches(&t, "https://a/b.example.com/mcp/eu"));
    }

    #[test]
    fn commands_name_their_packages() {
        let p = |c: &str, a: &[&str]| package_of(c, a);
        let want = |k: &str, i: &str| Some((k.to_string(), i.to_string()));
        assert_eq!(
            p("npx", &["-y", "@scope/srv@1.2.0", "--port", "1"]),
            want("npm", "@scope/srv")
        );
        assert_eq!(p("/usr/bin/npx", &["srv@latest"]), want("npm", "srv"));
        assert_eq!(p("npx", &["--package=@a/b", "b-cli"]), want("npm", "@a/b"));
        assert_eq!(
            p("uvx", &["mcp-server-Fetch==0.6"]),
            want("pypi", "mcp-server-fetch")
        );
        assert_eq!(
            p("uvx", &["--from", "my_pkg[x]", "cmd"]),
            want("pypi", "my-pkg")
        );
        assert_eq!(
            p(
                "docker",
                &[
                    "run",
                    "-i",
                    "--rm",
                    "-e",
                    "TOKEN",
                    "docker.io/mcp/fetch:1.0"
                ]
            ),
            want("oci", "mcp/fetch")
        );
        assert_eq!(
            p("podman", &["run", "--env=A=1", "ghcr.io/o/img@sha256:ab"]),
            want("oci", "ghcr.io/o/img")
        );
        assert_eq!(p("node", &["server.js"]), None);
        assert_eq!(p("npx", &["-y"]), None);
    }

    #[test]
    fn an_index_finds_by_url_template_and_package() {
        let page = json!([
            {"server": {"name": "io.x/remote", "version": "1.0.0",
                        "remotes": [{"type": "streamable-http", "url": "https://mcp.x.io/mcp/"}]},
             "_meta": {OFFICIAL_META: {"status": "active"}}},
            {"server": {"name": "io.x/tenant", "remotes": [{"type": "sse", "url": "https://{t}.x.io/sse"}]},
             "_meta": {OFFICIAL_META: {"status": "deprecated", "statusMessage": "use io.x/remote"}}},
            {"server": {"name": "io.x/pkg", "packages": [{"registryType": "npm", "identifier": "@x/srv", "version": "2.0.0"}]}},
        ]);
        let known: BTreeMap<String, Known> =
            page.as_array().unwrap().iter().filter_map(known).collect();
        let index = Index::new(known);
        let how = |e: Value| {
            index
                .find(&e)
                .map(|(n, k, how)| (n.to_string(), k.status.clone(), how))
        };
        assert_eq!(
            how(json!({"type": "http", "url": "https://MCP.x.io:443/mcp?session=1"})),
            Some(("io.x/remote".into(), "active".into(), "url"))
        );
        assert_eq!(
            how(json!({"type": "sse", "url": "https://acme.x.io/sse"})),
            Some(("io.x/tenant".into(), "deprecated".into(), "url_template"))
        );
        assert_eq!(
            how(json!({"command": "npx", "args": ["-y", "@x/srv@2"]})),
            Some(("io.x/pkg".into(), "active".into(), "package"))
        );
        assert_eq!(
            how(json!({"command": "npx", "args": ["-y", "@x/other"]})),
            None
        );
    }
}
