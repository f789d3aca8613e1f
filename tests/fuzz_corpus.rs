//! The fuzz targets' committed corpora (tests/fuzz/corpus/<target>/*), each input run through
//! its target's entry point: every input a fuzzing run found interesting stays a regression
//! test, on stable, in every test run (the fuzzing itself: tests/fuzz/run.sh, nightly).

use std::path::PathBuf;

type Entry = fn(&[u8]);

const TARGETS: &[(&str, Entry)] = &[
    ("protocol_line", mcplug::fuzzing::protocol_line),
    ("http_response", mcplug::fuzzing::http_response),
    ("config_merge", mcplug::fuzzing::config_merge),
    ("frontmatter", mcplug::fuzzing::frontmatter),
    ("www_authenticate", mcplug::fuzzing::www_authenticate),
    ("url_policy_expand", mcplug::fuzzing::url_policy_expand),
];

#[test]
fn every_corpus_input_runs_through_its_target() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus");
    for (target, entry) in TARGETS {
        let dir = root.join(target);
        let mut n = 0;
        for file in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = file.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            entry(&data);
            n += 1;
        }
        assert!(n > 0, "the corpus of {target} is empty");
        println!("{target}: {n} inputs");
    }
    // Every target of tests/fuzz has its corpus here.
    let targets = std::fs::read_dir(root.parent().unwrap().join("fuzz_targets"))
        .unwrap()
        .count();
    assert_eq!(
        targets,
        TARGETS.len(),
        "a fuzz target without its corpus replay"
    );
}
