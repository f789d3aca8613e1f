//! A server entry (Claude Code's `mcpServers` format) as the client reads it: which transport,
//! and its configuration, with errors that name the offending field.

use crate::config::Kind;
use crate::error::{Error, Result};
use crate::shape::as_object;
use crate::transport::remote::RemoteConfig;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Which transport a server entry asks for, parsed from the Claude Code format.
#[derive(Debug, Clone)]
pub enum ServerSpec {
    Stdio {
        name: Option<String>,
        config: crate::transport::stdio::StdioConfig,
    },
    /// Streamable HTTP (`http`, `streamable-http`); falls back to HTTP+SSE at the same URL when
    /// the server turns out to speak only that.
    Http {
        name: Option<String>,
        config: RemoteConfig,
    },
    /// The deprecated HTTP+SSE transport (`sse`, `sse-ide`).
    Sse {
        name: Option<String>,
        config: RemoteConfig,
    },
    /// WebSocket (`ws`, `ws-ide`).
    Ws {
        name: Option<String>,
        config: RemoteConfig,
    },
}

/// The `url` and `headers` of a remote server entry.
fn parse_remote(obj: &Map<String, Value>, kind: &str) -> Result<RemoteConfig> {
    let url = match obj.get("url") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(v) => {
            return Err(Error::invalid(format!(
                "server field `url` must be a non-empty string (got {v})"
            )))
        }
        None => return Err(Error::invalid(format!("a {kind} server needs a `url`"))),
    };
    let (schemes, example): (&[&str], &str) = match kind {
        "ws" => (&["ws", "wss"], "ws:// or wss://"),
        _ => (&["http", "https"], "http:// or https://"),
    };
    let scheme = url
        .split("://")
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !url.contains("://") || !schemes.contains(&scheme.as_str()) {
        return Err(Error::invalid(format!(
            "server field `url` {url:?}: a {kind} server needs a {example} URL"
        )));
    }
    let headers = match obj.get("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                let v = v.as_str().ok_or_else(|| {
                    Error::invalid(format!(
                        "server field `headers.{k}` must be a string (got {v})"
                    ))
                })?;
                crate::transport::remote::check_header(k, v)?;
                Ok((k.clone(), v.to_string()))
            })
            .collect::<Result<_>>()?,
        Some(v) => {
            return Err(Error::invalid(format!(
                "server field `headers` must be an object of strings (got {v})"
            )))
        }
    };
    let headers_helper = match obj.get("headersHelper") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        Some(v) => {
            return Err(Error::invalid(format!(
                "server field `headersHelper` must be a non-empty string, a shell command (got {v})"
            )))
        }
    };
    let tls = match obj.get("tls") {
        None => None,
        Some(t) => crate::transport::tls::TlsOptions::parse(t, "server field `tls`")?.map(Box::new),
    };
    let proxy = match obj.get("proxy") {
        None => None,
        Some(p) => {
            crate::transport::proxy::ProxySetting::parse(p, "server field `proxy`")?.map(Box::new)
        }
    };
    Ok(RemoteConfig {
        url,
        headers,
        oauth: obj.get("oauth").filter(|o| !o.is_null()).cloned(),
        headers_helper,
        credentials: None,
        tls,
        proxy,
    })
}

impl ServerSpec {
    pub fn parse(value: &Value) -> Result<Self> {
        let obj = as_object(value, "server_json")?;
        let name = match obj.get("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => {
                return Err(Error::invalid(format!(
                    "server field `name` must be a string (got {v})"
                )))
            }
        };
        let kind = match obj.get("type") {
            None | Some(Value::Null) => Kind::Stdio,
            Some(Value::String(s)) => Kind::from_type(s).ok_or_else(|| {
                Error::invalid(format!(
                    "server field `type` is {s:?}; known types: {}",
                    Kind::known_types()
                ))
            })?,
            Some(v) => {
                return Err(Error::invalid(format!(
                    "server field `type` must be a string (got {v})"
                )))
            }
        };
        // The factory: one arm a kind.
        match kind {
            Kind::Stdio => {}
            Kind::Http => {
                let config = parse_remote(obj, "http")?;
                return Ok(ServerSpec::Http { name, config });
            }
            Kind::Sse => {
                let config = parse_remote(obj, "sse")?;
                return Ok(ServerSpec::Sse { name, config });
            }
            Kind::Ws => {
                let config = parse_remote(obj, "ws")?;
                return Ok(ServerSpec::Ws { name, config });
            }
            Kind::Sdk => {
                return Err(Error::invalid(
                    "an in-process server (`type` \"sdk\") is served by the host through a manager (mcplug_manager_connect), not by a client connection",
                ))
            }
        }
        if obj.contains_key("url") && !obj.contains_key("command") {
            return Err(Error::invalid(
                "server has a `url` but no `type`: give `type` (\"http\", \"sse\" or \"ws\")",
            ));
        }
        let command = match obj.get("command") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(v) => {
                return Err(Error::invalid(format!(
                    "server field `command` must be a non-empty string (got {v})"
                )))
            }
            None => return Err(Error::invalid("a stdio server needs a `command`")),
        };
        let args = match obj.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    a.as_str().map(str::to_string).ok_or_else(|| {
                        Error::invalid(format!(
                            "server field `args[{i}]` must be a string (got {a})"
                        ))
                    })
                })
                .collect::<Result<_>>()?,
            Some(v) => {
                return Err(Error::invalid(format!(
                    "server field `args` must be an array of strings (got {v})"
                )))
            }
        };
        let env = match obj.get("env") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|s| (k.clone(), s.to_string()))
                        .ok_or_else(|| {
                            Error::invalid(format!(
                                "server field `env.{k}` must be a string (got {v})"
                            ))
                        })
                })
                .collect::<Result<_>>()?,
            Some(v) => {
                return Err(Error::invalid(format!(
                    "server field `env` must be an object of strings (got {v})"
                )))
            }
        };
        let cwd = match obj.get("cwd") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => {
                return Err(Error::invalid(format!(
                    "server field `cwd` must be a string (got {v})"
                )))
            }
        };
        Ok(ServerSpec::Stdio {
            name,
            config: crate::transport::stdio::StdioConfig {
                command,
                args,
                env,
                cwd,
            },
        })
    }

    /// Its transport.
    pub fn kind(&self) -> Kind {
        match self {
            ServerSpec::Stdio { .. } => Kind::Stdio,
            ServerSpec::Http { .. } => Kind::Http,
            ServerSpec::Sse { .. } => Kind::Sse,
            ServerSpec::Ws { .. } => Kind::Ws,
        }
    }

    /// A remote server's URL, headers and OAuth settings (none for stdio).
    pub fn remote(&self) -> Option<&RemoteConfig> {
        match self {
            ServerSpec::Stdio { .. } => None,
            ServerSpec::Http { config, .. }
            | ServerSpec::Sse { config, .. }
            | ServerSpec::Ws { config, .. } => Some(config),
        }
    }

    pub fn name(&self) -> Option<&str> {
        match self {
            ServerSpec::Stdio { name, .. }
            | ServerSpec::Http { name, .. }
            | ServerSpec::Sse { name, .. }
            | ServerSpec::Ws { name, .. } => name.as_deref(),
        }
    }

    /// The identity under which the era of this server is cached: everything that starts it.
    pub fn era_cache_key(&self) -> String {
        match self {
            ServerSpec::Stdio { config, .. } => {
                serde_json::to_string(&(&config.command, &config.args, &config.env, &config.cwd))
                    .unwrap_or_default()
            }
            ServerSpec::Http { config, .. }
            | ServerSpec::Sse { config, .. }
            | ServerSpec::Ws { config, .. } => remote_key(self.kind().as_str(), config),
        }
    }

    /// The Claude Code dedup signature, `stdio:["cmd","arg",...]`.
    pub fn signature(&self) -> String {
        match self {
            ServerSpec::Stdio { config, .. } => {
                let mut argv = vec![config.command.clone()];
                argv.extend(config.args.iter().cloned());
                format!("stdio:{}", serde_json::to_string(&argv).unwrap_or_default())
            }
            ServerSpec::Http { config, .. }
            | ServerSpec::Sse { config, .. }
            | ServerSpec::Ws { config, .. } => format!("url:{}", config.url),
        }
    }
}

fn remote_key(kind: &str, config: &RemoteConfig) -> String {
    serde_json::to_string(&(kind, &config.url, &config.headers)).unwrap_or_default()
}
