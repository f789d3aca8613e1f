//! Builds the C test programs in `tests/c/` against the crate's `libmcplug.so` with
//! `-std=c11 -Wall -Wextra -Wpedantic -Werror`, runs each, and fails with its output when it fails.
//! The programs land in `target/c-tests/`; run one by hand with the environment printed on failure.
//!
//! The programs talk to real peers, found in the checkout (see `peers()`); a missing peer fails
//! with the command that installs it. `MCPLUG_VALGRIND=1` also runs each program under valgrind
//! (definite leaks and memory errors fail) in a reduced mode (`MCPLUG_TEST_REDUCED=1`: 100 calls
//! instead of 1,000, time bounds ten times looser). `CC` picks the compiler (default `cc`).

#[path = "support/peers.rs"]
mod peers;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const NPM_INSTALL: &str =
    "mkdir -p .deps/npm && cd .deps/npm && echo '{\"private\":true}' > package.json && \
     npm install @modelcontextprotocol/server-everything@2026.8.31 koffi@3.3.4";
const VENV_INSTALL: &str =
    "python3 -m venv .deps/venv && .deps/venv/bin/pip install pytest mcp==2.3.0";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// This test binary is `target/<profile>/deps/c_abi-<hash>`.
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .expect("the test binary has a parent directory")
        .to_path_buf()
}

/// `target/<profile>` of this build.
fn profile_dir() -> PathBuf {
    deps_dir()
        .parent()
        .expect("deps/ has a parent directory")
        .to_path_buf()
}

/// Where this build's `libmcplug.so` is. `cargo test` builds the cdylib into `deps/` beside the
/// test binary (fresh for this very build) and only `cargo build` copies it up to
/// `target/<profile>/`, where it may be stale; so `deps/` comes first.
fn library_dir() -> PathBuf {
    for dir in [deps_dir(), profile_dir()] {
        if dir.join("libmcplug.so").exists() {
            return dir;
        }
    }
    panic!(
        "libmcplug.so is in neither {} nor {}; `cargo test` should have built the cdylib",
        deps_dir().display(),
        profile_dir().display()
    );
}

/// `target/c-tests/`: the compiled programs and their scratch files.
fn out_dir() -> PathBuf {
    let dir = profile_dir()
        .parent()
        .expect("target/ above the profile dir")
        .join("c-tests");
    std::fs::create_dir_all(dir.join("tmp")).expect("create target/c-tests/tmp");
    dir
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The environment the C programs read their peers from. Panics (with the install command)
/// when one is missing: a test that silently skips proves nothing.
fn peers() -> &'static Vec<(&'static str, PathBuf)> {
    static PEERS: OnceLock<Vec<(&'static str, PathBuf)>> = OnceLock::new();
    PEERS.get_or_init(|| {
        let root = manifest_dir();
        let node = which("node").unwrap_or_else(|| {
            panic!("`node` is not on PATH; the C tests need Node.js (20+) for server-everything")
        });
        let everything = root
            .join(".deps/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        let python = root.join(".deps/venv/bin/python");
        let npm_peer = |name: &str| {
            root.join(format!(
                ".deps/npm/node_modules/@modelcontextprotocol/{name}/dist/index.js"
            ))
        };
        let list = vec![
            ("MCPLUG_NODE", node),
            ("MCPLUG_EVERYTHING", everything),
            ("MCPLUG_PYTHON", python),
            (
                "MCPLUG_FAULT_SERVER",
                root.join("tests/servers/fault_server.py"),
            ),
            (
                "MCPLUG_MODERN_SERVER",
                root.join("tests/servers/modern_server.py"),
            ),
            (
                "MCPLUG_OAUTH_SERVER",
                root.join("tests/servers/oauth_server.py"),
            ),
            (
                "MCPLUG_NAMES_SERVER",
                root.join("tests/servers/names_server.py"),
            ),
            ("MCPLUG_FILESYSTEM", npm_peer("server-filesystem")),
            ("MCPLUG_MEMORY", npm_peer("server-memory")),
        ];
        for (name, path) in &list {
            if !path.exists() {
                let install = match *name {
                    "MCPLUG_EVERYTHING" | "MCPLUG_FILESYSTEM" | "MCPLUG_MEMORY" => {
                        format!("install it from the checkout's root:\n    {NPM_INSTALL}")
                    }
                    "MCPLUG_PYTHON" => {
                        format!("install it from the checkout's root:\n    {VENV_INSTALL}")
                    }
                    _ => "it belongs to the repository; restore it from git".to_string(),
                };
                panic!(
                    "test peer {name} is missing: {} does not exist; {install}",
                    path.display()
                );
            }
        }
        let probe = Command::new(&list[2].1)
            .args(["-c", "import mcp.server.mcpserver"])
            .output();
        match probe {
            Ok(o) if o.status.success() => {}
            _ => panic!(
                "{} cannot import mcp.server.mcpserver; install mcp 2.3.0:\n    {VENV_INSTALL}",
                list[2].1.display()
            ),
        }
        list
    })
}

/// Compiles `tests/c/<name>.c` once per test run; returns the program's path.
fn build(name: &str) -> PathBuf {
    build_with(name, false)
}

/// Compiles `tests/c/<name>.c`, with AddressSanitizer when `asan` (its runtime then watches
/// every malloc and free of the process, the library's included).
fn build_with(name: &str, asan: bool) -> PathBuf {
    let root = manifest_dir();
    let out = out_dir();
    let exe = out.join(if asan {
        format!("{name}-asan")
    } else {
        name.to_string()
    });
    // Another `cargo test` may be building the same program: write aside, then rename.
    let tmp = out.join(format!(".{name}.{}.tmp", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let lib = library_dir();
    let output = Command::new(&cc)
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Wpedantic",
            "-Werror",
            "-g",
            "-O1",
        ])
        .args(if asan {
            &["-fsanitize=address", "-fno-omit-frame-pointer"][..]
        } else {
            &[][..]
        })
        .arg("-I")
        .arg(root.join("include"))
        .arg("-I")
        .arg(root.join("tests/c"))
        .arg(root.join("tests/c").join(format!("{name}.c")))
        .arg("-o")
        .arg(&tmp)
        .arg("-L")
        .arg(&lib)
        .args(["-lmcplug", "-lpthread"])
        .output()
        .unwrap_or_else(|e| panic!("could not run the C compiler `{cc}`: {e}"));
    if !output.status.success() {
        let _ = std::fs::remove_file(&tmp);
        panic!(
            "compiling tests/c/{name}.c failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    std::fs::rename(&tmp, &exe).expect("move the compiled program into place");
    exe
}

/// Runs a command with a wall-clock bound; returns its exit code (None: killed at the bound),
/// its stdout followed by its stderr, and how long it took.
/// The checks that failed, each with the output it printed, for the head of a failure message
/// (a long log is cut from its head when shown).
fn failed_checks(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let mut failed = String::new();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("FAIL ") {
            if i > 0 && lines[i - 1].starts_with("    out:") {
                failed.push_str(&format!("\n  {}", lines[i - 1].trim()));
            }
            failed.push_str(&format!("\n  {line}"));
            if let Some(at) = lines.get(i + 1).filter(|l| l.starts_with("    at ")) {
                failed.push_str(&format!("\n  {}", at.trim()));
            }
        }
    }
    if failed.is_empty() {
        failed
    } else {
        format!("failed checks:{failed}\n\n")
    }
}

fn run_bounded(mut cmd: Command, bound: Duration) -> (Option<i32>, String, Duration) {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("could not start {cmd:?}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the C test") {
            break Some(status);
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = start.elapsed();
    let mut text = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if !err.is_empty() {
        text.push_str("--- stderr ---\n");
        text.push_str(&err);
    }
    match status {
        Some(s) => (s.code(), text, took),
        None => (
            None,
            format!(
                "{text}\n*** killed: still running after {} s ***\n",
                bound.as_secs()
            ),
            took,
        ),
    }
}

fn run(name: &str) {
    run_with(name, &[]);
}

/// Runs a C test with more environment (the URLs of servers the test started).
fn run_with(name: &str, extra: &[(&str, String)]) {
    let exe = build(name);
    let configure = |cmd: &mut Command, reduced: bool| {
        cmd.envs(extra.iter().map(|(k, v)| (*k, v.as_str())));
        cmd.env("LD_LIBRARY_PATH", library_dir())
            .env("MCPLUG_TEST_TMPDIR", out_dir().join("tmp"))
            // The default OAuth store (the needs-auth cache of a 401) under the test's folder,
            // never the user's.
            .env("XDG_STATE_HOME", out_dir().join("state"))
            .env("MCPLUG_TEST_REDUCED", if reduced { "1" } else { "0" })
            .current_dir(out_dir());
        for (var, path) in peers() {
            cmd.env(var, path);
        }
    };

    // Under MCPLUG_ASAN=1 or MCPLUG_VALGRIND=1 only those runs are made: the plain one came
    // before (tests/run.sh runs `cargo test` first), and repeating it cost CI a minute.
    let plain = std::env::var("MCPLUG_ASAN").as_deref() != Ok("1")
        && std::env::var("MCPLUG_VALGRIND").as_deref() != Ok("1");
    if plain {
        let mut cmd = Command::new(&exe);
        configure(&mut cmd, false);
        let (code, output, took) = run_bounded(cmd, Duration::from_secs(120));
        print!("{output}");
        println!("[{name}: exit {code:?} in {:.2} s]", took.as_secs_f64());
        if code != Some(0) {
            let mut again = format!(
                "LD_LIBRARY_PATH={} MCPLUG_TEST_TMPDIR={}",
                library_dir().display(),
                out_dir().join("tmp").display()
            );
            for (var, path) in peers() {
                again.push_str(&format!(" {var}={}", path.display()));
            }
            for (var, value) in extra {
                again.push_str(&format!(" {var}={value}"));
            }
            panic!("C test {name} failed (exit {code:?}).\n{}its output:\n{output}\nto run it again:\n    {again} {}", failed_checks(&output), exe.display());
        }
    }

    if std::env::var("MCPLUG_ASAN").as_deref() == Ok("1") {
        let exe = build_with(name, true);
        let mut cmd = Command::new(&exe);
        configure(&mut cmd, true);
        // Leaks are valgrind's to judge (definite ones only); here: use after free, overflows,
        // double frees, in the test and in the library alike.
        cmd.env(
            "ASAN_OPTIONS",
            "detect_leaks=0:abort_on_error=0:exitcode=98:detect_stack_use_after_return=0",
        );
        let (code, output, took) = run_bounded(cmd, Duration::from_secs(600));
        print!("{output}");
        println!(
            "[{name} under AddressSanitizer: exit {code:?} in {:.2} s]",
            took.as_secs_f64()
        );
        match code {
            Some(0) => {}
            Some(98) => panic!("AddressSanitizer found a memory error in C test {name}:\n{output}"),
            _ => panic!(
                "C test {name} failed under AddressSanitizer (exit {code:?}).\n{}its output:\n{output}",
                failed_checks(&output)
            ),
        }
    }

    // TLS records are sealed and opened by ring's AES-GCM assembly, whose writes memcheck does
    // not see: every record reads as uninitialised (a writev of one, a compare in its opening).
    // The C side of that test is the same as every other's; ASan still runs it.
    const NOT_UNDER_VALGRIND: &[&str] = &["networks"];
    if std::env::var("MCPLUG_VALGRIND").as_deref() == Ok("1") && NOT_UNDER_VALGRIND.contains(&name)
    {
        println!("[{name}: not run under valgrind: ring's assembly is opaque to memcheck]");
    } else if std::env::var("MCPLUG_VALGRIND").as_deref() == Ok("1") {
        let mut cmd = Command::new("valgrind");
        cmd.args([
            "--leak-check=full",
            "--errors-for-leak-kinds=definite",
            // Only what fails the run is printed: "possibly lost" blocks (the runtime's threads,
            // caches) buried the failed check of a CI log under thousands of lines.
            "--show-leak-kinds=definite",
            "--error-exitcode=99",
            "--quiet",
        ])
        .arg(&exe);
        configure(&mut cmd, true);
        let (code, output, took) = run_bounded(cmd, Duration::from_secs(900));
        print!("{output}");
        println!(
            "[{name} under valgrind: exit {code:?} in {:.2} s]",
            took.as_secs_f64()
        );
        match code {
            Some(0) => {}
            Some(99) => {
                panic!("valgrind found definite leaks or memory errors in C test {name}:\n{output}")
            }
            _ => panic!(
                "C test {name} failed under valgrind (exit {code:?}).\n{}its output:\n{output}",
                failed_checks(&output)
            ),
        }
    }
}

/// Issue 32, items 7 and 8: lists too big to hold (max_list_bytes) and storms of list_changed,
/// against a hostile server of the test's own.
#[test]
fn c_regress_lists() {
    let server = manifest_dir().join("tests/servers/list_storm_server.py");
    run_with(
        "regress_lists",
        &[("MCPLUG_LIST_STORM_SERVER", server.display().to_string())],
    );
}

#[test]
fn c_abi_args() {
    run("abi_args");
}

/// The library's log records as the host's: capture, pull, the descriptor, release.
#[test]
fn c_logs() {
    run("logs");
}

#[test]
fn c_everything() {
    run("everything");
}

/// The same program as c_everything, against server-everything's Streamable HTTP mode.
#[test]
fn c_everything_over_http() {
    let http = peers::everything("streamableHttp");
    run_with(
        "everything",
        &[
            ("MCPLUG_EVERYTHING_TYPE", "http".to_string()),
            (
                "MCPLUG_EVERYTHING_URL",
                format!("http://127.0.0.1:{}/mcp", http.port),
            ),
        ],
    );
}

/// The same program as c_everything, against server-everything's HTTP+SSE mode.
#[test]
fn c_everything_over_sse() {
    let sse = peers::everything("sse");
    run_with(
        "everything",
        &[
            ("MCPLUG_EVERYTHING_TYPE", "sse".to_string()),
            (
                "MCPLUG_EVERYTHING_URL",
                format!("http://127.0.0.1:{}/sse", sse.port),
            ),
        ],
    );
}

#[test]
fn c_modern() {
    run("modern");
}

#[test]
fn c_faults() {
    run("faults");
}

#[test]
fn c_concurrency() {
    run("concurrency");
}

#[test]
fn c_started() {
    run("started");
}

#[test]
fn c_host_requests() {
    run("host_requests");
}

#[test]
fn c_schemas() {
    run("schemas");
}

#[test]
fn c_remote() {
    let http = peers::everything("streamableHttp");
    let sse = peers::everything("sse");
    let modern = peers::modern_http(&[]);
    let fault = peers::fault_http();
    let url = |p: &peers::Peer, path: &str| format!("http://127.0.0.1:{}{path}", p.port);
    run_with(
        "remote",
        &[
            ("MCPLUG_HTTP_URL", url(&http, "/mcp")),
            ("MCPLUG_SSE_URL", url(&sse, "/sse")),
            ("MCPLUG_MODERN_HTTP_URL", url(&modern, "/mcp")),
            ("MCPLUG_FAULT_HTTP_URL", url(&fault, "")),
        ],
    );
}

#[test]
fn c_model_view() {
    run("model_view");
}

#[test]
fn c_manager() {
    let http = peers::everything("streamableHttp");
    let fault = peers::fault_http();
    run_with(
        "manager",
        &[
            (
                "MCPLUG_HTTP_URL",
                format!("http://127.0.0.1:{}/mcp", http.port),
            ),
            (
                "MCPLUG_FAULT_HTTP_URL",
                format!("http://127.0.0.1:{}/mcp", fault.port),
            ),
        ],
    );
}

#[test]
fn c_registry() {
    let http = peers::everything("streamableHttp");
    let url = format!("http://127.0.0.1:{}/mcp", http.port);
    let official = |status: &str, message: Option<&str>| {
        let mut m = serde_json::json!({"status": status, "updatedAt": "2026-01-01T00:00:00Z", "isLatest": true});
        if let Some(message) = message {
            m["statusMessage"] = message.into();
        }
        serde_json::json!({"io.modelcontextprotocol.registry/official": m})
    };
    let entries = serde_json::json!([
        {"server": {"name": "io.test/filler", "version": "1.0.0"}, "_meta": official("active", None)},
        {"server": {"name": "io.test/everything", "version": "1.0.0",
                    "remotes": [{"type": "streamable-http", "url": format!("{url}/")}]},
         "_meta": official("active", None)},
        {"server": {"name": "io.test/old-cli", "version": "1.0.0",
                    "packages": [{"registryType": "npm", "identifier": "@acme/old-cli",
                                  "transport": {"type": "stdio"}}]},
         "_meta": official("deprecated", Some("use io.test/new-cli"))},
    ]);
    let dir = out_dir().join("tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("entries-{}.json", std::process::id()));
    std::fs::write(&file, entries.to_string()).unwrap();
    let registry = peers::registry(&file);
    run_with(
        "registry",
        &[
            ("MCPLUG_HTTP_URL", url),
            (
                "MCPLUG_REGISTRY_URL",
                format!("http://127.0.0.1:{}", registry.port),
            ),
        ],
    );
}

#[test]
fn c_serve() {
    run("serve");
}

/// Issue 32's regressions of the configuration and the credential store: an unusable token
/// record (the connect names logout, logout removes it), a HOME that is not absolute, unknown
/// listing keys, `${VAR}` expansion bounded per merge.
#[test]
fn c_regress_config() {
    let peer = peers::oauth_http();
    run_with(
        "regress_config",
        &[(
            "MCPLUG_OAUTH_URL",
            format!("http://127.0.0.1:{}/mcp", peer.port),
        )],
    );
}

#[test]
fn c_oauth() {
    let peer = peers::oauth_http();
    run_with(
        "oauth",
        &[(
            "MCPLUG_OAUTH_URL",
            format!("http://127.0.0.1:{}/mcp", peer.port),
        )],
    );
}

#[test]
fn c_networks() {
    let http = peers::everything("streamableHttp");
    let dir = out_dir()
        .join("tmp")
        .join(format!("tls-{}", std::process::id()));
    let front = peers::tls_front(&dir, &format!("127.0.0.1:{}", http.port), &["--proxy"]);
    let s = |k: &str| match &front.info[k] {
        serde_json::Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    run_with(
        "networks",
        &[
            ("MCPLUG_TLS_HTTPS_PORT", s("https_port")),
            ("MCPLUG_TLS_MTLS_PORT", s("mtls_port")),
            ("MCPLUG_TLS_CA", s("ca")),
            ("MCPLUG_TLS_CLIENT_CERT", s("client_cert")),
            ("MCPLUG_TLS_CLIENT_KEY", s("client_key")),
            ("MCPLUG_TLS_CLIENT_KEY_ENC", s("client_key_enc")),
            ("MCPLUG_TLS_PASSPHRASE", s("passphrase")),
            ("MCPLUG_PROXY_PORT", s("proxy_port")),
            ("MCPLUG_PROXY_LOG", s("proxy_log")),
            ("MCPLUG_GUARDED_PROXY_PORT", s("guarded_proxy_port")),
            ("MCPLUG_GUARDED_PROXY_AUTH", s("guarded_proxy_auth")),
        ],
    );
}

#[test]
fn c_xaa() {
    let peer = peers::xaa_http();
    run_with(
        "xaa",
        &[("MCPLUG_XAA_BASE", format!("http://127.0.0.1:{}", peer.port))],
    );
}

#[test]
fn c_regress_auth() {
    run("regress_auth");
}

#[test]
fn c_regress_names() {
    run("regress_names");
}

#[test]
fn c_regress_fork() {
    run("regress_fork");
}

#[test]
fn every_c_test_is_run() {
    // A new tests/c/*.c must get its #[test] above.
    let known = [
        "abi_args",
        "everything",
        "modern",
        "faults",
        "concurrency",
        "started",
        "host_requests",
        "schemas",
        "remote",
        "manager",
        "model_view",
        "serve",
        "oauth",
        "logs",
        "regress_auth",
        "regress_config",
        "regress_lists",
        "regress_names",
        "regress_fork",
        "registry",
        "xaa",
        "networks",
    ];
    let dir = manifest_dir().join("tests/c");
    for entry in std::fs::read_dir(&dir).expect("read tests/c") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) == Some("c") {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            assert!(
                known.contains(&stem.as_str()),
                "tests/c/{stem}.c has no #[test] in tests/c_abi.rs"
            );
        }
    }
}
