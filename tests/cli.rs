//! The `mcplug` command line, run as a user runs it: a scratch HOME and project directory, the
//! reference server (server-everything over stdio) and the OAuth test server, the files checked
//! as Claude Code reads them (`~/.claude.json` `mcpServers` / `projects[<dir>]`, `.mcp.json`).

#[path = "support/peers.rs"]
mod peers;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Scratch {
    root: PathBuf,
    home: PathBuf,
    project: PathBuf,
}

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let root = std::env::temp_dir().join(format!("mcplug-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (home, project) = (root.join("home"), root.join("project"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        // The path Claude Code keys `projects` by: the directory as the process sees it.
        let project = project.canonicalize().unwrap();
        Scratch {
            root,
            home,
            project,
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mcplug"));
        c.args(args)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env_remove("XDG_STATE_HOME")
            .env_remove("MCPLUG_LOG")
            .env_remove("BROWSER");
        c
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out: Output = self.cmd(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs a command that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(
            code, 0,
            "mcplug {args:?} exited {code}\nstdout: {out}\nstderr: {err}"
        );
        out
    }

    fn json(&self, file: &Path) -> Value {
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn everything_js() -> String {
    let js = peers::repo()
        .join(".deps/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        js.exists(),
        "run tests/install-deps.sh first ({js:?} is missing)"
    );
    js.display().to_string()
}

#[test]
fn add_list_get_tools_call_remove_against_the_reference_server() {
    let s = Scratch::new("main");
    let js = everything_js();
    let out = s.ok(&[
        "add", "--scope", "user", "-e", "MARK=m-7", "ev", "--", "node", &js, "stdio",
    ]);
    assert!(out.contains("Added stdio MCP server ev"), "{out}");
    // The entry Claude Code writes for that command line, where Claude Code reads user servers.
    let written = s.json(&s.home.join(".claude.json"));
    assert_eq!(
        written["mcpServers"]["ev"],
        json!({"type": "stdio", "command": "node", "args": [js, "stdio"], "env": {"MARK": "m-7"}})
    );

    let out = s.ok(&["list"]);
    assert!(
        out.contains("ev: node ") && out.contains("✓ Connected"),
        "{out}"
    );
    let listed: Value = serde_json::from_str(&s.ok(&["list", "--json"])).unwrap();
    assert_eq!(listed["servers"][0]["name"], "ev");
    assert_eq!(listed["servers"][0]["state"], "connected");
    assert_eq!(listed["servers"][0]["scope"], "user");

    let out = s.ok(&["get", "ev"]);
    assert!(
        out.contains("Scope: User config") && out.contains("Status: ✓ Connected"),
        "{out}"
    );
    // An environment value is a secret as often as not: named, not shown.
    assert!(out.contains("MARK=…") && !out.contains("m-7"), "{out}");

    let out = s.ok(&["tools", "ev"]);
    assert!(
        out.lines().any(|l| l.starts_with("mcp__ev__echo  Echoes")),
        "{out}"
    );

    assert_eq!(
        s.ok(&["call", "ev", "echo", r#"{"message": "hi there"}"#]),
        "Echo: hi there\n"
    );
    // The environment reached the server.
    assert!(s.ok(&["call", "ev", "get-env"]).contains("m-7"));
    // --json: the raw result, its structuredContent checked against the tool's outputSchema.
    let r: Value = serde_json::from_str(&s.ok(&[
        "call",
        "ev",
        "get-structured-content",
        r#"{"location": "New York"}"#,
        "--json",
    ]))
    .unwrap();
    assert!(r["structuredContent"]["temperature"].is_number(), "{r}");

    let (code, _, err) = s.run(&["call", "ev", "no-such-tool"]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("has no tool \"no-such-tool\"") && err.contains("echo"),
        "{err}"
    );

    let out = s.ok(&["remove", "ev"]);
    assert!(
        out.contains("Removed MCP server ev from user config"),
        "{out}"
    );
    assert_eq!(
        s.json(&s.home.join(".claude.json"))["mcpServers"],
        json!({})
    );
    let (code, _, err) = s.run(&["get", "ev"]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(
        s.ok(&["list"]),
        "No MCP servers configured. Use `mcplug add` to add a server.\n"
    );
}

#[test]
fn scopes_are_claude_codes_files_and_project_servers_wait_for_approval() {
    let s = Scratch::new("scopes");
    let js = everything_js();
    s.ok(&["add", "ev", "--", "node", &js, "stdio"]); // local: the default scope
    s.ok(&[
        "add-json",
        "-s",
        "project",
        "shared",
        r#"{"command": "node", "args": ["x.js"]}"#,
    ]);
    s.ok(&[
        "add",
        "-s",
        "user",
        "-t",
        "http",
        "-H",
        "Authorization: Bearer tok-9",
        "ev2",
        "http://127.0.0.1:9/mcp",
    ]);
    let home = s.json(&s.home.join(".claude.json"));
    let dir = s.project.display().to_string();
    assert_eq!(
        home["projects"][&dir]["mcpServers"]["ev"]["command"],
        "node"
    );
    assert_eq!(
        home["mcpServers"]["ev2"],
        json!({"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer tok-9"}})
    );
    assert_eq!(
        s.json(&s.project.join(".mcp.json"))["mcpServers"]["shared"]["args"],
        json!(["x.js"])
    );

    // One failed server makes the exit status 1; the project server is not started at all.
    let (code, out, _) = s.run(&["list"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("ev: node") && out.contains("✓ Connected"),
        "{out}"
    );
    assert!(
        out.contains("ev2: http://127.0.0.1:9/mcp (HTTP) - ✗ Failed to connect: "),
        "{out}"
    );
    assert!(
        out.contains("shared: (project .mcp.json) - ⏸ Pending approval"),
        "{out}"
    );
    assert!(!out.contains("tok-9"), "{out}");
    let out = s.ok(&["explain"]);
    assert!(
        out.contains("✗ shared — project scope") && out.contains("pending_approval"),
        "{out}"
    );

    // A name in two scopes is removed only from the one named.
    s.ok(&["add", "-s", "user", "ev", "--", "node", &js, "stdio"]);
    let (code, _, err) = s.run(&["remove", "ev"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("more than one scope (local, user)"), "{err}");
    s.ok(&["remove", "ev", "--scope", "local"]);
    assert!(s.json(&s.home.join(".claude.json"))["mcpServers"]["ev"].is_object());
    // The same name again in the same scope is refused, and the file is left as it was.
    let before = std::fs::read_to_string(s.home.join(".claude.json")).unwrap();
    let (code, _, err) = s.run(&["add", "-s", "user", "ev", "--", "other"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("already has a server named \"ev\""), "{err}");
    assert_eq!(
        std::fs::read_to_string(s.home.join(".claude.json")).unwrap(),
        before
    );
}

#[test]
fn approve_reject_and_reset_write_what_claude_codes_dialog_writes() {
    let s = Scratch::new("approve");
    let js = everything_js();
    s.ok(&["add", "-s", "project", "ev", "--", "node", &js, "stdio"]);
    s.ok(&[
        "add-json",
        "-s",
        "project",
        "other",
        r#"{"command": "node", "args": ["x.js"]}"#,
    ]);
    let (_, out, _) = s.run(&["list"]);
    assert!(
        out.contains("ev: (project .mcp.json) - ⏸ Pending approval"),
        "{out}"
    );

    let out = s.ok(&["approve", "ev"]);
    assert!(out.contains("Approved project MCP server ev"), "{out}");
    let settings = s.project.join(".claude/settings.local.json");
    assert_eq!(s.json(&settings)["enabledMcpjsonServers"], json!(["ev"]));
    let (_, out, _) = s.run(&["list"]);
    assert!(
        out.contains("ev: node") && out.contains("✓ Connected"),
        "approved, it connects: {out}"
    );

    s.ok(&["reject", "other"]);
    assert_eq!(
        s.json(&settings)["disabledMcpjsonServers"],
        json!(["other"])
    );
    let out = s.ok(&["explain"]);
    assert!(out.contains("rejected"), "{out}");
    s.ok(&["approve", "--all", "other"]);
    let v = s.json(&settings);
    assert_eq!(v["enabledMcpjsonServers"], json!(["ev", "other"]));
    assert_eq!(v["disabledMcpjsonServers"], json!([]));
    assert_eq!(v["enableAllProjectMcpServers"], true);

    let (code, _, err) = s.run(&["approve", "nosuch"]);
    assert_eq!(code, 3, "not_found: {err}");
    assert!(
        err.contains("no project (.mcp.json) server named \"nosuch\"") && err.contains("ev, other"),
        "{err}"
    );

    let out = s.ok(&["reset-project-choices"]);
    assert!(out.contains("have been reset"), "{out}");
    assert_eq!(s.json(&settings), json!({}));
    let (_, out, _) = s.run(&["list"]);
    assert!(
        out.contains("ev: (project .mcp.json) - ⏸ Pending approval"),
        "{out}"
    );
}

#[test]
fn add_from_claude_desktop_imports_its_servers_as_claude_code_does() {
    let s = Scratch::new("desktop");
    let js = everything_js();
    let (code, _, err) = s.run(&["add-from-claude-desktop"]);
    assert_eq!(code, 3, "no Claude Desktop file: not found: {err}");
    assert!(err.contains("no Claude Desktop configuration at"), "{err}");
    let dir = s.home.join(".config/Claude");
    std::fs::create_dir_all(&dir).unwrap();
    let desktop = json!({"mcpServers": {
        "everything": {"command": "node", "args": [js, "stdio"]},
        "notes": {"command": "node", "args": ["notes.js"]},
        "broken": {"command": ""},
    }, "globalShortcut": "Ctrl+Space"});
    std::fs::write(dir.join("claude_desktop_config.json"), desktop.to_string()).unwrap();
    s.ok(&["add", "notes", "--", "other"]); // the name is taken in the local scope
    let (code, out, err) = s.run(&["add-from-claude-desktop"]);
    assert_eq!(code, 1, "one entry was skipped: {out}{err}");
    assert!(out.contains("Added 2 MCP server(s) from Claude Desktop to local config: everything, notes (as notes_1)"), "{out}");
    assert!(
        err.contains("Skipped broken:") && err.contains("`command` must not be empty"),
        "{err}"
    );
    let home = s.json(&s.home.join(".claude.json"));
    let local = &home["projects"][s.project.display().to_string()]["mcpServers"];
    assert_eq!(
        local["notes"]["command"], "other",
        "the existing entry is kept"
    );
    assert_eq!(local["notes_1"]["args"], json!(["notes.js"]));
    let out = s.ok(&["tools", "everything"]);
    assert!(
        out.contains("mcp__everything__echo"),
        "the imported server connects: {out}"
    );
    let out = s.ok(&["add-from-claude-desktop", "-s", "user", "everything"]);
    assert!(
        out.contains("Added 1 MCP server(s) from Claude Desktop to user config: everything"),
        "{out}"
    );
    let (code, _, err) = s.run(&["add-from-claude-desktop", "nosuch"]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("no MCP server named \"nosuch\"") && err.contains("everything, notes, broken"),
        "{err}"
    );
}

#[test]
fn mcp_config_files_add_servers_to_every_verb_and_the_policy_applies_to_them() {
    let s = Scratch::new("mcpconfig");
    let js = everything_js();
    s.ok(&["add", "--scope", "user", "mine", "--", "node", &js, "stdio"]);
    // The user's settings deny one server by name: Claude Code applies that to --mcp-config too.
    std::fs::create_dir_all(s.home.join(".claude")).unwrap();
    std::fs::write(
        s.home.join(".claude/settings.json"),
        json!({"deniedMcpServers": [{"serverName": "bad"}]}).to_string(),
    )
    .unwrap();
    let file = s.root.join("servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {
            "given": {"command": "node", "args": [js, "stdio"]},
            "bad": {"command": "node", "args": [js, "stdio"]},
        }})
        .to_string(),
    )
    .unwrap();
    let f = file.display().to_string();
    let names = |v: &Value| -> Vec<String> {
        let mut n: Vec<String> = v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect();
        n.sort();
        n
    };
    let listed: Value =
        serde_json::from_str(&s.ok(&["list", "--json", "--mcp-config", &f])).unwrap();
    assert_eq!(names(&listed), ["given", "mine"], "{listed}");
    let listed: Value =
        serde_json::from_str(&s.ok(&["--strict-mcp-config", "--mcp-config", &f, "list", "--json"]))
            .unwrap();
    assert_eq!(
        names(&listed),
        ["given"],
        "strict: no configured server: {listed}"
    );
    let explained: Value = serde_json::from_str(&s.ok(&[
        "explain",
        "--json",
        "--strict-mcp-config",
        "--mcp-config",
        &f,
    ]))
    .unwrap();
    let bad = explained["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "bad")
        .unwrap_or_else(|| panic!("bad is excluded: {explained}"));
    assert_eq!(bad["reason"], "denied", "{bad}");
    assert!(s
        .ok(&["tools", "given", "--mcp-config", &f, "--strict-mcp-config"])
        .contains("mcp__given__echo"));
    let (code, _, err) = s.run(&["call", "bad", "echo", "--mcp-config", &f]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("left out") && err.contains("deniedMcpServers"),
        "{err}"
    );
    let (code, _, err) = s.run(&["tools", "mine", "--strict-mcp-config", "--mcp-config", &f]);
    assert_eq!(code, 3, "strict leaves the user's server out: {err}");
    for (args, says) in [
        (
            vec!["list", "--strict-mcp-config"],
            "needs at least one --mcp-config",
        ),
        (
            vec!["list", "--mcp-config", "/nonexistent.json"],
            "cannot be read",
        ),
        (vec!["list", "--mcp-config", &js], "not JSON"),
    ] {
        let (code, _, err) = s.run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn list_marks_the_servers_a_registry_knows() {
    let s = Scratch::new("registry");
    let js = everything_js();
    let dead = peers::free_port();
    let api = format!("http://127.0.0.1:{dead}/mcp");
    s.ok(&["add", "--scope", "user", "ev", "--", "node", &js, "stdio"]);
    s.ok(&["add", "--scope", "user", "-t", "http", "api", &api]);
    let official = json!({"io.modelcontextprotocol.registry/official": {
        "status": "deprecated", "statusMessage": "moved to io.test/api2",
        "updatedAt": "2026-01-01T00:00:00Z"}});
    let entries = s.root.join("entries.json");
    std::fs::write(
        &entries,
        json!([{"server": {"name": "io.test/api", "version": "2.0.0",
                           "remotes": [{"type": "streamable-http", "url": format!("HTTP://127.0.0.1:{dead}/mcp/")}]},
                "_meta": official}])
        .to_string(),
    )
    .unwrap();
    let registry = peers::registry(&entries);
    let url = format!("http://127.0.0.1:{}", registry.port);
    let flag = format!("--registry={url}");
    let mut cmd = s.cmd(&["list", &flag]);
    cmd.env("XDG_CACHE_HOME", s.root.join("cache"))
        .env_remove("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC");
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "api cannot connect: {text}");
    let api_line = text.lines().find(|l| l.starts_with("api:")).unwrap();
    assert!(
        api_line.ends_with("· registry: io.test/api (deprecated: moved to io.test/api2)"),
        "{text}"
    );
    let ev_line = text.lines().find(|l| l.starts_with("ev:")).unwrap();
    assert!(!ev_line.contains("registry"), "{text}");
    let mut cmd = s.cmd(&["list", "--json", &flag]);
    cmd.env("XDG_CACHE_HOME", s.root.join("cache"));
    let listed: Value = serde_json::from_slice(&cmd.output().unwrap().stdout).unwrap();
    assert_eq!(listed["registry"]["state"], "ready", "{listed}");
    let row = listed["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "api")
        .unwrap();
    assert_eq!(row["registry"]["name"], "io.test/api");
    assert_eq!(row["registry"]["match"], "url");
    // Without the flag, no mark and no request.
    let (code, plain, _) = s.run(&["list", "--json"]);
    assert_eq!(code, 1);
    assert!(!plain.contains("\"registry\""), "{plain}");
    let (code, _, err) = s.run(&["list", "--registry=ftp://x"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--registry must be an http(s) URL"), "{err}");
}

#[test]
fn get_shows_a_remote_servers_proxy_and_trust() {
    let s = Scratch::new("route");
    let dead = peers::free_port();
    let entry = json!({"type": "http", "url": format!("https://127.0.0.1:{dead}/mcp"),
                       "proxy": format!("http://alice:s3cret@127.0.0.1:{dead}")});
    s.ok(&["add-json", "-s", "user", "corp", &entry.to_string()]);
    let (code, out, _) = s.run(&["get", "corp", "--timeout", "5"]);
    assert_eq!(code, 1, "the proxy is down: {out}");
    assert!(
        out.contains(&format!("Network: through the proxy http://127.0.0.1:{dead} (proxies from the server's `proxy`)")),
        "{out}"
    );
    assert!(out.contains("Trusted: "), "{out}");
    assert!(
        !out.contains("s3cret"),
        "credentials are never shown: {out}"
    );
    let (_, json_out, _) = s.run(&["get", "corp", "--json", "--timeout", "5"]);
    let v: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(v["network"]["proxy"], format!("http://127.0.0.1:{dead}"));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("through the proxy"),
        "{v}"
    );
}

#[test]
fn bad_input_is_a_usage_error_naming_what_was_wrong() {
    let s = Scratch::new("usage");
    let cases: &[(&[&str], &str)] = &[
        (
            &["add", "-t", "http", "-e", "A=1", "x", "https://h/mcp"],
            "-e sets a stdio server's environment",
        ),
        (
            &["add", "-H", "A: 1", "x", "cmd"],
            "-H sets a remote server's headers",
        ),
        (&["add", "-e", "NOEQUALS", "x", "cmd"], "KEY=VALUE"),
        (&["add-json", "x", "{nope"], "not JSON"),
        (&["add-json", "x", "[1]"], "must be a JSON object"),
        (&["add-json", "bad name!", r#"{"command": "c"}"#], "name"),
        (&["add-json", "x", r#"{"type": "http"}"#], "url"),
        (&["call", "x", "t", "[1]"], "must be a JSON object"),
        (&["--timeout", "0", "list"], "--timeout"),
        (&["frobnicate"], "unrecognized subcommand"),
    ];
    for (args, says) in cases {
        let (code, _, err) = s.run(args);
        assert_eq!(code, 2, "mcplug {args:?}: {err}");
        assert!(
            err.contains(says),
            "mcplug {args:?} said {err:?}, not {says:?}"
        );
    }
    assert!(!s.home.join(".claude.json").exists());
    for verb in [
        "list", "get", "add", "add-json", "remove", "login", "logout", "tools", "call", "explain",
    ] {
        let out = s.ok(&[verb, "--help"]);
        assert!(out.contains("Usage: mcplug"), "{verb} --help: {out}");
    }
    assert!(s.ok(&["--help"]).contains("Exit status: 0 success"));
}

#[test]
fn login_through_the_browser_then_call_then_logout() {
    let s = Scratch::new("login");
    let peer = peers::oauth_http();
    let url = format!("http://127.0.0.1:{}/mcp", peer.port);
    s.ok(&["add", "-s", "user", "-t", "http", "srv", &url]);
    let (code, out, _) = s.run(&["list"]);
    assert_eq!(code, 4, "{out}");
    assert!(
        out.contains("⚠ Needs authentication (mcplug login srv)"),
        "{out}"
    );
    let (code, _, err) = s.run(&["call", "srv", "whoami"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("mcplug login srv"), "{err}");

    // The "browser": follows the authorization server's redirect back to the loopback listener.
    let browser = s.root.join("browser.py");
    std::fs::write(
        &browser,
        "import sys, urllib.request\n\
         class Stop(urllib.request.HTTPRedirectHandler):\n\
         \x20   def redirect_request(self, *a): return None\n\
         opener = urllib.request.build_opener(Stop)\n\
         try:\n\
         \x20   opener.open(sys.argv[1], timeout=10)\n\
         except urllib.error.HTTPError as e:\n\
         \x20   urllib.request.urlopen(e.headers['Location'], timeout=10).read()\n",
    )
    .unwrap();
    let out = s
        .cmd(&["login", "srv"])
        .env("BROWSER", format!("python3 {}", browser.display()))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "login: {stdout}\n{stderr}");
    assert!(stdout.contains("✓ Authenticated srv"), "{stdout}");
    assert!(stderr.contains("If it does not open, visit:"), "{stderr}");
    // The tokens are in the library's default store under this HOME, private to the user.
    let store = s.home.join(".local/state/mcplug/auth");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&store).unwrap().permissions().mode() & 0o777,
        0o700
    );

    assert_eq!(s.ok(&["call", "srv", "whoami"]), "ok\n");
    assert!(s.ok(&["list"]).contains("srv: "));
    assert!(s
        .ok(&["logout", "srv"])
        .contains("Removed the stored credentials of srv"));
    assert!(s
        .ok(&["logout", "srv"])
        .contains("No stored credentials for srv"));
    let (code, _, _) = s.run(&["list"]);
    assert_eq!(code, 4);
    let (code, _, err) = s.run(&["login", "nope"]);
    assert_eq!(code, 3, "{err}");
}

/// An empty or relative HOME is no home: the working directory's `.claude.json` is not the
/// user's file, so its servers are not run by `list` nor found by the verbs that edit the user's
/// scope (the password database's home is used instead, as the token store does).
#[test]
fn a_home_that_is_not_absolute_is_ignored() {
    let s = Scratch::new("relhome");
    let marker = s.root.join("planted-ran");
    let planted = format!("planted-{}", std::process::id());
    let user_file = json!({"mcpServers": {planted.as_str(): {
        "command": "sh", "args": ["-c", format!("touch {}", marker.display())]
    }}});
    let text = serde_json::to_string_pretty(&user_file).unwrap();
    // HOME="" and HOME="." both name the working directory when taken as a path; "rel" a
    // directory below it.
    std::fs::write(s.project.join(".claude.json"), &text).unwrap();
    std::fs::create_dir_all(s.project.join("rel")).unwrap();
    std::fs::write(s.project.join("rel/.claude.json"), &text).unwrap();
    for home in ["", ".", "rel"] {
        let run = |args: &[&str]| {
            let out = s.cmd(args).env("HOME", home).output().unwrap();
            (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let (_, out, err) = run(&["list"]);
        assert!(
            !out.contains(&planted) && !err.contains(&planted),
            "HOME={home:?}: list showed the working directory's server\n{out}\n{err}"
        );
        let (code, _, err) = run(&["get", &planted]);
        assert_eq!(
            code, 3,
            "HOME={home:?}: get found the planted server: {err}"
        );
        // `remove -s user` must not edit the working directory's file as the user's.
        let (code, _, err) = run(&["remove", "-s", "user", &planted]);
        assert_ne!(code, 0, "HOME={home:?}: remove -s user succeeded: {err}");
        assert!(
            !marker.exists(),
            "HOME={home:?}: the planted server was run"
        );
    }
    assert_eq!(
        std::fs::read_to_string(s.project.join(".claude.json")).unwrap(),
        text
    );
    assert_eq!(
        std::fs::read_to_string(s.project.join("rel/.claude.json")).unwrap(),
        text
    );
}

/// `list` fails (exit 1) when `~/.claude.json` cannot be used, as `explain` does, saying why —
/// also with `--json` — instead of showing the other servers as if that was all.
#[test]
fn list_fails_when_the_user_file_cannot_be_read() {
    let s = Scratch::new("unreadable");
    let file = s.home.join(".claude.json");
    let plant = |what: &str| match what {
        "a directory" => std::fs::create_dir(&file).unwrap(),
        "over the size limit" => {
            let f = std::fs::File::create(&file).unwrap();
            f.set_len((64 << 20) + 1).unwrap();
        }
        "malformed" => std::fs::write(&file, "{\"mcpServers\": {").unwrap(),
        other => unreachable!("{other}"),
    };
    let cases = [
        ("a directory", "not a regular file"),
        ("over the size limit", "bytes"),
        ("malformed", ""),
    ];
    for (what, says) in cases {
        let _ = std::fs::remove_dir_all(&file);
        let _ = std::fs::remove_file(&file);
        plant(what);
        let (code, _, err) = s.run(&["list"]);
        assert_eq!(code, 1, "{what}: list exited {code}: {err}");
        assert!(
            err.contains(".claude.json") && err.contains(says),
            "{what}: {err}"
        );
        let (code, out, _) = s.run(&["--json", "list"]);
        assert_eq!(code, 1, "{what}: list --json exited {code}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert!(
            v["errors"][0]["file"]
                .as_str()
                .is_some_and(|f| f.ends_with(".claude.json")),
            "{what}: {v}"
        );
        let (code, _, _) = s.run(&["explain"]);
        assert_eq!(code, 1, "{what}: explain exited {code}");
    }
}

/// Control characters a person's terminal would act on: every one but newline and tab.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect()
}

/// Issue 32, item 9: a server (and a configuration) whose names, descriptions, errors and tool
/// output carry ESC sequences (OSC 0 retitles, OSC 52 writes the clipboard, CSI 2J clears), a CR
/// that overwrites the line, C1 CSI and DEL: nothing the command line prints carries one raw —
/// stdout and stderr, text and `--json` — and a tool's output keeps its newlines and tabs.
#[test]
fn nothing_a_server_or_config_says_reaches_the_terminal_raw() {
    let s = Scratch::new("terminal");
    let python = peers::repo().join(".deps/venv/bin/python");
    let server = peers::repo().join("tests/servers/terminal_server.py");
    let hostile_arg = "\u{1b}]0;from-config\u{7}\r\u{9b}2J";
    let entry = |mode: &str| json!({"type": "stdio", "command": python, "args": [server, mode, hostile_arg]});
    std::fs::write(
        s.home.join(".claude.json"),
        json!({"mcpServers": {"evil": entry("ok"), "broken": entry("fail-init")}}).to_string(),
    )
    .unwrap();
    let runs: &[&[&str]] = &[
        &["list"],
        &["list", "--json"],
        &["get", "evil"],
        &["get", "broken"],
        &["tools"],
        &["tools", "evil", "--json"],
        &["call", "evil", "show"],
        &["call", "evil", "show", "--json"],
        &["call", "evil", "nosuch"],
        &["call", "broken", "show"],
        &["explain"],
        &["explain", "--json"],
    ];
    let mut seen = String::new();
    for args in runs {
        let (code, out, err) = s.run(args);
        assert!(
            raw_controls(&out).is_empty() && raw_controls(&err).is_empty(),
            "mcplug {args:?} (exit {code}) printed raw controls {:?} / {:?}\nstdout: {out:?}\nstderr: {err:?}",
            raw_controls(&out),
            raw_controls(&err)
        );
        if args.contains(&"--json") {
            let doc: Value = serde_json::from_str(&out)
                .unwrap_or_else(|e| panic!("mcplug {args:?}: --json is not JSON ({e}): {out}"));
            seen.push_str(&doc.to_string());
        }
        seen.push_str(&out);
        seen.push_str(&err);
    }
    // The texts are there, shown escaped (text), or as JSON escapes that read back the same.
    assert!(seen.contains("evil\\u{1b}]0;pwned\\u{7}"), "{seen}");
    assert!(
        seen.contains("\\u{d}OVERWRITTEN\\u{9b}31m\\u{7f}"),
        "{seen}"
    );
    assert!(seen.contains("from-config"), "{seen}");
    assert!(
        seen.contains("refused\\u{d}"),
        "the failing server's error: {seen}"
    );
    // A tool's output keeps its lines and tabs.
    let out = s.ok(&["call", "evil", "show"]);
    assert!(
        out.starts_with("line1\n\tindented \\u{1b}]0;pwned"),
        "{out:?}"
    );
    assert!(out.ends_with("\nlast\n"), "{out:?}");
    let doc: Value = serde_json::from_str(&s.ok(&["call", "evil", "show", "--json"])).unwrap();
    assert!(
        doc["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}[2J\rOVERWRITTEN\u{9b}31m\u{7f}"),
        "--json keeps the server's text exactly: {doc}"
    );
}

/// Issue 32, item 9: `MCPLUG_LOG` records carry a server's text (a refused handshake's message)
/// escaped: one line each, no CR or ESC a terminal would act on.
#[test]
fn log_records_on_stderr_carry_a_servers_text_escaped() {
    let s = Scratch::new("terminal-log");
    let python = peers::repo().join(".deps/venv/bin/python");
    let server = peers::repo().join("tests/servers/terminal_server.py");
    std::fs::write(
        s.home.join(".claude.json"),
        json!({"mcpServers": {"broken": {"command": python, "args": [server, "fail-init"]},
                              "evil": {"command": python, "args": [server]}}})
        .to_string(),
    )
    .unwrap();
    let out = s
        .cmd(&["list"])
        .env("MCPLUG_LOG", "debug,mcplug::wire=trace")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("connect failed") && err.contains("refused\\u{d}"),
        "the server's message is logged, escaped: {err}"
    );
    assert!(
        raw_controls(&err).is_empty(),
        "raw controls {:?} in the log:\n{err:?}",
        raw_controls(&err)
    );
    for line in err.lines() {
        assert!(
            !line.starts_with("OVERWRITTEN") && !line.starts_with("\\"),
            "a record's text began a line of its own: {line:?}"
        );
    }
}
