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
