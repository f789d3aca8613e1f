//! The library's one private tokio runtime, created on first use.
//!
//! Blocking entry points (only in `ffi`) call [`block_on`] from the host's threads; the engine's
//! own tasks (stdout readers, timers of server requests, process reapers) run on its workers.
//! Never call [`block_on`] from a runtime thread.

use once_cell::sync::Lazy;
use std::future::Future;
use tokio::runtime::{Builder, Runtime};

static RUNTIME: Lazy<Runtime> = Lazy::new(|| {
    Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("mcplug-rt")
        .enable_all()
        .build()
        .expect("mcplug: could not start its tokio runtime")
});

pub fn handle() -> &'static tokio::runtime::Handle {
    RUNTIME.handle()
}

/// Runs `fut` to completion on the calling (host) thread, inside the runtime's context, so that
/// timers and I/O created inside `fut` belong to the runtime.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    RUNTIME.block_on(fut)
}

pub fn spawn<F>(fut: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    RUNTIME.spawn(fut)
}
