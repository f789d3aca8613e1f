//! Discovery and editing on real files: a temporary home, project and managed directory per test,
//! written the way each host writes them.

use mcplug::config::{add_server, discover, remove_server};
use serde_json::{json, Value};
use std::path::PathBuf;

struct Tree {
    root: PathBuf,
}

impl Tree {
    fn new(tag: &str) -> Tree {
        let root = std::env::temp_dir().join(format!("mcplug-config-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for d in ["home", "repo/sub/dir", "managed"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        Tree { root }
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
    fn write(&self, rel: &str, text: &str) {
        let p = self.p(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    fn s(&self, rel: &str) -> String {
        self.p(rel).display().to_string()
    }
    fn options(&self, extra: Value) -> Value {
        let mut o = json!({"home": self.s("home"), "cwd": self.s("repo/sub/dir"),
                           "managed_dir": self.s("managed"), "env": {"TOKEN": "t0k"}});
        for (k, v) in extra.as_object().unwrap() {
            o[k] = v.clone();
        }
        o
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn names(r: &Value) -> Vec<String> {
    let mut n: Vec<String> = r["servers"].as_object().unwrap().keys().cloned().collect();
    n.sort();
    n
}

fn excluded<'a>(r: &'a Value, name: &str) -> Vec<&'a Value> {
    r["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == name)
        .collect()
}

#[test]
fn claude_code_files_scopes_and_approval() {
    let t = Tree::new("cc");
    let cwd = t.s("repo/sub/dir");
    t.write(
        "home/.claude.json",
        &serde_json::to_string_pretty(&json!({
            "numStartups": 3,
            "mcpServers": {"gh": {"command": "user-gh"}, "u": {"type": "http", "url": "https://u.example/mcp",
                           "headers": {"Authorization": "Bearer ${TOKEN}"}}},
            "projects": {cwd.clone(): {"mcpServers": {"gh": {"command": "local-gh"}},
                                       "enabledMcpjsonServers": ["near"]}}
        }))
        .unwrap(),
    );
    t.write(
        "repo/.mcp.json",
        r#"{"mcpServers": {"far": {"command": "far"}, "near": {"command": "far-version"}}}"#,
    );
    t.write(
        "repo/sub/dir/.mcp.json",
        r#"{"mcpServers": {"near": {"command": "near"}}}"#,
    );
    t.write(
        "repo/sub/dir/.claude/settings.local.json",
        r#"{"mcpServers": {"sl": {"command": "sl"}}, "deniedMcpServers": [{"serverName": "u2"}]}"#,
    );
    // A repository's shared settings may not approve its own servers.
    t.write(
        "repo/sub/dir/.claude/settings.json",
        r#"{"enableAllProjectMcpServers": true, "enabledMcpjsonServers": ["far"]}"#,
    );
    let r = discover(&t.options(json!({}))).unwrap();
    assert_eq!(names(&r), ["gh", "near", "sl", "u"], "{r:#}");
    assert_eq!(r["servers"]["gh"]["scope"], "local");
    assert_eq!(r["servers"]["gh"]["config"], json!({"command": "local-gh"}));
    assert_eq!(
        r["servers"]["near"]["config"],
        json!({"command": "near"}),
        "the closest .mcp.json wins"
    );
    assert_eq!(
        r["servers"]["u"]["config"]["headers"]["Authorization"],
        "Bearer t0k"
    );
    assert_eq!(excluded(&r, "far")[0]["reason"], "pending_approval");
    let shadowed = excluded(&r, "near");
    assert_eq!(shadowed[0]["reason"], "shadowed");
    assert_eq!(shadowed[0]["file"], t.s("repo/.mcp.json"));
    assert_eq!(
        excluded(&r, "gh")[0]["by"]["file"],
        t.s("home/.claude.json")
    );
    assert!(r["errors"].as_array().unwrap().is_empty(), "{r:#}");
    let files: Vec<&str> = r["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert!(files.contains(&t.s("repo/.mcp.json").as_str()), "{files:?}");
}

#[test]
fn managed_file_is_exclusive_and_managed_policy_applies() {
    let t = Tree::new("managed");
    t.write(
        "home/.claude.json",
        r#"{"mcpServers": {"u": {"command": "u"}}}"#,
    );
    t.write("managed/managed-mcp.json", r#"{"mcpServers": {"corp": {"type": "http", "url": "https://corp.example.com/mcp"}, "bad": {"type": "http", "url": "https://evil.example.net/mcp"}}}"#);
    t.write(
        "managed/managed-settings.json",
        r#"{"allowedMcpServers": [{"serverUrl": "https://*.example.com"}]}"#,
    );
    let r = discover(&t.options(json!({}))).unwrap();
    assert_eq!(names(&r), ["corp"]);
    assert_eq!(excluded(&r, "u")[0]["reason"], "enterprise_exclusive");
    assert_eq!(excluded(&r, "bad")[0]["reason"], "not_allowed");
    // An unreadable managed policy fails closed.
    t.write("managed/managed-settings.json", "{\"allowedMcpServers\": [");
    let e = discover(&t.options(json!({}))).unwrap_err();
    assert_eq!(e.kind.as_str(), "config");
    assert!(e.message.contains("managed-settings.json:1:"), "{e}");
}

#[test]
fn strict_mcp_config_takes_only_the_given_servers_under_the_policy() {
    let t = Tree::new("strict");
    t.write(
        "home/.claude.json",
        r#"{"mcpServers": {"u": {"command": "u"}}}"#,
    );
    t.write(
        "repo/.mcp.json",
        r#"{"mcpServers": {"p": {"command": "p"}}}"#,
    );
    t.write(
        "home/.claude/settings.json",
        r#"{"deniedMcpServers": [{"serverCommand": ["bad"]}]}"#,
    );
    let given = json!({"mcpServers": {"g": {"command": "g"}, "b": {"command": "bad"}}});
    let r = discover(&t.options(json!({"dynamic": given, "strict_mcp_config": true}))).unwrap();
    assert_eq!(names(&r), ["g"], "{r:#}");
    assert_eq!(excluded(&r, "b")[0]["reason"], "denied");
    assert!(
        excluded(&r, "u").is_empty() && excluded(&r, "p").is_empty(),
        "{r:#}"
    );
    let r = discover(&t.options(json!({"dynamic": given}))).unwrap();
    assert_eq!(names(&r), ["g", "u"], "{r:#}");
    // The managed file still rules alone.
    t.write(
        "managed/managed-mcp.json",
        r#"{"mcpServers": {"corp": {"command": "corp"}}}"#,
    );
    let r = discover(&t.options(json!({"dynamic": given, "strict_mcp_config": true}))).unwrap();
    assert_eq!(names(&r), ["corp"], "{r:#}");
    assert_eq!(excluded(&r, "g")[0]["reason"], "enterprise_exclusive");
    let e = discover(&t.options(json!({"strict_mcp_config": "yes"}))).unwrap_err();
    assert!(
        e.message
            .contains("`strict_mcp_config` must be true or false"),
        "{e}"
    );
}

#[test]
fn malformed_file_names_file_line_column_and_the_rest_merges() {
    let t = Tree::new("malformed");
    t.write(
        "home/.claude.json",
        r#"{"mcpServers": {"u": {"command": "u"}}}"#,
    );
    t.write(
        "repo/.mcp.json",
        "{\n  \"mcpServers\": {\n    \"p\": {\"command\": \"p\"\n  }\n}\n",
    );
    t.write("repo/sub/dir/.mcp.json", "{\"mcpServers\": {\"bad\": {\"type\": \"tcp\", \"url\": \"x\"}, \"ok\": {\"command\": \"ok\"}}}");
    let r =
        discover(&t.options(json!({"settings": {"enableAllProjectMcpServers": true}}))).unwrap();
    assert_eq!(names(&r), ["ok", "u"]);
    let errors = r["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{r:#}");
    assert_eq!(errors[0]["file"], t.s("repo/.mcp.json"));
    assert_eq!(
        (errors[0]["line"].as_u64(), errors[0]["column"].as_u64()),
        (Some(6), Some(1)),
        "EOF: the line after the last"
    );
    let bad = excluded(&r, "bad");
    assert_eq!(bad[0]["reason"], "invalid");
    assert_eq!(
        (bad[0]["line"].as_u64(), bad[0]["column"].as_u64()),
        (Some(1), Some(25))
    );
    assert_eq!(bad[0]["path"], "mcpServers.bad.type");
    assert!(bad[0]["detail"].as_str().unwrap().starts_with(&format!(
        "{}:1:25: mcpServers.bad.type: unknown type",
        t.s("repo/sub/dir/.mcp.json")
    )));
}

#[test]
fn other_hosts_each_format() {
    let t = Tree::new("hosts");
    t.write(
        "repo/.vscode/mcp.json",
        r#"{
  // VS Code allows comments
  "inputs": [{"type": "promptString", "id": "key", "password": true}],
  "servers": {
    "vs": {"type": "stdio", "command": "node", "args": ["${workspaceFolder}/srv.js", "--key=${input:key}"], "env": {"T": "${env:TOKEN}"}},
    "vsr": {"url": "https://vs.example/mcp"},
  }
}"#,
    );
    t.write("home/.cursor/mcp.json", r#"{"mcpServers": {"cur": {"command": "${userHome}/bin/cur", "env": {"T": "${env:TOKEN}"}}, "curr": {"url": "https://cursor.example/sse"}}}"#);
    t.write(
        "repo/sub/.cursor/mcp.json",
        r#"{"mcpServers": {"cur": {"command": "project-cur"}}}"#,
    );
    t.write("home/.codeium/windsurf/mcp_config.json", r#"{"mcpServers": {"ws": {"serverUrl": "https://windsurf.example/mcp", "headers": {"X": "${env:TOKEN}"}}}}"#);
    t.write(
        "home/.config/Claude/claude_desktop_config.json",
        r#"{"mcpServers": {"desk": {"command": "uvx", "args": ["desk"]}}, "globalShortcut": ""}"#,
    );
    t.write(
        "home/.config/zed/settings.json",
        "// Zed settings\n{\n  \"theme\": \"One Dark\",\n  \"context_servers\": {\n    /* old form */\n    \"zold\": {\"command\": {\"path\": \"zed-old\", \"args\": [\"a\"], \"env\": {}}, \"settings\": {}},\n    \"znew\": {\"source\": \"custom\", \"command\": \"zed-new\", \"args\": [],},\n  },\n}\n",
    );
    let hosts = json!(["vscode", "cursor", "windsurf", "claude_desktop", "zed"]);
    let r = discover(&t.options(json!({"hosts": hosts}))).unwrap();
    assert!(r["errors"].as_array().unwrap().is_empty(), "{r:#}");
    assert_eq!(
        names(&r),
        ["cur", "curr", "desk", "vs", "vsr", "ws", "znew", "zold"],
        "{r:#}"
    );
    let s = &r["servers"];
    assert_eq!(s["vs"]["scope"], "vscode");
    assert_eq!(
        s["vs"]["config"]["args"],
        json!([format!("{}/srv.js", t.s("repo")), "--key=${input:key}"])
    );
    assert_eq!(s["vs"]["config"]["env"]["T"], "t0k");
    assert_eq!(s["vsr"]["config"]["type"], "http");
    assert!(
        r["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("${input:key} is an input the editor prompts for")),
        "{r:#}"
    );
    assert_eq!(
        s["cur"]["config"]["command"], "project-cur",
        "the project's .cursor/mcp.json wins"
    );
    assert_eq!(excluded(&r, "cur")[0]["reason"], "shadowed");
    assert_eq!(s["curr"]["signature"], "url:https://cursor.example/sse");
    assert_eq!(s["ws"]["scope"], "windsurf");
    assert_eq!(
        s["ws"]["config"],
        json!({"url": "https://windsurf.example/mcp", "type": "http", "headers": {"X": "t0k"}})
    );
    assert_eq!(s["desk"]["signature"], "stdio:[\"uvx\",\"desk\"]");
    assert_eq!(s["zold"]["config"]["command"], "zed-old");
    assert_eq!(s["zold"]["config"]["args"], json!(["a"]));
    assert_eq!(s["znew"]["scope"], "zed");
    // Without `hosts`, none of these files is read.
    let r = discover(&t.options(json!({}))).unwrap();
    assert_eq!(names(&r), Vec::<String>::new());
    // The user-level Cursor file's own ${userHome} expansion.
    std::fs::remove_file(t.p("repo/sub/.cursor/mcp.json")).unwrap();
    let r = discover(&t.options(json!({"hosts": ["cursor"]}))).unwrap();
    assert_eq!(
        r["servers"]["cur"]["config"]["command"],
        format!("{}/bin/cur", t.s("home"))
    );
}

#[test]
fn editing_keeps_the_rest_of_the_file() {
    let t = Tree::new("edit");
    let original = "{\n  \"zeta\": 1,\n  \"mcpServers\": {\n    \"b\": {\"command\": \"b\", \"x-unknown\": [1, 2]},\n    \"a\": {\"command\": \"a\"}\n  },\n  \"alpha\": {\"nested\": true}\n}\n";
    t.write("home/.claude.json", original);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            t.p("home/.claude.json"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
    }
    let base = |extra: Value| t.options(extra);
    let r = add_server(&base(
        json!({"scope": "user", "name": "c", "config": {"type": "http", "url": "https://c/mcp"}}),
    ))
    .unwrap();
    assert_eq!(r["created"], false);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(t.p("home/.claude.json")).unwrap()).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["zeta", "mcpServers", "alpha"]);
    let servers: Vec<&String> = v["mcpServers"].as_object().unwrap().keys().collect();
    assert_eq!(servers, ["b", "a", "c"]);
    assert_eq!(v["mcpServers"]["b"]["x-unknown"], json!([1, 2]));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(t.p("home/.claude.json"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
    }
    // Existing name, invalid entry, bad name: clear errors, file untouched.
    let e = add_server(&base(
        json!({"scope": "user", "name": "a", "config": {"command": "x"}}),
    ))
    .unwrap_err();
    assert!(
        e.message.contains("already has a server named \"a\""),
        "{e}"
    );
    let e = add_server(&base(
        json!({"scope": "user", "name": "n", "config": {"url": "https://x"}}),
    ))
    .unwrap_err();
    assert!(
        e.message
            .contains("config.url: an entry with a `url` needs a `type`"),
        "{e}"
    );
    let e = add_server(&base(
        json!({"scope": "user", "name": "a__b", "config": {"command": "x"}}),
    ))
    .unwrap_err();
    assert!(e.message.contains("\"__\""), "{e}");
    // Remove keeps the order of the rest.
    let r = remove_server(&base(json!({"scope": "user", "name": "b"}))).unwrap();
    assert_eq!(r["removed"]["x-unknown"], json!([1, 2]));
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(t.p("home/.claude.json")).unwrap()).unwrap();
    assert_eq!(
        v["mcpServers"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["a", "c"]
    );
    assert_eq!(
        remove_server(&base(json!({"scope": "user", "name": "b"})))
            .unwrap_err()
            .kind
            .as_str(),
        "not_found"
    );
    // Local scope goes under projects[<cwd>]; project scope creates .mcp.json; discovery sees both.
    add_server(&base(
        json!({"scope": "local", "name": "l", "config": {"command": "l"}}),
    ))
    .unwrap();
    let r = add_server(&base(
        json!({"scope": "project", "name": "p", "config": {"command": "p"}}),
    ))
    .unwrap();
    assert_eq!(r["created"], true);
    assert_eq!(r["file"], t.s("repo/sub/dir/.mcp.json"));
    let d = discover(&base(json!({"settings": {"enabledMcpjsonServers": ["p"]}}))).unwrap();
    assert_eq!(names(&d), ["a", "c", "l", "p"]);
    assert_eq!(d["servers"]["l"]["scope"], "local");
    // A malformed file is never overwritten.
    t.write("repo/sub/dir/.mcp.json", "{\"mcpServers\": {");
    let e = add_server(&base(
        json!({"scope": "project", "name": "q", "config": {"command": "q"}}),
    ))
    .unwrap_err();
    assert!(
        e.message.contains(".mcp.json:1:") && e.message.contains("left untouched"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(t.p("repo/sub/dir/.mcp.json")).unwrap(),
        "{\"mcpServers\": {"
    );
}
