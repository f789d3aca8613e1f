//! Config files as text: parsing with positions, JSON with comments (Zed), and finding where a
//! JSON path sits in a file so that an invalid entry can be reported as `file:line:column`.

use serde_json::Value;
use std::fmt;

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A JSON path, shown as `mcpServers.github.args[1]` (keys that are not plain identifiers are
/// quoted: `projects["/home/me/app"].mcpServers`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonPath(pub Vec<Seg>);

impl JsonPath {
    pub fn key(&self, k: &str) -> JsonPath {
        let mut p = self.clone();
        p.0.push(Seg::Key(k.to_string()));
        p
    }
    pub fn index(&self, i: usize) -> JsonPath {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }
    pub fn join(&self, other: &JsonPath) -> JsonPath {
        let mut p = self.clone();
        p.0.extend(other.0.iter().cloned());
        p
    }
    pub fn of_keys(keys: &[&str]) -> JsonPath {
        JsonPath(keys.iter().map(|k| Seg::Key(k.to_string())).collect())
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for seg in &self.0 {
            match seg {
                Seg::Key(k) => {
                    let plain = !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                        && !k.starts_with(|c: char| c.is_ascii_digit());
                    if plain {
                        if !first {
                            f.write_str(".")?;
                        }
                        f.write_str(k)?;
                    } else {
                        write!(f, "[{}]", serde_json::to_string(k).unwrap_or_default())?;
                    }
                }
                Seg::Index(i) => write!(f, "[{i}]")?,
            }
            first = false;
        }
        if first {
            f.write_str("(the whole file)")?;
        }
        Ok(())
    }
}

/// A file that is not valid JSON: where, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

/// Parses a config file's text. `comments`: the file is JSON with comments (`//`, `/* */`) and
/// trailing commas, as Zed's settings are; they are blanked out first, keeping every position.
pub fn parse(file: &str, text: &str, comments: bool) -> Result<(Value, String), ParseError> {
    let text = if comments {
        strip_jsonc(text)
    } else {
        text.to_string()
    };
    // A UTF-8 byte order mark is not JSON, but editors write one; it is not worth refusing a file.
    let body = text.strip_prefix('\u{feff}').unwrap_or(&text);
    match serde_json::from_str::<Value>(body) {
        Ok(v) => Ok((v, text.clone())),
        Err(e) => Err(ParseError {
            file: file.to_string(),
            line: e.line(),
            // serde_json says column 0 for an end of input right after a newline.
            column: e.column().max(1),
            message: format!("not valid JSON: {}", strip_position(&e.to_string())),
        }),
    }
}

/// serde_json's message ends with " at line L column C"; we report those separately.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// Blanks out comments and trailing commas (replaced by spaces; newlines kept, so lines and
/// columns stay where they were).
pub fn strip_jsonc(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let mut in_string = false;
    // The last significant byte outside strings and comments, and where it is.
    let mut last_comma: Option<usize> = None;
    while i < b.len() {
        let c = b[i];
        if in_string {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match c {
            b'"' => {
                in_string = true;
                last_comma = None;
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let start = i;
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                let end = (i + 2).min(b.len());
                for (j, byte) in out.iter_mut().enumerate().take(end).skip(start) {
                    if b[j] != b'\n' {
                        *byte = b' ';
                    }
                }
                i = end;
            }
            b',' => {
                last_comma = Some(i);
                i += 1;
            }
            b'}' | b']' => {
                if let Some(at) = last_comma.take() {
                    out[at] = b' ';
                }
                i += 1;
            }
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            _ => {
                last_comma = None;
                i += 1;
            }
        }
    }
    // Only ASCII bytes were replaced by ASCII spaces, so the text is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// The 1-based line and column of the value at `path` in `text` (the start of its key, for an
/// object member; of the element, for an array element). `None` if the path is not there.
pub fn locate(text: &str, path: &JsonPath) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let mut pos = skip_ws(b, 0);
    if b.get(pos) == Some(&0xEF) {
        pos = skip_ws(b, pos + 3); // BOM
    }
    let mut mark = pos;
    for seg in &path.0 {
        match seg {
            Seg::Key(want) => {
                if b.get(pos) != Some(&b'{') {
                    return None;
                }
                pos = skip_ws(b, pos + 1);
                loop {
                    if b.get(pos) != Some(&b'"') {
                        return None;
                    }
                    let key_start = pos;
                    let key_end = skip_string(b, pos)?;
                    let key: String = serde_json::from_str(&text[key_start..key_end]).ok()?;
                    pos = skip_ws(b, key_end);
                    if b.get(pos) != Some(&b':') {
                        return None;
                    }
                    pos = skip_ws(b, pos + 1);
                    if &key == want {
                        mark = key_start;
                        break;
                    }
                    pos = skip_ws(b, skip_value(b, pos)?);
                    match b.get(pos) {
                        Some(b',') => pos = skip_ws(b, pos + 1),
                        _ => return None,
                    }
                }
            }
            Seg::Index(want) => {
                if b.get(pos) != Some(&b'[') {
                    return None;
                }
                pos = skip_ws(b, pos + 1);
                let mut i = 0;
                while i < *want {
                    pos = skip_ws(b, skip_value(b, pos)?);
                    match b.get(pos) {
                        Some(b',') => pos = skip_ws(b, pos + 1),
                        _ => return None,
                    }
                    i += 1;
                }
                mark = pos;
            }
        }
    }
    Some(line_col(text, mark))
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

fn skip_ws(b: &[u8], mut pos: usize) -> usize {
    while matches!(b.get(pos), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        pos += 1;
    }
    pos
}

/// `pos` is at a `"`; returns the position just after the closing quote.
fn skip_string(b: &[u8], mut pos: usize) -> Option<usize> {
    pos += 1;
    while pos < b.len() {
        match b[pos] {
            b'\\' => pos += 2,
            b'"' => return Some(pos + 1),
            _ => pos += 1,
        }
    }
    None
}

/// `pos` is at the start of a value; returns the position just after it.
fn skip_value(b: &[u8], mut pos: usize) -> Option<usize> {
    match b.get(pos)? {
        b'"' => skip_string(b, pos),
        b'{' | b'[' => {
            let mut depth = 0usize;
            while pos < b.len() {
                match b[pos] {
                    b'"' => {
                        pos = skip_string(b, pos)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(pos + 1);
                        }
                    }
                    _ => {}
                }
                pos += 1;
            }
            None
        }
        _ => {
            while pos < b.len()
                && !matches!(b[pos], b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n')
            {
                pos += 1;
            }
            Some(pos)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_json_names_line_and_column() {
        let e = parse(
            "/x/.mcp.json",
            "{\n  \"mcpServers\": {\n    \"a\": {,}\n  }\n}",
            false,
        )
        .unwrap_err();
        assert_eq!((e.file.as_str(), e.line, e.column), ("/x/.mcp.json", 3, 11));
        assert!(e.message.starts_with("not valid JSON: "), "{}", e.message);
        assert!(!e.message.contains("at line"), "{}", e.message);
    }

    #[test]
    fn comments_and_trailing_commas_are_blanked_in_place() {
        let text = "{ // a comment, with \"quotes\"\n \"a\": \"http://x/*y*/\", /* block\n */ \"b\": [1, 2,],\n}";
        let (v, kept) = parse("z", text, true).unwrap();
        assert_eq!(v, serde_json::json!({"a": "http://x/*y*/", "b": [1, 2]}));
        assert_eq!(locate(&kept, &JsonPath::of_keys(&["b"])), Some((3, 5)));
    }

    #[test]
    fn locate_finds_keys_and_indexes() {
        let text = "{\n \"x\": {\"y\": [1, {\"z\": 2}]},\n \"mcpServers\": {\n  \"a\": {\"args\": [\"p\", 3]}\n }\n}";
        let p = JsonPath::of_keys(&["mcpServers", "a"]);
        assert_eq!(locate(text, &p), Some((4, 3)));
        assert_eq!(locate(text, &p.key("args").index(1)), Some((4, 23)));
        assert_eq!(locate(text, &JsonPath::of_keys(&["nope"])), None);
        assert_eq!(p.key("args").index(1).to_string(), "mcpServers.a.args[1]");
        assert_eq!(
            JsonPath::of_keys(&["projects", "/home/me"]).to_string(),
            "projects[\"/home/me\"]"
        );
    }
}
