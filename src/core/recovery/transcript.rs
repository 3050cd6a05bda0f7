//! Finding a Claude Code session's transcript: `<projects>/*/<session>*.jsonl`.

use std::path::{Path, PathBuf};

/// Where the transcript of a session lives: `<projects>/*/<session>*.jsonl`.
pub fn find_transcript(projects_dir: &Path, session: &str) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(projects_dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|dir| std::fs::read_dir(dir.path()).ok())
        .flat_map(|entries| entries.filter_map(Result::ok))
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "jsonl")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(session))
        })
        .collect();
    found.sort();
    found.pop()
}
