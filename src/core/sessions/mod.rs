//! Claude Code's own files about each session (docs/sessions.md): which transcripts belong
//! to which task (`find`), what a transcript adds up to by the usage tools' counting
//! rules (`tally`), and the list prices a cost is estimated at (`prices`).
//!
//! `maestro usage` reads the files once; the live session source
//! (`core::sources::sessions`) follows them with a [`follow::Follower`] per file.

pub mod activity;
pub mod counted;
pub mod deeds;
pub mod figures;
pub mod find;
pub mod follow;
pub mod loop_watch;
pub mod loops;
pub mod monitor;
pub mod pollers;
pub mod prices;
pub mod skim;
pub mod tally;
pub mod timestamp;

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

/// The budgets (`[budget]`); each off when `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budgets {
    pub task_usd: Option<f64>,
    pub orchestration_usd: Option<f64>,
    pub context_percent: Option<f64>,
}

/// A session's whole transcript and its subagents' files ([`find::subagent_files`]: in
/// `<session id>/subagents/` and beside it), each read once through a [`follow::Follower`] (streamed: a 100 MB
/// file is never held whole; a half-written last line is not counted yet).
pub fn tally_session(
    transcript: &Path,
    session_id: &str,
    prices: &PriceTable,
) -> (Tally, Vec<Tally>) {
    tally_sessions(&[(transcript, session_id)], prices)
        .pop()
        .unwrap_or_else(|| (Tally::new(), Vec::new()))
}

/// [`tally_session`] for many sessions at once, their files read in parallel
/// ([`read_sessions`]); one result per session, in the order given.
pub fn tally_sessions(sessions: &[(&Path, &str)], prices: &PriceTable) -> Vec<(Tally, Vec<Tally>)> {
    read_sessions(sessions, prices)
        .into_iter()
        .map(|(main, agents)| (main.tally, agents.into_iter().map(|a| a.tally).collect()))
        .collect()
}

/// Each session's transcript and its subagents' files, every file read once on all
/// cores ([`follow::read_all`]); a subagent file of another session is left out. One
/// result per session, in the order given.
pub fn read_sessions(
    sessions: &[(&Path, &str)],
    prices: &PriceTable,
) -> Vec<(follow::Follower, Vec<follow::Follower>)> {
    // Every file of every session, each tagged with its session's place in `sessions`;
    // a session's own transcript comes first.
    let mut owners = Vec::new();
    let mut followers = Vec::new();
    for (i, (transcript, session_id)) in sessions.iter().enumerate() {
        owners.push(i);
        followers.push(follow::Follower::new(transcript, None));
        for agent in find::subagent_files(transcript, session_id) {
            owners.push(i);
            followers.push(follow::Follower::new(
                &agent,
                Some((*session_id).to_owned()),
            ));
        }
    }
    follow::read_all(&mut followers, prices);
    let mut files = owners.into_iter().zip(followers).peekable();
    let mut out = Vec::with_capacity(sessions.len());
    for i in 0..sessions.len() {
        let Some((_, main)) = files.next_if(|(owner, _)| *owner == i) else {
            continue;
        };
        let mut agents = Vec::new();
        while let Some((_, agent)) = files.next_if(|(owner, _)| *owner == i) {
            if !agent.is_foreign() {
                agents.push(agent);
            }
        }
        out.push((main, agents));
    }
    out
}

#[cfg(test)]
mod fixtures {
    //! What the real Claude Code 2.1.328 wrote (tests/fixtures/claude-2.1.328), read
    //! without npm: the figures are the scripted ones.
    use super::*;

    #[test]
    fn a_real_session_with_a_subagent_in_the_2_1_layout_is_billed_whole() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude-2.1.328/subagent/project");
        let main = std::fs::read_dir(&dir)
            .expect("fixture")
            .flatten()
            .map(|e| e.path())
            .find(|p| find::is_jsonl(p))
            .expect("the session's file");
        let head = find::head(&main).expect("its first lines");
        let (tally, agents) = tally_session(&main, &head.session_id, &PriceTable::default());
        assert_eq!(agents.len(), 1, "the subagent in <session>/subagents/");
        let t = &tally.tokens;
        assert_eq!(
            (t.input, t.output, t.cache_write, t.cache_read),
            (1000, 20, 500, 3000)
        );
        let a = &agents[0].tokens;
        assert_eq!(
            (a.input, a.output, a.cache_write, a.cache_read),
            (200, 7, 100, 0)
        );
        assert_eq!(
            tally.models.iter().collect::<Vec<_>>(),
            ["claude-sonnet-4-5"]
        );
        assert_eq!(
            tally.skipped_lines, 0,
            "every line of 2.1.328 reads as JSON"
        );
        assert_eq!(
            head.first_prompt.as_deref(),
            Some("PARENT-7Q: /musician task-01")
        );
        // The context is the parent's latest main-chain response: the zero-usage turns
        // after the subagent (the script's `done`).
        assert_eq!(tally.context_tokens, 0);
    }
}
