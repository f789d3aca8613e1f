//! What the server sends on its own: its requests (answered by the library, or handed to the host
//! under a timer), its notifications (events; progress and cancellation routed), and the framing
//! of each incoming line (responses go to the pending table).

use super::*;

impl Shared {
    pub(super) fn reply(&self, id: Value, outcome: std::result::Result<Value, Value>) {
        let Some(transport) = self.transport.get().cloned() else {
            return;
        };
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let msg = match &outcome {
            Ok(r) => protocol::encode_response(&id, Ok(r)),
            Err(e) => protocol::encode_response(&id, Err(e)),
        };
        crate::runtime::spawn(async move {
            let _ = transport.send(msg).await;
        });
    }

    pub(super) fn on_server_request(
        self: &Arc<Self>,
        id: Value,
        method: String,
        params: Option<Value>,
    ) {
        let capability = match method.as_str() {
            "ping" => return self.reply(id, Ok(json!({}))),
            "roots/list" => {
                if let Some(roots) = &self.options.roots {
                    return self.reply(id, Ok(json!({ "roots": roots })));
                }
                "roots"
            }
            "sampling/createMessage" => "sampling",
            "elicitation/create" => "elicitation",
            _ => {
                return self.reply(
                    id,
                    Err(json!({"code": codes::METHOD_NOT_FOUND, "message": format!("Method not found: {method}")})),
                )
            }
        };
        if !self.options.declares(capability) {
            return self.reply(
                id,
                Err(json!({
                    "code": codes::METHOD_NOT_FOUND,
                    "message": format!("Method not found: {method} (this client did not declare the {capability} capability)")
                })),
            );
        }
        self.to_host(id, method, params);
    }

    /// Hands a server's request to the host as an event, under a timer: if the host does not
    /// answer in time, the server gets an error instead of waiting forever.
    pub(super) fn to_host(self: &Arc<Self>, rpc_id: Value, method: String, params: Option<Value>) {
        let event_id = format!("s{}", self.next_event_id.fetch_add(1, Ordering::Relaxed));
        let limit = self.options.host_request_timeout;
        let weak = Arc::downgrade(self);
        let timer_id = event_id.clone();
        let timer_method = method.clone();
        let timer = crate::runtime::spawn(async move {
            tokio::time::sleep(limit).await;
            let Some(shared) = weak.upgrade() else { return };
            let entry = shared.host_requests.lock().remove(&timer_id);
            if let Some(entry) = entry {
                shared.reply(
                    entry.rpc_id,
                    Err(json!({
                        "code": codes::INTERNAL_ERROR,
                        "message": format!("the host did not answer {timer_method} within {} ms", limit.as_millis())
                    })),
                );
                shared.events.push(
                    &json!({"type": "request_expired", "id": timer_id, "method": timer_method}),
                    true,
                );
            }
        });
        self.host_requests
            .lock()
            .insert(event_id.clone(), HostRequest { rpc_id, timer });
        let mut event = json!({"type": "request", "id": event_id, "method": method});
        if let Some(p) = params {
            event["params"] = p;
        }
        self.events.push(&event, false);
    }

    pub(super) async fn respond(&self, response: &Value) -> Result<()> {
        let obj = response
            .as_object()
            .ok_or_else(|| Error::invalid("response_json must be a JSON object"))?;
        let event_id = obj.get("id").and_then(Value::as_str).ok_or_else(|| {
            Error::invalid("response_json needs the string `id` of the request event it answers")
        })?;
        let outcome = match (obj.get("result"), obj.get("error")) {
            (Some(r), None) => Ok(r.clone()),
            (None, Some(e)) => {
                let code_ok = e.get("code").is_some_and(|c| c.as_i64().is_some());
                let msg_ok = e.get("message").is_some_and(Value::is_string);
                if !code_ok || !msg_ok {
                    return Err(Error::invalid(
                        "response_json `error` needs an integer `code` and a string `message`",
                    ));
                }
                Err(e.clone())
            }
            _ => {
                return Err(Error::invalid(
                    "response_json needs exactly one of `result` or `error`",
                ))
            }
        };
        self.check_open()?;
        let entry = self.host_requests.lock().remove(event_id);
        let Some(entry) = entry else {
            return Err(Error::invalid(format!(
                "no server request with id {event_id:?} is waiting for an answer (already answered, expired, cancelled by the server, or never sent)"
            )));
        };
        entry.timer.abort();
        let msg = match &outcome {
            Ok(r) => protocol::encode_response(&entry.rpc_id, Ok(r)),
            Err(e) => protocol::encode_response(&entry.rpc_id, Err(e)),
        };
        self.transport()?.clone().send(msg).await
    }

    pub(super) fn on_notification(&self, method: String, params: Option<Value>) {
        let mut event = json!({"type": "notification", "method": method});
        match method.as_str() {
            "notifications/progress" => {
                let token = params
                    .as_ref()
                    .and_then(|p| p.get("progressToken"))
                    .map(token_key);
                if let Some(token) = token {
                    if let Some(route) = self.progress.lock().get(&token) {
                        if let Some(reset) = &route.reset {
                            reset.notify_one();
                        }
                        if let Some(tag) = &route.tag {
                            event["tag"] = json!(tag);
                        }
                    }
                }
            }
            "notifications/tools/list_changed" => self.schemas.forget(),
            "notifications/cancelled" => {
                // The server gave up on one of its requests to the host: forget it.
                if let Some(rid) = params.as_ref().and_then(|p| p.get("requestId")) {
                    let mut hr = self.host_requests.lock();
                    let found = hr
                        .iter()
                        .find(|(_, r)| &r.rpc_id == rid)
                        .map(|(k, _)| k.clone());
                    if let Some(k) = found {
                        if let Some(r) = hr.remove(&k) {
                            r.timer.abort();
                        }
                        event["cancels"] = json!(k);
                    }
                }
            }
            _ => {}
        }
        if let Some(p) = params {
            event["params"] = p;
        }
        self.events.push(&event, true);
    }
}

impl Inbound for Shared {
    fn message(self: Arc<Self>, line: &[u8]) {
        // JSON-RPC batches exist only in 2025-03-26 (which a client must accept); they hold
        // ordinary messages, handled one by one.
        if line.first() == Some(&b'[') {
            if let Ok(batch) = serde_json::from_slice::<Vec<&RawValue>>(line) {
                for item in batch {
                    self.handle_message(item.get().as_bytes());
                }
                return;
            }
        }
        self.handle_message(line);
    }

    fn stderr(self: Arc<Self>, line: String) {
        self.events
            .push(&json!({"type": "stderr", "line": line}), true);
    }

    fn closed(self: Arc<Self>, mut error: Error) {
        if let Some(line) = self.last_invalid.lock().take() {
            error.message.push_str(&format!(
                "; it also wrote non-JSON to stdout, last: {line:?}"
            ));
        }
        self.shut(error, Shutdown::Transport);
    }
}

impl Shared {
    pub(super) fn handle_message(self: &Arc<Self>, line: &[u8]) {
        match protocol::parse(line) {
            Incoming::Response { id, outcome } => {
                let outcome = match outcome {
                    Ok(result) => Ok(RawJson::copy_of(result)),
                    Err(error) => Err(Error::from_rpc(&error)),
                };
                if !self.pending.complete(id, outcome) {
                    tracing::debug!(id = id.get(), "ignored a response to no pending request");
                }
            }
            Incoming::Request { id, method, params } => self.on_server_request(id, method, params),
            Incoming::Notification { method, params } => self.on_notification(method, params),
            Incoming::Invalid { reason } => {
                let text = String::from_utf8_lossy(&line[..line.len().min(4096)]).into_owned();
                *self.last_invalid.lock() = Some(text.chars().take(200).collect());
                self.events.push(
                    &json!({"type": "invalid_message", "error": reason, "line": text}),
                    true,
                );
            }
        }
    }
}

fn token_key(token: &Value) -> String {
    match token {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
