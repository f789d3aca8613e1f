//! The committed `include/mcplug.h` must be the one build.rs generates from the source: build.rs
//! rewrites the work-tree copy on every build, so a difference from the committed header means an
//! ABI change was not committed with its header.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn committed_header_is_current() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&root).output();
    let inside = git(&["rev-parse", "--is-inside-work-tree"]);
    let in_checkout = matches!(&inside, Ok(o) if o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "true");
    if !in_checkout {
        if root.join(".git").exists() {
            panic!(
                "{} has a .git but `git rev-parse` failed: {inside:?}",
                root.display()
            );
        }
        println!(
            "note: {} is not a git checkout; the header check is skipped",
            root.display()
        );
        return;
    }
    let tracked =
        git(&["ls-files", "--error-unmatch", "--", "include/mcplug.h"]).expect("run git ls-files");
    assert!(
        tracked.status.success(),
        "include/mcplug.h is not committed; build.rs generated it: commit it"
    );
    let diff =
        git(&["diff", "--exit-code", "HEAD", "--", "include/mcplug.h"]).expect("run git diff");
    if !diff.status.success() {
        panic!(
            "include/mcplug.h differs from the committed one (build.rs regenerated it from src/ffi/); \
             commit the new header with the ABI change:\n{}{}",
            String::from_utf8_lossy(&diff.stdout),
            String::from_utf8_lossy(&diff.stderr)
        );
    }
}

/// Every name the header gives a C host is the library's own: a `#define`, type, enumerator or
/// function not prefixed `mcplug_`/`MCPLUG_` would collide with the host's (an engine constant
/// made `pub` leaks into the header through cbindgen; keep those `pub(crate)`).
#[test]
fn every_header_name_is_prefixed() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header =
        std::fs::read_to_string(root.join("include/mcplug.h")).expect("read include/mcplug.h");
    let mut code = String::new();
    let mut in_comment = false;
    for line in header.lines() {
        let t = line.trim_start();
        if in_comment {
            if t.contains("*/") {
                in_comment = false;
            }
            continue;
        }
        if t.starts_with("/*") {
            in_comment = !t.contains("*/");
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    let prefixed = |name: &str| name.starts_with("mcplug_") || name.starts_with("MCPLUG_");
    let mut bad = Vec::new();
    for line in code.lines() {
        let t = line.trim();
        let name = if let Some(rest) = t.strip_prefix("#define ") {
            rest.split_whitespace().next()
        } else if let Some(rest) = t.strip_prefix("typedef struct ") {
            rest.split_whitespace().next()
        } else if t.starts_with("enum ") && t.ends_with('{')
            || t.starts_with("struct ") && t.ends_with('{')
        {
            t.split_whitespace().nth(1)
        } else if let Some(open) = t.find('(') {
            // A function declaration: the name before its parameter list.
            t[..open].split([' ', '*']).next_back()
        } else if t.contains(" = ") {
            // An enumerator (`MCPLUG_OK = 0,`); parameter lines (`const char *name,`) have none.
            t.split([' ', ',', '=']).next()
        } else {
            None
        };
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            if name != "MCPLUG_H" && !prefixed(name) {
                bad.push(format!("{name}  ({t})"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "include/mcplug.h names that are not prefixed mcplug_/MCPLUG_:\n  {}",
        bad.join("\n  ")
    );
}

/// The header's comment of each `MCPLUG_<KIND>` status says what the engine's one table of error
/// kinds says (`ErrorKind::meaning`, which `mcplug_error_kinds` returns), with its number.
#[test]
fn the_status_comments_are_the_error_kind_table() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header =
        std::fs::read_to_string(root.join("include/mcplug.h")).expect("read include/mcplug.h");
    let table = mcplug::ErrorKind::table();
    for entry in table.as_array().expect("an array") {
        let kind = entry["kind"].as_str().expect("kind");
        let status = entry["status"].as_u64().expect("status");
        let meaning = entry["meaning"].as_str().expect("meaning");
        let name = format!("MCPLUG_{} = {status},", kind.to_uppercase());
        let at = header
            .find(&name)
            .unwrap_or_else(|| panic!("the header has no `{name}`"));
        // The comment just above the enumerator: `/** ... */`.
        let before = &header[..at];
        let open = before.rfind("/**").expect("a comment above");
        let comment: Vec<&str> = before[open + 3..]
            .lines()
            .map(|l| {
                l.trim()
                    .trim_end_matches("*/")
                    .trim_start_matches('*')
                    .trim()
            })
            .filter(|l| !l.is_empty())
            .collect();
        let comment = comment.join(" ");
        let want = format!("{}{}.", meaning[..1].to_uppercase(), &meaning[1..]);
        assert_eq!(comment, want, "the comment of {name}");
    }
}

/// Functions a binding leaves out on purpose, each with why; every other `mcplug_*` function of
/// the header must be declared by both bindings, so a new export cannot silently miss one.
const PYTHON_SKIPS: &[(&str, &str)] = &[
    (
        "mcplug_client_call_tool_start",
        "Python calls block a worker thread; no event-loop start/complete pair",
    ),
    (
        "mcplug_client_request_start",
        "as call_tool_start: the blocking request with a cancel token serves Python",
    ),
    (
        "mcplug_client_cancel_call",
        "Python cancels through cancel tokens (mcplug_cancel_token_*)",
    ),
    (
        "mcplug_client_event_fd",
        "Python waits in mcplug_client_next_event on a thread, not on a descriptor",
    ),
    (
        "mcplug_client_take_events",
        "drained by the descriptor-driven loop only (Node)",
    ),
    (
        "mcplug_client_next_events",
        "Python takes one event per blocking next_event",
    ),
    (
        "mcplug_client_feed",
        "fd-driven transport pump for hosts with their own loop (Node)",
    ),
    (
        "mcplug_client_flush",
        "fd-driven transport pump for hosts with their own loop (Node)",
    ),
    (
        "mcplug_client_stdout_fd",
        "fd-driven transport pump for hosts with their own loop (Node)",
    ),
    (
        "mcplug_manager_event_fd",
        "Python waits in mcplug_manager_next_event on a thread",
    ),
    (
        "mcplug_log_event_fd",
        "Python reads logs with mcplug_log_next_events on a thread",
    ),
];
const NODE_SKIPS: &[(&str, &str)] = &[
    (
        "mcplug_client_next_event",
        "Node never blocks its loop: it polls the event descriptor and takes events",
    ),
    (
        "mcplug_client_next_events",
        "Node drains with mcplug_client_take_events after the descriptor fires",
    ),
    (
        "mcplug_manager_next_event",
        "Node polls mcplug_manager_event_fd and drains with next_events(timeout 0)",
    ),
    (
        "mcplug_manager_call_tool",
        "Node uses mcplug_manager_call_tool_start so the loop never blocks",
    ),
];

#[test]
fn every_header_function_is_bound_or_skipped_on_purpose() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let read =
        |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("read {p}: {e}"));
    let header = read("include/mcplug.h");
    let mut functions: Vec<String> = Vec::new();
    for line in header.lines().filter(|l| !l.trim_start().starts_with('*')) {
        let mut rest = line;
        while let Some(open) = rest.find("mcplug_") {
            let name: String = rest[open..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[open + name.len()..];
            if rest.starts_with('(') && !functions.contains(&name) {
                functions.push(name);
            }
        }
    }
    assert!(
        functions.len() > 50,
        "found only {} functions in include/mcplug.h: the scan is broken",
        functions.len()
    );
    // A declaration names the function in quotes: `_declare("mcplug_x", ...)`, `lib.func('mcplug_x', ...)`.
    let declared = |source: &str, name: &str| {
        source.contains(&format!("\"{name}\"")) || source.contains(&format!("'{name}'"))
    };
    let mut missing = Vec::new();
    for (binding, path, skips) in [
        ("python", "bindings/python/mcplug/_ffi.py", PYTHON_SKIPS),
        ("node", "bindings/node/lib/native.js", NODE_SKIPS),
    ] {
        let source = read(path);
        for (skip, _why) in skips {
            assert!(
                functions.iter().any(|f| f == skip),
                "{binding} skip list names {skip}, which include/mcplug.h does not declare: drop it"
            );
            assert!(
                !declared(&source, skip),
                "{path} declares {skip}, which is on the {binding} skip list: drop it from the list"
            );
        }
        for f in &functions {
            if !declared(&source, f) && !skips.iter().any(|(s, _)| s == f) {
                missing.push(format!(
                    "{f} (in neither {path} nor the {binding} skip list)"
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "functions of include/mcplug.h no binding declares:\n  {}",
        missing.join("\n  ")
    );
}

/// The five views of a server entry's `type` are one: the library's `Kind::TYPES` is what
/// `index.d.ts` declares (`Transport` the own names, `ServerType` those and the aliases), what
/// discovery accepts and what the client parses.
#[test]
fn index_d_ts_declares_the_librarys_server_types() {
    use mcplug::config::Kind;
    let dts = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bindings/node/index.d.ts"),
    )
    .unwrap();
    let declared = |name: &str| -> Vec<String> {
        let start = format!("export type {name} = ");
        let line = dts
            .lines()
            .find(|l| l.starts_with(&start))
            .unwrap_or_else(|| panic!("index.d.ts declares no `{start}`"));
        line[start.len()..]
            .trim_end_matches(';')
            .split('|')
            .map(|t| t.trim().trim_matches('\'').to_string())
            .collect()
    };
    let own: Vec<String> = Kind::TYPES
        .iter()
        .filter(|(n, k)| *n == k.as_str())
        .map(|(n, _)| n.to_string())
        .collect();
    let aliases: Vec<String> = Kind::TYPES
        .iter()
        .filter(|(n, k)| *n != k.as_str())
        .map(|(n, _)| n.to_string())
        .collect();
    assert_eq!(declared("Transport"), own, "index.d.ts `Transport`");
    let mut server_type = vec!["Transport".to_string()];
    server_type.extend(aliases);
    assert_eq!(
        declared("ServerType"),
        server_type,
        "index.d.ts `ServerType`"
    );
    for (name, kind) in Kind::TYPES {
        assert_eq!(Kind::from_type(name), Some(*kind));
        let entry = match kind {
            Kind::Stdio => serde_json::json!({"type": name, "command": "c"}),
            Kind::Sdk => serde_json::json!({"type": name}),
            Kind::Ws => serde_json::json!({"type": name, "url": "wss://h.example/mcp"}),
            Kind::Http | Kind::Sse => {
                serde_json::json!({"type": name, "url": "https://h.example/mcp"})
            }
        };
        let merged =
            mcplug::config::merge(&serde_json::json!({"user": {"mcpServers": {"s": entry}}}))
                .unwrap();
        assert!(
            merged["servers"]["s"].is_object(),
            "{name}: merge takes it: {merged}"
        );
        if kind.is_remote() || *kind == Kind::Stdio {
            let spec = mcplug::ServerSpec::parse(&entry).unwrap();
            assert_eq!(spec.kind(), *kind, "{name}");
        }
    }
}
