//! Resources and prompts across servers (FEATURES M8). Listed when the host asks — every page,
//! the servers in parallel, a failing server named in `errors` while the others answer — so a
//! list is never stale; `read_resource` and `get_prompt` go to one server. Prompts carry a
//! qualified name, `mcp__{server}__{prompt}`, made the way pool names are.

use super::pool;
use super::Server;
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
    Ok(json!({"prompts": prompts, "errors": errors}))
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

/// The server's own name for the prompt `qualified` names (asking the server for its list:
/// normalization is not reversible).
pub async fn resolve_prompt(t: &Target, qualified: &str, options: &CallOptions) -> Result<String> {
    let listed = list_of(t, "prompts/list", "prompts", options).await?;
    listed
        .iter()
        .filter_map(|p| p.get("name").and_then(Value::as_str))
        .find(|own| pool::pool_name(&t.server, own) == qualified)
        .map(str::to_string)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!(
                    "server {:?} has no prompt named {qualified:?} (see mcplug_manager_list_prompts)",
                    t.server
                ),
            )
        })
}

/// The manager's side: what a host asks of the servers' resources and prompts.
impl super::Manager {
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
        self.inner.clean(result)
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
        // The longest server prefix that fits (one server's name may prefix another's).
        let mut owners: Vec<Arc<Server>> = inner
            .servers
            .lock()
            .iter()
            .filter(|s| qualified.starts_with(&format!("mcp__{}__", pool::normalize(&s.name))))
            .cloned()
            .collect();
        owners.sort_by_key(|s| std::cmp::Reverse(s.name.len()));
        let Some(owner) = owners.first() else {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("no server of the manager has a prompt named {qualified:?} (prompt names are mcp__<server>__<prompt>)"),
            ));
        };
        let t = inner.target(&owner.name)?;
        let own = resolve_prompt(&t, qualified, options).await?;
        let mut params = json!({ "name": own });
        if let Some(a) = arguments {
            if !a.is_object() {
                return Err(Error::invalid(format!(
                    "prompt arguments must be a JSON object (got {a})"
                )));
            }
            params["arguments"] = a;
        }
        let result = t
            .client
            .request("prompts/get", Some(params), options)
            .await?;
        inner.clean(result)
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
}
