//! Resources and prompts across servers (FEATURES M8). Listed when the host asks — every page,
//! the servers in parallel, a failing server named in `errors` while the others answer — so a
//! list is never stale; `read_resource` and `get_prompt` go to one server. Prompts carry a
//! qualified name, `mcp__{server}__{prompt}`, made the way pool names are.

use super::pool;
use crate::client::options::CallOptions;
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::RawJson;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// One connected server that can be asked.
pub struct Target {
    pub server: String,
    pub client: Arc<Client>,
}

/// Every page of `method`'s `field`, each item with `"server"` added.
async fn list_of(
    t: &Target,
    method: &str,
    field: &str,
    options: &CallOptions,
) -> Result<Vec<Value>> {
    let mut o = options.clone();
    o.all_pages = true;
    let mut v = t.client.request(method, None, &o).await?.value()?;
    let Some(Value::Array(items)) = v.get_mut(field).map(Value::take) else {
        return Err(Error::protocol(format!(
            "server {:?} answered {method} without a `{field}` array",
            t.server
        )));
    };
    Ok(items
        .into_iter()
        .filter_map(|mut item| {
            item.as_object_mut()?
                .insert("server".into(), json!(t.server));
            Some(item)
        })
        .collect())
}

fn error_entry(e: &Error) -> Value {
    e.to_json()["error"].clone()
}

/// `{"resources": [...], "templates": [...], "errors": {server: error}}`; with `single` (the host
/// named the server), that server's error is the call's.
pub async fn list_resources(
    targets: Vec<Target>,
    options: &CallOptions,
    single: bool,
) -> Result<Value> {
    let runs = targets.iter().map(|t| async move {
        let resources = list_of(t, "resources/list", "resources", options).await;
        // Templates are optional for a server: one that does not know the method has none.
        let templates =
            match list_of(t, "resources/templates/list", "resourceTemplates", options).await {
                Err(e) if e.kind == ErrorKind::Rpc && e.code == Some(-32601) => Ok(Vec::new()),
                other => other,
            };
        (t.server.clone(), resources, templates)
    });
    let mut out_resources = Vec::new();
    let mut out_templates = Vec::new();
    let mut errors = Map::new();
    for (server, resources, templates) in futures_util::future::join_all(runs).await {
        match (resources, templates) {
            (Ok(r), Ok(t)) => {
                out_resources.extend(r);
                out_templates.extend(t);
            }
            (Err(e), _) | (_, Err(e)) if single => return Err(e),
            (Err(e), _) | (_, Err(e)) => {
                errors.insert(server, error_entry(&e));
            }
        }
    }
    Ok(json!({"resources": out_resources, "templates": out_templates, "errors": errors}))
}

/// `{"prompts": [...], "errors": {...}}`; each prompt's `name` is its qualified name and
/// `prompt` the server's own name for it; `single` as for [`list_resources`].
pub async fn list_prompts(
    targets: Vec<Target>,
    options: &CallOptions,
    single: bool,
) -> Result<Value> {
    let runs = targets.iter().map(|t| async move {
        (
            t.server.clone(),
            list_of(t, "prompts/list", "prompts", options).await,
        )
    });
    let mut prompts = Vec::new();
    let mut errors = Map::new();
    for (server, listed) in futures_util::future::join_all(runs).await {
        match listed {
            Ok(items) => prompts.extend(items.into_iter().map(|p| qualify(&server, p))),
            Err(e) if single => return Err(e),
            Err(e) => {
                errors.insert(server, error_entry(&e));
            }
        }
    }
    let (prompts, dropped) = settle_prompts(prompts);
    Ok(json!({"prompts": prompts, "errors": errors, "dropped": dropped}))
}

/// The qualified prompts that keep their names by the pool's one rule ([`pool::settle`]), and
/// the `dropped` entries of the others.
fn settle_prompts(prompts: Vec<Value>) -> (Vec<Value>, Vec<Value>) {
    let (keep, dropped) = {
        let claims: Vec<pool::Claim<'_>> = prompts
            .iter()
            .filter_map(|p| {
                Some(pool::Claim {
                    name: p.get("name")?.as_str()?,
                    server: p.get("server")?.as_str()?,
                    own: p.get("prompt")?.as_str()?,
                })
            })
            .collect();
        if claims.len() != prompts.len() {
            // A prompt without a name string has no qualified name to settle; kept as listed.
            let named: Vec<bool> = prompts
                .iter()
                .map(|p| p.get("prompt").and_then(Value::as_str).is_some())
                .collect();
            let (k, d) = pool::settle(&claims, "prompt");
            let mut k = k.into_iter();
            let keep: Vec<bool> = named
                .iter()
                .map(|n| if *n { k.next().unwrap_or(false) } else { true })
                .collect();
            (keep, d)
        } else {
            pool::settle(&claims, "prompt")
        }
    };
    let kept = prompts
        .into_iter()
        .zip(keep)
        .filter_map(|(p, k)| k.then_some(p))
        .collect();
    (kept, dropped)
}

fn qualify(server: &str, mut prompt: Value) -> Value {
    if let Some(own) = prompt
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string)
    {
        prompt["prompt"] = json!(own);
        prompt["name"] = json!(pool::pool_name(server, &own));
    }
    prompt
}

/// The server and own name of the prompt `qualified` names, by the pool's one rule: every
/// server that may make the name ([`pool::may_name`]) is asked for its list (normalization is
/// not reversible), and a name two servers' prompts come out as goes to neither.
pub async fn resolve_prompt(
    targets: Vec<Target>,
    qualified: &str,
    options: &CallOptions,
) -> Result<(Target, String, Value)> {
    let runs = targets
        .iter()
        .map(|t| async move { list_of(t, "prompts/list", "prompts", options).await });
    let mut prompts = Vec::new();
    for (t, listed) in targets
        .iter()
        .zip(futures_util::future::join_all(runs).await)
    {
        let items = listed.map_err(|e| {
            Error::new(
                e.kind,
                format!(
                    "server {:?} may have a prompt named {qualified:?} but could not be asked: {}",
                    t.server, e.message
                ),
            )
        })?;
        prompts.extend(items.into_iter().map(|p| qualify(&t.server, p)));
    }
    let (kept, dropped) = settle_prompts(prompts);
    let collision: Vec<&Value> = dropped
        .iter()
        .filter(|d| d["name"] == qualified && d["reason"] == "collision")
        .collect();
    if let Some(e) = pool::collided(qualified, &collision) {
        return Err(e);
    }
    let found = kept.iter().find(|p| p["name"] == qualified).and_then(|p| {
        Some((
            p.get("server")?.as_str()?.to_string(),
            p.get("prompt")?.as_str()?.to_string(),
            p.get("arguments").cloned().unwrap_or(Value::Null),
        ))
    });
    let Some((server, own, declared)) = found else {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "no server of the manager has a prompt named {qualified:?} (prompt names are mcp__<server>__<prompt>; see mcplug_manager_list_prompts)"
            ),
        ));
    };
    let t = targets
        .into_iter()
        .find(|t| t.server == server)
        .expect("the server was among the targets");
    Ok((t, own, declared))
}

/// A command line (`a "b c"`, as a user types after `/mcp__server__prompt`) mapped onto the
/// prompt's declared arguments in their order, as Claude Code maps a prompt's slash command:
/// words split as a POSIX shell splits them (quotes, backslashes), the first word to the first
/// argument and so on. More words than arguments, a required argument left without one, or an
/// unbalanced quote is `invalid_argument` naming the prompt's arguments.
pub fn command_line_arguments(qualified: &str, line: &str, declared: &Value) -> Result<Value> {
    let names: Vec<(&str, bool)> = declared
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|d| {
                    let name = d.get("name")?.as_str()?;
                    Some((
                        name,
                        d.get("required").and_then(Value::as_bool) == Some(true),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let listed = || {
        if names.is_empty() {
            "it takes no arguments".to_string()
        } else {
            let all: Vec<String> = names
                .iter()
                .map(|(n, required)| {
                    if *required {
                        format!("{n} (required)")
                    } else {
                        n.to_string()
                    }
                })
                .collect();
            format!("its arguments, in order: {}", all.join(", "))
        }
    };
    let words = shlex::split(line).ok_or_else(|| {
        Error::invalid(format!(
            "the command line of prompt {qualified:?} has an unbalanced quote: {line:?}"
        ))
    })?;
    if words.len() > names.len() {
        return Err(Error::invalid(format!(
            "prompt {qualified:?} got {} words on its command line ({line:?}); {}",
            words.len(),
            listed()
        )));
    }
    let mut out = serde_json::Map::new();
    for (i, (name, required)) in names.iter().enumerate() {
        match words.get(i) {
            Some(word) => {
                out.insert(name.to_string(), Value::String(word.clone()));
            }
            None if *required => {
                return Err(Error::invalid(format!(
                    "prompt {qualified:?} needs its argument {name:?}, which the command line {line:?} does not give; {}",
                    listed()
                )))
            }
            None => {}
        }
    }
    Ok(Value::Object(out))
}

/// The manager's side: what a host asks of the servers' resources and prompts.
impl super::Manager {
    /// A call of `ListMcpResourcesTool` or `ReadMcpResourceTool` (`resource_tools`), answered
    /// as Claude Code answers it: the listing as JSON text; a read's contents as embedded
    /// resources (cleaned and capped as any read). What the model got wrong (an unknown server,
    /// a missing argument, a server's error) is an `isError` result it can read.
    pub(crate) async fn call_resource_tool(
        &self,
        tool: &str,
        arguments: Option<&serde_json::value::RawValue>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let args: Value = match arguments {
            Some(a) => serde_json::from_str(a.get())
                .map_err(|e| Error::invalid(format!("{tool}: arguments: {e}")))?,
            None => json!({}),
        };
        let arg = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let told = |text: String| {
            RawJson::from_value(
                &json!({"content": [{"type": "text", "text": text}], "isError": true}),
            )
        };
        let model_error = |e: &Error| {
            matches!(
                e.kind,
                ErrorKind::InvalidArgument | ErrorKind::NotFound | ErrorKind::Rpc
            )
        };
        if tool == pool::LIST_RESOURCES_TOOL {
            let listed = match self.list_resources(arg("server"), options).await {
                Ok(l) => l,
                Err(e) if model_error(&e) => return Ok(told(e.message)),
                Err(e) => return Err(e),
            };
            let resources = listed.get("resources").cloned().unwrap_or(json!([]));
            let empty = resources.as_array().is_none_or(|a| a.is_empty());
            let text = if empty {
                "No resources found. MCP servers may still offer tools without resources."
                    .to_string()
            } else {
                resources.to_string()
            };
            return Ok(RawJson::from_value(
                &json!({"content": [{"type": "text", "text": text}]}),
            ));
        }
        let (Some(server), Some(uri)) = (arg("server"), arg("uri")) else {
            return Ok(told(format!(
                "{tool} needs `server` and `uri` (as {} lists them)",
                pool::LIST_RESOURCES_TOOL
            )));
        };
        let read = match self.read_resource(server, uri, options).await {
            Ok(r) => r.value()?,
            Err(e) if model_error(&e) => return Ok(told(e.message)),
            Err(e) => return Err(e),
        };
        let content: Vec<Value> = read
            .get("contents")
            .and_then(Value::as_array)
            .map(|c| {
                c.iter()
                    .map(|item| json!({"type": "resource", "resource": item}))
                    .collect()
            })
            .unwrap_or_default();
        Ok(RawJson::from_value(&json!({ "content": content })))
    }

    /// Every resource and template of the connected servers that have resources (or of one).
    pub async fn list_resources(
        &self,
        server: Option<&str>,
        options: &CallOptions,
    ) -> Result<Value> {
        let targets = self.inner.targets(server, "resources")?;
        list_resources(targets, options, server.is_some()).await
    }

    /// `resources/read` on one server; the contents' text cleaned and capped like tool output.
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let t = self.inner.target(server)?;
        let result = t
            .client
            .request("resources/read", Some(json!({ "uri": uri })), options)
            .await?;
        self.inner.clean(
            result,
            super::hygiene::Shape::Resource,
            &format!("{server}-resource"),
        )
    }

    /// Every prompt of the connected servers that have prompts (or of one), with qualified names.
    pub async fn list_prompts(&self, server: Option<&str>, options: &CallOptions) -> Result<Value> {
        let targets = self.inner.targets(server, "prompts")?;
        list_prompts(targets, options, server.is_some()).await
    }

    /// `prompts/get` by the qualified name `mcp__{server}__{prompt}`.
    pub async fn get_prompt(
        &self,
        qualified: &str,
        arguments: Option<Value>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let inner = &self.inner;
        inner.check_open()?;
        let targets: Vec<Target> = inner
            .targets(None, "prompts")?
            .into_iter()
            .filter(|t| pool::may_name(&t.server, qualified))
            .collect();
        if let Some(a) = &arguments {
            if !a.is_object() && !a.is_string() {
                return Err(Error::invalid(format!(
                    "prompt arguments must be a JSON object, or a command line as a string (got {a})"
                )));
            }
        }
        let (t, own, declared) = resolve_prompt(targets, qualified, options).await?;
        let mut params = json!({ "name": own });
        match arguments {
            Some(Value::String(line)) => {
                let mapped = command_line_arguments(qualified, &line, &declared)?;
                if mapped.as_object().is_some_and(|m| !m.is_empty()) {
                    params["arguments"] = mapped;
                }
            }
            Some(a) => params["arguments"] = a,
            None => {}
        }
        let result = t
            .client
            .request("prompts/get", Some(params), options)
            .await?;
        inner.clean(result, super::hygiene::Shape::Prompt, qualified)
    }

    /// Any request to one connected server, its result untouched.
    pub async fn request(
        &self,
        server: &str,
        method: &str,
        params: Option<Value>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let t = self.inner.target(server)?;
        t.client.request(method, params, options).await
    }

    /// A served client's request to one connected server, passed on and answered as they are
    /// (`CallOptions::relayed`, `mcplug serve`). Apart from `request`: the host's requests, on
    /// a host thread's stack, carry none of it.
    pub(crate) async fn relay(
        &self,
        server: &str,
        method: &str,
        params: Option<Value>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let t = self.inner.target(server)?;
        t.client.relay(method, params, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared() -> Value {
        json!([{"name": "city", "required": true}, {"name": "state"}])
    }

    #[test]
    fn a_command_line_maps_onto_the_declared_arguments_in_order() {
        let got = command_line_arguments("mcp__w__p", r#""New York" NY"#, &declared()).unwrap();
        assert_eq!(got, json!({"city": "New York", "state": "NY"}));
        let got = command_line_arguments("mcp__w__p", r"San\ Jose", &declared()).unwrap();
        assert_eq!(
            got,
            json!({"city": "San Jose"}),
            "an optional argument left out"
        );
        let none = command_line_arguments("mcp__w__p", "  ", &Value::Null).unwrap();
        assert_eq!(none, json!({}));
    }

    #[test]
    fn a_command_line_that_does_not_fit_is_named() {
        let e = command_line_arguments("mcp__w__p", "a b c", &declared()).unwrap_err();
        assert!(
            e.message.contains("3 words") && e.message.contains("city (required), state"),
            "{e}"
        );
        let e = command_line_arguments("mcp__w__p", "", &declared()).unwrap_err();
        assert!(e.message.contains("needs its argument \"city\""), "{e}");
        let e = command_line_arguments("mcp__w__p", "\"open", &declared()).unwrap_err();
        assert!(e.message.contains("unbalanced quote"), "{e}");
        let e = command_line_arguments("mcp__w__p", "x", &Value::Null).unwrap_err();
        assert!(e.message.contains("takes no arguments"), "{e}");
    }
}
