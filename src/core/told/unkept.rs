//! What was told while the journal could not keep it (it could not be written, its lock
//! was held by a stopped maestro, it could not be opened at start): held here, bounded,
//! and written to the journal as soon as it can be, marked `replayed` (some reader was
//! told it already, with a null cursor). So a reader resuming later gets it once, not
//! as new, and a maestro started later finds it told.

use std::collections::VecDeque;
use std::sync::Arc;

use super::file::Entry;

/// The most events held (and their bytes); past either, the oldest are let go and the
/// journal says how many in a `gap`.
const MAX_EVENTS: usize = 10_000;
const MAX_BYTES: usize = 8 << 20;

/// One event told with a null cursor: its key fields and its line as printed.
#[derive(Debug)]
pub struct Held {
    pub entry: Entry,
    pub json: Arc<str>,
}

/// The events told while the journal could not keep them, oldest first.
#[derive(Debug, Default)]
pub struct Unkept {
    held: VecDeque<Held>,
    bytes: usize,
    /// Let go past the bound, not yet said in the journal.
    dropped: u64,
}

impl Unkept {
    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.dropped == 0
    }

    /// Holds one event; an event without an identity is given one of its own, so a
    /// reader that printed it (`Told::key`) knows it again when the journal gets it.
    pub fn hold(&mut self, mut entry: Entry, json: Arc<str>) -> (u64, u64) {
        if entry.slot == 0 {
            entry.slot = crate::core::paths::fnv1a(json.as_bytes()).max(1);
            entry.fingerprint = entry.first_ns as u64 ^ entry.seq;
        }
        self.bytes += json.len();
        let key = (entry.slot, entry.fingerprint);
        self.held.push_back(Held { entry, json });
        while self.held.len() > MAX_EVENTS || self.bytes > MAX_BYTES {
            let Some(old) = self.held.pop_front() else {
                break;
            };
            self.bytes -= old.json.len();
            self.dropped += 1;
        }
        key
    }

    /// How many were let go and not said yet.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// `count` of them were said in the journal (a `gap`): forgotten now, not before,
    /// so a gap that could not be written (a full disk) is said whole later.
    pub fn said_dropped(&mut self, count: u64) {
        self.dropped = self.dropped.saturating_sub(count);
    }

    /// The oldest held, to be written.
    pub fn front(&self) -> Option<&Held> {
        self.held.front()
    }

    /// The oldest held was written (or is in the journal already).
    pub fn pop(&mut self) {
        if let Some(old) = self.held.pop_front() {
            self.bytes -= old.json.len();
        }
    }
}

/// A held event's line as the journal keeps it: its own cursor, and `replayed` (it was
/// printed before, with a null cursor).
pub fn kept_line(json: &str, cursor: super::Cursor) -> String {
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(serde_json::Value::Object(mut fields)) => {
            fields.insert("cursor".into(), cursor.to_string().into());
            fields.insert("replayed".into(), true.into());
            crate::core::text::json_line(&serde_json::Value::Object(fields))
        }
        _ => json.to_owned(),
    }
}

/// The `gap` the journal keeps when held events were let go.
pub fn dropped_line(ts: &str, count: u64, cursor: super::Cursor) -> String {
    crate::core::text::json_line(&serde_json::json!({
        "ts": ts,
        "event": "gap",
        "detail": format!(
            "{count} events were told while the journal could not keep them and are not in it (more than maestro holds meanwhile)"
        ),
        "count": count,
        "cursor": cursor.to_string(),
    }))
}
