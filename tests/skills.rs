//! The skills extension (SEP-2640) through the engine's Rust API, against the Python SDK 2.3
//! server of the 2026-07-28 era (tests/servers/modern_server.py, which serves two skills as
//! resources and answers skills/list and skills/get from their bytes). The conformance suite's
//! sep-2640-* scenarios show the refusals with tampered files; this shows the whole way through
//! with true ones, and a file that changes after its entry was listed.

use mcplug::runtime::block_on;
use mcplug::{CallOptions, Client, ConnectOptions, ErrorKind, ServerSpec};
use serde_json::{json, Value};

fn modern() -> (Client, Value) {
    let root = env!("CARGO_MANIFEST_DIR");
    let python = format!("{root}/.deps/venv/bin/python");
    assert!(
        std::path::Path::new(&python).exists(),
        "run tests/install-deps.sh first"
    );
    let spec = ServerSpec::parse(
        &json!({"command": python, "args": [format!("{root}/tests/servers/modern_server.py")]}),
    )
    .unwrap();
    block_on(Client::connect(
        &spec,
        ConnectOptions::parse(Some(&json!({"connect_timeout_ms": 20000}))).unwrap(),
        None,
    ))
    .unwrap()
}

fn none() -> CallOptions {
    CallOptions::default()
}

fn reads(c: &Client) -> Vec<String> {
    let args = serde_json::value::to_raw_value(&json!({})).unwrap();
    let r = block_on(c.call_tool("skill_reads", Some(&args), &none()))
        .unwrap()
        .value()
        .unwrap();
    serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap()
}

const SKILL: &str = "skill://git-workflow/SKILL.md";
const GUIDE: &str = "skill://git-workflow/references/GUIDE.md";

#[test]
fn skills_are_listed_loaded_and_read_verified() {
    let (c, info) = modern();
    assert_eq!(info["era"], "modern", "{info}");
    // Listing fetches no file.
    let listed = block_on(c.list_skills(&none())).unwrap();
    let skills = listed["skills"].as_array().unwrap();
    assert_eq!(skills.len(), 2, "{listed}");
    assert_eq!(skills[0]["uri"], SKILL);
    assert_eq!(reads(&c), Vec::<String>::new(), "nothing read on listing");
    // A file of a skill not loaded yet: refused, nothing read.
    let e = block_on(c.read_skill_file(SKILL, "references/GUIDE.md", &none())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");

    let loaded = block_on(c.load_skill(SKILL, &none())).unwrap();
    assert_eq!(loaded["verified"], true, "{loaded}");
    assert_eq!(loaded["name"], "git-workflow");
    assert_eq!(
        loaded["frontmatter"]["metadata"]["tags"],
        json!(["git", "review"])
    );
    assert!(loaded["text"]
        .as_str()
        .unwrap()
        .contains("Branch from main"));
    assert_eq!(loaded["files"], json!([SKILL, GUIDE]));
    // A supporting file, by its relative path: read now, verified (its bytes are not its chars).
    let guide = block_on(c.read_skill_file(SKILL, "references/GUIDE.md", &none())).unwrap();
    assert_eq!(guide["uri"], GUIDE);
    assert_eq!(guide["verified"], true);
    assert_eq!(
        guide["text"],
        "Rebase, never merge \u{2014} caf\u{e9} rules.\n"
    );
    // A file the server serves but the entry does not list: refused without a read.
    let e = block_on(c.read_skill_file(SKILL, "scripts/unlisted.sh", &none())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidResult, "{e}");
    assert_eq!(e.data.as_ref().unwrap()["check"], "unlisted");
    let e = block_on(c.read_skill_file(SKILL, "../other/SKILL.md", &none())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
    assert_eq!(reads(&c), vec![SKILL.to_string(), GUIDE.to_string()]);

    // The file changes after the entry was listed: its read fails verification.
    let args = serde_json::value::to_raw_value(&json!({})).unwrap();
    block_on(c.call_tool("tamper_skill", Some(&args), &none())).unwrap();
    let e = block_on(c.read_skill_file(SKILL, GUIDE, &none())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidResult, "{e}");
    assert_eq!(e.data.as_ref().unwrap()["check"], "size", "{e:?}");
    // skills/get refreshes the entry; the loaded skill keeps the entry it was loaded from until
    // it is loaded again, and then the new file verifies.
    let fresh = block_on(c.get_skill(SKILL, &none())).unwrap();
    assert_eq!(fresh["uri"], SKILL);
    assert!(block_on(c.read_skill_file(SKILL, GUIDE, &none())).is_err());
    block_on(c.load_skill(SKILL, &none())).unwrap();
    let guide = block_on(c.read_skill_file(SKILL, GUIDE, &none())).unwrap();
    assert!(
        guide["text"]
            .as_str()
            .unwrap()
            .ends_with("One more rule.\n"),
        "{guide}"
    );

    // A dynamic skill: loaded, its frontmatter compared, but not verified by digest.
    let refunds = "skill://acme/billing/refunds/SKILL.md";
    let loaded = block_on(c.load_skill(refunds, &none())).unwrap();
    assert_eq!(loaded["verified"], false, "{loaded}");
    assert_eq!(loaded["files"], "dynamic");
    // A skill the server does not serve: its error, nothing loaded.
    let e = block_on(c.load_skill("skill://nope/SKILL.md", &none())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Rpc, "{e}");
    assert_eq!(e.code, Some(-32602));
    block_on(c.close());
}

#[test]
fn a_skill_never_listed_is_fetched_with_skills_get() {
    let (c, _) = modern();
    let loaded = block_on(c.load_skill(SKILL, &none())).unwrap();
    assert_eq!(loaded["verified"], true, "{loaded}");
    assert_eq!(reads(&c), vec![SKILL.to_string()]);
    block_on(c.close());
}

#[test]
fn a_server_without_the_extension_is_told_apart() {
    let spec = ServerSpec::parse(&json!({
        "command": "python3",
        "args": [concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/fault_server.py"), "modern"]
    }))
    .unwrap();
    let (c, _) = block_on(Client::connect(&spec, ConnectOptions::default(), None)).unwrap();
    let e = block_on(c.list_skills(&none())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(e.message.contains("io.modelcontextprotocol/skills"), "{e}");
    block_on(c.close());
}
