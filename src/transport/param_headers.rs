//! Custom headers from tool parameters (SEP-2243; Streamable HTTP, 2026-07-28 era).
//!
//! A tool's `inputSchema` may mark properties with `"x-mcp-header": "<Name>"`; on a `tools/call`
//! the value of each such argument is mirrored into the request header `Mcp-Param-<Name>`
//! (strings as they are, integers in decimal, booleans `true`/`false`; a value that is not plain
//! visible ASCII, has whitespace at an end, or looks like the sentinel goes as
//! `=?base64?<base64 of its UTF-8>?=`; a missing or null value sends no header).
//!
//! An annotation is valid when it is a non-empty RFC 9110 token, on a property of type
//! `string`, `integer` or `boolean`, reached from the schema root through `properties` keys
//! only (never `items`, `oneOf`, `$defs`, `$ref`, ...), and case-insensitively unique in the
//! schema. A tool with any invalid annotation is dropped from `tools/list` results (the host
//! gets a `warning` event naming the tool and why) and a call to it is refused.
//!
//! [`ParamHeaders`] is what one connection learned from its `tools/list` results: tool name ->
//! annotated properties. The client feeds it (see [`ParamHeaders::screen`]); the HTTP transport
//! reads it for every modern `tools/call` it POSTs. A tool never listed is called without
//! `Mcp-Param-*` headers; when the server answers -32020 (header mismatch) the client lists the
//! tools again and retries once (`client/mrtr.rs`).

use super::remote::header_safe;
use parking_lot::RwLock;
use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The annotation keyword.
const ANNOTATION: &str = "x-mcp-header";
/// The prefix of the mirrored headers.
const PREFIX: &str = "Mcp-Param-";

/// One annotated property: where its value is in the arguments, and the header it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeaderParam {
    /// The chain of `properties` keys from the schema root to the property.
    pub path: Vec<String>,
    /// The annotation's value (`Region` for `Mcp-Param-Region`).
    pub name: String,
}

/// Keywords whose value is one subschema, several (an array), or a map of them. Everything
/// else (`const`, `enum`, `default`, `examples`, ...) is data, never looked into. `properties`
/// is handled on its own: it is the only step that keeps a property statically reachable.
const ONE_SCHEMA: &[&str] = &[
    "items",
    "additionalItems",
    "contains",
    "unevaluatedItems",
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
const SCHEMA_LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
const SCHEMA_MAP: &[&str] = &[
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The annotated properties of an `inputSchema`, or why its annotations are invalid.
pub(crate) fn annotations(schema: &Value) -> Result<Vec<HeaderParam>, String> {
    let mut found: Vec<HeaderParam> = Vec::new();
    // (path while statically reachable, schema); an explicit stack for any depth.
    let mut stack: Vec<(Option<Vec<String>>, &Value)> = vec![(Some(Vec::new()), schema)];
    while let Some((path, node)) = stack.pop() {
        let Value::Object(obj) = node else { continue };
        if let Some(annotation) = obj.get(ANNOTATION) {
            let path = match &path {
                Some(p) if !p.is_empty() => p,
                Some(_) => return Err(format!("{ANNOTATION} is on the schema root itself")),
                None => {
                    return Err(format!(
                        "{ANNOTATION} is on a schema that is not reached from the root through `properties` alone (under items, a composition, $defs, ...)"
                    ))
                }
            };
            let at = path.join(".");
            let Value::String(name) = annotation else {
                return Err(format!(
                    "property {at:?}: {ANNOTATION} must be a string (got {annotation})"
                ));
            };
            if name.is_empty() {
                return Err(format!("property {at:?}: {ANNOTATION} is empty"));
            }
            if !name.bytes().all(is_tchar) {
                return Err(format!(
                    "property {at:?}: {ANNOTATION} {name:?} is not an HTTP header-name token (no spaces, colons, control or non-ASCII characters)"
                ));
            }
            match obj.get("type") {
                Some(Value::String(t)) if matches!(t.as_str(), "string" | "integer" | "boolean") => {}
                Some(Value::String(t)) => {
                    return Err(format!(
                        "property {at:?}: {ANNOTATION} is only allowed on string, integer or boolean properties (this one is {t:?})"
                    ))
                }
                other => {
                    return Err(format!(
                        "property {at:?}: {ANNOTATION} is only allowed on a property whose `type` is string, integer or boolean (got {})",
                        other.map_or("no type".to_string(), Value::to_string)
                    ))
                }
            }
            if let Some(twin) = found.iter().find(|f| f.name.eq_ignore_ascii_case(name)) {
                return Err(format!(
                    "property {at:?}: {ANNOTATION} {name:?} is also used by property {:?} (names are compared without case)",
                    twin.path.join(".")
                ));
            }
            found.push(HeaderParam {
                path: path.clone(),
                name: name.clone(),
            });
        }
        for (key, value) in obj {
            match key.as_str() {
                "properties" => {
                    if let Value::Object(props) = value {
                        for (name, sub) in props {
                            let sub_path = path.as_ref().map(|p| {
                                let mut p = p.clone();
                                p.push(name.clone());
                                p
                            });
                            stack.push((sub_path, sub));
                        }
                    }
                }
                k if SCHEMA_LIST.contains(&k) && value.is_array() => {
                    for sub in value.as_array().into_iter().flatten() {
                        stack.push((None, sub));
                    }
                }
                k if ONE_SCHEMA.contains(&k) => stack.push((None, value)),
                k if SCHEMA_MAP.contains(&k) => {
                    for sub in value.as_object().into_iter().flat_map(Map::values) {
                        stack.push((None, sub));
                    }
                }
                _ => {}
            }
        }
    }
    // The walk pops in reverse: keep the schema's own order for the headers.
    found.reverse();
    Ok(found)
}

/// The header text of one argument value, before the sentinel encoding: `None` for null and
/// for what has no header form (objects, arrays).
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(if *b { "true" } else { "false" }.to_string()),
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() {
                return Some(n.to_string());
            }
            // An integer written with a fraction (42.0) goes as the integer it is.
            match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
                    Some(format!("{}", f as i64))
                }
                _ => Some(n.to_string()),
            }
        }
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

/// The `Mcp-Param-*` headers of one call's arguments.
pub(crate) fn headers_of(params: &[HeaderParam], arguments: &Value) -> Vec<(String, String)> {
    params
        .iter()
        .filter_map(|p| {
            let mut at = arguments;
            for key in &p.path {
                at = at.as_object()?.get(key)?;
            }
            let text = scalar_text(at)?;
            Some((
                format!("{PREFIX}{}", p.name),
                header_safe(&text).into_owned(),
            ))
        })
        .collect()
}

/// What one connection learned of its tools' header parameters.
#[derive(Default)]
pub struct ParamHeaders {
    /// Tools with at least one annotated property.
    tools: RwLock<HashMap<String, Arc<[HeaderParam]>>>,
    /// Tools dropped for invalid annotations, with the reason.
    rejected: RwLock<HashMap<String, String>>,
    /// Whether `tools` is not empty (one atomic load for a call of a tool without any).
    any: AtomicBool,
}

/// The fields of a listed tool read here.
#[derive(Deserialize)]
struct ListedTool {
    name: String,
    #[serde(rename = "inputSchema")]
    input_schema: Option<Value>,
}

/// A tool that was dropped from a listing, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejected {
    pub tool: String,
    pub reason: String,
    /// Not dropped for this reason by an earlier listing (the host was not told yet).
    pub fresh: bool,
}

impl ParamHeaders {
    /// Takes in one `tools/list` result (`complete`: the whole list, which replaces what was
    /// known; otherwise a page, which adds to it). Returns `None` when the listing is to reach
    /// the host as it is, or the listing without its invalid tools (every other byte kept) and
    /// the tools dropped.
    pub(crate) fn screen(&self, listing: &str, complete: bool) -> Option<(String, Vec<Rejected>)> {
        // The common case: no annotation anywhere, nothing known: nothing to learn or drop.
        if !listing.contains(ANNOTATION)
            && !self.any.load(Ordering::Acquire)
            && self.rejected.read().is_empty()
        {
            return None;
        }
        let Ok(fields) = serde_json::from_str::<Fields>(listing) else {
            return None;
        };
        let tools_raw = fields.tools()?;
        let mut kept: Vec<&RawValue> = Vec::with_capacity(tools_raw.len());
        let mut dropped = Vec::new();
        let mut learned: Vec<(String, Option<Arc<[HeaderParam]>>)> = Vec::new();
        for raw in &tools_raw {
            let text = raw.get();
            if !text.contains(ANNOTATION) {
                if let Ok(t) = serde_json::from_str::<NameOnly>(text) {
                    learned.push((t.name, None));
                }
                kept.push(raw.as_ref());
                continue;
            }
            let Ok(tool) = serde_json::from_str::<ListedTool>(text) else {
                kept.push(raw.as_ref());
                continue;
            };
            match tool.input_schema.as_ref().map(annotations).transpose() {
                Ok(found) => {
                    let found = found.filter(|f| !f.is_empty()).map(Arc::from);
                    learned.push((tool.name, found));
                    kept.push(raw.as_ref());
                }
                Err(reason) => dropped.push(Rejected {
                    tool: tool.name,
                    reason,
                    fresh: true,
                }),
            }
        }
        {
            let mut tools = self.tools.write();
            let mut rejected = self.rejected.write();
            for d in &mut dropped {
                d.fresh = rejected.get(&d.tool) != Some(&d.reason);
            }
            if complete {
                tools.clear();
                rejected.clear();
            }
            for (name, found) in learned {
                rejected.remove(&name);
                match found {
                    Some(f) => {
                        tools.insert(name, f);
                    }
                    None => {
                        tools.remove(&name);
                    }
                }
            }
            for d in &dropped {
                tools.remove(&d.tool);
                rejected.insert(d.tool.clone(), d.reason.clone());
            }
            self.any.store(!tools.is_empty(), Ordering::Release);
        }
        if dropped.is_empty() {
            return None;
        }
        Some((fields.rebuild(&kept), dropped))
    }

    /// Why a tool was dropped from the listing, when it was.
    pub(crate) fn rejected(&self, tool: &str) -> Option<String> {
        let rejected = self.rejected.read();
        if rejected.is_empty() {
            return None;
        }
        rejected.get(tool).cloned()
    }

    /// The `Mcp-Param-*` headers of a `tools/call` message (the JSON text the engine wrote),
    /// from the tool's last listed schema; none for a tool never listed or without annotations.
    pub(crate) fn headers_for(&self, tool: &str, message: &[u8]) -> Vec<(HeaderName, HeaderValue)> {
        if !self.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        let Some(params) = self.tools.read().get(tool).cloned() else {
            return Vec::new();
        };
        #[derive(Deserialize)]
        struct Message {
            params: Option<Params>,
        }
        #[derive(Deserialize)]
        struct Params {
            arguments: Option<Value>,
        }
        let arguments = serde_json::from_slice::<Message>(message)
            .ok()
            .and_then(|m| m.params)
            .and_then(|p| p.arguments)
            .unwrap_or(Value::Null);
        headers_of(&params, &arguments)
            .into_iter()
            .filter_map(|(name, value)| {
                Some((
                    HeaderName::from_bytes(name.as_bytes()).ok()?,
                    HeaderValue::from_str(&value).ok()?,
                ))
            })
            .collect()
    }
}

/// A JSON object's members in their order, each value as the text it was.
struct Fields(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Fields, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    out.push((k, v));
                }
                Ok(Fields(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

impl Fields {
    /// The `tools` array's items, as text.
    fn tools(&self) -> Option<Vec<Box<RawValue>>> {
        let (_, raw) = self.0.iter().find(|(k, _)| k == "tools")?;
        serde_json::from_str(raw.get()).ok()
    }

    /// The object again, with `tools` holding only `kept`.
    fn rebuild(&self, kept: &[&RawValue]) -> String {
        let mut out = String::from("{");
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&Value::String(k.clone()).to_string());
            out.push(':');
            if k == "tools" {
                out.push('[');
                for (j, t) in kept.iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    out.push_str(t.get());
                }
                out.push(']');
            } else {
                out.push_str(v.get());
            }
        }
        out.push('}');
        out
    }
}

/// A listed tool's name alone.
#[derive(Deserialize)]
struct NameOnly {
    name: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(schema: Value) -> Result<Vec<HeaderParam>, String> {
        annotations(&schema)
    }

    fn prop(p: Value) -> Value {
        json!({"type": "object", "properties": {"v": p}})
    }

    #[test]
    fn valid_annotations_are_found_with_their_paths() {
        let found = one(json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"},
                "opts": {"type": "object", "properties": {
                    "level": {"type": "integer", "x-mcp-header": "Level"},
                    "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}
                }},
                "tags": {"type": "array", "items": {"type": "string"}}
            }
        }))
        .unwrap();
        let got: Vec<(String, String)> = found
            .iter()
            .map(|p| (p.path.join("."), p.name.clone()))
            .collect();
        assert_eq!(got.len(), 3);
        assert!(got.contains(&("region".into(), "Region".into())));
        assert!(got.contains(&("opts.level".into(), "Level".into())));
        assert!(got.contains(&("opts.dry".into(), "Dry-Run".into())));
        // No annotation at all, no schema object: nothing, and valid.
        assert_eq!(one(json!({"type": "object"})).unwrap(), vec![]);
        assert_eq!(one(json!(true)).unwrap(), vec![]);
        // A property *named* x-mcp-header, and the word in data, are not annotations.
        assert_eq!(
            one(
                json!({"type": "object", "properties": {"x-mcp-header": {"type": "string"}},
                       "default": {"x-mcp-header": 5}, "examples": [{"x-mcp-header": ""}]})
            )
            .unwrap(),
            vec![]
        );
    }

    #[test]
    fn invalid_annotations_are_refused_with_a_reason() {
        let bad = |schema: Value, why: &str| {
            let e = one(schema.clone()).expect_err(&format!("{schema} must be refused"));
            assert!(e.contains(why), "{schema}: {e}");
        };
        // The scenario's cases (http-invalid-tool-headers).
        bad(prop(json!({"type": "string", "x-mcp-header": ""})), "empty");
        bad(
            prop(json!({"type": "object", "x-mcp-header": "Data"})),
            "\"object\"",
        );
        bad(
            prop(json!({"type": "array", "items": {"type": "string"}, "x-mcp-header": "Items"})),
            "\"array\"",
        );
        bad(
            prop(json!({"type": "null", "x-mcp-header": "Nil"})),
            "\"null\"",
        );
        bad(
            prop(json!({"type": "number", "x-mcp-header": "Score"})),
            "\"number\"",
        );
        bad(
            json!({"type": "object", "properties": {
                "a": {"type": "string", "x-mcp-header": "Region"},
                "b": {"type": "string", "x-mcp-header": "Region"}}}),
            "also used",
        );
        bad(
            json!({"type": "object", "properties": {
                "a": {"type": "string", "x-mcp-header": "MyField"},
                "b": {"type": "string", "x-mcp-header": "myfield"}}}),
            "also used",
        );
        bad(
            prop(json!({"type": "string", "x-mcp-header": "My Region"})),
            "token",
        );
        bad(
            prop(json!({"type": "string", "x-mcp-header": "Region:Primary"})),
            "token",
        );
        bad(
            prop(json!({"type": "string", "x-mcp-header": "Région"})),
            "token",
        );
        bad(
            prop(json!({"type": "string", "x-mcp-header": "Region\t1"})),
            "token",
        );
        bad(
            prop(json!({"type": "string", "x-mcp-header": "A\r\nB"})),
            "token",
        );
        // Not a string, no type, a type list.
        bad(
            prop(json!({"type": "string", "x-mcp-header": 7})),
            "must be a string",
        );
        bad(prop(json!({"x-mcp-header": "V"})), "no type");
        bad(
            prop(json!({"type": ["string", "null"], "x-mcp-header": "V"})),
            "[\"string\",\"null\"]",
        );
        // Not statically reachable.
        bad(json!({"type": "string", "x-mcp-header": "Root"}), "root");
        bad(
            json!({"type": "object", "properties": {"list": {"type": "array",
                "items": {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "R"}}}}}}),
            "not reached",
        );
        bad(
            json!({"type": "object", "oneOf": [{"properties": {"r": {"type": "string", "x-mcp-header": "R"}}}]}),
            "not reached",
        );
        bad(
            json!({"type": "object", "$defs": {"r": {"type": "string", "x-mcp-header": "R"}},
                   "properties": {"r": {"$ref": "#/$defs/r"}}}),
            "not reached",
        );
        bad(
            json!({"type": "object", "additionalProperties": {"type": "string", "x-mcp-header": "R"}}),
            "not reached",
        );
    }

    fn params(list: &[(&str, &str)]) -> Vec<HeaderParam> {
        list.iter()
            .map(|(path, name)| HeaderParam {
                path: path.split('.').map(str::to_string).collect(),
                name: name.to_string(),
            })
            .collect()
    }

    #[test]
    fn values_are_encoded_as_the_spec_says() {
        let p = params(&[
            ("region", "Region"),
            ("priority", "Priority"),
            ("verbose", "Verbose"),
            ("debug", "Debug"),
            ("empty", "EmptyVal"),
            ("greeting", "Greeting"),
            ("padded", "Padded"),
            ("lines", "Lines"),
            ("crlf", "CrLf"),
            ("tab", "Tab"),
            ("inner", "Inner"),
            ("literal", "Literal"),
            ("neg", "Neg"),
            ("whole", "Whole"),
            ("nested.deep", "Deep"),
            ("missing", "Missing"),
            ("nothing", "Nothing"),
            ("obj", "Obj"),
        ]);
        let args = json!({
            "region": "us-west1", "priority": 42, "verbose": false, "debug": true,
            "empty": "", "greeting": "Hello, 世界", "padded": " padded ",
            "lines": "line1\nline2", "crlf": "line1\r\nline2", "tab": "\tindented",
            "inner": "us west 1", "literal": "=?base64?literal?=", "neg": -7, "whole": 42.0,
            "nested": {"deep": "down"}, "nothing": null, "obj": {"a": 1}, "query": "SELECT 1"
        });
        let got: HashMap<String, String> = headers_of(&p, &args).into_iter().collect();
        let want: HashMap<String, String> = [
            ("Mcp-Param-Region", "us-west1"),
            ("Mcp-Param-Priority", "42"),
            ("Mcp-Param-Verbose", "false"),
            ("Mcp-Param-Debug", "true"),
            ("Mcp-Param-EmptyVal", ""),
            ("Mcp-Param-Greeting", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            ("Mcp-Param-Padded", "=?base64?IHBhZGRlZCA=?="),
            ("Mcp-Param-Lines", "=?base64?bGluZTEKbGluZTI=?="),
            ("Mcp-Param-CrLf", "=?base64?bGluZTENCmxpbmUy?="),
            ("Mcp-Param-Tab", "=?base64?CWluZGVudGVk?="),
            ("Mcp-Param-Inner", "us west 1"),
            ("Mcp-Param-Literal", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
            ("Mcp-Param-Neg", "-7"),
            ("Mcp-Param-Whole", "42"),
            ("Mcp-Param-Deep", "down"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
        // No arguments at all: no headers.
        assert!(headers_of(&p, &Value::Null).is_empty());
    }

    const LISTING: &str = r#"{"tools":[{"name":"ok","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"number","default":1.50}}}},{"name":"bad","inputSchema":{"type":"object","properties":{"s":{"type":"number","x-mcp-header":"Score"}}}},{"name":"plain","inputSchema":{"type":"object"}}],"nextCursor":null,"ttlMs":0}"#;

    #[test]
    fn a_listing_loses_its_invalid_tools_and_nothing_else() {
        let known = ParamHeaders::default();
        let (kept, dropped) = known.screen(LISTING, true).expect("a tool is dropped");
        assert_eq!(
            kept,
            r#"{"tools":[{"name":"ok","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"number","default":1.50}}}},{"name":"plain","inputSchema":{"type":"object"}}],"nextCursor":null,"ttlMs":0}"#,
            "every other byte kept"
        );
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].tool, "bad");
        assert!(dropped[0].fresh);
        assert!(
            dropped[0].reason.contains("\"number\""),
            "{}",
            dropped[0].reason
        );
        assert!(known.rejected("bad").is_some());
        assert!(known.rejected("ok").is_none());

        let call = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ok","arguments":{"region":"eu","n":2}}}"#;
        let headers = known.headers_for("ok", call);
        assert_eq!(headers.len(), 1);
        assert_eq!(headers[0].0.as_str(), "mcp-param-region");
        assert_eq!(headers[0].1, "eu");
        assert!(known.headers_for("plain", call).is_empty());
        assert!(known.headers_for("never-listed", call).is_empty());

        // Listed again: still dropped, but the host was told already.
        let (_, again) = known.screen(LISTING, true).unwrap();
        assert!(!again[0].fresh);
    }

    #[test]
    fn a_page_adds_and_a_complete_list_replaces() {
        let known = ParamHeaders::default();
        known.screen(LISTING, true);
        // A page that lists "ok" without its annotation: its headers are gone, others stay.
        let page = r#"{"tools":[{"name":"ok","inputSchema":{"type":"object"}}],"nextCursor":"2"}"#;
        assert!(known.screen(page, false).is_none(), "nothing to drop");
        assert!(known
            .headers_for("ok", br#"{"params":{"arguments":{"region":"x"}}}"#)
            .is_empty());
        assert!(
            known.rejected("bad").is_some(),
            "a page does not forget others"
        );
        // A complete list without annotations forgets everything, and costs no parse next time.
        assert!(known.screen(r#"{"tools":[]}"#, true).is_none());
        assert!(known.rejected("bad").is_none());
        assert!(known.screen(r#"{"tools":[{"name":"x"}]}"#, true).is_none());
        // A listing that is not what it should be is left alone.
        assert!(known.screen(r#"{"tools":"x-mcp-header"}"#, true).is_none());
        assert!(known.screen("[1]", true).is_none());
    }
}
