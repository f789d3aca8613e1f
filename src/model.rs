//! The model's view of tools and results (`format`): an MCP tool or tool result as a model API
//! takes it, so that a host hands it on without a mapping of its own.
//!
//! - `"mcp"` (the default): untouched.
//! - `"anthropic"`: a tool as a Messages API tool definition `{name, description, input_schema}`;
//!   a result as what a `tool_result` block holds, `{"content": [blocks], "is_error"}`: text as
//!   text blocks, images (JPEG, PNG, GIF, WebP) as base64 image blocks, PDFs as base64 document
//!   blocks, embedded text resources and resource links as text naming their URI, audio and other
//!   media as a text note (the API takes none).
//! - `"openai"`: a tool as a Chat Completions function tool
//!   `{"type": "function", "function": {name, description, parameters}}`; a result as the tool
//!   message's `{"role": "tool", "content": "<text>"}` (tool messages take text only: media are
//!   named in a note), with `is_error` beside it for the host.
//!
//! Nothing here reads more than the fields it maps; everything else of an item is the host's to
//! read in the `"mcp"` form.

use crate::error::{Error, Result};
use serde_json::{json, Map, Value};

/// A model API's shape of tools and results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Mcp,
    Anthropic,
    Openai,
}

impl Format {
    /// The option `format`'s value.
    pub fn parse(v: &Value) -> Result<Format> {
        match v.as_str() {
            Some("mcp") => Ok(Format::Mcp),
            Some("anthropic") => Ok(Format::Anthropic),
            Some("openai") => Ok(Format::Openai),
            _ => Err(Error::invalid(format!(
                "option `format` must be \"mcp\", \"anthropic\" or \"openai\" (got {v})"
            ))),
        }
    }
}

/// One MCP tool (a server's, or a pool entry) as `format`'s tool definition.
pub fn tool(tool: &Value, format: Format) -> Value {
    let name = tool.get("name").cloned().unwrap_or(Value::Null);
    let description = tool.get("description").filter(|d| d.is_string());
    let schema = tool
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(|| json!({"type": "object"}));
    match format {
        Format::Mcp => tool.clone(),
        Format::Anthropic => {
            let mut t = Map::new();
            t.insert("name".into(), name);
            if let Some(d) = description {
                t.insert("description".into(), d.clone());
            }
            t.insert("input_schema".into(), schema);
            Value::Object(t)
        }
        Format::Openai => {
            let mut f = Map::new();
            f.insert("name".into(), name);
            if let Some(d) = description {
                f.insert("description".into(), d.clone());
            }
            f.insert("parameters".into(), schema);
            json!({"type": "function", "function": f})
        }
    }
}

/// A listing `{"tools": [...], ...}` with every tool in `format` (other keys kept).
pub fn listing(mut listing: Value, format: Format) -> Value {
    if format == Format::Mcp {
        return listing;
    }
    if let Some(tools) = listing.get_mut("tools").and_then(Value::as_array_mut) {
        for t in tools.iter_mut() {
            *t = tool(t, format);
        }
    }
    listing
}

/// Image types the Messages API takes in an image block.
const ANTHROPIC_IMAGES: &[&str] = &["image/jpeg", "image/png", "image/gif", "image/webp"];

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// What an item the model API cannot take was, in words.
fn note(what: &str, mime: &str, data: &str, why: &str) -> String {
    format!(
        "[{what} ({mime}, {} bytes of base64) not shown: {why}]",
        data.len()
    )
}

/// A resource link or an embedded resource's header, naming its URI.
fn link_text(item: &Value) -> String {
    let uri = str_of(item, "uri");
    let name = item
        .get("title")
        .or_else(|| item.get("name"))
        .and_then(Value::as_str)
        .unwrap_or(uri);
    let mut t = format!("[Resource link: {name} <{uri}>]");
    if let Some(d) = item.get("description").and_then(Value::as_str) {
        t.push(' ');
        t.push_str(d);
    }
    t
}

/// One MCP content item as Messages API blocks.
fn anthropic_block(item: &Value) -> Value {
    let text = |t: String| json!({"type": "text", "text": t});
    match str_of(item, "type") {
        "text" => text(str_of(item, "text").to_string()),
        "image" => {
            let mime = str_of(item, "mimeType");
            let data = str_of(item, "data");
            if ANTHROPIC_IMAGES.contains(&mime) {
                json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
            } else {
                text(note(
                    "image",
                    mime,
                    data,
                    "the Messages API takes JPEG, PNG, GIF and WebP",
                ))
            }
        }
        "audio" => text(note(
            "audio",
            str_of(item, "mimeType"),
            str_of(item, "data"),
            "the Messages API takes no audio",
        )),
        "resource_link" => text(link_text(item)),
        "resource" => {
            let r = item.get("resource").unwrap_or(&Value::Null);
            let uri = str_of(r, "uri");
            let mime = str_of(r, "mimeType");
            if let Some(t) = r.get("text").and_then(Value::as_str) {
                return text(format!("[Resource <{uri}>]\n{t}"));
            }
            let blob = str_of(r, "blob");
            if mime == "application/pdf" {
                json!({"type": "document", "source": {"type": "base64", "media_type": mime, "data": blob}})
            } else if ANTHROPIC_IMAGES.contains(&mime) {
                json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": blob}})
            } else {
                text(note(
                    &format!("resource <{uri}>"),
                    mime,
                    blob,
                    "the Messages API takes no such media",
                ))
            }
        }
        _ => text(item.to_string()),
    }
}

/// One MCP content item as text for a Chat Completions tool message.
fn openai_text(item: &Value) -> String {
    let why = "Chat Completions tool messages take text only";
    match str_of(item, "type") {
        "text" => str_of(item, "text").to_string(),
        t @ ("image" | "audio") => note(t, str_of(item, "mimeType"), str_of(item, "data"), why),
        "resource_link" => link_text(item),
        "resource" => {
            let r = item.get("resource").unwrap_or(&Value::Null);
            let uri = str_of(r, "uri");
            match r.get("text").and_then(Value::as_str) {
                Some(t) => format!("[Resource <{uri}>]\n{t}"),
                None => note(
                    &format!("resource <{uri}>"),
                    str_of(r, "mimeType"),
                    str_of(r, "blob"),
                    why,
                ),
            }
        }
        _ => item.to_string(),
    }
}

/// A `CallToolResult` as `format` has it (see the module's documentation).
pub fn tool_result(result: &Value, format: Format) -> Value {
    let empty = Vec::new();
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    // A result with structured content and no content of its own says it as JSON text.
    let structured = result
        .get("structuredContent")
        .filter(|_| content.is_empty())
        .map(|s| json!({"type": "text", "text": s.to_string()}));
    let items = content.iter().chain(structured.as_ref());
    match format {
        Format::Mcp => result.clone(),
        Format::Anthropic => {
            let blocks: Vec<Value> = items.map(anthropic_block).collect();
            json!({"content": blocks, "is_error": is_error})
        }
        Format::Openai => {
            let text = items.map(openai_text).collect::<Vec<_>>().join("\n");
            json!({"role": "tool", "content": text, "is_error": is_error})
        }
    }
}

/// [`tool_result`] over a result's text (untouched, and unparsed, for `"mcp"`).
pub fn tool_result_raw(
    result: crate::protocol::RawJson,
    format: Format,
) -> Result<crate::protocol::RawJson> {
    if format == Format::Mcp {
        return Ok(result);
    }
    let v = result.value()?;
    Ok(crate::protocol::RawJson::from_value(&tool_result(
        &v, format,
    )))
}

/// [`listing`] over a listing's text (untouched, and unparsed, for `"mcp"`).
pub fn listing_raw(
    listing: crate::protocol::RawJson,
    format: Format,
) -> Result<crate::protocol::RawJson> {
    if format == Format::Mcp {
        return Ok(listing);
    }
    let v = listing.value()?;
    Ok(crate::protocol::RawJson::from_value(&self::listing(
        v, format,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_are_checked() {
        assert_eq!(
            Format::parse(&json!("anthropic")).unwrap(),
            Format::Anthropic
        );
        let e = Format::parse(&json!("claude")).unwrap_err();
        assert!(
            e.message.contains("\"mcp\", \"anthropic\" or \"openai\""),
            "{e}"
        );
    }

    #[test]
    fn tools_as_each_api_defines_them() {
        let t = json!({"name": "mcp__s__echo", "description": "Echoes", "inputSchema": {"type": "object", "properties": {"m": {"type": "string"}}}, "server": "s"});
        assert_eq!(
            tool(&t, Format::Anthropic),
            json!({"name": "mcp__s__echo", "description": "Echoes", "input_schema": t["inputSchema"]})
        );
        assert_eq!(
            tool(&t, Format::Openai),
            json!({"type": "function", "function": {"name": "mcp__s__echo", "description": "Echoes", "parameters": t["inputSchema"]}})
        );
        assert_eq!(tool(&t, Format::Mcp), t);
        let bare = json!({"name": "x"});
        assert_eq!(
            tool(&bare, Format::Anthropic)["input_schema"],
            json!({"type": "object"})
        );
    }

    #[test]
    fn results_as_each_api_takes_them() {
        let r = json!({"content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "image", "data": "AAAA", "mimeType": "image/tiff"},
            {"type": "audio", "data": "AAAAAAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "body"}},
            {"type": "resource", "resource": {"uri": "file:///a.pdf", "blob": "JVBE", "mimeType": "application/pdf"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b", "description": "the b"},
        ], "isError": true});
        let a = tool_result(&r, Format::Anthropic);
        assert_eq!(a["is_error"], true);
        let c = a["content"].as_array().unwrap();
        assert_eq!(c[0], json!({"type": "text", "text": "hi"}));
        assert_eq!(
            c[1]["source"],
            json!({"type": "base64", "media_type": "image/png", "data": "AAAA"})
        );
        assert!(c[2]["text"]
            .as_str()
            .unwrap()
            .contains("image (image/tiff, 4 bytes"));
        assert!(c[3]["text"].as_str().unwrap().contains("takes no audio"));
        assert_eq!(c[4]["text"], "[Resource <file:///a.txt>]\nbody");
        assert_eq!(c[5]["type"], "document");
        assert_eq!(c[5]["source"]["media_type"], "application/pdf");
        assert_eq!(c[6]["text"], "[Resource link: b <file:///b>] the b");
        let o = tool_result(&r, Format::Openai);
        assert_eq!(o["role"], "tool");
        let text = o["content"].as_str().unwrap();
        assert!(
            text.starts_with("hi\n[image (image/png, 4 bytes of base64) not shown"),
            "{text}"
        );
        assert!(text.contains("[Resource <file:///a.txt>]\nbody"));
        assert_eq!(o["is_error"], true);
        let structured = json!({"content": [], "structuredContent": {"t": 21}});
        assert_eq!(
            tool_result(&structured, Format::Anthropic)["content"][0]["text"],
            "{\"t\":21}"
        );
        assert_eq!(tool_result(&structured, Format::Openai)["is_error"], false);
    }
}
