//! What a listing of every page has taken so far, bounded: the bytes of its pages (connection
//! option `max_list_bytes`), how many pages, and the cursors seen — as hashes, not copies, so a
//! server that sends large cursors cannot grow the host with them either. A cursor seen before
//! is a loop; past any bound the listing stops with an error naming it.

use crate::error::{Error, ErrorKind, Result};
use std::collections::HashSet;
use std::hash::BuildHasher;

/// The most pages a list call follows before it calls the server broken.
pub(super) const MAX_PAGES: usize = 10_000;

/// The default of `max_list_bytes`: 64 MiB, or twice `max_message_bytes` when that is more (so
/// a listing always holds two of the largest pages the connection accepts).
pub fn default_max_list_bytes(max_message_bytes: usize) -> usize {
    (64usize << 20).max(max_message_bytes.saturating_mul(2))
}

pub(super) struct Pages<'a> {
    method: &'a str,
    /// The most bytes of page text the listing takes (`max_list_bytes`).
    limit: usize,
    bytes: usize,
    pages: usize,
    /// The cursors followed so far, hashed with this listing's own random keys (a server cannot
    /// make two of its cursors collide on purpose).
    cursors: HashSet<u64>,
    keys: std::collections::hash_map::RandomState,
}

impl<'a> Pages<'a> {
    pub fn new(method: &'a str, limit: usize) -> Self {
        Pages {
            method,
            limit,
            bytes: 0,
            pages: 0,
            cursors: HashSet::new(),
            keys: Default::default(),
        }
    }

    /// A page of `len` bytes arrived: an error once the pages together pass the limit.
    pub fn page(&mut self, len: usize) -> Result<()> {
        self.pages += 1;
        self.bytes = self.bytes.saturating_add(len);
        if self.bytes > self.limit {
            return Err(Error::new(
                ErrorKind::Denied,
                format!(
                    "{}: the server's pages passed {} bytes after {} pages, the limit of one listing (connection option max_list_bytes); stopping",
                    self.method, self.limit, self.pages
                ),
            ));
        }
        Ok(())
    }

    /// The server's next cursor: an error when it sent the same one before (a loop), or when
    /// the listing already followed [`MAX_PAGES`] pages.
    pub fn next(&mut self, cursor: &str) -> Result<()> {
        if !self.cursors.insert(self.keys.hash_one(cursor)) {
            let shown: String = cursor.chars().take(64).collect();
            let more = if shown.len() < cursor.len() {
                "…"
            } else {
                ""
            };
            return Err(Error::protocol(format!(
                "{}: the server sent the cursor {shown:?}{more} twice; stopping instead of looping",
                self.method
            )));
        }
        if self.pages >= MAX_PAGES {
            return Err(Error::protocol(format!(
                "{}: more than {MAX_PAGES} pages; stopping",
                self.method
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_stops_at_its_byte_limit_naming_the_option() {
        let mut p = Pages::new("tools/list", 1000);
        for i in 0..3 {
            p.page(300).unwrap();
            p.next(&format!("c{i}")).unwrap();
        }
        let e = p.page(300).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Denied);
        assert!(e.message.contains("max_list_bytes"), "{}", e.message);
        assert!(e.message.contains("1000 bytes"), "{}", e.message);
        assert!(e.message.starts_with("tools/list"), "{}", e.message);
    }

    #[test]
    fn cursors_are_kept_as_hashes_and_a_repeat_is_a_loop() {
        let mut p = Pages::new("resources/list", usize::MAX);
        let big = "x".repeat(1 << 20);
        for i in 0..100 {
            p.page(10).unwrap();
            p.next(&format!("{big}{i}")).unwrap();
        }
        // A hundred cursors of 1 MiB each leave a hundred hashes behind, not 100 MiB.
        assert_eq!(p.cursors.len(), 100);
        assert!(std::mem::size_of_val(&p) < 1024);
        let e = p.next(&format!("{big}7")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Protocol);
        assert!(e.message.contains("twice"), "{}", e.message);
        // The cursor is named, but not all of it.
        assert!(e.message.len() < 300, "{}", e.message.len());
    }

    #[test]
    fn the_page_count_is_bounded_too() {
        let mut p = Pages::new("prompts/list", usize::MAX);
        for i in 0..MAX_PAGES {
            p.page(1).unwrap();
            if i + 1 < MAX_PAGES {
                p.next(&i.to_string()).unwrap();
            }
        }
        let e = p.next("last").unwrap_err();
        assert!(e.message.contains("more than 10000 pages"), "{}", e.message);
    }

    #[test]
    fn the_default_limit_holds_two_of_the_largest_pages() {
        assert_eq!(default_max_list_bytes(32 << 20), 64 << 20);
        assert_eq!(default_max_list_bytes(1 << 20), 64 << 20);
        assert_eq!(default_max_list_bytes(100 << 20), 200 << 20);
        assert_eq!(default_max_list_bytes(usize::MAX), usize::MAX);
    }
}
