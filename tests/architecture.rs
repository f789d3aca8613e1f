//! The shape ARCHITECTURE.md promises for the client role and the session core, held by reading
//! the source: a connection's state holds at most 12 fields (the rest in the parts that own
//! them), no type's `impl` blocks are spread over more than 3 files, and the modules of
//! `src/client` do not import each other in a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The text before the file's `#[cfg(test)] mod tests` (tests may reach anywhere).
fn without_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// The type an `impl` line is for: `impl Foo {`, `impl<T> Foo<T> {`, `impl Trait for Foo {`.
fn impl_target(line: &str) -> Option<String> {
    let rest = line.strip_prefix("impl")?;
    if !(rest.starts_with(' ') || rest.starts_with('<')) {
        return None;
    }
    let mut rest = rest.trim_end_matches('{').trim();
    if rest.starts_with('<') {
        // impl<...>: the generics first.
        let mut depth = 0;
        let close = rest.char_indices().find(|&(_, c)| {
            depth += match c {
                '<' => 1,
                '>' => -1,
                _ => 0,
            };
            depth == 0
        })?;
        rest = rest[close.0 + 1..].trim();
    }
    let target = match rest.rsplit_once(" for ") {
        Some((_, t)) => t,
        None => rest,
    };
    let name: String = target
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

#[test]
fn a_connections_state_holds_at_most_twelve_fields() {
    let text = fs::read_to_string("src/client/mod.rs").unwrap();
    let start = text
        .find("\nstruct Shared {")
        .expect("client::Shared is defined in mod.rs");
    let body = &text[start..];
    let end = body.find("\n}").unwrap();
    let fields: Vec<&str> = body[..end]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && l.contains(':'))
        .collect();
    assert!(
        fields.len() <= 12,
        "client::Shared has {} fields (at most 12: the rest belong to its parts): {fields:?}",
        fields.len()
    );
}

#[test]
fn no_type_has_its_impl_blocks_in_more_than_three_files() {
    let mut files_of: BTreeMap<String, BTreeSet<PathBuf>> = BTreeMap::new();
    for dir in ["src/client", "src/session"] {
        for path in rust_files(Path::new(dir)) {
            let text = fs::read_to_string(&path).unwrap();
            for line in without_tests(&text).lines() {
                if let Some(target) = impl_target(line) {
                    files_of
                        .entry(format!("{dir}: {target}"))
                        .or_default()
                        .insert(path.clone());
                }
            }
        }
    }
    assert!(
        files_of
            .get("src/client: Shared")
            .is_some_and(|f| f.len() > 1),
        "the check reads the impl blocks ({files_of:?})"
    );
    let spread: Vec<_> = files_of.iter().filter(|(_, f)| f.len() > 3).collect();
    assert!(
        spread.is_empty(),
        "impl blocks spread over more than 3 files: {spread:?}"
    );
}

#[test]
fn the_client_modules_do_not_import_each_other_in_a_circle() {
    let dir = Path::new("src/client");
    let module_of = |path: &Path| -> String {
        let rel = path.strip_prefix(dir).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        first.trim_end_matches(".rs").to_string()
    };
    let files = rust_files(dir);
    let modules: BTreeSet<String> = files.iter().map(|p| module_of(p)).collect();
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &files {
        let module = module_of(path);
        if module == "mod" {
            continue;
        }
        let text = fs::read_to_string(path).unwrap();
        let text = without_tests(&text);
        let mut found = BTreeSet::new();
        for prefix in ["super::", "crate::client::"] {
            for (at, _) in text.match_indices(prefix) {
                let name: String = text[at + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.insert(name);
            }
        }
        // `use super::{a, b::C, ...}`
        for (at, _) in text.match_indices("use super::{") {
            let list = &text[at + 12..];
            let list = &list[..list.find('}').unwrap_or(0)];
            for item in list.split(',') {
                found.insert(item.trim().split("::").next().unwrap().to_string());
            }
        }
        found.retain(|m| modules.contains(m) && *m != module && m != "mod");
        uses.insert(module, found);
    }
    assert!(
        uses.get("mrtr").is_some_and(|u| !u.is_empty()),
        "the check reads the imports ({uses:?})"
    );
    // A circle: a module that reaches itself.
    for start in uses.keys() {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
        while let Some((m, path)) = todo.pop() {
            for next in uses.get(&m).into_iter().flatten() {
                assert!(
                    next != start,
                    "src/client modules import each other in a circle: {} -> {start}",
                    path.join(" -> ")
                );
                if seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    todo.push((next.clone(), p));
                }
            }
        }
    }
}

#[test]
fn impl_lines_are_read_as_their_types() {
    assert_eq!(impl_target("impl Shared {").as_deref(), Some("Shared"));
    assert_eq!(
        impl_target("impl Inbound for Shared {").as_deref(),
        Some("Shared")
    );
    assert_eq!(
        impl_target("impl<E: QueueEvent> EventQueue<E> {").as_deref(),
        Some("EventQueue")
    );
    assert_eq!(
        impl_target("impl<'a> Drop for LeaveCall<'a> {").as_deref(),
        Some("LeaveCall")
    );
    assert_eq!(impl_target("implement {"), None);
}
