//! `mcplug serve`: the servers configured here served as one MCP server over stdio, for any MCP
//! host (Claude Desktop, Cursor, …) — or one configured server alone (`--server NAME`), the
//! bridge from a host that speaks stdio to a remote server.

use crate::live::{discover, one, only};
use crate::{Ctx, Exit};
use mcplug::manager::{Manager, ManagerOptions};
use mcplug::{Error, ErrorKind};
use serde_json::{json, Value};

/// `mcplug serve`'s own flags.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// How tools and prompts are named: `prefixed` (mcp__<server>__<tool>) or `unprefixed` (the
    /// servers' own names; the first server in configuration order wins a collision).
    #[arg(long, value_enum, default_value_t = NamesArg::Prefixed)]
    pub names: NamesArg,
    /// Serve this one configured server alone.
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// Serve Streamable HTTP at http://ADDR/mcp (and HTTP+SSE at /sse, for old clients)
    /// instead of stdio (ADDR like 127.0.0.1:8808; port 0 picks one). The URL is printed on a
    /// line of its own.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NamesArg {
    Prefixed,
    Unprefixed,
}

pub fn serve(ctx: &Ctx, args: &ServeArgs) -> Result<Exit, Error> {
    let d = discover(ctx)?;
    let config = match &args.server {
        Some(name) => only(name, &one(&d, name)?),
        None => d,
    };
    let ms = ctx.timeout.as_millis() as u64;
    // The clients decide what the model sees: results pass as the servers sent them. What an
    // upstream may ask (sampling, elicitation, roots) is declared and asked of the client.
    let m = Manager::new(ManagerOptions {
        connection: Some(json!({
            "connect_timeout_ms": ms,
            "capabilities": {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}},
            "host_request_timeout_ms": 600_000,
            // Every upstream sends its log messages (a 2026-07-28 one only when each request
            // asks); each client gets those at the level it set.
            "log_level": "debug",
            // A 2026-07-28 upstream's list changes and resource updates reach the clients.
            "listen": true,
        })),
        max_output_chars: None,
        ..ManagerOptions::default()
    });
    let names = match args.names {
        NamesArg::Prefixed => "prefixed",
        NamesArg::Unprefixed => "unprefixed",
    };
    mcplug::runtime::block_on(async move {
        let served = async {
            m.connect(&config).await?;
            match m.wait_settled(Some(ctx.timeout)).await {
                Ok(_) => {}
                Err(e) if e.kind == ErrorKind::Timeout => {}
                Err(e) => return Err(e),
            }
            for (name, st) in m.status()["servers"].as_object().into_iter().flatten() {
                if st["state"] != "connected" {
                    tellln!(
                        "mcplug serve: server {name:?} is {}{}",
                        st["state"].as_str().unwrap_or_default(),
                        st["error"]["message"]
                            .as_str()
                            .map(|m| format!(": {m}"))
                            .unwrap_or_default()
                    );
                }
            }
            let options = match &args.http {
                Some(addr) => json!({"transport": "http", "listen": addr, "names": names}),
                None => json!({"transport": "stdio", "names": names}),
            };
            let server = mcplug::server::serve(&m, &options)?;
            if let Some(url) = server.url() {
                sayln!("{url}");
                use std::io::Write;
                let _ = std::io::stdout().flush();
            }
            tokio::select! {
                _ = server.done() => {}
                _ = stopped() => {}
                _ = refuse_the_rest(&m) => {}
            }
            server.close().await;
            Ok(())
        };
        let outcome = served.await;
        m.close().await;
        outcome
    })?;
    Ok(Exit::Ok)
}

/// The host's part of the manager's events, which the served clients do not take: a server's
/// request made outside any client's call (roots at start, say) is answered with an error at
/// once — there is no person here to ask.
async fn refuse_the_rest(m: &Manager) {
    loop {
        match m.next_events(64, Some(std::time::Duration::ZERO)) {
            mcplug::queue::Pulled::Event(text) => {
                let events: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
                for e in events.iter().filter(|e| e["type"] == "request") {
                    let refusal = json!({"id": e["id"], "error": {"code": -32603, "message":
                        "mcplug serve asks its clients only during their own calls on this server"}});
                    let _ = m.respond(&refusal).await;
                }
            }
            mcplug::queue::Pulled::TimedOut => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            mcplug::queue::Pulled::Closed => std::future::pending::<()>().await,
        }
    }
}

/// Resolves at SIGINT or SIGTERM (the servers are stopped before exiting).
async fn stopped() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}
