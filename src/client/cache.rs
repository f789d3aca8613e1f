//! Results the server marked cacheable (2026-07-28, `server/utilities/caching.mdx`).
//!
//! A modern server puts `ttlMs` and `cacheScope` on the results of `tools/list`, `prompts/list`,
//! `resources/list`, `resources/templates/list` and `resources/read` (and `server/discover`, which
//! a connection sends once). This connection keeps such a result for `ttlMs` after it arrived and
//! answers the same request (the same method and params, each page by its cursor) from it, the
//! server's text untouched; the spec defines no marker for "this came from a cache", so there is
//! none. What makes an entry stale before its time: the notification that says it changed
//! (`notifications/tools/list_changed` for `tools/list`, ..., `notifications/resources/updated`
//! for that URI's `resources/read`), an error for a cursor that was valid (every page of that
//! list), and a `subscriptions/listen` stream that was re-opened after a drop (what it carried
//! in between is lost).
//!
//! Never shared across credentials: a `"private"` entry (and anything that is not `"public"`)
//! is served only under the credentials it was fetched with (the transport's fingerprint of what
//! it sends, see [`crate::transport::Transport::credential`]); a `"public"` one to any. The
//! cache is the connection's own, so nothing crosses connections either.
//!
//! Not cached: the legacy era (its results carry no hints), a result reached through
//! `InputRequiredResult` rounds or a request carrying `inputResponses`/`requestState` (they
//! depend on inputs outside the key), `ttlMs` absent, zero or negative. TTL is not a polling
//! interval: nothing is re-fetched in the background.

use super::options::CallOptions;
use super::request::{Body, Send};
use super::{mrtr, Shared};
use crate::error::{ErrorKind, Result};
use crate::protocol::era::{self, Era};
use crate::protocol::RawJson;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The methods whose results the spec makes cacheable (`server/discover` is sent once, at
/// connect, and never again on a connection).
pub(super) const CACHEABLE: &[&str] = &[
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// The longest freshness honoured (as the Python SDK's client): a `ttlMs` of years is a
/// server's way of saying "until I notify you", and a notification ends it sooner anyway.
const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Bounds of one connection's cache; past them the oldest entries go first.
const MAX_ENTRIES: usize = 4096;
const MAX_BYTES: usize = 64 << 20;
/// A result larger than this is not kept (it would push out everything else).
const MAX_ENTRY_BYTES: usize = MAX_BYTES / 4;

/// What identifies a cached result: the method and the params that affect it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct CacheKey {
    method: &'static str,
    /// The params as canonical JSON (keys sorted), without `_meta.progressToken`.
    params: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Public,
    Private,
}

struct Entry {
    result: RawJson,
    expires: Instant,
    scope: Scope,
    /// The credentials it was fetched with.
    credential: u64,
    /// `params.uri` of a `resources/read`, for `notifications/resources/updated`.
    uri: Option<String>,
    /// Insertion order, for eviction.
    seq: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<CacheKey, Entry>,
    bytes: usize,
    /// Bumped by every invalidation: a fetch that was sent before one does not store what it
    /// got (it may be the old state the notification was about).
    generation: u64,
    next_seq: u64,
}

pub(super) struct ResultCache {
    enabled: bool,
    state: Mutex<State>,
}

/// A fetch's ticket to store its result: the generation it was sent under.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ticket(u64);

impl ResultCache {
    pub(super) fn new(enabled: bool) -> Self {
        ResultCache {
            enabled,
            state: Mutex::new(State::default()),
        }
    }

    /// The key of a request whose result may be cached, `None` for any other.
    pub(super) fn key(&self, method: &str, params: Option<&Value>) -> Option<CacheKey> {
        if !self.enabled {
            return None;
        }
        let method = *CACHEABLE.iter().find(|m| **m == method)?;
        let params = match params {
            None | Some(Value::Null) => return Some(CacheKey::of(method, &Map::new())),
            Some(Value::Object(p)) => p,
            Some(_) => return None,
        };
        // A multi-round retry's result depends on inputs outside the key (spec: MUST NOT cache).
        if params.contains_key("inputResponses") || params.contains_key("requestState") {
            return None;
        }
        let mut params = params.clone();
        if let Some(Value::Object(meta)) = params.get_mut("_meta") {
            meta.remove("progressToken");
            if meta.is_empty() {
                params.remove("_meta");
            }
        }
        Some(CacheKey::of(method, &params))
    }

    /// A fresh result for `key` that may be served under `credential`.
    pub(super) fn get(&self, key: &CacheKey, credential: u64) -> Option<RawJson> {
        let mut state = self.state.lock();
        let entry = state.entries.get(key)?;
        if Instant::now() >= entry.expires {
            state.remove(key);
            return None;
        }
        if entry.scope == Scope::Private && entry.credential != credential {
            return None;
        }
        Some(entry.result.clone())
    }

    /// Taken before a fetch is sent; see [`ResultCache::put`].
    pub(super) fn ticket(&self) -> Ticket {
        Ticket(self.state.lock().generation)
    }

    /// Keeps `result` if the server marked it cacheable and nothing was invalidated since the
    /// fetch was sent (`ticket`).
    pub(super) fn put(&self, key: CacheKey, result: &RawJson, ticket: Ticket, credential: u64) {
        let Some((ttl, scope)) = hints(result.as_str()) else {
            return;
        };
        let size = result.as_str().len() + key.params.len();
        if size > MAX_ENTRY_BYTES {
            return;
        }
        let uri = (key.method == "resources/read")
            .then(|| serde_json::from_str::<Value>(&key.params).ok())
            .flatten()
            .and_then(|p| p.get("uri").and_then(Value::as_str).map(str::to_string));
        let now = Instant::now();
        let Some(expires) = now.checked_add(ttl) else {
            return;
        };
        let mut state = self.state.lock();
        if state.generation != ticket.0 {
            return;
        }
        state.remove(&key);
        state.make_room(size, now);
        let seq = state.next_seq;
        state.next_seq += 1;
        state.bytes += size;
        state.entries.insert(
            key,
            Entry {
                result: result.clone(),
                expires,
                scope,
                credential,
                uri,
                seq,
            },
        );
    }

    /// Every cached result of `method` is stale (its list changed, or a cursor broke).
    pub(super) fn invalidate_method(&self, method: &str) {
        self.invalidate(|k, _| k.method == method);
    }

    /// The cached `resources/read` of `uri` is stale.
    pub(super) fn invalidate_resource(&self, uri: &str) {
        self.invalidate(|k, e| k.method == "resources/read" && e.uri.as_deref() == Some(uri));
    }

    fn invalidate(&self, stale: impl Fn(&CacheKey, &Entry) -> bool) {
        let mut state = self.state.lock();
        state.generation += 1;
        let keys: Vec<CacheKey> = state
            .entries
            .iter()
            .filter(|(k, e)| stale(k, e))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            state.remove(&k);
        }
    }

    /// What a server notification makes stale.
    pub(super) fn on_notification(&self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/tools/list_changed" => self.invalidate_method("tools/list"),
            "notifications/prompts/list_changed" => self.invalidate_method("prompts/list"),
            "notifications/resources/list_changed" => {
                // Templates describe the same space of resources.
                self.invalidate_method("resources/list");
                self.invalidate_method("resources/templates/list");
            }
            "notifications/resources/updated" => {
                if let Some(uri) = params.and_then(|p| p.get("uri")).and_then(Value::as_str) {
                    self.invalidate_resource(uri);
                }
            }
            _ => {}
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.state.lock().entries.len()
    }
}

impl State {
    fn remove(&mut self, key: &CacheKey) {
        if let Some(e) = self.entries.remove(key) {
            self.bytes -= e.result.as_str().len() + key.params.len();
        }
    }

    /// Drops expired entries, then the oldest, until `size` more bytes and one more entry fit.
    fn make_room(&mut self, size: usize, now: Instant) {
        if self.entries.len() < MAX_ENTRIES && self.bytes + size <= MAX_BYTES {
            return;
        }
        let expired: Vec<CacheKey> = self
            .entries
            .iter()
            .filter(|(_, e)| now >= e.expires)
            .map(|(k, _)| k.clone())
            .collect();
        for k in expired {
            self.remove(&k);
        }
        while self.entries.len() >= MAX_ENTRIES || self.bytes + size > MAX_BYTES {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.seq)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.remove(&oldest);
        }
    }
}

impl CacheKey {
    fn of(method: &'static str, params: &Map<String, Value>) -> Self {
        let mut text = String::new();
        canonical(&mut text, &Value::Object(params.clone()));
        CacheKey {
            method,
            params: text,
        }
    }
}

/// JSON text with every object's keys sorted, so that the same params in another order are
/// the same key.
fn canonical(out: &mut String, v: &Value) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(out, &m[k]);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(out, x);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The caching hints of a result: how long it is fresh, and who may be served it. `None` when
/// it is not to be kept (no `ttlMs`, zero or negative; not a complete result).
fn hints(text: &str) -> Option<(Duration, Scope)> {
    #[derive(serde::Deserialize)]
    struct Hints<'a> {
        #[serde(rename = "ttlMs", default)]
        ttl: Option<serde_json::Number>,
        #[serde(rename = "cacheScope", borrow, default)]
        scope: Option<std::borrow::Cow<'a, str>>,
        #[serde(rename = "resultType", borrow, default)]
        result_type: Option<std::borrow::Cow<'a, str>>,
    }
    let h: Hints = serde_json::from_str(text).ok()?;
    if h.result_type.is_some_and(|t| t != "complete") {
        return None;
    }
    let ttl = h.ttl?;
    let ms = match ttl.as_u64() {
        Some(ms) => ms as f64,
        None => ttl.as_f64().filter(|ms| *ms > 0.0)?,
    };
    if ms < 1.0 {
        return None;
    }
    let ttl = Duration::from_millis(ms as u64).min(MAX_TTL);
    // Anything but an explicit "public" is kept to the credentials that fetched it.
    let scope = match h.scope.as_deref() {
        Some("public") => Scope::Public,
        _ => Scope::Private,
    };
    Some((ttl, scope))
}

impl ResultCache {
    /// The credentials this connection sends now (see [`ResultCache::get`]).
    fn credential(&self, conn: &Shared) -> u64 {
        conn.session
            .transport_if_set()
            .map(|t| t.credential())
            .unwrap_or_default()
    }

    /// The cache key of a request on this connection: modern era only (legacy results carry no
    /// hints; a legacy server that wrote `ttlMs` anyway meant something else).
    pub(super) fn cache_key(
        &self,
        conn: &Shared,
        method: &str,
        params: Option<&Value>,
    ) -> Option<CacheKey> {
        let modern = matches!(
            conn.era.read().as_ref().map(|s| &s.era),
            Some(Era::Modern { .. })
        );
        if !modern {
            return None;
        }
        self.key(method, params)
    }

    /// A cached result for `key`, unless the call's `cache` option is false.
    fn cached(&self, conn: &Shared, key: &CacheKey, options: &CallOptions) -> Option<RawJson> {
        if options.cache == Some(false) {
            return None;
        }
        self.get(key, self.credential(conn))
    }

    /// One page of a list (or any cacheable request that takes no rounds): from the cache while
    /// fresh, else from the server, kept if the server marked it cacheable.
    pub(super) async fn fetch_page(
        &self,
        conn: &Shared,
        key: Option<CacheKey>,
        method: &str,
        params: Option<Value>,
        timeout: Option<Duration>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        if let Some(hit) = key.as_ref().and_then(|k| self.cached(conn, k, options)) {
            return Ok(hit);
        }
        let ticket = self.ticket();
        let credential = self.credential(conn);
        let had_cursor = params
            .as_ref()
            .and_then(|p| p.get("cursor"))
            .is_some_and(|c| !c.is_null());
        let outcome = conn
            .send_request(Send {
                method,
                body: Body::Params(params),
                timeout,
                cancellable: true,
                resolves: false,
                options: Some(options),
                pausable: false,
            })
            .await;
        match (&outcome, key) {
            (Ok(result), Some(key)) => self.put(key, result, ticket, credential),
            // A cursor the server no longer takes: every page of that list may be stale.
            (Err(e), Some(_)) if had_cursor && e.kind == ErrorKind::Rpc => {
                self.invalidate_method(method)
            }
            _ => {}
        }
        outcome
    }

    /// A host's request of a cacheable method: from the cache while fresh; else its first round
    /// from the server, kept when it is a complete result, and any further rounds resolved as
    /// every call's are (`mrtr::call`), never kept.
    pub(super) async fn fetch_cacheable(
        &self,
        conn: &Arc<Shared>,
        key: CacheKey,
        method: &str,
        params: Option<Value>,
        timeout: Option<Duration>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        if !era::allows_input_required(method) {
            return self
                .fetch_page(conn, Some(key), method, params, timeout, options)
                .await;
        }
        if let Some(hit) = self.cached(conn, &key, options) {
            return Ok(hit);
        }
        let ticket = self.ticket();
        let credential = self.credential(conn);
        let first = conn
            .send_request(Send {
                method,
                body: Body::Params(params.clone()),
                timeout,
                cancellable: true,
                resolves: true,
                options: Some(options),
                pausable: false,
            })
            .await;
        if let Ok(result) = &first {
            if matches!(
                era::result_type(result.as_str()).as_deref(),
                None | Some("complete")
            ) {
                self.put(key, result, ticket, credential);
                return first;
            }
        }
        // More rounds (or an error that the rounds resolve, or that is the call's outcome).
        conn.rounds
            .call(
                conn,
                method,
                mrtr::Call::Params(params),
                timeout,
                options,
                Some(first),
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(v: Value) -> RawJson {
        RawJson::from_value(&v)
    }

    #[test]
    fn keys_are_the_method_and_the_params_that_matter() {
        let c = ResultCache::new(true);
        let a = c.key("tools/list", None).unwrap();
        assert_eq!(a, c.key("tools/list", Some(&json!({}))).unwrap());
        assert_eq!(a, c.key("tools/list", Some(&Value::Null)).unwrap());
        assert_eq!(
            a,
            c.key("tools/list", Some(&json!({"_meta": {"progressToken": 4}})))
                .unwrap(),
            "a progress token does not change the result"
        );
        assert_ne!(
            a,
            c.key("tools/list", Some(&json!({"cursor": "2"}))).unwrap()
        );
        assert_ne!(a, c.key("prompts/list", None).unwrap());
        let r1 = c
            .key(
                "resources/read",
                Some(&json!({"uri": "a://1", "x": {"b": 1, "a": 2}})),
            )
            .unwrap();
        let r2 = c
            .key(
                "resources/read",
                Some(&json!({"x": {"a": 2, "b": 1}, "uri": "a://1"})),
            )
            .unwrap();
        assert_eq!(r1, r2, "key order does not matter");
        assert!(c.key("tools/call", None).is_none());
        assert!(c
            .key(
                "resources/read",
                Some(&json!({"uri": "a://1", "requestState": "s"}))
            )
            .is_none());
        assert!(ResultCache::new(false).key("tools/list", None).is_none());
    }

    #[test]
    fn only_results_marked_fresh_are_kept() {
        assert!(hints(r#"{"tools":[]}"#).is_none(), "no ttlMs");
        assert!(hints(r#"{"ttlMs":0,"cacheScope":"public"}"#).is_none());
        assert!(hints(r#"{"ttlMs":-5,"cacheScope":"public"}"#).is_none());
        assert!(hints(r#"{"ttlMs":1000,"resultType":"input_required"}"#).is_none());
        assert_eq!(
            hints(r#"{"ttlMs":1000,"cacheScope":"public","resultType":"complete"}"#),
            Some((Duration::from_secs(1), Scope::Public))
        );
        assert_eq!(
            hints(r#"{"ttlMs":1500.7}"#),
            Some((Duration::from_millis(1500), Scope::Private)),
            "no scope is private"
        );
        assert_eq!(
            hints(r#"{"ttlMs":1e12,"cacheScope":"shared"}"#),
            Some((MAX_TTL, Scope::Private))
        );
    }

    #[test]
    fn private_results_never_cross_credentials() {
        let c = ResultCache::new(true);
        let alice =
            crate::transport::remote::fingerprint([(&b"authorization"[..], &b"Bearer alice"[..])]);
        let bob =
            crate::transport::remote::fingerprint([(&b"authorization"[..], &b"Bearer bob"[..])]);
        assert_ne!(alice, bob);
        let read = c
            .key("resources/read", Some(&json!({"uri": "note://x"})))
            .unwrap();
        let list = c.key("tools/list", None).unwrap();
        let t = c.ticket();
        c.put(
            read.clone(),
            &raw(json!({"contents": [], "ttlMs": 60000, "cacheScope": "private"})),
            t,
            alice,
        );
        c.put(
            list.clone(),
            &raw(json!({"tools": [], "ttlMs": 60000, "cacheScope": "public"})),
            t,
            alice,
        );
        assert!(c.get(&read, alice).is_some());
        assert!(
            c.get(&read, bob).is_none(),
            "private: not for other credentials"
        );
        assert!(c.get(&list, bob).is_some(), "public: for anyone");
    }

    #[test]
    fn notifications_and_late_fetches() {
        let c = ResultCache::new(true);
        let read = c
            .key("resources/read", Some(&json!({"uri": "note://x"})))
            .unwrap();
        let other = c
            .key("resources/read", Some(&json!({"uri": "note://y"})))
            .unwrap();
        let list = c.key("tools/list", None).unwrap();
        let page2 = c.key("tools/list", Some(&json!({"cursor": "2"}))).unwrap();
        let fresh = raw(json!({"ttlMs": 60000}));
        for k in [&read, &other, &list, &page2] {
            c.put(k.clone(), &fresh, c.ticket(), 0);
        }
        assert_eq!(c.len(), 4);
        c.on_notification(
            "notifications/resources/updated",
            Some(&json!({"uri": "note://x"})),
        );
        assert!(c.get(&read, 0).is_none());
        assert!(c.get(&other, 0).is_some());
        c.on_notification("notifications/tools/list_changed", None);
        assert!(c.get(&list, 0).is_none() && c.get(&page2, 0).is_none());
        assert!(c.get(&other, 0).is_some());
        // A fetch sent before an invalidation does not store what it got.
        let before = c.ticket();
        c.on_notification("notifications/prompts/list_changed", None);
        c.put(list.clone(), &fresh, before, 0);
        assert!(c.get(&list, 0).is_none());
    }

    #[test]
    fn expiry_and_bounds() {
        let c = ResultCache::new(true);
        let k = c.key("tools/list", None).unwrap();
        c.put(k.clone(), &raw(json!({"ttlMs": 1})), c.ticket(), 0);
        std::thread::sleep(Duration::from_millis(5));
        assert!(c.get(&k, 0).is_none(), "expired");
        for i in 0..MAX_ENTRIES + 10 {
            let k = c
                .key("resources/read", Some(&json!({"uri": format!("n://{i}")})))
                .unwrap();
            c.put(k, &raw(json!({"ttlMs": 60000})), c.ticket(), 0);
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        let first = c
            .key("resources/read", Some(&json!({"uri": "n://0"})))
            .unwrap();
        assert!(c.get(&first, 0).is_none(), "the oldest went first");
    }
}
