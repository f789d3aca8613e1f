//! Tool search over the pool (FEATURES M4: deferred loading). A host that keeps only the
//! `always_load` tools in its model's context finds the others by a query, the way Claude Code's
//! tool search does:
//!
//! - `select:a,b` names tools exactly (pool names, or a server's own tool names), in that order;
//! - otherwise the query is words, matched case-insensitively against each tool's name (its
//!   words: `mcp__github__create_issue` has `github`, `create`, `issue`), its search hint and its
//!   description; a word written `+word` must match for a tool to count at all.
//!
//! Scores, per query word: the tool's own name equal to the word 12, a word of the tool's name
//! 6 (a part of one 3), the server's name 2, a word of the search hint 4 (a part of one 2), a
//! word of the description 2 (a part of one 1); the whole query equal to the tool's name adds 10.
//! Ties go by pool order (the pool's own sort), so results repeat from run to run.

use super::pool::{Pool, PoolTool};
use crate::error::{Error, Result};
use serde_json::{json, Value};

/// The ranked result: `{"tools": [entry + "score"], "total": N}` (N counts every match before
/// `max_results` cut the list).
pub fn search(pool: &Pool, query: &str, max_results: usize, server: Option<&str>) -> Result<Value> {
    let query = query.trim();
    if query.is_empty() {
        return Err(Error::invalid(
            "the search query is empty: give words, or `select:<name>,<name>`",
        ));
    }
    let candidates = pool
        .tools
        .iter()
        .filter(|t| server.is_none_or(|s| s == t.server));
    if let Some(list) = query.strip_prefix("select:") {
        let mut out: Vec<Value> = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        let tools: Vec<&PoolTool> = candidates.map(|t| &**t).collect();
        for want in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let hit = tools
                .iter()
                .find(|t| t.name == want)
                .or_else(|| tools.iter().find(|t| t.tool == want));
            if let Some(t) = hit {
                if !seen.contains(&t.name.as_str()) {
                    seen.push(&t.name);
                    out.push(scored(t, 1.0));
                }
            }
        }
        let total = out.len();
        out.truncate(max_results);
        return Ok(json!({ "tools": out, "total": total }));
    }
    let mut words: Vec<(String, bool)> = Vec::new();
    for w in query.split_whitespace() {
        let (w, required) = match w.strip_prefix('+') {
            Some(rest) => (rest, true),
            None => (w, false),
        };
        let w = w.to_lowercase();
        if !w.is_empty() {
            words.push((w, required));
        }
    }
    if words.is_empty() {
        return Err(Error::invalid(format!(
            "the search query {query:?} has no words"
        )));
    }
    let whole = query.to_lowercase();
    let mut hits: Vec<(u32, &PoolTool)> = Vec::new();
    for t in candidates {
        if let Some(score) = score(t, &words, &whole) {
            hits.push((score, t));
        }
    }
    // Stable: equal scores keep the pool's order.
    hits.sort_by_key(|h| std::cmp::Reverse(h.0));
    let total = hits.len();
    let tools: Vec<Value> = hits
        .iter()
        .take(max_results)
        .map(|(s, t)| scored(t, f64::from(*s)))
        .collect();
    Ok(json!({ "tools": tools, "total": total }))
}

fn scored(t: &PoolTool, score: f64) -> Value {
    let mut e = t.entry();
    e["score"] = json!(score);
    e
}

/// Lowercase words of a text: runs of letters and digits.
fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Exact word 2 points, a word containing it 1 (times `weight`).
fn field_score(words: &[String], term: &str, weight: u32) -> u32 {
    if words.iter().any(|w| w == term) {
        2 * weight
    } else if words.iter().any(|w| w.contains(term)) {
        weight
    } else {
        0
    }
}

fn score(t: &PoolTool, query: &[(String, bool)], whole: &str) -> Option<u32> {
    let own = t.tool.to_lowercase();
    let name_words = words_of(&t.tool);
    let server_words = words_of(&t.server);
    let hint_words = words_of(t.search_hint.as_deref().unwrap_or(""));
    let description_words = words_of(&t.description());
    let mut total = 0;
    for (term, required) in query {
        let mut s = if own == *term {
            12
        } else {
            field_score(&name_words, term, 3)
        };
        if server_words.iter().any(|w| w == term) {
            s += 2;
        }
        s += field_score(&hint_words, term, 2);
        s += field_score(&description_words, term, 1);
        if s == 0 && *required {
            return None;
        }
        total += s;
    }
    if own == whole || t.name.to_lowercase() == whole {
        total += 10;
    }
    (total > 0).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::pool::PoolLimits;
    use crate::manager::pool::Source;

    fn pool() -> Pool {
        let tools = vec![
            json!({"name": "create_issue", "description": "Create a new issue in a repository"}),
            json!({"name": "list_issues", "description": "List issues",
                   "_meta": {"anthropic/searchHint": "bugs tickets"}}),
            json!({"name": "get_file", "description": "Read a file from the repository"}),
        ];
        let files = vec![json!({"name": "read_file", "description": "Read a local file"})];
        Pool::build(
            &[
                ("github".into(), Source::Server, tools),
                ("fs".into(), Source::Server, files),
            ],
            &PoolLimits {
                max_description: 2048,
            },
        )
    }

    fn names(v: &Value) -> Vec<String> {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn words_rank_name_over_description() {
        let p = pool();
        let r = search(&p, "issue", 5, None).unwrap();
        // A word of the name (create_issue) beats a part of one (list_issues), which beats
        // the description alone.
        assert_eq!(
            names(&r),
            ["mcp__github__create_issue", "mcp__github__list_issues"]
        );
        assert_eq!(r["total"], 2);
        let r = search(&p, "read file", 5, None).unwrap();
        assert_eq!(names(&r)[0], "mcp__fs__read_file");
        assert_eq!(r["total"], 2);
        assert!(
            r["tools"][0]["score"].as_f64().unwrap() > r["tools"][1]["score"].as_f64().unwrap()
        );
    }

    #[test]
    fn hints_required_words_and_limits() {
        let p = pool();
        assert_eq!(
            names(&search(&p, "tickets", 5, None).unwrap()),
            ["mcp__github__list_issues"]
        );
        // +local must match: only fs's read_file has it.
        assert_eq!(
            names(&search(&p, "file +local", 5, None).unwrap()),
            ["mcp__fs__read_file"]
        );
        let r = search(&p, "file", 1, None).unwrap();
        assert_eq!(r["tools"].as_array().unwrap().len(), 1);
        assert_eq!(r["total"], 2);
        assert_eq!(
            names(&search(&p, "file", 5, Some("github")).unwrap()),
            ["mcp__github__get_file"]
        );
        assert_eq!(search(&p, "nothing-like-it", 5, None).unwrap()["total"], 0);
    }

    #[test]
    fn select_names_exactly_in_order() {
        let p = pool();
        let r = search(
            &p,
            "select:read_file, mcp__github__create_issue,unknown",
            5,
            None,
        )
        .unwrap();
        assert_eq!(
            names(&r),
            ["mcp__fs__read_file", "mcp__github__create_issue"]
        );
        assert!(search(&p, "   ", 5, None).is_err());
        assert!(search(&p, "+", 5, None).is_err());
    }
}
