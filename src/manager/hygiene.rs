//! Output hygiene: what a server says is shown to a model, so characters that make text read
//! differently from what it is (bidirectional overrides and isolates, zero-width characters) are
//! removed from tool descriptions and tool output text, and very large outputs are cut with a
//! marker that says how much went.

use serde_json::Value;

/// Bidirectional controls (embeddings, overrides, isolates, marks) and zero-width characters.
pub fn is_dangerous(c: char) -> bool {
    matches!(
        c,
        '\u{202A}'..='\u{202E}' // LRE, RLE, PDF, LRO, RLO
            | '\u{2066}'..='\u{2069}' // LRI, RLI, FSI, PDI
            | '\u{200E}' | '\u{200F}' | '\u{061C}' // LRM, RLM, ALM
            | '\u{200B}'..='\u{200D}' // zero-width space, non-joiner, joiner
            | '\u{2060}' | '\u{FEFF}' | '\u{180E}' // word joiner, BOM, Mongolian vowel separator
    )
}

/// `text` without the characters [`is_dangerous`] names (borrowed work only when one is there).
pub fn clean(text: &str) -> String {
    if !text.chars().any(is_dangerous) {
        return text.to_string();
    }
    text.chars().filter(|&c| !is_dangerous(c)).collect()
}

const DESCRIPTION_MARKER: &str = "… [truncated]";

/// A description cut to at most `max` characters (marker included); returns the text and how
/// many characters of the original were cut (0: untouched).
pub fn cap_description(text: &str, max: usize) -> (String, usize) {
    let count = text.chars().count();
    if count <= max {
        return (text.to_string(), 0);
    }
    let marker = DESCRIPTION_MARKER.chars().count();
    let keep = max.saturating_sub(marker);
    let mut out: String = text.chars().take(keep).collect();
    if max >= marker {
        out.push_str(DESCRIPTION_MARKER);
    }
    (out, count - keep)
}

/// Cleans every `text` item of a `CallToolResult` in place, then caps their total at
/// `max_chars` characters: the item that crosses the limit is cut and ends with a marker saying
/// how many characters were cut in all; later text items are removed. Other items (images,
/// resources) and `structuredContent` are left as they are. Returns the characters cut.
pub fn clean_result(result: &mut Value, max_chars: Option<usize>) -> usize {
    let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) else {
        return 0;
    };
    for item in content.iter_mut() {
        if let Some(Value::String(t)) = item.get_mut("text") {
            if t.chars().any(is_dangerous) {
                *t = clean(t);
            }
        }
        if let Some(Value::String(t)) = item.get_mut("resource").and_then(|r| r.get_mut("text")) {
            if t.chars().any(is_dangerous) {
                *t = clean(t);
            }
        }
    }
    let Some(max) = max_chars else { return 0 };
    let is_text = |item: &Value| item.get("type").and_then(Value::as_str) == Some("text");
    let total: usize = content
        .iter()
        .filter(|i| is_text(i))
        .filter_map(|i| i.get("text").and_then(Value::as_str))
        .map(|t| t.chars().count())
        .sum();
    if total <= max {
        return 0;
    }
    let cut = total - max;
    let mut left = max;
    let mut marked = false;
    content.retain_mut(|item| {
        if !is_text(item) {
            return true;
        }
        if marked {
            return false;
        }
        let Some(Value::String(t)) = item.get_mut("text") else {
            return true;
        };
        let n = t.chars().count();
        if n <= left {
            left -= n;
            return true;
        }
        let mut kept: String = t.chars().take(left).collect();
        kept.push_str(&format!(
            "\n\n[output truncated by mcplug: {cut} of {total} characters cut; the limit is {max}]"
        ));
        *t = kept;
        marked = true;
        true
    });
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strips_bidi_and_zero_width() {
        assert_eq!(clean("a\u{202E}b\u{200B}c\u{2066}d\u{FEFF}"), "abcd");
        assert_eq!(clean("plain é 漢"), "plain é 漢");
    }

    #[test]
    fn caps_text_output_with_a_marker() {
        let mut r = json!({"content": [
            {"type": "text", "text": "x".repeat(60)},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "y\u{202E}".repeat(60)},
            {"type": "text", "text": "z"}
        ]});
        assert_eq!(clean_result(&mut r, Some(100)), 21);
        let c = r["content"].as_array().unwrap();
        assert_eq!(c.len(), 3, "the item past the cut is gone, the image stays");
        let t = c[2]["text"].as_str().unwrap();
        assert!(t.starts_with(&"y".repeat(40)) && !t.contains('\u{202E}'));
        assert!(t.contains("21 of 121 characters cut"), "{t}");
        let mut small = json!({"content": [{"type": "text", "text": "ok\u{200D}"}]});
        assert_eq!(clean_result(&mut small, Some(100)), 0);
        assert_eq!(small["content"][0]["text"], "ok");
    }
}
