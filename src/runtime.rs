//! The library's one private tokio runtime, created on first use.
//!
//! Blocking entry points (only in `ffi`) call [`block_on`] (or, for the hot calls, [`run_now`])
//! from the host's threads; the engine's own tasks (stdout readers, timers of server requests,
//! process reapers) run on its workers. Never call either from a runtime thread.
//!
//! SIGPIPE: writing to a server that has just exited raises SIGPIPE in the writing thread, and its
//! default action kills the whole host. So, when the runtime starts, a SIGPIPE disposition still
//! at its default is set to "ignore" (as gRPC and Rust's own `main` do; a host that installed a
//! handler keeps it), and the runtime's threads block the signal outright. A failed write then
//! is just an error (`closed`).

use once_cell::sync::Lazy;
use std::cell::Cell;
use std::future::Future;
use tokio::runtime::{Builder, Runtime};

static RUNTIME: Lazy<Runtime> = Lazy::new(|| {
    crate::log::init();
    crate::sys::signal::ignore_default_sigpipe();
    crate::sys::fork::watch();
    Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("mcplug-rt")
        .on_thread_start(crate::sys::signal::block_sigpipe_in_this_thread)
        .enable_all()
        .build()
        .expect("mcplug: could not start its tokio runtime")
});

pub fn handle() -> &'static tokio::runtime::Handle {
    RUNTIME.handle()
}

thread_local! {
    /// Set while a host thread is inside [`block_on`] or [`run_now`]: such a thread may block
    /// (it is not a runtime worker), so a caller waiting for an answer may read the transport
    /// itself.
    static IN_HOST_CALL: Cell<bool> = const { Cell::new(false) };
}

/// Runs `fut` to completion on the calling (host) thread, inside the runtime's context, so that
/// timers and I/O created inside `fut` belong to the runtime.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let _mark = HostCall::enter();
    RUNTIME.block_on(fut)
}

/// Like [`block_on`], for the host's hot calls, which nearly always finish at their first poll:
/// a call whose caller reads the answer itself blocks in that read, inside the poll (see
/// `transport/stdio_read.rs`), and starting a call only registers and writes it. That poll runs
/// inside the runtime's context with a no-op waker, and only a future still pending after it goes
/// on in tokio's `block_on` (its scheduler context and park machinery cost ~1k instructions per
/// call), which polls it again at once with a real waker; that waker replaces the no-op one
/// wherever the first poll left it. Not for connects: the legacy SSE connect, polled this way,
/// overflowed a debug build's 192 KiB host thread (`tests/c/remote.c`).
pub fn run_now<F: Future>(fut: F) -> F::Output {
    let _mark = HostCall::enter();
    let mut fut = std::pin::pin!(fut);
    let first = {
        let _context = RUNTIME.enter();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        fut.as_mut().poll(&mut cx)
    };
    match first {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => RUNTIME.block_on(fut),
    }
}

/// Marks the thread as a host thread inside a call until dropped, a panic included (the C
/// boundary catches it, and the thread goes on serving the host).
struct HostCall(bool);

impl HostCall {
    fn enter() -> HostCall {
        HostCall(IN_HOST_CALL.with(|c| c.replace(true)))
    }
}

impl Drop for HostCall {
    fn drop(&mut self) {
        IN_HOST_CALL.with(|c| c.set(self.0));
    }
}

/// Whether this thread is a host thread inside [`block_on`] or [`run_now`] (never true on a
/// runtime worker).
pub fn on_host_thread() -> bool {
    IN_HOST_CALL.with(Cell::get)
}

/// Runs `fut` on a runtime thread and waits for it. For the HTTP and WebSocket stacks' futures
/// (reqwest, hyper, tungstenite: deep poll frames), which a host thread must not poll itself: its
/// stack may be small (koffi runs a Node binding's asynchronous calls on 128 KiB, where the
/// legacy HTTP connect overflowed it). A caller that stops waiting leaves the work to finish
/// there.
pub async fn on_worker<T, F>(fut: F) -> Result<T, crate::error::Error>
where
    F: Future<Output = Result<T, crate::error::Error>> + Send + 'static,
    T: Send + 'static,
{
    match spawn(fut).await {
        Ok(out) => out,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(crate::error::Error::closed(
            "the library's runtime is shutting down",
        )),
    }
}

pub fn spawn<F>(fut: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    RUNTIME.spawn(fut)
}

/// The stack of a spare thread: for work that recurses with its input (compiling a schema,
/// building a deep JSON tree) when the caller's own stack may be small (koffi's calls run on
/// 128 KiB stacks, and many C hosts' threads are no bigger).
const SPARE_STACK: usize = 8 << 20;

/// Runs `f` on a thread with an 8 MiB stack of the library's own; a panic there is an `Err`.
pub(crate) fn on_spare_stack<R: Send>(
    f: impl FnOnce() -> R + Send,
) -> std::result::Result<R, String> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("mcplug-spare".into())
            .stack_size(SPARE_STACK)
            .spawn_scoped(scope, f)
            .map_err(|e| format!("could not start a thread for it: {e}"))?
            .join()
            .map_err(|_| "the work on the spare stack panicked".to_string())
    })
}
