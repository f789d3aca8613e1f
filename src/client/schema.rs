//! Tool schemas: what the client learned from `tools/list`, and the checks made with it.
//!
//! - A tool call's result: when the tool declared an `outputSchema`, a result that is not
//!   `isError: true` must carry `structuredContent` that matches it, or the call fails with kind
//!   `invalid_result` (the message says where and why; `data` keeps the untouched result).
//! - A tool call's arguments, when the host asks (`validate_arguments`): checked against the
//!   tool's `inputSchema` before anything is sent; a mismatch is `invalid_argument`.
//!
//! Schemas come only from the `tools/list` results the client sees (`list_tools`, or
//! `request("tools/list")`); a call to a tool not seen there is not checked, and no hidden
//! `tools/list` is ever sent. `notifications/tools/list_changed` forgets them all. A validator is
//! compiled once per schema text and kept while later listings carry the same text.
//!
//! JSON Schema 2020-12 is the default dialect; a schema's `$schema` naming draft 4, 6, 7 or
//! 2019-09 is honoured. Nothing outside the schema is ever fetched: every external `$ref` (http,
//! https, file, ...) is refused, so such a schema fails to compile. The validators come from the
//! companion library libmcplug_schema, loaded on the first compile (`validator.rs`). A schema
//! that fails to compile (malformed, an unknown `$schema`, an external `$ref`, no companion
//! library to be found) is not used: the tool is called without that check, and the host gets
//! one event
//! `{"type": "warning", "reason": "invalid_schema", "tool", "schema": "outputSchema"|"inputSchema", "message"}`.
//!
//! The cost for a tool without an output schema: one atomic load while no listed tool has
//! one, a map lookup otherwise; the result is parsed only when there is a schema to check.

use super::event::Event;
use super::validator::Validator;
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::RawJson;
use crate::queue::EventQueue;
use once_cell::sync::OnceCell;
use parking_lot::RwLock;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How many violations an error lists (the message names the first).
const MAX_REPORTED: usize = 8;

/// The schemas of the tools the client has seen listed.
#[derive(Default)]
pub(super) struct ToolSchemas {
    tools: RwLock<HashMap<String, Arc<ToolEntry>>>,
    /// Does any known tool declare an `outputSchema`? While not, a call's result is not looked at.
    any_output: AtomicBool,
}

struct ToolEntry {
    input: Option<Schema>,
    output: Option<Schema>,
}

/// One schema as the server sent it, compiled on first use.
struct Schema {
    text: Box<RawValue>,
    /// `None` once compiling failed (the host was warned).
    compiled: OnceCell<Option<Validator>>,
}

/// Which of a tool's schemas, as the spec names the field.
#[derive(Clone, Copy)]
enum Which {
    Input,
    Output,
}

impl Which {
    fn field(self) -> &'static str {
        match self {
            Which::Input => "inputSchema",
            Which::Output => "outputSchema",
        }
    }
}

impl Schema {
    fn new(text: Box<RawValue>) -> Self {
        Schema {
            text,
            compiled: OnceCell::new(),
        }
    }

    /// The validator, compiling it on first use; `None` when the schema does not compile (the
    /// host is warned once, by an event).
    fn validator(
        &self,
        tool: &str,
        which: Which,
        events: &EventQueue<super::Event>,
    ) -> Option<&Validator> {
        self.compiled
            .get_or_init(|| match compile(self.text.get()) {
                Ok(v) => Some(v),
                Err(why) => {
                    let mut about = serde_json::Map::new();
                    about.insert("tool".into(), json!(tool));
                    about.insert("schema".into(), json!(which.field()));
                    events.push_event(Event::Warning {
                        reason: "invalid_schema",
                        message: format!(
                            "the {} of tool {tool:?} does not compile, so it is not checked: {why}",
                            which.field()
                        ),
                        about,
                    });
                    None
                }
            })
            .as_ref()
    }
}

/// How much of its own stack a caller must have left to check an instance in place. A result
/// nested 120 deep in a recursive schema takes about 64 KiB (release build); this is 16 times that.
const CHECK_IN_PLACE: usize = 1 << 20;

/// How many bytes of its stack this thread has left, when that is known: `None` when the stack
/// pointer is not inside the thread's own stack — as under koffi, whose `.async` calls run on a
/// 128 KiB stack of its own, where an overflow kills the host.
fn stack_room() -> Option<usize> {
    use std::cell::Cell;
    thread_local! {
        /// This thread's stack as (lowest address, highest address); (0, 0) when unknown.
        static BOUNDS: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
    }
    let (low, high) = BOUNDS.with(|b| {
        let known = b
            .get()
            .unwrap_or_else(|| crate::sys::thread::stack_bounds().unwrap_or((0, 0)));
        b.set(Some(known));
        known
    });
    let marker = 0u8;
    let here = std::ptr::addr_of!(marker) as usize;
    (low < here && here < high).then(|| here - low)
}

/// Runs a check here when this thread's stack surely has room for it, else on a spare stack.
fn with_room<R: Send>(f: impl FnOnce() -> R + Send) -> std::result::Result<R, String> {
    match stack_room() {
        Some(room) if room >= CHECK_IN_PLACE => Ok(f()),
        _ => crate::runtime::on_spare_stack(f),
    }
}

/// Compiles one schema, always on a spare stack: compiling recurses deeply (the first compile
/// in a process also builds the meta-schema validators, about 130 KiB of stack, and loads the
/// validator library), and schemas compile rarely (once per schema text), so a thread start
/// costs nothing that matters.
fn compile(text: &str) -> std::result::Result<Validator, String> {
    crate::runtime::on_spare_stack(|| Validator::compile(text))?
}

/// The violations of an instance (JSON text), none when it matches: at most [`MAX_REPORTED`],
/// each `{"message", "instance_path", "schema_path"}` for an error's `data`. Checked where the
/// stack has room for it (see [`with_room`]).
fn violations(validator: &Validator, instance: &str) -> std::result::Result<Vec<Value>, String> {
    with_room(|| validator.check(instance, MAX_REPORTED))
        .and_then(|checked| checked)
        .map(Option::unwrap_or_default)
}

/// "at /a/0: 5 is not of type \"string\"" for the first violation, and how many more.
fn summary(found: &[Value]) -> String {
    let Some(first) = found.first() else {
        return "it does not match".into();
    };
    let path = first["instance_path"].as_str().unwrap_or_default();
    let place = if path.is_empty() {
        "at the top level".to_string()
    } else {
        format!("at {path}")
    };
    let more = match found.len() {
        1 => String::new(),
        n if n >= MAX_REPORTED => " (and more violations)".to_string(),
        n => format!(" (and {} more)", n - 1),
    };
    format!(
        "{place}: {}{more}",
        first["message"].as_str().unwrap_or_default()
    )
}

/// The fields of a listed tool that matter here; the rest is skipped unparsed.
#[derive(Deserialize)]
struct ListedTool {
    name: String,
    #[serde(rename = "inputSchema")]
    input_schema: Option<Box<RawValue>>,
    #[serde(rename = "outputSchema")]
    output_schema: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct Listing<'a> {
    #[serde(borrow)]
    tools: Option<Vec<&'a RawValue>>,
    #[serde(rename = "nextCursor")]
    next_cursor: Option<Value>,
}

/// The fields of a tool call's result that the output check reads.
#[derive(Deserialize)]
struct CallResult<'a> {
    #[serde(rename = "isError")]
    is_error: Option<Value>,
    #[serde(rename = "structuredContent", borrow)]
    structured: Option<&'a RawValue>,
}

fn same_text(a: &Option<Schema>, b: &Option<Box<RawValue>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.text.get() == b.get(),
        _ => false,
    }
}

impl ToolSchemas {
    /// Takes in a `tools/list` result: new and changed tools get fresh entries, whose output
    /// schemas are compiled now (warning the host of any that fail). A complete list (the first
    /// page, `first_page`, with no `nextCursor`, or every page joined) also forgets the tools it
    /// no longer has; a page only adds. Malformed entries are skipped: the listing itself
    /// reaches the host untouched either way.
    /// Whether any listed tool has an output schema (one atomic read).
    pub(super) fn any_output(&self) -> bool {
        self.any_output.load(Ordering::Acquire)
    }

    pub(super) fn learn(&self, listing: &str, first_page: bool, events: &EventQueue<super::Event>) {
        let Ok(Listing {
            tools: Some(items),
            next_cursor,
        }) = serde_json::from_str::<Listing>(listing)
        else {
            return;
        };
        let complete = first_page && next_cursor.is_none_or(|c| c.is_null());
        let listed: Vec<ListedTool> = items
            .into_iter()
            .filter_map(|t| serde_json::from_str::<ListedTool>(t.get()).ok())
            .collect();
        let mut fresh: Vec<(String, Arc<ToolEntry>)> = Vec::with_capacity(listed.len());
        {
            let known = self.tools.read();
            for t in listed {
                if let Some(old) = known.get(&t.name) {
                    if same_text(&old.input, &t.input_schema)
                        && same_text(&old.output, &t.output_schema)
                    {
                        fresh.push((t.name, old.clone()));
                        continue;
                    }
                }
                let entry = ToolEntry {
                    input: t.input_schema.map(Schema::new),
                    output: t.output_schema.map(Schema::new),
                };
                fresh.push((t.name, Arc::new(entry)));
            }
        }
        // Outside the lock: a slow schema holds up no call.
        for (name, entry) in &fresh {
            if let Some(s) = &entry.output {
                s.validator(name, Which::Output, events);
            }
        }
        let mut known = self.tools.write();
        if complete {
            known.clear();
        }
        known.extend(fresh);
        self.any_output.store(
            known.values().any(|e| e.output.is_some()),
            Ordering::Release,
        );
    }

    /// Forgets every schema (the server said its tool list changed).
    pub(super) fn forget(&self) {
        let mut known = self.tools.write();
        known.clear();
        self.any_output.store(false, Ordering::Release);
    }

    fn entry(&self, tool: &str) -> Option<Arc<ToolEntry>> {
        self.tools.read().get(tool).cloned()
    }

    /// Checks a tool call's result against the tool's `outputSchema`: `invalid_result` when
    /// `structuredContent` does not match it or is missing. `isError` results, tools without an
    /// output schema (or with one that does not compile) and tools never listed pass unlooked at.
    pub(super) fn check_result(
        &self,
        tool: &str,
        result: &RawJson,
        events: &EventQueue<super::Event>,
    ) -> Result<()> {
        if !self.any_output.load(Ordering::Acquire) {
            return Ok(());
        }
        // A tool without an output schema costs one lookup (no reference count touched).
        let entry = match self.tools.read().get(tool) {
            Some(e) if e.output.is_some() => e.clone(),
            _ => return Ok(()),
        };
        let Some(schema) = &entry.output else {
            return Ok(());
        };
        let Some(validator) = schema.validator(tool, Which::Output, events) else {
            return Ok(());
        };
        // A result that is not even an object is not this check's to judge.
        let Ok(parsed) = serde_json::from_str::<CallResult>(result.as_str()) else {
            return Ok(());
        };
        if parsed.is_error == Some(Value::Bool(true)) {
            return Ok(());
        }
        let invalid = |message: String, errors: Vec<Value>| {
            let mut e = Error::new(ErrorKind::InvalidResult, message);
            e.data = Some(json!({"tool": tool, "errors": errors, "result": result.value().ok()}));
            e
        };
        let Some(structured) = parsed.structured else {
            return Err(invalid(
                format!(
                    "tool {tool:?} declares an outputSchema, but its result has no structuredContent"
                ),
                Vec::new(),
            ));
        };
        let found = violations(validator, structured.get()).map_err(|why| {
            Error::new(
                ErrorKind::InvalidResult,
                format!("checking the structuredContent of tool {tool:?} failed: {why}"),
            )
        })?;
        if found.is_empty() {
            return Ok(());
        }
        Err(invalid(
            format!(
                "the structuredContent of tool {tool:?} does not match its outputSchema {}",
                summary(&found)
            ),
            found,
        ))
    }

    /// Checks a tool call's arguments against the tool's `inputSchema` (absent arguments are
    /// checked as `{}`): `invalid_argument` naming the violation. Tools never listed, without an
    /// input schema, or whose schema does not compile pass.
    pub(super) fn check_arguments(
        &self,
        tool: &str,
        arguments: Option<&RawValue>,
        events: &EventQueue<super::Event>,
    ) -> Result<()> {
        self.check_arguments_with(tool, events, || match arguments {
            Some(a) => a.get().into(),
            None => "{}".into(),
        })
    }

    /// [`check_arguments`](Self::check_arguments) for arguments held as a tree (the generic
    /// request's `params.arguments`).
    pub(super) fn check_argument_value(
        &self,
        tool: &str,
        arguments: Option<&Value>,
        events: &EventQueue<super::Event>,
    ) -> Result<()> {
        self.check_arguments_with(tool, events, || match arguments {
            Some(a) => a.to_string().into(),
            None => "{}".into(),
        })
    }

    /// The arguments (JSON text) are only looked at when the tool has an input schema to check
    /// them against.
    fn check_arguments_with<'a>(
        &self,
        tool: &str,
        events: &EventQueue<super::Event>,
        arguments: impl FnOnce() -> std::borrow::Cow<'a, str>,
    ) -> Result<()> {
        let Some(entry) = self.entry(tool) else {
            return Ok(());
        };
        let Some(schema) = &entry.input else {
            return Ok(());
        };
        let Some(validator) = schema.validator(tool, Which::Input, events) else {
            return Ok(());
        };
        let instance = arguments();
        let found = violations(validator, &instance).map_err(|why| {
            Error::invalid(format!(
                "checking the arguments of tool {tool:?} failed: {why}"
            ))
        })?;
        if found.is_empty() {
            return Ok(());
        }
        let mut e = Error::invalid(format!(
            "the arguments of tool {tool:?} do not match its inputSchema {} (nothing was sent)",
            summary(&found)
        ));
        e.data = Some(json!({"tool": tool, "errors": found}));
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Pulled;
    use std::time::Duration;

    fn listing(tools: Value) -> String {
        json!({ "tools": tools }).to_string()
    }

    fn raw(v: Value) -> RawJson {
        RawJson::from_value(&v)
    }

    fn events_of(q: &EventQueue<super::Event>) -> Vec<Value> {
        let mut out = Vec::new();
        while let Pulled::Event(text) = q.pull(Some(Duration::ZERO)) {
            out.push(serde_json::from_str(&text).unwrap());
        }
        out
    }

    fn weather() -> Value {
        json!({
            "name": "weather",
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            "outputSchema": {
                "type": "object",
                "properties": {"temperature": {"type": "number"}, "sky": {"enum": ["clear", "cloudy"]}},
                "required": ["temperature"]
            }
        })
    }

    #[test]
    fn a_result_that_matches_passes_untouched() {
        let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
        s.learn(&listing(json!([weather()])), true, &q);
        let ok =
            raw(json!({"content": [], "structuredContent": {"temperature": 21.5, "sky": "clear"}}));
        s.check_result("weather", &ok, &q).unwrap();
        assert!(events_of(&q).is_empty());
    }

    #[test]
    fn a_mismatch_is_invalid_result_naming_the_place() {
        let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
        s.learn(&listing(json!([weather()])), true, &q);
        let bad = raw(json!({"content": [], "structuredContent": {"temperature": "hot"}}));
        let e = s.check_result("weather", &bad, &q).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidResult);
        assert!(e.message.contains("at /temperature"), "{e}");
        assert!(
            e.message.contains("\"hot\" is not of type \"number\""),
            "{e}"
        );
        let data = e.data.unwrap();
        assert_eq!(data["tool"], "weather");
        assert_eq!(data["errors"][0]["instance_path"], "/temperature");
        assert_eq!(
            data["errors"][0]["schema_path"],
            "/properties/temperature/type"
        );
        assert_eq!(data["result"]["structuredContent"]["temperature"], "hot");

        // Two violations: both listed, the message says there is more.
        let two = raw(json!({"structuredContent": {"temperature": "hot", "sky": "green"}}));
        let e = s.check_result("weather", &two, &q).unwrap_err();
        assert_eq!(
            e.data.as_ref().unwrap()["errors"].as_array().unwrap().len(),
            2
        );
        assert!(e.message.contains("(and 1 more)"), "{e}");
    }

    #[test]
    fn missing_structured_content_is_invalid_but_is_error_results_are_not_checked() {
        let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
        s.learn(&listing(json!([weather()])), true, &q);
        let none = raw(json!({"content": [{"type": "text", "text": "21"}]}));
        let e = s.check_result("weather", &none, &q).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidResult);
        assert!(e.message.contains("no structuredContent"), "{e}");
        let failed = raw(json!({"isError": true, "content": [], "structuredContent": {"x": 1}}));
        s.check_result("weather", &failed, &q).unwrap();
        let failed_bare = raw(json!({"isError": true, "content": []}));
        s.check_result("weather", &failed_bare, &q).unwrap();
    }

    #[test]
    fn unknown_tools_and_tools_without_output_schema_are_not_checked() {
        let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
        let garbage = raw(json!({"structuredContent": 5}));
        // Nothing listed yet: no lookup at all.
        s.check_result("weather", &garbage, &q).unwrap();
        s.learn(
            &listing(json!([weather(), {"name": "echo", "inputSchema": {"type": "object"}}])),
            true,
            &q,
        );
        s.check_result("echo", &garbage, &q).unwrap();
        s.check_result("never-listed", &garbage, &q).unwrap();
        assert!(s.check_result("weather", &garbage, &q).is_err());
    }

    #[test]
    fn list_changed_forgets_and_a_new_listing_replaces() {
        let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
        let bad = raw(json!({"structuredContent": {"temperature": "hot"}}));
        s.learn(&listing(json!([weather()])), true, &q);
        assert!(s.check_result("weather", &bad, &q).is_err());
        s.forget();
        s.check_result("weather", &bad, &q).unwrap();
        assert!(!s.any_output.load(Ordering::Relaxed));

        // The schema changes: the new one applies.
        s.learn(&listing(json!([weather()])), true, &q);
        let mut loose = weather();
        loose["outputSchema"]["properties"]["temperature"] = json!({"type": "string"});
        s.learn(&listing(json!([loose])), true, &q);
        s.check_result("weather", &bad, &q).unwrap();

        // A complete list drops tools it no longer has; one page only adds.
        s.learn(&listing(json!([weather()])), false, &q);
        assert!(s.check_result("weather", &bad, &q).is_err());
        s.learn(&listing(json!([{"name": "echo"}])), false, &q);
        assert!(s.check_result("weather", &bad, &q).is_err());
        s.learn(&listing(json!([{"name": "echo"}])), true, &q);
        s.check_result("weather", &bad, &q).unwrap();
    }

    #[test]
    fn an_unchanged_listing_keeps_the_compiled_validator() {
        let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
        s.learn(&listing(json!([weather()])), true, &q);
        let before = s.entry("weather").unwrap();
        s.learn(&listing(json!([weather(), {"name": "echo"}])), true, &q);
        assert!(Arc::ptr_eq(&before, &s.entry("weather").unwrap()));
    }

    #[test]
    fn a_schema_that_does_not_compile_warns_once_and_checks_nothing() {
        let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
        let broken = json!({"name": "broken", "outputSchema": {"type": 12}});
        s.learn(&listing(json!([broken])), true, &q);
        let ev = events_of(&q);
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(ev[0]["type"], "warning");
        assert_eq!(ev[0]["reason"], "invalid_schema");
        assert_eq!(ev[0]["tool"], "broken");
        assert_eq!(ev[0]["schema"], "outputSchema");
        s.check_result("broken", &raw(json!({"structuredContent": 1})), &q)
            .unwrap();
        s.check_result("broken", &raw(json!({"content": []})), &q)
            .unwrap();
        s.learn(&listing(json!([broken])), true, &q);
        assert!(events_of(&q).is_empty(), "the same schema warns once");

        let unknown_dialect = json!({"name": "odd", "outputSchema": {"$schema": "https://example.com/my-dialect", "type": "object"}});
        s.learn(&listing(json!([unknown_dialect])), true, &q);
        let ev = events_of(&q);
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert!(ev[0]["message"].as_str().unwrap().contains("odd"), "{ev:?}");
    }

    #[test]
    fn the_default_dialect_is_2020_12_and_schema_names_another() {
        let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
        // prefixItems exists in 2020-12 only; draft 7 ignores it (and uses `items` arrays).
        let tuple_2020 = json!({"name": "t2020", "outputSchema": {
            "type": "object",
            "properties": {"pair": {"prefixItems": [{"type": "string"}, {"type": "integer"}]}}
        }});
        let tuple_07 = json!({"name": "t07", "outputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"pair": {"items": [{"type": "string"}, {"type": "integer"}]}}
        }});
        s.learn(&listing(json!([tuple_2020, tuple_07])), true, &q);
        assert!(events_of(&q).is_empty());
        let wrong = raw(json!({"structuredContent": {"pair": [1, "a"]}}));
        assert!(s.check_result("t2020", &wrong, &q).is_err());
        assert!(s.check_result("t07", &wrong, &q).is_err());
        let right = raw(json!({"structuredContent": {"pair": ["a", 1]}}));
        s.check_result("t2020", &right, &q).unwrap();
        s.check_result("t07", &right, &q).unwrap();
    }

    #[test]
    fn local_refs_resolve_and_external_refs_are_never_fetched() {
        use std::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
        let local = json!({"name": "local", "outputSchema": {
            "type": "object",
            "$defs": {"n": {"type": "integer"}},
            "properties": {"n": {"$ref": "#/$defs/n"}}
        }});
        let remote = json!({"name": "remote", "outputSchema": {
            "type": "object",
            "properties": {"n": {"$ref": format!("http://127.0.0.1:{port}/n.json")}}
        }});
        let dir = std::env::temp_dir().join(format!("mcplug-schema-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("n.json");
        std::fs::write(&file, r#"{"type": "integer"}"#).unwrap();
        let on_disk = json!({"name": "on_disk", "outputSchema": {
            "type": "object",
            "properties": {"n": {"$ref": format!("file://{}", file.display())}}
        }});
        s.learn(&listing(json!([local, remote, on_disk])), true, &q);
        let ev = events_of(&q);
        let _ = std::fs::remove_dir_all(&dir);
        let warned: Vec<&str> = ev.iter().map(|e| e["tool"].as_str().unwrap()).collect();
        assert_eq!(warned, ["remote", "on_disk"], "{ev:?}");
        assert!(
            ev[0]["message"]
                .as_str()
                .unwrap()
                .contains("never fetches external schema references"),
            "{ev:?}"
        );
        let bad = raw(json!({"structuredContent": {"n": "x"}}));
        assert!(s.check_result("local", &bad, &q).is_err());
        s.check_result("remote", &bad, &q).unwrap();
        // Give a connection that was attempted in the background time to arrive.
        std::thread::sleep(Duration::from_millis(100));
        match listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("the listener saw a connection: {other:?}"),
        }
    }

    #[test]
    fn cyclic_refs_neither_hang_nor_exhaust_memory() {
        let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
        let cyclic = json!({"name": "cyclic", "outputSchema": {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "$ref": "#/$defs/a"
        }});
        let selfish = json!({"name": "selfish", "outputSchema": {
            "$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}},
            "$ref": "#/$defs/a"
        }});
        s.learn(&listing(json!([cyclic, selfish])), true, &q);
        let any = raw(json!({"structuredContent": {"x": 1}}));
        let _ = s.check_result("cyclic", &any, &q);
        let _ = s.check_result("selfish", &any, &q);
    }

    /// A recursive schema and a result nested 121 deep (serde_json's limit is 128).
    fn tree_tool_and_result() -> (Value, RawJson) {
        let tree = json!({"name": "tree", "outputSchema": {
            "$defs": {"node": {"type": "object", "properties": {
                "v": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
            }}},
            "$ref": "#/$defs/node"
        }});
        let mut text = String::from(r#"{"v": 1}"#);
        for _ in 0..60 {
            text = format!(r#"{{"v": 1, "children": [{text}]}}"#);
        }
        let result = RawJson::copy_of(
            &serde_json::from_str::<Box<RawValue>>(&format!(r#"{{"structuredContent": {text}}}"#))
                .unwrap(),
        );
        (tree, result)
    }

    #[test]
    fn a_small_stack_is_never_overflowed() {
        // koffi runs `.async` calls on a 128 KiB stack; compiling (the meta-schemas) and checking a
        // deep result take more than that in a debug build, so both must move to a spare stack.
        let (tree, deep) = tree_tool_and_result();
        let outcome = std::thread::Builder::new()
            .stack_size(128 << 10)
            .spawn(move || {
                let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
                s.learn(&listing(json!([tree])), true, &q);
                let ok = s.check_result("tree", &deep, &q);
                let bad =
                    RawJson::from_value(&json!({"structuredContent": {"children": [{"v": "x"}]}}));
                let e = s.check_result("tree", &bad, &q).unwrap_err();
                (ok, e.message, stack_room())
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(
            outcome.0.is_ok(),
            "the deep result matches: {:?}",
            outcome.0
        );
        assert!(outcome.1.contains("at /children/0/v"), "{}", outcome.1);
        let room = outcome.2.expect("a thread's own stack is known");
        assert!(room < CHECK_IN_PLACE, "{room}");
        assert!(stack_room().is_some_and(|r| r > 0));
    }

    #[test]
    fn arguments_are_checked_against_the_input_schema() {
        let (s, q) = (ToolSchemas::default(), EventQueue::<super::Event>::new(10));
        s.learn(&listing(json!([weather()])), true, &q);
        let args = |t: &str| -> Box<RawValue> { serde_json::from_str(t).unwrap() };
        s.check_arguments("weather", Some(&args(r#"{"city": "Oslo"}"#)), &q)
            .unwrap();
        let e = s
            .check_arguments("weather", Some(&args(r#"{"city": 5}"#)), &q)
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert!(
            e.message.contains("inputSchema") && e.message.contains("at /city"),
            "{e}"
        );
        let e = s.check_arguments("weather", None, &q).unwrap_err();
        assert!(e.message.contains("city"), "a missing required field: {e}");
        s.check_arguments("never-listed", Some(&args("{}")), &q)
            .unwrap();
    }
}
