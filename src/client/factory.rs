//! The factory of the client's transports: the transport a server spec asks for, built with the
//! connection's limits (and, for Streamable HTTP, the tool-header table the client keeps).

use super::spec::ServerSpec;
use super::Shared;
use crate::error::Result;
use crate::transport::http::HttpTransport;
use crate::transport::stdio::{Started, StdioConfig, StdioLimits, StdioTransport};
use crate::transport::{Inbound, Transport};
use std::sync::{Arc, Weak};

/// The transport `spec` asks for, delivering what it reads to `sink`; for Streamable HTTP also
/// the transport itself (a refused `initialize` there means an HTTP+SSE server, connected again
/// as one). `started`: a stdio server already started on the host's thread.
pub(super) async fn transport_for(
    shared: &Shared,
    spec: &ServerSpec,
    started: Option<Started>,
    sink: Weak<dyn Inbound>,
) -> Result<(Arc<dyn Transport>, Option<Arc<HttpTransport>>)> {
    Ok(match spec {
        ServerSpec::Stdio { config, .. } => (stdio(shared, config, started, sink)?, None),
        ServerSpec::Http { config, .. } => {
            let t = HttpTransport::new(
                config,
                shared.remote_limits(),
                shared.tools.headers.clone(),
                sink,
            )?;
            (t.clone(), Some(t))
        }
        // The HTTP and WebSocket stacks connect on a runtime thread (see `runtime::on_worker`).
        ServerSpec::Sse { config, .. } => {
            let (config, limits) = (config.clone(), shared.remote_limits());
            let t = crate::runtime::on_worker(async move {
                // Boxed, as the WebSocket's: the connect future stays small (host threads poll it).
                let t = Box::pin(crate::transport::sse::SseTransport::connect(
                    &config, limits, sink,
                ));
                t.await.map(|t| t as Arc<dyn Transport>)
            })
            .await?;
            (t, None)
        }
        ServerSpec::Ws { config, .. } => {
            let (config, limits) = (config.clone(), shared.remote_limits());
            let t = crate::runtime::on_worker(async move {
                let t = Box::pin(crate::transport::ws::WsTransport::connect(
                    &config, limits, sink,
                ));
                t.await.map(|t| t as Arc<dyn Transport>)
            })
            .await?;
            (t, None)
        }
    })
}

/// The stdio transport of a connect: attaches the server `started` started, or starts one. Not
/// inlined: its temporaries would widen the frame of every poll of the connect future, which a
/// host thread with a small stack runs (tests/c/remote.c's 192 KiB thread, in the debug build).
#[inline(never)]
fn stdio(
    shared: &Shared,
    config: &StdioConfig,
    started: Option<Started>,
    sink: Weak<dyn Inbound>,
) -> Result<Arc<dyn Transport>> {
    let limits = StdioLimits {
        max_message_bytes: shared.options.max_message_bytes,
        shutdown_grace: shared.options.shutdown_grace,
    };
    Ok(match started {
        Some(started) => StdioTransport::attach(started, limits, sink)?,
        None => StdioTransport::spawn(config, limits, sink)?,
    })
}
