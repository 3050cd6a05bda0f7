//! Claude Code's own files about each session (SESSIONS.md): which transcripts belong
//! to which task (`find`), what a transcript adds up to by the usage tools' counting
//! rules (`tally`), and the list prices a cost is estimated at (`prices`).
//!
//! `maestro usage` reads the files once; the live session source
//! (`core::sources::sessions`) follows them with a [`follow::Follower`] per file.

pub mod activity;
pub mod figures;
pub mod find;
pub mod follow;
pub mod prices;
pub mod tally;

use std::io::BufRead;
use std::path::Path;

use prices::PriceTable;
use tally::Tally;

/// The context window assumed when a session shows no sign of a larger one.
pub const DEFAULT_WINDOW: u64 = 200_000;

/// Now, in milliseconds since the epoch (the burn window's clock).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `[sessions] context_window` and `context_windows`: the window a model runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextWindows {
    pub default: u64,
    /// By model id prefix (the longest match wins).
    pub by_model: Vec<(String, u64)>,
}

impl Default for ContextWindows {
    fn default() -> Self {
        Self {
            default: DEFAULT_WINDOW,
            by_model: Vec::new(),
        }
    }
}

impl ContextWindows {
    pub fn of(&self, model: Option<&str>) -> u64 {
        model
            .and_then(|m| {
                self.by_model
                    .iter()
                    .filter(|(prefix, _)| m.starts_with(prefix.as_str()))
                    .max_by_key(|(prefix, _)| prefix.len())
            })
            .map_or(self.default, |(_, w)| *w)
    }
}

/// A session's whole transcript, streamed line by line (a 100 MB file is never held
/// whole), with its subagents' `agent-*.jsonl` files of the same session beside it.
pub fn tally_session(transcript: &Path, session_id: &str, prices: &PriceTable) -> Tally {
    let mut tally = Tally::new();
    feed_file(&mut tally, transcript, prices, None);
    if let Some(dir) = transcript.parent()
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        let mut agents: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                find::is_jsonl(p)
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("agent-"))
            })
            .collect();
        agents.sort();
        for agent in agents {
            feed_file(&mut tally, &agent, prices, Some(session_id));
        }
    }
    tally
}

/// Feeds every line of a file; with `only`, the file is skipped unless its first line
/// belongs to that session (and then only the billing counts: the main chain's
/// context and first prompt are the parent transcript's).
fn feed_file(tally: &mut Tally, path: &Path, prices: &PriceTable, only: Option<&str>) {
    let Ok((file, _)) = crate::core::safe_fs::open_regular(path) else {
        return;
    };
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::new();
    let mut first = true;
    let mut sub = Tally::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        // A last line without its newline is still being written: not counted yet.
        if line.last() != Some(&b'\n') {
            break;
        }
        match only {
            None => tally.feed_bytes(&line, prices),
            Some(session) => {
                if first {
                    let belongs = serde_json::from_slice::<serde_json::Value>(&line)
                        .ok()
                        .is_some_and(|v| v["sessionId"] == session);
                    if !belongs {
                        return;
                    }
                }
                sub.feed_bytes(&line, prices);
            }
        }
        first = false;
    }
    if only.is_some() {
        tally.absorb_billing(&sub);
    }
}
