//! The `claude_export` provider's text handling: finding the export, trimming it to the
//! size a relaunched Conductor can read, and estimating its tokens.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Exports are trimmed to about this many characters.
pub const TRIM_TO: usize = 4_000_000;
/// The top of an export (its summary) is always kept.
pub const KEEP_HEAD: usize = 100_000;

/// Keeps the head (the summary at the top) and the most recent tail, with a marker
/// saying how much was cut. Cuts fall on character boundaries.
pub fn trim(text: &str) -> String {
    let chars = text.chars().count();
    if chars <= TRIM_TO {
        return text.to_owned();
    }
    let head_end = byte_at(text, KEEP_HEAD);
    let tail_chars = TRIM_TO - KEEP_HEAD;
    let tail_start = byte_at(text, chars - tail_chars);
    format!(
        "{}\n\n[… {} characters trimmed by maestro …]\n\n{}",
        &text[..head_end],
        chars - KEEP_HEAD - tail_chars,
        &text[tail_start..]
    )
}

fn byte_at(text: &str, char_index: usize) -> usize {
    text.char_indices()
        .nth(char_index)
        .map_or(text.len(), |(i, _)| i)
}

/// Tokens estimated as characters / 3, counted after the latest compaction marker.
pub fn estimate_tokens(text: &str) -> u64 {
    let from = ["\"subtype\":\"compact_boundary\"", "Conversation compacted"]
        .iter()
        .filter_map(|m| text.rfind(m))
        .max()
        .unwrap_or(0);
    (text[from..].chars().count() / 3) as u64
}

/// The newest file in `dir` modified at or after `since` whose name mentions the session.
pub fn newest_export(dir: &Path, session: &str, since: SystemTime) -> Option<PathBuf> {
    let mut found: Vec<(SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.contains(session)))
        .filter_map(|e| {
            let modified = e.metadata().ok()?.modified().ok()?;
            (modified >= since && e.path().is_file()).then(|| (modified, e.path()))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_exports_are_untouched_and_long_ones_keep_head_and_tail() {
        assert_eq!(trim("short"), "short");
        let text = format!(
            "SUMMARY{}{}END",
            "é".repeat(KEEP_HEAD),
            "x".repeat(TRIM_TO * 2)
        );
        let out = trim(&text);
        assert!(out.starts_with("SUMMARY"));
        assert!(out.ends_with("xxxEND"));
        assert!(out.contains("characters trimmed by maestro"));
        let len = out.chars().count();
        assert!(len > TRIM_TO && len < TRIM_TO + 100, "{len}");
    }

    #[test]
    fn tokens_count_from_the_latest_compaction() {
        assert_eq!(estimate_tokens(&"a".repeat(300)), 100);
        let text = format!(
            "{}{{\"type\":\"system\",\"subtype\":\"compact_boundary\"}}{}",
            "a".repeat(3000),
            "b".repeat(300)
        );
        let est = estimate_tokens(&text);
        assert!(est < 200, "{est}");
    }
}
