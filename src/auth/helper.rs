//! `headersHelper` (Claude Code's field): a command whose JSON output — an object of header
//! names to string values — is sent with every request of a remote connection. Run once per
//! connection, before its first request, within a time limit (`headers_helper_timeout_ms`,
//! 10 s); run again when a request is answered 401 or 403 (its output may be a short-lived
//! token) — an output that was itself such a re-run is not re-run again within [`RERUN_GAP`],
//! so a server that refuses every output is not answered with a process per request. Its headers replace the entry's `headers` of the same
//! name; when they carry no `Authorization`, OAuth (lazy, as without a helper) supplies it.
//!
//! The command runs with `sh -c`, stdin closed, in its own process group (killed whole when
//! it overruns, and when it has exited: what it left running goes with it); its own exit, not
//! the end of its output, ends the run (a child left holding stdout is not waited for), with
//! `MCPLUG_SERVER_NAME` and `MCPLUG_SERVER_URL` set, and Claude Code's
//! `CLAUDE_CODE_MCP_SERVER_NAME` and `CLAUDE_CODE_MCP_SERVER_URL` for scripts written for it.
//! Its output is a credential: it never appears in an error, and its values are marked
//! sensitive; its stderr (the script's own diagnostics) is quoted, cut short, when it fails.

use crate::error::{Error, ErrorKind, Result};
use crate::transport::credentials::{Applied, Credentials, Request, Verdict};
use crate::transport::BoxFuture;
use parking_lot::RwLock;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The least time between two runs a 401/403 asks for.
pub const RERUN_GAP: Duration = Duration::from_secs(5);

/// The most output read from the command (stdout; stderr is quoted from its first KiB).
const MAX_OUTPUT: u64 = 256 << 10;

/// One connection's helper, with the entry's static headers and the OAuth behind it.
pub struct HeadersHelper {
    command: String,
    name: Option<String>,
    url: String,
    timeout: Duration,
    statics: Vec<(HeaderName, HeaderValue)>,
    output: RwLock<Option<Arc<Output>>>,
    run: tokio::sync::Mutex<()>,
    /// OAuth, used when the helper's headers carry no `Authorization`.
    inner: Option<Arc<dyn Credentials>>,
}

/// One run's headers (merged with the static ones).
struct Output {
    headers: Vec<(HeaderName, HeaderValue)>,
    generation: u64,
    authorizes: bool,
    identity: u64,
    at: Instant,
    /// Run because a request was refused (not the connection's first run).
    challenged: bool,
}

impl HeadersHelper {
    pub fn new(
        command: &str,
        name: Option<&str>,
        url: &str,
        timeout: Duration,
        statics: &[(String, String)],
        inner: Option<Arc<dyn Credentials>>,
    ) -> Result<HeadersHelper> {
        let statics = statics
            .iter()
            .map(|(k, v)| {
                crate::transport::remote::check_header(k, v)?;
                let mut value = HeaderValue::from_str(v).expect("checked");
                value.set_sensitive(true);
                Ok((
                    HeaderName::from_bytes(k.as_bytes()).expect("checked"),
                    value,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(HeadersHelper {
            command: command.to_string(),
            name: name.map(str::to_string),
            url: url.to_string(),
            timeout,
            statics,
            output: RwLock::new(None),
            run: tokio::sync::Mutex::new(()),
            inner,
        })
    }

    fn who(&self) -> String {
        match &self.name {
            Some(n) => format!("the headersHelper of server {n:?}"),
            None => format!("the headersHelper of {}", self.url),
        }
    }

    /// Runs the command again unless another request did since `seen` (the generation it
    /// judged; 0: none yet).
    async fn rerun(&self, seen: u64, challenged: bool) -> Result<()> {
        let _one = self.run.lock().await;
        let current = self.output.read().as_ref().map_or(0, |o| o.generation);
        if current != seen {
            return Ok(());
        }
        let got = self.run_command().await?;
        let mut headers: Vec<(HeaderName, HeaderValue)> = self
            .statics
            .iter()
            .filter(|(k, _)| !got.iter().any(|(g, _)| g == k))
            .cloned()
            .collect();
        headers.extend(got);
        let authorizes = headers.iter().any(|(k, _)| *k == AUTHORIZATION);
        let identity = crate::transport::remote::fingerprint(
            headers
                .iter()
                .map(|(k, v)| (k.as_str().as_bytes(), v.as_bytes())),
        );
        *self.output.write() = Some(Arc::new(Output {
            headers,
            generation: current + 1,
            authorizes,
            identity,
            at: Instant::now(),
            challenged,
        }));
        Ok(())
    }

    async fn run_command(&self) -> Result<Vec<(HeaderName, HeaderValue)>> {
        use std::os::unix::process::CommandExt;
        let who = self.who();
        let fail = |why: String| Error::new(ErrorKind::Config, format!("{who}: {why}"));
        // std's process, not tokio's: tokio's would install a SIGCHLD handler in the host's
        // process. Its pipes are read on a blocking thread, bounded by the timeout itself.
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(&self.command)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .env("MCPLUG_SERVER_URL", &self.url)
            .env("CLAUDE_CODE_MCP_SERVER_URL", &self.url)
            .process_group(0);
        if let Some(n) = &self.name {
            cmd.env("MCPLUG_SERVER_NAME", n)
                .env("CLAUDE_CODE_MCP_SERVER_NAME", n);
        }
        let child = cmd
            .spawn()
            .map_err(|e| fail(format!("cannot start `sh -c {:?}`: {e}", self.command)))?;
        let timeout = self.timeout;
        let ran = tokio::task::spawn_blocking(move || Run::new(child)?.finish(timeout))
            .await
            .map_err(|e| fail(format!("its reader failed: {e}")))?
            .map_err(|e| fail(format!("cannot read its output: {e}")))?;
        let Some(status) = ran.status else {
            return Err(fail(format!(
                "did not finish within {} ms (headers_helper_timeout_ms); it was killed",
                self.timeout.as_millis()
            )));
        };
        let err = String::from_utf8_lossy(&ran.err).trim().to_string();
        let said = if err.is_empty() {
            String::new()
        } else {
            format!("; it said: {err}")
        };
        if !status.success() {
            return Err(fail(format!("exited with {status}{said}")));
        }
        if ran.out.len() as u64 > MAX_OUTPUT {
            return Err(fail(format!(
                "its output is larger than {MAX_OUTPUT} bytes"
            )));
        }
        parse_output(&ran.out).map_err(fail)
    }
}

/// How long the pipes are read after the helper exited: what it wrote just before is taken; a
/// child it left holding them (`cmd &`, a `setsid` daemon) is not waited for.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);

/// One run of the helper's command: its pipes read side by side (non-blocking, through
/// `sys::fd`) while the helper itself is watched, so its end — not its pipes' — ends the run.
struct Run {
    child: std::process::Child,
    out_pipe: Option<std::process::ChildStdout>,
    err_pipe: Option<std::process::ChildStderr>,
    out: Vec<u8>,
    err: Vec<u8>,
    /// The exit status; `None` when it was killed for overrunning.
    status: Option<std::process::ExitStatus>,
}

impl Run {
    fn new(mut child: std::process::Child) -> std::io::Result<Run> {
        let out_pipe = child.stdout.take();
        let err_pipe = child.stderr.take();
        for fd in [
            out_pipe.as_ref().map(std::os::fd::AsFd::as_fd),
            err_pipe.as_ref().map(std::os::fd::AsFd::as_fd),
        ]
        .into_iter()
        .flatten()
        {
            crate::sys::fd::set_nonblocking(fd, true)?;
        }
        Ok(Run {
            child,
            out_pipe,
            err_pipe,
            out: Vec::new(),
            err: Vec::new(),
            status: None,
        })
    }

    /// Reads until the helper has exited and its pipes are done (or [`DRAIN_AFTER_EXIT`] has
    /// passed since), or `timeout` has: then its process group is killed and it is reaped. Its
    /// pipes are closed when this returns, whoever else still holds them, and what it left
    /// running in its process group is killed: nothing is left behind but a child that left the
    /// group (`setsid`), which is that child's to end.
    fn finish(mut self, timeout: Duration) -> std::io::Result<Run> {
        let deadline = Instant::now() + timeout;
        let mut exited_at = None;
        loop {
            self.read_what_there_is()?;
            let now = Instant::now();
            if exited_at.is_none() {
                if let Some(status) = self.child.try_wait()? {
                    self.status = Some(status);
                    exited_at = Some(now);
                }
            }
            let pipes_done = self.out_pipe.is_none() && self.err_pipe.is_none();
            match exited_at {
                Some(at) if pipes_done || now >= at + DRAIN_AFTER_EXIT => {
                    // What it left running in its group goes with it.
                    let _ = crate::sys::process::signal_group(
                        self.child.id() as i32,
                        crate::sys::process::Signal::KILL,
                    );
                    break;
                }
                None if now >= deadline => {
                    let pid = self.child.id() as i32;
                    let _ =
                        crate::sys::process::signal_group(pid, crate::sys::process::Signal::KILL);
                    let _ = self.child.wait();
                    self.status = None;
                    break;
                }
                _ => {}
            }
            // Wait for output, or look at the helper again (its exit makes no descriptor
            // readable while a child of its holds the pipes).
            let slice = Duration::from_millis(10);
            match (&self.out_pipe, &self.err_pipe) {
                (Some(o), e) => {
                    use std::os::fd::AsFd;
                    crate::sys::fd::wait_readable(o.as_fd(), e.as_ref().map(|e| e.as_fd()), slice);
                }
                (None, Some(e)) => {
                    crate::sys::fd::wait_ready(e, crate::sys::fd::Ready::Read, slice);
                }
                (None, None) => std::thread::sleep(slice),
            }
        }
        self.out_pipe = None;
        self.err_pipe = None;
        Ok(self)
    }

    /// Reads what each pipe has now, keeping at most [`MAX_OUTPUT`] + 1 bytes of stdout and 1 KiB
    /// of stderr (the rest is read and dropped, so the helper never blocks on a full pipe); a
    /// pipe at its end is closed.
    fn read_what_there_is(&mut self) -> std::io::Result<()> {
        drain(&mut self.out_pipe, &mut self.out, MAX_OUTPUT as usize + 1)?;
        drain(&mut self.err_pipe, &mut self.err, 1024)
    }
}

/// Reads what `pipe` has now into `kept` (up to `cap` bytes kept); closes it at its end.
fn drain<P: std::os::fd::AsFd>(
    pipe: &mut Option<P>,
    kept: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<()> {
    let Some(p) = pipe else { return Ok(()) };
    let mut buf = [0u8; 8192];
    loop {
        match crate::sys::fd::read(p.as_fd(), &mut buf) {
            Ok(0) => {
                *pipe = None;
                return Ok(());
            }
            Ok(n) => {
                let room = cap.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The command's output: a JSON object of header names to strings. The errors never quote a
/// value (it is a credential).
fn parse_output(out: &[u8]) -> std::result::Result<Vec<(HeaderName, HeaderValue)>, String> {
    let value: Value = serde_json::from_slice(out).map_err(|e| {
        format!("its output is not JSON ({e}); it must print an object of header names to strings")
    })?;
    let Value::Object(map) = value else {
        return Err("its output must be a JSON object of header names to strings".into());
    };
    let mut headers = Vec::with_capacity(map.len());
    for (k, v) in map {
        let Value::String(v) = v else {
            return Err(format!("header {k:?} of its output is not a string"));
        };
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("{k:?} of its output is not a valid HTTP header name"))?;
        let mut value = HeaderValue::from_str(&v).map_err(|_| {
            format!("the value of header {k:?} of its output is not a valid HTTP header value (visible ASCII, space and tab only)")
        })?;
        value.set_sensitive(true);
        headers.push((name, value));
    }
    Ok(headers)
}

impl Credentials for HeadersHelper {
    fn apply(&self, request: &Request<'_>) -> Applied {
        let Some(out) = self.output.read().clone() else {
            return Applied::default();
        };
        let mut headers = out.headers.clone();
        let mut sent = 0;
        if !out.authorizes {
            if let Some(inner) = &self.inner {
                let a = inner.apply(request);
                headers.extend(a.headers);
                sent = a.sent;
            }
        }
        Applied {
            headers,
            sent,
            generation: out.generation,
        }
    }

    fn due(&self) -> bool {
        match self.output.read().as_ref() {
            None => true,
            Some(out) => !out.authorizes && self.inner.as_ref().is_some_and(|i| i.due()),
        }
    }

    fn prepare(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            if self.output.read().is_none() {
                self.rerun(0, false).await?;
            }
            let authorizes = self.output.read().as_ref().is_some_and(|o| o.authorizes);
            match &self.inner {
                Some(inner) if !authorizes => inner.prepare().await,
                _ => Ok(()),
            }
        })
    }

    fn identity(&self) -> u64 {
        let out = self.output.read().as_ref().map_or(0, |o| o.identity);
        let inner = self.inner.as_ref().map_or(0, |i| i.identity());
        out ^ inner.rotate_left(29)
    }

    fn challenge<'a>(
        &'a self,
        sent: &'a Applied,
        status: u16,
        headers: &'a HeaderMap,
        request: &'a Request<'a>,
    ) -> BoxFuture<'a, Verdict> {
        Box::pin(async move {
            let current = self.output.read().clone();
            if let Some(o) = &current {
                if o.generation != sent.generation {
                    // Run again since this request was sent: send it with the new output.
                    return Verdict::Retry;
                }
                if !o.challenged || o.at.elapsed() >= RERUN_GAP {
                    return match self.rerun(o.generation, true).await {
                        Ok(()) => Verdict::Retry,
                        Err(e) => Verdict::Fail(e),
                    };
                }
                if o.authorizes {
                    return Verdict::Pass;
                }
            }
            match &self.inner {
                Some(inner) => inner.challenge(sent, status, headers, request).await,
                None => Verdict::Pass,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper(command: &str, timeout_ms: u64) -> HeadersHelper {
        HeadersHelper::new(
            command,
            Some("srv"),
            "http://127.0.0.1:1/mcp",
            Duration::from_millis(timeout_ms),
            &[
                ("X-Static".into(), "s".into()),
                ("X-Both".into(), "static".into()),
            ],
            None,
        )
        .unwrap()
    }

    fn request() -> Request<'static> {
        Request {
            method: "POST",
            url: "http://127.0.0.1:1/mcp",
            body: None,
        }
    }

    fn names(a: &Applied) -> Vec<(String, String)> {
        a.headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect()
    }

    #[test]
    fn its_headers_replace_the_static_ones_of_the_same_name() {
        crate::runtime::block_on(async {
            let h = helper(
                r#"printf '{"X-Both": "%s", "Authorization": "Bearer t"}' "$MCPLUG_SERVER_NAME""#,
                5000,
            );
            assert!(h.due(), "not run yet: prepare first");
            assert!(h.apply(&request()).headers.is_empty());
            h.prepare().await.unwrap();
            assert!(!h.due());
            let a = h.apply(&request());
            assert_eq!(
                names(&a),
                [
                    ("x-static".into(), "s".into()),
                    ("x-both".into(), "srv".into()),
                    ("authorization".into(), "Bearer t".into())
                ]
            );
            assert!(a.headers.iter().all(|(_, v)| v.is_sensitive()));
            assert_eq!(a.generation, 1);
            assert_ne!(h.identity(), 0);
        });
    }

    #[test]
    fn bad_output_and_failures_are_config_errors_that_never_quote_the_output() {
        crate::runtime::block_on(async {
            for (cmd, want) in [
                ("echo not-json-secret", "not JSON"),
                (r#"echo '["a"]'"#, "JSON object"),
                (r#"echo '{"X": 1}'"#, "not a string"),
                (
                    r#"printf '%s' '{"X": "a\nb"}'"#,
                    "not a valid HTTP header value",
                ),
                ("echo oops >&2; exit 3", "oops"),
            ] {
                let e = helper(cmd, 5000).prepare().await.unwrap_err();
                assert_eq!(e.kind, ErrorKind::Config, "{cmd}: {}", e.message);
                assert!(e.message.contains(want), "{cmd}: {}", e.message);
                assert!(e.message.contains("headersHelper of server \"srv\""));
                assert!(!e.message.contains("secret"), "{}", e.message);
            }
        });
    }

    #[test]
    fn the_helpers_own_exit_ends_the_run_not_a_child_holding_its_output() {
        crate::runtime::block_on(async {
            for cmd in [
                r#"(sleep 30 &); printf '{"X-A": "1"}'"#,
                r#"setsid sleep 3 & printf '{"X-A": "1"}'"#,
                r#"printf '{"X-A": '; (sleep 30 &); printf '"1"}'"#,
            ] {
                let started = Instant::now();
                let h = helper(cmd, 10_000);
                h.prepare()
                    .await
                    .unwrap_or_else(|e| panic!("{cmd}: {}", e.message));
                let got = names(&h.apply(&request()));
                assert!(got.contains(&("x-a".into(), "1".into())), "{cmd}: {got:?}");
                assert!(
                    started.elapsed() < Duration::from_secs(3),
                    "{cmd}: took {:?}",
                    started.elapsed()
                );
            }
        });
    }

    #[test]
    fn an_overrun_is_killed_with_its_children() {
        crate::runtime::block_on(async {
            let marker = std::env::temp_dir().join(format!("mcplug-helper-{}", std::process::id()));
            let cmd = format!("(sleep 1; touch {}) & sleep 30", marker.display());
            let started = Instant::now();
            let e = helper(&cmd, 200).prepare().await.unwrap_err();
            assert!(
                e.message.contains("did not finish within 200 ms"),
                "{}",
                e.message
            );
            assert!(started.elapsed() < Duration::from_secs(5));
            tokio::time::sleep(Duration::from_millis(1300)).await;
            assert!(!marker.exists(), "the background child was killed too");
        });
    }

    #[test]
    fn a_challenge_runs_it_again_at_most_once_per_gap() {
        crate::runtime::block_on(async {
            let count =
                std::env::temp_dir().join(format!("mcplug-helper-n-{}", std::process::id()));
            let _ = std::fs::remove_file(&count);
            let cmd = format!(
                r#"echo x >> {0}; printf '{{"Authorization": "Bearer %s"}}' "$(wc -l < {0} | tr -d ' ')""#,
                count.display()
            );
            let h = helper(&cmd, 5000);
            h.prepare().await.unwrap();
            let first = h.apply(&request());
            assert_eq!(names(&first)[2].1, "Bearer 1");
            let no = HeaderMap::new();
            // The first output refused: run again, the request is retried with the new one.
            assert!(matches!(
                h.challenge(&first, 401, &no, &request()).await,
                Verdict::Retry
            ));
            let second = h.apply(&request());
            assert_eq!(names(&second)[2].1, "Bearer 2");
            // A request that carried the first output is simply retried with the second.
            assert!(matches!(
                h.challenge(&first, 401, &no, &request()).await,
                Verdict::Retry
            ));
            // The re-run's output refused within the gap: the refusal goes on as it came.
            assert!(matches!(
                h.challenge(&second, 401, &no, &request()).await,
                Verdict::Pass
            ));
            // Past the gap: run again.
            if let Some(o) = h.output.write().as_mut() {
                let older = Output {
                    headers: o.headers.clone(),
                    at: Instant::now() - RERUN_GAP,
                    ..**o
                };
                *o = Arc::new(older);
            }
            assert!(matches!(
                h.challenge(&second, 401, &no, &request()).await,
                Verdict::Retry
            ));
            assert_eq!(names(&h.apply(&request()))[2].1, "Bearer 3");
            let _ = std::fs::remove_file(&count);
        });
    }
}
