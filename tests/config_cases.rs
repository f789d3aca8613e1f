//! The configuration corpus: every `tests/config/cases/*.json` is `{"description", "sources",
//! "expected"}` (the exact result of `mcplug::config::merge`) or `{"description", "sources",
//! "expected_error": {"kind", "message_contains"}}`. The same files are replayed through the C ABI
//! by the Python (`tests/python/test_config.py`) and Node (`tests/node/config.test.js`) bindings.
//!
//! `MCPLUG_BLESS=1 cargo test --test config_cases` writes the current results into cases that have
//! no `expected` yet (never over an existing one): review them before committing.

use serde_json::Value;
use std::path::PathBuf;

fn cases() -> Vec<(PathBuf, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/config/cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let v: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, v)
        })
        .collect()
}

#[test]
fn corpus() {
    let all = cases();
    assert!(all.len() >= 20, "the corpus shrank to {} cases", all.len());
    let bless = std::env::var("MCPLUG_BLESS").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    for (path, case) in all {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let got = mcplug::config::merge(&case["sources"]);
        if let Some(want) = case.get("expected_error") {
            match got {
                Ok(v) => failures.push(format!("{name}: expected an error, got {v}")),
                Err(e) => {
                    let kind_ok = e.kind.as_str() == want["kind"].as_str().unwrap();
                    let msg_ok = e
                        .message
                        .contains(want["message_contains"].as_str().unwrap());
                    if !kind_ok || !msg_ok {
                        failures.push(format!("{name}: expected {want}, got {e}"));
                    }
                }
            }
            continue;
        }
        let got = match got {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{name}: unexpected error {e}"));
                continue;
            }
        };
        match case.get("expected") {
            Some(want) if *want == got => {}
            Some(want) => failures.push(format!(
                "{name}: {}\n  expected {}\n  got      {}",
                case["description"], want, got
            )),
            None if bless => {
                let mut case = case.clone();
                case["expected"] = got;
                std::fs::write(&path, serde_json::to_string_pretty(&case).unwrap() + "\n").unwrap();
                println!("blessed {name}");
            }
            None => failures.push(format!(
                "{name}: no `expected` (bless with MCPLUG_BLESS=1, then review)"
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
