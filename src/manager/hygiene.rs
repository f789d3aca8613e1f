//! Output hygiene: what a server says is shown to a model, so characters that make text read
//! differently from what it is (bidirectional overrides and isolates, zero-width characters) are
//! removed from tool descriptions and from every text of tool results, resources and prompts;
//! very large outputs are cut with a marker that says how much went (and, with `output_dir`,
//! kept whole in a file the marker names), and base64 media have a limit in bytes of their own.

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

/// Where a result's items are: a tool result's `content`, `resources/read`'s `contents`, or
/// `prompts/get`'s `messages` (each message's `content` one item).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Tool,
    Resource,
    Prompt,
}

/// What one result may take: characters of text, bytes of base64 media, and where an output
/// over its limit is kept whole (`output_dir`), under a name that says what it was (`label`).
#[derive(Default)]
pub struct Limits<'a> {
    pub max_chars: Option<usize>,
    pub max_media_bytes: Option<usize>,
    pub keep: Option<&'a Keeper>,
    pub label: &'a str,
}

/// What an item of a result carries for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Text: a text item's `text`, an embedded or read resource's `text`.
    Text,
    /// base64: an image's or audio's `data`, an embedded or read resource's `blob`.
    Media,
    /// A `resource_link`: counted as text by what it says, never cut, only dropped.
    Link,
    Other,
}

fn payload_mut(item: &mut Value, shape: Shape) -> Option<&mut Value> {
    match shape {
        Shape::Prompt => item.get_mut("content").filter(|c| c.is_object()),
        _ => Some(item),
    }
}

fn slot_of(p: &Value, shape: Shape) -> Slot {
    let has = |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).is_some_and(Value::is_string);
    match p.get("type").and_then(Value::as_str) {
        Some("text") if has(Some(p), "text") => Slot::Text,
        Some("image" | "audio") if has(Some(p), "data") => Slot::Media,
        Some("resource") if has(p.get("resource"), "text") => Slot::Text,
        Some("resource") if has(p.get("resource"), "blob") => Slot::Media,
        Some("resource_link") => Slot::Link,
        None if shape == Shape::Resource && has(Some(p), "text") => Slot::Text,
        None if shape == Shape::Resource && has(Some(p), "blob") => Slot::Media,
        _ => Slot::Other,
    }
}

/// The string a text or media slot holds.
fn field_mut(p: &mut Value, slot: Slot) -> Option<&mut String> {
    let key = if slot == Slot::Text { "text" } else { "data" };
    let holder = if p.get("type").and_then(Value::as_str) == Some("resource") {
        p.get_mut("resource")?
    } else {
        p
    };
    let key = if holder.get(key).is_some() {
        key
    } else if slot == Slot::Media {
        "blob"
    } else {
        return None;
    };
    match holder.get_mut(key)? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

fn clean_in_place(v: Option<&mut Value>) {
    if let Some(Value::String(t)) = v {
        if t.chars().any(is_dangerous) {
            *t = clean(t);
        }
    }
}

/// Every string of a JSON value cleaned (`structuredContent`: its strings reach the model too).
fn clean_deep(v: &mut Value) {
    match v {
        Value::String(_) => clean_in_place(Some(v)),
        Value::Array(a) => a.iter_mut().for_each(clean_deep),
        Value::Object(o) => o.values_mut().for_each(clean_deep),
        _ => {}
    }
}

/// The characters a resource link says to the model.
fn link_chars(p: &Value) -> usize {
    ["uri", "name", "title", "description"]
        .iter()
        .filter_map(|k| p.get(*k).and_then(Value::as_str))
        .map(|t| t.chars().count())
        .sum()
}

/// Cleans a result in place and holds it to `limits`; returns the characters of text cut.
///
/// Every text the model reads loses the characters [`is_dangerous`] names: text items,
/// embedded and read resources' text, resource links' names and descriptions, a prompt's
/// description and every string of `structuredContent`. Then text over `max_chars` in all is
/// cut in the item that crosses the limit, which ends with a marker saying how much was cut,
/// and later text items and links are removed; base64 media (images, audio, blobs) over
/// `max_media_bytes` in all are replaced, item by item, by a text saying what was there;
/// `structuredContent` longer than `max_chars` on its own is removed with a note. With a
/// keeper (`output_dir`), what is cut or removed is first written whole to a file there, and
/// the marker names it.
pub fn clean_output(result: &mut Value, shape: Shape, limits: &Limits) -> usize {
    let Some(obj) = result.as_object_mut() else {
        return 0;
    };
    clean_in_place(obj.get_mut("description"));
    if shape == Shape::Tool {
        if let Some(sc) = obj.get_mut("structuredContent") {
            clean_deep(sc);
        }
    }
    let key = match shape {
        Shape::Tool => "content",
        Shape::Resource => "contents",
        Shape::Prompt => "messages",
    };
    let mut cut = 0;
    if let Some(items) = obj.get_mut(key).and_then(Value::as_array_mut) {
        for item in items.iter_mut() {
            let Some(p) = payload_mut(item, shape) else {
                continue;
            };
            for k in ["name", "title", "description"] {
                clean_in_place(p.get_mut(k));
            }
            let slot = slot_of(p, shape);
            if slot == Slot::Text {
                if let Some(t) = field_mut(p, slot) {
                    if t.chars().any(is_dangerous) {
                        *t = clean(t);
                    }
                }
            }
        }
        // Text first: the notes that replace media are not the server's text, and stay.
        if let Some(max) = limits.max_chars {
            cut = cap_text(items, shape, max, limits);
        }
        if let Some(max) = limits.max_media_bytes {
            cap_media(items, shape, max, limits);
        }
    }
    if let (Shape::Tool, Some(max)) = (shape, limits.max_chars) {
        cut += cap_structured(obj, max, limits);
    }
    cut
}

/// Media over `max` bytes of base64 in all become text notes (kept in a file with a keeper).
fn cap_media(items: &mut [Value], shape: Shape, max: usize, limits: &Limits) {
    let mut used = 0usize;
    for item in items.iter_mut() {
        let Some(p) = payload_mut(item, shape) else {
            continue;
        };
        if slot_of(p, shape) != Slot::Media {
            continue;
        }
        let n = field_mut(p, Slot::Media).map_or(0, |d| d.len());
        if used + n <= max {
            used += n;
            continue;
        }
        let holder = p.get("resource").unwrap_or(p);
        let mime = holder
            .get("mimeType")
            .and_then(Value::as_str)
            .unwrap_or("application/octet-stream")
            .to_string();
        let what = match p.get("type").and_then(Value::as_str) {
            Some(t @ ("image" | "audio")) => t.to_string(),
            _ => "blob".to_string(),
        };
        let uri = holder.get("uri").cloned();
        let data = field_mut(p, Slot::Media)
            .map(std::mem::take)
            .unwrap_or_default();
        let kept = limits.keep.and_then(|k| {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .ok()?;
            k.keep(limits.label, extension(&mime), &bytes).ok()
        });
        let note = match kept {
            Some(path) => format!(
                "[{what} ({mime}, {n} bytes of base64) kept whole in {} by mcplug: media in one result are limited to {max} bytes]",
                path.display()
            ),
            None => format!(
                "[{what} ({mime}, {n} bytes of base64) removed by mcplug: media in one result are limited to {max} bytes]"
            ),
        };
        *p = match (shape, uri) {
            (Shape::Resource, Some(uri)) => {
                serde_json::json!({"uri": uri, "mimeType": "text/plain", "text": note})
            }
            _ => serde_json::json!({"type": "text", "text": note}),
        };
    }
}

/// Text over `max` characters in all is cut (see [`clean_output`]); returns the characters cut.
fn cap_text(items: &mut Vec<Value>, shape: Shape, max: usize, limits: &Limits) -> usize {
    let mut total = 0usize;
    let mut whole = String::new();
    for item in items.iter_mut() {
        let Some(p) = payload_mut(item, shape) else {
            continue;
        };
        match slot_of(p, shape) {
            Slot::Text => {
                if let Some(t) = field_mut(p, Slot::Text) {
                    total += t.chars().count();
                    if limits.keep.is_some() {
                        if !whole.is_empty() {
                            whole.push('\n');
                        }
                        whole.push_str(t);
                    }
                }
            }
            Slot::Link => total += link_chars(p),
            _ => {}
        }
    }
    if total <= max {
        return 0;
    }
    let cut = total - max;
    let kept = limits
        .keep
        .and_then(|k| k.keep(limits.label, "txt", whole.as_bytes()).ok());
    let mut left = max;
    let mut marked = false;
    items.retain_mut(|item| {
        let Some(p) = payload_mut(item, shape) else {
            return true;
        };
        match slot_of(p, shape) {
            Slot::Link => {
                let n = link_chars(p);
                if marked || n > left {
                    return false;
                }
                left -= n;
                true
            }
            Slot::Text => {
                if marked {
                    return false;
                }
                let Some(t) = field_mut(p, Slot::Text) else {
                    return true;
                };
                let n = t.chars().count();
                if n <= left {
                    left -= n;
                    return true;
                }
                let mut preview: String = t.chars().take(left).collect();
                preview.push_str(&format!(
                    "\n\n[output truncated by mcplug: {cut} of {total} characters cut; the limit is {max}"
                ));
                if let Some(path) = &kept {
                    preview.push_str(&format!("; the whole output is in {}", path.display()));
                }
                preview.push(']');
                *t = preview;
                marked = true;
                true
            }
            _ => true,
        }
    });
    cut
}

/// `structuredContent` longer than `max` characters as JSON is removed, with a note in
/// `content` (and kept whole with a keeper); returns the characters removed.
fn cap_structured(obj: &mut serde_json::Map<String, Value>, max: usize, limits: &Limits) -> usize {
    let Some(sc) = obj.get("structuredContent") else {
        return 0;
    };
    let text = sc.to_string();
    let n = text.chars().count();
    if n <= max {
        return 0;
    }
    obj.remove("structuredContent");
    let kept = limits
        .keep
        .and_then(|k| k.keep(limits.label, "json", text.as_bytes()).ok());
    let note = match kept {
        Some(path) => format!(
            "[structuredContent of {n} characters kept whole in {} by mcplug: over the limit of {max}]",
            path.display()
        ),
        None => format!("[structuredContent of {n} characters removed by mcplug: over the limit of {max}]"),
    };
    let note = serde_json::json!({"type": "text", "text": note});
    match obj.get_mut("content").and_then(Value::as_array_mut) {
        Some(content) => content.push(note),
        None => {
            obj.insert("content".into(), Value::Array(vec![note]));
        }
    }
    n
}

/// A file name extension for a MIME type (`bin` when it is none we know).
fn extension(mime: &str) -> &'static str {
    let base = mime
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match base.as_str() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "image/bmp" => "bmp",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/ogg" => "ogg",
        "audio/webm" => "webm",
        "audio/flac" => "flac",
        "application/pdf" => "pdf",
        "application/json" => "json",
        "application/gzip" | "application/x-gzip" => "gz",
        "application/zip" => "zip",
        "text/plain" => "txt",
        "text/html" => "html",
        "text/csv" => "csv",
        "text/markdown" => "md",
        _ => "bin",
    }
}

/// Where outputs over their limit are kept whole (`output_dir`): files of their own, 0600, in a
/// directory held under a size cap by removing the oldest of ours first.
pub struct Keeper {
    dir: std::path::PathBuf,
    max_bytes: u64,
    next: std::sync::atomic::AtomicU64,
    /// One writer at a time, so that making room and writing are one step.
    lock: parking_lot::Mutex<()>,
}

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeper")
            .field("dir", &self.dir)
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

/// The prefix of every file a keeper writes (and the only files it ever removes).
const KEPT_PREFIX: &str = "mcplug-";

impl Keeper {
    /// Opens (creating, 0700) the directory; an error names it.
    pub fn open(dir: &std::path::Path, max_bytes: u64) -> crate::error::Result<Keeper> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| {
                crate::error::Error::invalid(format!(
                    "manager option `output_dir`: cannot create {}: {e}",
                    dir.display()
                ))
            })?;
        if !dir.is_dir() {
            return Err(crate::error::Error::invalid(format!(
                "manager option `output_dir`: {} is not a directory",
                dir.display()
            )));
        }
        Ok(Keeper {
            dir: dir.to_path_buf(),
            max_bytes,
            next: std::sync::atomic::AtomicU64::new(1),
            lock: parking_lot::Mutex::new(()),
        })
    }

    /// Writes `bytes` to a new file named after `label`; returns its path.
    pub fn keep(
        &self,
        label: &str,
        ext: &str,
        bytes: &[u8],
    ) -> std::io::Result<std::path::PathBuf> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let size = bytes.len() as u64;
        if size > self.max_bytes {
            return Err(std::io::Error::other("larger than the directory's cap"));
        }
        let _one = self.lock.lock();
        self.make_room(size);
        let label: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self.dir.join(format!(
            "{KEPT_PREFIX}{label}-{ms}-{}-{n}.{ext}",
            std::process::id()
        ));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        if let Err(e) = f.write_all(bytes) {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        Ok(path)
    }

    /// Removes our oldest files until `need` more bytes fit under the cap.
    fn make_room(&self, need: u64) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut ours: Vec<(std::time::SystemTime, u64, std::path::PathBuf)> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(KEPT_PREFIX))
            .filter_map(|e| {
                let meta = e.metadata().ok().filter(|m| m.is_file())?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = ours.iter().map(|(_, len, _)| len).sum();
        ours.sort();
        for (_, len, path) in ours {
            if total + need <= self.max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn clean_result(r: &mut Value, max: Option<usize>) -> usize {
        let limits = Limits {
            max_chars: max,
            ..Limits::default()
        };
        clean_output(r, Shape::Tool, &limits)
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mcplug-hygiene-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn every_text_a_model_reads_is_cleaned() {
        let bad = "a\u{202E}b\u{200B}";
        let mut tool = json!({"content": [
            {"type": "text", "text": bad},
            {"type": "resource", "resource": {"uri": "x://1", "text": bad}},
            {"type": "resource_link", "uri": "x://2", "name": bad, "description": bad},
        ], "structuredContent": {"deep": [{"s": bad}]}});
        clean_result(&mut tool, None);
        assert!(!tool.to_string().contains("\\u202e"), "{tool}");
        assert_eq!(tool["structuredContent"]["deep"][0]["s"], "ab");
        assert_eq!(tool["content"][2]["description"], "ab");
        let mut read = json!({"contents": [{"uri": "x://1", "text": bad}]});
        clean_output(&mut read, Shape::Resource, &Limits::default());
        assert_eq!(read["contents"][0]["text"], "ab");
        let mut prompt = json!({"description": bad, "messages": [
            {"role": "user", "content": {"type": "text", "text": bad}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "x://1", "text": bad}}},
        ]});
        clean_output(&mut prompt, Shape::Prompt, &Limits::default());
        assert_eq!(prompt["description"], "ab");
        assert_eq!(prompt["messages"][0]["content"]["text"], "ab");
        assert_eq!(prompt["messages"][1]["content"]["resource"]["text"], "ab");
    }

    #[test]
    fn resources_and_prompts_are_capped_like_tool_output() {
        let limits = Limits {
            max_chars: Some(50),
            ..Limits::default()
        };
        let mut read = json!({"contents": [
            {"uri": "x://1", "text": "r".repeat(40)},
            {"uri": "x://2", "text": "s".repeat(40)},
            {"uri": "x://3", "text": "t".repeat(40)},
        ]});
        assert_eq!(clean_output(&mut read, Shape::Resource, &limits), 70);
        let c = read["contents"].as_array().unwrap();
        assert_eq!(c.len(), 2, "{read}");
        assert!(c[1]["text"].as_str().unwrap().starts_with(&"s".repeat(10)));
        assert!(c[1]["text"]
            .as_str()
            .unwrap()
            .contains("70 of 120 characters cut"));
        let mut prompt = json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "p".repeat(80)}},
        ]});
        assert_eq!(clean_output(&mut prompt, Shape::Prompt, &limits), 30);
        let t = prompt["messages"][0]["content"]["text"].as_str().unwrap();
        assert!(
            t.starts_with(&"p".repeat(50)) && !t.starts_with(&"p".repeat(51)),
            "{t}"
        );
        // A resource link counts what it says; past the limit it is dropped.
        let mut links = json!({"content": [
            {"type": "text", "text": "q".repeat(45)},
            {"type": "resource_link", "uri": "x://a-long-enough-uri", "name": "n"},
        ]});
        assert!(clean_output(&mut links, Shape::Tool, &limits) > 0);
        assert_eq!(links["content"].as_array().unwrap().len(), 1, "{links}");
    }

    #[test]
    fn media_have_a_limit_in_bytes_of_their_own() {
        let limits = Limits {
            max_chars: Some(1000),
            max_media_bytes: Some(10),
            ..Limits::default()
        };
        let mut r = json!({"content": [
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAAAAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "x://b", "blob": "AAAA", "mimeType": "application/pdf"}},
        ]});
        clean_output(&mut r, Shape::Tool, &limits);
        let c = r["content"].as_array().unwrap();
        assert_eq!(c[0]["type"], "image", "the first fits");
        assert_eq!(c[1]["type"], "text");
        let note = c[1]["text"].as_str().unwrap();
        assert!(
            note.contains("audio (audio/wav, 8 bytes of base64) removed"),
            "{note}"
        );
        assert_eq!(
            c[2]["type"], "resource",
            "4 + 4 fit after the audio went: {r}"
        );
        let mut read = json!({"contents": [{"uri": "x://big", "blob": "A".repeat(16), "mimeType": "image/png"}]});
        clean_output(&mut read, Shape::Resource, &limits);
        assert_eq!(read["contents"][0]["uri"], "x://big");
        assert!(read["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("blob (image/png, 16 bytes"));
    }

    #[test]
    fn structured_content_over_the_limit_is_removed_with_a_note() {
        let mut r = json!({"content": [{"type": "text", "text": "short"}],
                           "structuredContent": {"rows": "x".repeat(200)}});
        clean_result(&mut r, Some(100));
        assert!(r.get("structuredContent").is_none());
        let note = r["content"][1]["text"].as_str().unwrap();
        assert!(
            note.contains("structuredContent of 211 characters removed"),
            "{note}"
        );
    }

    #[test]
    fn with_a_keeper_what_is_cut_is_kept_whole_in_a_file_of_its_own() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("keep");
        let keeper = Keeper::open(&dir, 1 << 20).unwrap();
        let limits = Limits {
            max_chars: Some(20),
            max_media_bytes: Some(4),
            keep: Some(&keeper),
            label: "srv/tool",
        };
        let mut r = json!({"content": [
            {"type": "text", "text": "a".repeat(15)},
            {"type": "text", "text": "b".repeat(15)},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        ]});
        clean_output(&mut r, Shape::Tool, &limits);
        let text = r["content"][1]["text"].as_str().unwrap();
        let path = text
            .split("the whole output is in ")
            .nth(1)
            .unwrap()
            .trim_end_matches(']');
        let whole = std::fs::read_to_string(path).unwrap();
        assert_eq!(whole, format!("{}\n{}", "a".repeat(15), "b".repeat(15)));
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(
            path.contains("mcplug-srv_tool-") && path.ends_with(".txt"),
            "{path}"
        );
        let note = r["content"][2]["text"].as_str().unwrap();
        let image = note
            .split("kept whole in ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        assert!(image.ends_with(".png"), "{note}");
        assert_eq!(std::fs::read(image).unwrap(), b"\x89PNG\r\n\x1a\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_keepers_directory_stays_under_its_cap_oldest_out_first() {
        let dir = scratch("cap");
        let keeper = Keeper::open(&dir, 100).unwrap();
        let first = keeper.keep("t", "txt", &[b'x'; 60]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = keeper.keep("t", "txt", &[b'y'; 30]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let third = keeper.keep("t", "txt", &[b'z'; 30]).unwrap();
        assert!(!first.exists(), "the oldest went to make room");
        assert!(second.exists() && third.exists());
        assert!(
            keeper.keep("t", "txt", &[b'w'; 101]).is_err(),
            "larger than the cap"
        );
        std::fs::write(dir.join("not-ours.txt"), [0u8; 90]).unwrap();
        let _fourth = keeper.keep("t", "txt", &[b'v'; 50]).unwrap();
        assert!(
            dir.join("not-ours.txt").exists(),
            "only our files are ever removed"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

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
