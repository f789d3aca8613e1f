//! The stdio transport: a child process speaking newline-delimited JSON on stdin/stdout.
//!
//! The server is spawned as the leader of its own process group, so that shutdown reaches
//! everything it started (an `npx` wrapper's node child, a shell's children): close stdin, wait,
//! then SIGINT, SIGTERM and SIGKILL to the group as Claude Code does, each after a grace period. The leader is always reaped (a task waits on it),
//! so no zombie is left. stderr is drained continuously (a full pipe would block the server) and
//! each line goes to the connection as an event.

use super::stdio_read::SharedReader;
use super::{BoxFuture, Drive, Driven, DrivenRequest, HostRead, Inbound, Transport};
use crate::error::Error;
use crate::sys::{self, process::Signal};
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::os::fd::{IntoRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::watch;

/// How to start the server.
#[derive(Debug, Clone, Default)]
pub struct StdioConfig {
    pub command: String,
    pub args: Vec<String>,
    /// Added to (and overriding) the parent's environment.
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
}

/// Limits of one connection.
#[derive(Debug, Clone)]
pub struct StdioLimits {
    /// The largest message accepted from the server, in bytes; past it the connection fails with
    /// a `transport` error naming the limit.
    pub max_message_bytes: usize,
    /// How long each shutdown stage waits before the next, harder one.
    pub shutdown_grace: Duration,
}

impl Default for StdioLimits {
    fn default() -> Self {
        StdioLimits {
            max_message_bytes: 32 << 20,
            shutdown_grace: Duration::from_millis(500),
        }
    }
}

const STDERR_TAIL_LINES: usize = 20;
const STDERR_MAX_LINE: usize = 16 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    Code(i32),
    Signal(i32),
    Unknown,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit code {c}"),
            Exit::Signal(s) => write!(f, "signal {s}"),
            Exit::Unknown => write!(f, "unknown status"),
        }
    }
}

pub struct StdioTransport {
    stdin: tokio::sync::Mutex<Option<StdinPipe>>,
    reader: Arc<SharedReader>,
    sink: Weak<dyn Inbound>,
    /// Itself, for the tasks it spawns.
    me: Weak<StdioTransport>,
    pgid: i32,
    exit: watch::Receiver<Option<Exit>>,
    stderr_done: watch::Receiver<bool>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    closing: AtomicBool,
    grace: Duration,
    /// The command, for messages.
    command: String,
    /// The tasks of the attached server (reaper, stderr, background reader), spawned once its
    /// first request is out ([`StdioTransport::start_tasks`]): spawning wakes a runtime worker,
    /// which on a cold start would take a CPU from the starting server, and the wake-up's own
    /// system call would come before the first write.
    tasks: Mutex<Vec<BoxFuture<'static, ()>>>,
    tasks_started: std::sync::Once,
}

/// A server process started but not yet attached to the runtime (see [`StdioTransport::attach`]).
///
/// Starting needs no runtime, so a host's first connect starts the server first and builds the
/// library's runtime while the server itself starts up, when the scheduler gives the two
/// processes two CPUs (cold start, spawn to first `tools/list`: ~0.1 ms of ~1.6 ms less).
/// Dropped unattached, it kills the server's group and reaps it.
pub struct Started {
    /// Taken by [`StdioTransport::attach`]; still here when dropped unattached.
    process: Option<Process>,
    pid: i32,
    command: String,
}

struct Process {
    child: std::process::Child,
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
}

impl Started {
    /// Starts the server as the leader of a new process group, with our own pipes for stdin and
    /// stdout (tokio's would be registered with the reactor first, and the first write would wait
    /// for it: see `StdinPipe`).
    pub fn start(config: &StdioConfig) -> Result<Started, Error> {
        let (stdin_theirs, stdin_ours) = pipe_pair("stdin")?;
        let (stdout_ours, stdout_theirs) = pipe_pair("stdout")?;
        let mut cmd = std::process::Command::new(&config.command);
        cmd.args(&config.args)
            .envs(&config.env)
            .stdin(Stdio::from(stdin_theirs))
            .stdout(Stdio::from(stdout_theirs))
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(cwd) = &config.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = spawn_bound_to_us(cmd).map_err(|e| {
            let mut msg = format!(
                "could not start the server command {:?}: {e}",
                config.command
            );
            if let Some(cwd) = &config.cwd {
                msg.push_str(&format!(" (cwd {cwd:?})"));
            }
            Error::transport(msg)
        })?;
        let stderr = OwnedFd::from(child.stderr.take().expect("stderr was piped"));
        Ok(Started {
            pid: child.id() as i32,
            process: Some(Process {
                child,
                stdin: stdin_ours,
                stdout: stdout_ours,
                stderr,
            }),
            command: config.command.clone(),
        })
    }
}

/// Spawns a server that the kernel ends when this process dies (Linux: `PR_SET_PDEATHSIG`
/// SIGKILL, set in the child before it runs the command; a child whose parent died before that
/// exits at once), so a host that is killed leaves no server behind, not even one that ignores
/// the end of its stdin. What remains possible: a server that moves its own children to a new
/// session (`setsid`) and leaves them behind when it dies.
///
/// The signal follows the *thread* that forked, not the process: a server is forked by the
/// process's main thread when that is the caller (it lives as long as the process, short of a
/// `pthread_exit` from `main`), else by one thread of the library's that lives as long as the
/// process (a host thread that connected and then ended would otherwise take its servers with
/// it). The main thread forks itself because the hop costs a cold start ~0.4 ms (S1 1.35x the raw
/// client instead of 1.23x).
fn spawn_bound_to_us(mut cmd: std::process::Command) -> std::io::Result<std::process::Child> {
    #[cfg(target_os = "linux")]
    {
        type Job = (
            std::process::Command,
            std::sync::mpsc::SyncSender<std::io::Result<std::process::Child>>,
        );
        sys::process::die_with_parent(&mut cmd);
        // The main thread lives as long as the process: it forks itself (no thread hop, no
        // spawner thread to start — a C host's first connect is a cold start that counts).
        if sys::process::on_main_thread() {
            let child = cmd.spawn();
            drop(cmd);
            return child;
        }
        // The spawner of this process: a child forked by the host (after the library was used)
        // has no copy of the thread, so it starts its own.
        static SPAWNER: Mutex<Option<(u32, std::sync::mpsc::Sender<Job>)>> =
            parking_lot::const_mutex(None);
        let gone = || std::io::Error::other("the library's spawner thread is gone");
        let spawner = {
            let mut slot = SPAWNER.lock();
            match &*slot {
                Some((pid, tx)) if *pid == std::process::id() => tx.clone(),
                _ => {
                    let (tx, rx) = std::sync::mpsc::channel::<Job>();
                    std::thread::Builder::new()
                        .name("mcplug-spawner".into())
                        .spawn(move || {
                            for (mut cmd, back) in rx {
                                let child = cmd.spawn();
                                // The server's ends of the pipes are in `cmd`: closed now, so
                                // that the end of its stdout is seen when the server's last
                                // copy goes.
                                drop(cmd);
                                let _ = back.send(child);
                            }
                        })
                        .map_err(|e| {
                            std::io::Error::new(
                                e.kind(),
                                format!("cannot start the library's spawner thread: {e}"),
                            )
                        })?;
                    *slot = Some((std::process::id(), tx.clone()));
                    tx
                }
            }
        };
        let (back, answer) = std::sync::mpsc::sync_channel(1);
        spawner.send((cmd, back)).map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())?
    }
    #[cfg(not(target_os = "linux"))]
    {
        cmd.spawn()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(Process { child, .. }) = self.process.take() {
            // Never attached (the connect failed before): the server goes now, and is reaped.
            kill_and_reap(self.pid, child);
        }
    }
}

/// Kills a server that never got its reaper, with its group, and waits for it.
fn kill_and_reap(pgid: i32, mut child: std::process::Child) {
    let _ = sys::process::signal_group(pgid, Signal::KILL);
    let _ = child.wait();
}

impl StdioTransport {
    /// Starts the server. The returned transport delivers everything it reads to `sink`.
    pub fn spawn(
        config: &StdioConfig,
        limits: StdioLimits,
        sink: Weak<dyn Inbound>,
    ) -> Result<Arc<Self>, Error> {
        Self::attach(Started::start(config)?, limits, sink)
    }

    /// Attaches a started server to the runtime (call it inside the runtime's context): its
    /// stdin, its stdout's reader, the tasks that drain stderr, read stdout when nobody else
    /// does, and reap the process.
    pub fn attach(
        mut started: Started,
        limits: StdioLimits,
        sink: Weak<dyn Inbound>,
    ) -> Result<Arc<Self>, Error> {
        let Process {
            child,
            stdin,
            stdout,
            stderr,
        } = started.process.take().expect("a Started is attached once");
        let stdin = StdinPipe::new(stdin);
        let stderr = tokio::net::unix::pipe::Receiver::from_owned_fd(stderr)
            .map_err(|e| Error::transport(format!("cannot watch the server's stderr: {e}")));
        let (stdin, stderr) = match (stdin, stderr) {
            (Ok(i), Ok(e)) => (i, e),
            (Err(e), _) | (_, Err(e)) => {
                kill_and_reap(started.pid, child);
                return Err(e);
            }
        };
        let reader = Arc::new(SharedReader::new(
            stdout,
            sink.clone(),
            limits.max_message_bytes,
        ));
        // From here on the reaper owns the process.
        let pid = started.pid;

        let (exit_tx, exit_rx) = watch::channel(None);
        let (stderr_tx, stderr_rx) = watch::channel(false);
        let stderr_tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_LINES)));

        let transport = Arc::new_cyclic(|me| StdioTransport {
            me: me.clone(),
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            reader: reader.clone(),
            sink: sink.clone(),
            pgid: pid,
            exit: exit_rx,
            stderr_done: stderr_rx,
            stderr_tail: stderr_tail.clone(),
            closing: AtomicBool::new(false),
            grace: limits.shutdown_grace,
            command: std::mem::take(&mut started.command),
            tasks: Mutex::new(Vec::with_capacity(3)),
            tasks_started: std::sync::Once::new(),
        });

        let mut tasks = transport.tasks.lock();
        // The reaper: the leader is always waited for, so it never stays a zombie.
        tasks.push(Box::pin(async move {
            let _ = exit_tx.send(Some(reap(child).await));
        }));
        tasks.push(Box::pin(read_stderr(
            stderr,
            sink.clone(),
            stderr_tail,
            stderr_tx,
        )));
        let weak_self = Arc::downgrade(&transport);
        tasks.push(Box::pin(async move {
            let end = reader.background().await;
            drop(reader);
            if let (Some(end), Some(t)) = (end, weak_self.upgrade()) {
                t.report_end(end).await;
            }
        }));
        drop(tasks);
        Ok(transport)
    }

    /// Spawns the server's tasks, once: after the first request was written, or before anything
    /// that waits on them (an answer, the end, the diagnostics), whichever comes first.
    fn start_tasks(&self) {
        self.tasks_started.call_once(|| {
            for task in std::mem::take(&mut *self.tasks.lock()) {
                crate::runtime::spawn(task);
            }
        });
    }

    /// Tells the connection that the stream has ended, with the best description of why.
    async fn report_end(&self, end: Error) {
        let error = self.describe_end(end).await;
        if let Some(sink) = self.reader_sink() {
            sink.closed(error);
        }
    }

    fn reader_sink(&self) -> Option<Arc<dyn Inbound>> {
        self.sink.upgrade()
    }

    /// Turns "stdout ended" (or "stdin is broken") into the most useful message we can: how the
    /// process ended and what it last said on stderr; `error`'s own message when it has not ended.
    async fn describe_end(&self, error: Error) -> Error {
        if error.kind != crate::error::ErrorKind::Closed {
            return error;
        }
        let mut exit = self.exit.clone();
        let mut stderr_done = self.stderr_done.clone();
        let _ = tokio::time::timeout(Duration::from_millis(200), async {
            let _ = exit.wait_for(Option::is_some).await;
            let _ = stderr_done.wait_for(|d| *d).await;
        })
        .await;
        let mut message = match *self.exit.borrow() {
            // 126/127: how a process that could not run its program exits (a shell, or an exec
            // that failed after the spawn reported success): say which command.
            Some(exit @ (Exit::Code(126) | Exit::Code(127))) => format!(
                "the server process exited ({exit}): the command {:?} could not be run \
                 (not found or not executable?)",
                self.command
            ),
            Some(exit) => format!("the server process exited ({exit})"),
            None => error.message.clone(),
        };
        let tail = self.diagnostics_tail();
        if !tail.is_empty() {
            let last: Vec<&str> = tail
                .iter()
                .rev()
                .take(3)
                .rev()
                .map(String::as_str)
                .collect();
            let mut text = last.join(" | ");
            if text.len() > 600 {
                let mut cut = 600;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push('…');
            }
            message.push_str(&format!("; its last stderr: {text}"));
        }
        Error::closed(message)
    }

    fn group_alive(&self) -> bool {
        sys::process::group_alive(self.pgid)
    }

    fn signal_group(&self, signal: Signal) {
        // An error means the group is gone already (or never was: pgid 0).
        let _ = sys::process::signal_group(self.pgid, signal);
    }

    async fn wait_exit(&self, limit: Duration) -> bool {
        let mut exit = self.exit.clone();
        let exited = tokio::time::timeout(limit, exit.wait_for(Option::is_some))
            .await
            .is_ok();
        exited
    }

    async fn wait_group_gone(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if !self.group_alive() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Transport for StdioTransport {
    fn send(self: Arc<Self>, message: Vec<u8>) -> BoxFuture<'static, Result<(), Error>> {
        self.start_tasks();
        Box::pin(async move {
            let mut guard = self.stdin.lock().await;
            let Some(stdin) = guard.as_mut() else {
                return Err(Error::closed("the connection is closed"));
            };
            match stdin.write_all(&message).await {
                Ok(()) => Ok(()),
                // The server exited (or closed its stdin) before it read this: say how it
                // ended, as when its stdout ends — a command that could not run is named.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    drop(guard);
                    Err(self
                        .describe_end(Error::closed(
                            "the server closed its stdin (it probably exited)",
                        ))
                        .await)
                }
                Err(e) => Err(Error::transport(format!(
                    "writing to the server's stdin failed: {e}"
                ))),
            }
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.start_tasks();
        Box::pin(async move {
            self.closing.store(true, Ordering::SeqCst);
            // 1. Closing stdin is the polite request to exit. A writer stuck on a full pipe (a
            // server that stopped reading) holds the lock: then go straight to the signals, which
            // break the pipe and free it.
            if let Ok(mut stdin) = tokio::time::timeout(self.grace, self.stdin.lock()).await {
                drop(stdin.take());
            }
            let mut exited = self.wait_exit(self.grace).await;
            // 2. to 4. Then the whole group as Claude Code stops it: SIGINT, SIGTERM, SIGKILL,
            // each after its grace period.
            for signal in [Signal::INT, Signal::TERM] {
                if !exited {
                    self.signal_group(signal);
                    exited = self.wait_exit(self.grace).await;
                }
            }
            if !exited {
                self.signal_group(Signal::KILL);
                self.wait_exit(Duration::from_secs(5)).await;
            }
            // The leader is gone; anything it left behind in its group goes the same way.
            if self.group_alive() {
                self.signal_group(Signal::TERM);
                if !self.wait_group_gone(self.grace).await {
                    self.signal_group(Signal::KILL);
                    self.wait_group_gone(Duration::from_secs(2)).await;
                }
            }
            // A host that read stdout and never said it stopped: the reader takes it back, reads
            // the end of the stream and ends (with the descriptor).
            self.reader.host_release();
        })
    }

    fn diagnostics_tail(&self) -> Vec<String> {
        self.stderr_tail.lock().iter().cloned().collect()
    }

    fn drained(&self) -> BoxFuture<'_, ()> {
        self.start_tasks();
        let mut done = self.stderr_done.clone();
        Box::pin(async move {
            let _ = done.wait_for(|d| *d).await;
        })
    }

    fn driven(self: Arc<Self>) -> Option<Arc<dyn Driven>> {
        Some(self)
    }

    fn host_read(self: Arc<Self>) -> Option<Arc<dyn HostRead>> {
        Some(self)
    }
}

/// A caller waiting alone reads the server's stdout itself (see `stdio_read`).
impl Driven for StdioTransport {
    fn send_driven(
        self: Arc<Self>,
        message: Vec<u8>,
        _request: DrivenRequest,
    ) -> BoxFuture<'static, Result<(), Error>> {
        self.send(message)
    }

    fn send_now(&self, message: &[u8]) -> bool {
        if message.len() > sys::fd::PIPE_BUF {
            return false;
        }
        // Busy (another writer, or one waiting) or closed: the ordinary path waits its turn or
        // says why.
        let Ok(mut guard) = self.stdin.try_lock() else {
            return false;
        };
        let sent = guard
            .as_mut()
            .and_then(|stdin| stdin.write_now(message))
            .is_some();
        drop(guard);
        // (When nothing went out, the ordinary send that follows starts them.)
        if sent {
            self.start_tasks();
        }
        sent
    }

    fn enter_call(&self, can_drive: bool) {
        self.start_tasks();
        self.reader.enter(can_drive);
    }

    fn leave_call(&self, could_drive: bool) {
        self.reader.leave(could_drive);
    }

    fn drive(&self, wait: Duration, also: Option<std::os::fd::RawFd>) -> Drive {
        self.start_tasks();
        let (turn, end) = self.reader.drive(wait, also);
        if let Some(end) = end {
            // This caller saw the end of the stream: report it as the background task would.
            if let Some(me) = self.me.upgrade() {
                crate::runtime::spawn(async move { me.report_end(end).await });
            }
        }
        turn
    }

    fn drive_interruptible(&self) -> bool {
        self.reader.interruptible()
    }

    fn interrupt_drive(&self) {
        self.reader.interrupt();
    }

    fn ticket_started(&self) {
        self.start_tasks();
        self.reader.ticket_started();
    }

    fn ticket_finished(&self) {
        self.reader.ticket_finished();
    }

    fn tickets(&self) -> usize {
        self.reader.tickets()
    }

    fn baton(&self) -> Option<&tokio::sync::Notify> {
        Some(self.reader.baton())
    }
}

/// A host's event loop may read the server's stdout itself.
impl HostRead for StdioTransport {
    fn host_reader(&self) -> Result<std::os::fd::RawFd, Error> {
        self.start_tasks();
        self.reader
            .host_take()
            .and_then(|()| match sys::fd::dup_cloexec(self.reader.fd()) {
                Ok(fd) => Ok(fd.into_raw_fd()),
                Err(e) => {
                    self.reader.host_release();
                    Err(Error::transport(format!(
                        "cannot give the host a descriptor of the server's stdout: {e}"
                    )))
                }
            })
    }

    fn feed(&self, data: &[u8]) {
        self.start_tasks();
        if let Some(end) = self.reader.feed(data) {
            if let Some(me) = self.me.upgrade() {
                crate::runtime::spawn(async move { me.report_end(end).await });
            }
        }
    }

    fn host_release(&self) {
        self.reader.host_release();
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // A backstop for a transport dropped without close(): never leave the server running.
        if !self.closing.load(Ordering::SeqCst) && self.exit.borrow().is_none() {
            self.signal_group(Signal::KILL);
        }
        // Never used: the reaper must still reap it.
        self.start_tasks();
    }
}

/// Waits for the server process to end and reaps it. A pidfd (Linux 5.3) becomes readable when
/// the process ends; without one (older kernels), a thread of the runtime's blocking pool waits
/// for it. (Not SIGCHLD: tokio's signal driver, built with the runtime, cost every host's first
/// connect a socket pair, its registration and a table of one channel per signal, for kernels
/// older than 2019's.)
async fn reap(child: std::process::Child) -> Exit {
    reap_with(child, true).await
}

/// [`reap`], with the pidfd or (`pidfd` false: the fallback, for the tests) without.
async fn reap_with(mut child: std::process::Child, pidfd: bool) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    let status = |s: std::process::ExitStatus| match (s.code(), s.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(sig)) => Exit::Signal(sig),
        _ => Exit::Unknown,
    };
    // Our own child, which nothing reaps before this function does.
    let watched = pidfd
        .then(|| sys::process::pidfd(&child).ok())
        .flatten()
        .and_then(|fd| {
            // SAFETY: the AsyncFd owns the descriptor, registered until it is dropped with it.
            unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.ok()
        });
    let Some(fd) = watched else {
        return match tokio::task::spawn_blocking(move || child.wait()).await {
            Ok(Ok(s)) => status(s),
            // A failed wait (or a runtime shutting down, which never happens to ours).
            _ => Exit::Unknown,
        };
    };
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return status(s),
            Ok(None) => {}
            Err(_) => return Exit::Unknown,
        }
        match fd.readable().await {
            Ok(mut ready) => ready.clear_ready(),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

async fn read_stderr<R: AsyncRead + Unpin>(
    stderr: R,
    sink: Weak<dyn Inbound>,
    tail: Arc<Mutex<VecDeque<String>>>,
    done: watch::Sender<bool>,
) {
    let mut reader = BufReader::with_capacity(16 << 10, stderr);
    let mut raw = Vec::new();
    loop {
        raw.clear();
        // Bounded read: a line longer than STDERR_MAX_LINE is cut, never buffered whole.
        let n = match (&mut reader)
            .take(STDERR_MAX_LINE as u64)
            .read_until(b'\n', &mut raw)
            .await
        {
            Ok(n) => n,
            Err(_) => break,
        };
        if n == 0 {
            break;
        }
        while matches!(raw.last(), Some(b'\n' | b'\r')) {
            raw.pop();
        }
        let line = String::from_utf8_lossy(&raw).into_owned();
        {
            let mut t = tail.lock();
            if t.len() == STDERR_TAIL_LINES {
                t.pop_front();
            }
            t.push_back(line.clone());
        }
        if let Some(sink) = sink.upgrade() {
            sink.stderr(line);
        }
    }
    let _ = done.send(true);
}

use tokio::io::AsyncReadExt as _;

/// The server's stdin. A write goes straight to the pipe from the writing thread; only when the
/// pipe is full does it wait for the reactor. (tokio's `ChildStdin` first waits for the reactor
/// to report a new descriptor writable: the first request of every connection paid a runtime
/// thread's wake-up, and the caller's, before a byte went out.)
struct StdinPipe {
    fd: AsyncFd<std::os::fd::OwnedFd>,
}

impl StdinPipe {
    fn new(fd: OwnedFd) -> Result<Self, Error> {
        sys::fd::set_nonblocking(&fd, true).map_err(|e| {
            Error::transport(format!("cannot make the server's stdin non-blocking: {e}"))
        })?;
        // SAFETY: the AsyncFd owns the descriptor, so it stays open for as long as it is
        // registered (the registration goes before the descriptor is closed).
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::WRITABLE) }
            .map_err(|e| Error::transport(format!("cannot watch the server's stdin: {e}")))?;
        Ok(StdinPipe { fd })
    }

    /// Writes `buf` whole now, or nothing: `None` when the pipe has no room for all of it (or
    /// the write failed: the ordinary path then says why). Only for `buf` of at most
    /// `PIPE_BUF` bytes, which a pipe takes whole or not at all.
    fn write_now(&mut self, buf: &[u8]) -> Option<()> {
        debug_assert!(buf.len() <= sys::fd::PIPE_BUF);
        loop {
            match sys::fd::write(self.fd.get_ref(), buf) {
                Ok(n) => {
                    // A pipe writes up to PIPE_BUF bytes atomically: all of them.
                    debug_assert_eq!(n, buf.len());
                    return (n == buf.len()).then_some(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }

    async fn write_all(&mut self, mut buf: &[u8]) -> std::io::Result<()> {
        while !buf.is_empty() {
            let err = match sys::fd::write(self.fd.get_ref(), buf) {
                Ok(n) => {
                    buf = &buf[n..];
                    continue;
                }
                Err(err) => err,
            };
            match err.kind() {
                std::io::ErrorKind::Interrupted => {}
                std::io::ErrorKind::WouldBlock => {
                    // Full: wait until the server has read some. The readiness tokio holds may
                    // be stale; clearing it makes the next wait a real one.
                    self.fd.writable().await?.clear_ready();
                }
                _ => return Err(err),
            }
        }
        Ok(())
    }
}

/// A pipe (close-on-exec, blocking): its read end, then its write end.
fn pipe_pair(what: &str) -> Result<(OwnedFd, OwnedFd), Error> {
    sys::fd::pipe(false)
        .map_err(|e| Error::transport(format!("cannot make a pipe for the server's {what}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper() -> StdioConfig {
        StdioConfig {
            command: "sleep".into(),
            args: vec!["30".into()],
            ..Default::default()
        }
    }

    fn gone(pid: i32) -> bool {
        !sys::process::alive(pid)
    }

    #[test]
    fn a_server_started_but_never_attached_is_killed_and_reaped() {
        let started = Started::start(&sleeper()).expect("start sleep");
        let pid = started.pid;
        assert!(!gone(pid), "the server runs once started");
        drop(started);
        // Reaped, not a zombie: kill(pid, 0) fails only once the process is waited for.
        assert!(
            gone(pid),
            "the server {pid} outlived its unattached Started"
        );
    }

    #[test]
    fn the_reaper_reports_how_the_server_ended() {
        let code = |args: &[&str]| {
            let mut cmd = std::process::Command::new("sh");
            cmd.arg("-c").args(args);
            let child = cmd.spawn().expect("spawn sh");
            crate::runtime::block_on(reap(child))
        };
        assert_eq!(code(&["exit 7"]), Exit::Code(7));
        assert_eq!(
            code(&["kill -TERM $$"]),
            Exit::Signal(Signal::TERM.as_raw())
        );
    }

    #[test]
    fn without_a_pidfd_the_reaper_waits_on_a_blocking_thread() {
        let code = |script: &str| {
            let child = std::process::Command::new("sh")
                .args(["-c", script])
                .spawn()
                .expect("spawn sh");
            crate::runtime::block_on(reap_with(child, false))
        };
        // Ends at once, and later.
        assert_eq!(code("exit 3"), Exit::Code(3));
        assert_eq!(code("sleep 0.2; exit 4"), Exit::Code(4));
    }

    struct NoSink;
    impl Inbound for NoSink {
        fn message(self: Arc<Self>, _line: &[u8]) {}
        fn stderr(self: Arc<Self>, _line: String) {}
        fn request_failed(self: Arc<Self>, _id: &str, _error: Error) {}
        fn closed(self: Arc<Self>, _error: Error) {}
    }

    /// Attaches `config`'s server with `grace` and returns the transport (its tasks unstarted).
    fn attached(
        config: &StdioConfig,
        grace: Duration,
    ) -> (Arc<StdioTransport>, i32, Arc<dyn Inbound>) {
        let started = Started::start(config).expect("start the server");
        let pid = started.pid;
        let sink: Arc<dyn Inbound> = Arc::new(NoSink);
        let limits = StdioLimits {
            shutdown_grace: grace,
            ..StdioLimits::default()
        };
        let transport = {
            let _context = crate::runtime::handle().enter();
            StdioTransport::attach(started, limits, Arc::downgrade(&sink)).expect("attach")
        };
        (transport, pid, sink)
    }

    /// A shell server that writes each SIGINT and SIGTERM it gets to a file (`on_int`: what it
    /// does then besides), ignores the end of its stdin, and is attached with a grace of 300 ms
    /// once it runs; returns the transport, its pid, the sink and the file.
    fn signal_recorder(
        tag: &str,
        on_int: &str,
    ) -> (
        Arc<StdioTransport>,
        i32,
        Arc<dyn Inbound>,
        std::path::PathBuf,
    ) {
        let dir = std::env::temp_dir().join(format!("mcplug-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("signals");
        let _ = std::fs::remove_file(&log);
        let script = format!(
            "trap 'echo INT >> {0}{on_int}' INT; trap 'echo TERM >> {0}' TERM; echo ready >> {0}; \
             exec 0</dev/null; while :; do sleep 0.02; done",
            log.display()
        );
        let config = StdioConfig {
            command: "sh".into(),
            args: vec!["-c".into(), script],
            ..Default::default()
        };
        let (transport, pid, sink) = attached(&config, Duration::from_millis(300));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("ready")) {
            assert!(
                std::time::Instant::now() < deadline,
                "the server never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        (transport, pid, sink, log)
    }

    #[test]
    fn close_sends_sigint_then_sigterm_then_sigkill_to_the_group() {
        // A server that ignores the end of its stdin, SIGINT and SIGTERM: close must have sent
        // both, in Claude Code's order, then killed it.
        let (transport, pid, _sink, log) = signal_recorder("signals", "");
        let started = std::time::Instant::now();
        crate::runtime::block_on(transport.close());
        let took = started.elapsed();
        assert!(gone(pid), "the server {pid} outlived close");
        let got = std::fs::read_to_string(&log).unwrap();
        let signals: Vec<&str> = got.lines().filter(|l| *l != "ready").collect();
        assert_eq!(signals, ["INT", "TERM"], "signals the server saw: {got:?}");
        // Three graces (stdin, SIGINT, SIGTERM) before SIGKILL: neither skipped nor stuck.
        assert!(
            took >= Duration::from_millis(850),
            "close took only {took:?}"
        );
        assert!(took < Duration::from_secs(5), "close took {took:?}");
        let _ = std::fs::remove_dir_all(log.parent().unwrap());
    }

    #[test]
    fn a_server_that_exits_at_sigint_gets_no_more_signals() {
        let (transport, pid, _sink, log) = signal_recorder("sigint", "; exit 0");
        let started = std::time::Instant::now();
        crate::runtime::block_on(transport.close());
        assert!(gone(pid));
        let got = std::fs::read_to_string(&log).unwrap();
        assert!(got.ends_with("INT\n"), "signals the server saw: {got:?}");
        assert!(
            started.elapsed() < Duration::from_millis(900),
            "{:?}",
            started.elapsed()
        );
        let _ = std::fs::remove_dir_all(log.parent().unwrap());
    }

    #[test]
    fn a_server_attached_but_never_written_to_is_killed_and_reaped() {
        // Its tasks (the reaper among them) wait for the first request; dropped before one,
        // the transport must still start them, or the server would run on, then stay a zombie.
        let started = Started::start(&sleeper()).expect("start sleep");
        let pid = started.pid;
        let sink: Arc<dyn Inbound> = Arc::new(NoSink);
        let transport = {
            let _context = crate::runtime::handle().enter();
            StdioTransport::attach(started, StdioLimits::default(), Arc::downgrade(&sink))
                .expect("attach")
        };
        assert!(!transport.tasks_started.is_completed());
        drop(transport);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !gone(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(gone(pid), "the server {pid} outlived its dropped transport");
    }

    #[test]
    fn a_write_now_goes_out_whole_or_not_at_all() {
        let (theirs, ours) = pipe_pair("stdin").expect("pipe");
        let _context = crate::runtime::handle().enter();
        let mut stdin = StdinPipe::new(ours).expect("register");
        let line = b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n";
        assert_eq!(stdin.write_now(line), Some(()));
        // Fill the pipe to its last byte: then a line has no room, and none of it may go.
        let mut filler = vec![b' '; 4096];
        let mut filled = line.len();
        loop {
            if let Ok(n) = sys::fd::write(stdin.fd.get_ref(), &filler) {
                filled += n;
            } else if filler.len() > 1 {
                filler.truncate(filler.len() / 2);
            } else {
                break;
            }
        }
        assert_eq!(stdin.write_now(line), None, "a full pipe takes nothing");
        let mut buf = vec![0u8; filled + 64];
        let mut read = 0;
        while read < filled {
            let n = sys::fd::read(&theirs, &mut buf[read..]).expect("reading back");
            assert!(n > 0, "reading back what was written");
            read += n;
        }
        assert_eq!(read, filled, "nothing of the refused line was written");
        assert!(buf[..read].starts_with(line));
        assert_eq!(stdin.write_now(line), Some(()), "room again");
    }

    #[test]
    fn a_command_that_cannot_start_is_named() {
        let config = StdioConfig {
            command: "/nonexistent/mcplug-no-such-server".into(),
            ..Default::default()
        };
        let err = Started::start(&config).err().expect("no such command");
        assert!(
            err.message.contains("/nonexistent/mcplug-no-such-server"),
            "{}",
            err.message
        );
    }
}
