//! In-process servers (`"type": "sdk"`, FEATURES T5): servers the host implements itself. The
//! host lists their tools (in the entry's `tools`, or later with `set_tools`); the manager puts
//! them in the pool like any server's — first, as host tools — and a call to one becomes a
//! request event `tools/call` that the host answers with `respond`. No process, no socket.

use crate::error::{Error, Result};
use serde_json::{json, Value};

/// Checks a host's tool list: an array of objects, each with a non-empty string `name` (names
/// unique), `description` a string when given, `inputSchema` an object when given (absent: any
/// object of arguments, `{"type": "object"}`).
pub fn parse_tools(tools: Option<&Value>, server: &str) -> Result<Vec<Value>> {
    let list = match tools {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(Error::invalid(format!(
                "the tools of in-process server {server:?} must be an array (got {other})"
            )))
        }
    };
    let mut out: Vec<Value> = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let Value::Object(obj) = t else {
            return Err(Error::invalid(format!(
                "tool {i} of in-process server {server:?} must be an object (got {t})"
            )));
        };
        let name = match obj.get("name") {
            Some(Value::String(s)) if !s.is_empty() => s,
            _ => {
                return Err(Error::invalid(format!(
                    "tool {i} of in-process server {server:?} needs a non-empty string `name`"
                )))
            }
        };
        if out.iter().any(|o| o["name"] == json!(name)) {
            return Err(Error::invalid(format!(
                "in-process server {server:?} lists tool {name:?} twice"
            )));
        }
        for (key, want) in [
            ("description", "a string"),
            ("title", "a string"),
            ("inputSchema", "an object"),
            ("outputSchema", "an object"),
            ("annotations", "an object"),
            ("_meta", "an object"),
        ] {
            let ok = match obj.get(key) {
                None => true,
                Some(Value::String(_)) => want == "a string",
                Some(Value::Object(_)) => want == "an object",
                Some(_) => false,
            };
            if !ok {
                return Err(Error::invalid(format!(
                    "tool {name:?} of in-process server {server:?}: `{key}` must be {want}"
                )));
            }
        }
        let mut tool = t.clone();
        if !obj.contains_key("inputSchema") {
            tool["inputSchema"] = json!({"type": "object"});
        }
        out.push(tool);
    }
    Ok(out)
}

/// What the host answered for a host tool call: a result object, or its error as an `rpc`
/// error.
pub fn answer(response: &Value, id: &str) -> Result<Value> {
    match (response.get("result"), response.get("error")) {
        (Some(Value::Object(_)), None) => Ok(response["result"].clone()),
        (None, Some(e @ Value::Object(_))) => Err(Error::from_rpc(e)),
        _ => Err(Error::invalid(format!(
            "the answer to {id:?} needs exactly one of `result` (a CallToolResult object) or `error` (an object)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_checked_and_completed() {
        let t = parse_tools(Some(&json!([{"name": "add", "description": "adds"}])), "h").unwrap();
        assert_eq!(t[0]["inputSchema"], json!({"type": "object"}));
        assert!(parse_tools(None, "h").unwrap().is_empty());
        for bad in [
            json!({"name": "x"}),
            json!([1]),
            json!([{"name": ""}]),
            json!([{"name": "a"}, {"name": "a"}]),
            json!([{"name": "a", "inputSchema": "object"}]),
            json!([{"name": "a", "description": 3}]),
        ] {
            let e = parse_tools(Some(&bad), "h").unwrap_err();
            assert!(e.message.contains("\"h\""), "{}", e.message);
        }
    }

    #[test]
    fn answers() {
        assert!(answer(&json!({"result": {"content": []}}), "m1").is_ok());
        let e = answer(&json!({"error": {"code": 7, "message": "no"}}), "m1").unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (Some(7), "no"));
        assert!(answer(&json!({"result": 3}), "m1").is_err());
        assert!(answer(&json!({}), "m1").is_err());
    }
}
