//! Test servers on ports of their own (server-everything in its HTTP modes, the Python SDK
//! server over Streamable HTTP, the HTTP fault server), each killed when dropped. Shared by
//! tests/remote.rs and tests/c_abi.rs.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A server process on a port of its own, killed on drop.
pub struct Peer {
    child: Child,
    pub port: u16,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until the port accepts connections (or the process died).
fn wait_port(peer: &mut Peer) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", peer.port)).is_ok() {
            return;
        }
        if let Some(status) = peer.child.try_wait().unwrap() {
            panic!("the test server exited before listening: {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "the test server did not listen on {} within 30 s",
        peer.port
    );
}

pub fn everything(mode: &str) -> Peer {
    let js =
        repo().join(".deps/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        js.exists(),
        "run tests/install-deps.sh first ({js:?} is missing)"
    );
    let port = free_port();
    let child = Command::new("node")
        .arg(js)
        .arg(mode)
        .env("PORT", port.to_string())
        // tests/c/everything.c checks that get-env shows it, over every transport.
        .env("MCPLUG_TEST_MARKER", "marker-42")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut peer = Peer { child, port };
    wait_port(&mut peer);
    peer
}

fn python_server(python: PathBuf, script: &str, extra: &[&str]) -> Peer {
    python_server_on(free_port(), python, script, extra)
}

fn python_server_on(port: u16, python: PathBuf, script: &str, extra: &[&str]) -> Peer {
    let port_arg = port.to_string();
    let args: Vec<&str> = std::iter::once(port_arg.as_str())
        .chain(extra.iter().copied())
        .collect();
    let (child, line) = spawn_script(python, script, &args);
    assert!(line.starts_with("listening"), "{script} said {line:?}");
    let mut peer = Peer { child, port };
    wait_port(&mut peer);
    peer
}

/// Starts `tests/servers/<script>` with `args`; returns it and the first line it printed.
fn spawn_script(python: PathBuf, script: &str, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(python)
        .arg(repo().join("tests/servers").join(script))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line)
}

pub fn modern_http(extra: &[&str]) -> Peer {
    let python = repo().join(".deps/venv/bin/python");
    assert!(python.exists(), "run tests/install-deps.sh first");
    python_server(python, "modern_http_server.py", extra)
}

/// The same on a port of the caller's (a server started again where the last one was).
pub fn modern_http_on(port: u16, extra: &[&str]) -> Peer {
    let python = repo().join(".deps/venv/bin/python");
    assert!(python.exists(), "run tests/install-deps.sh first");
    python_server_on(port, python, "modern_http_server.py", extra)
}

pub fn fault_http() -> Peer {
    python_server("python3".into(), "http_fault_server.py", &[])
}

/// tests/servers/xaa_server.py: an IdP, an authorization server and two MCP servers (XAA).
pub fn xaa_http() -> Peer {
    let (child, line) = spawn_script("python3".into(), "xaa_server.py", &[]);
    let port = line
        .strip_prefix("PORT ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("xaa_server.py said {line:?}"));
    Peer { child, port }
}

/// tests/servers/registry_server.py: the official registry's `/v0.1/servers` over `entries`.
pub fn registry(entries: &std::path::Path) -> Peer {
    python_server(
        "python3".into(),
        "registry_server.py",
        &[entries.to_str().unwrap()],
    )
}

/// tests/servers/ws_bridge.py in front of server-everything over stdio.
pub fn everything_ws() -> Peer {
    let js =
        repo().join(".deps/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        js.exists(),
        "run tests/install-deps.sh first ({js:?} is missing)"
    );
    python_server(
        "python3".into(),
        "ws_bridge.py",
        &["node", js.to_str().unwrap(), "stdio"],
    )
}

/// tests/servers/oauth_server.py: a protected MCP server and its authorization server in one.
pub fn oauth_http() -> Peer {
    let (child, line) = spawn_script("python3".into(), "oauth_server.py", &[]);
    let port = line
        .strip_prefix("PORT ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("oauth_server.py said {line:?}"));
    Peer { child, port }
}

/// tests/servers/tls_front.py: nginx with TLS from a private CA made now, in front of
/// `upstream` (and `routes`, `prefix=host:port`); its JSON line (ports and certificate paths).
/// Dropped, it closes the script's input, which stops nginx.
pub struct TlsFront {
    child: Child,
    pub info: serde_json::Value,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn tls_front(dir: &std::path::Path, upstream: &str, routes: &[&str]) -> TlsFront {
    let mut child = Command::new("python3")
        .arg(repo().join("tests/servers/tls_front.py"))
        .arg(dir)
        .arg(upstream)
        .args(routes)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let info = serde_json::from_str(&line).unwrap_or_else(|e| {
        panic!("tls_front.py said {line:?} ({e}): is nginx installed (tests/install-deps.sh)?")
    });
    TlsFront { child, info }
}
