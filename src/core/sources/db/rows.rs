//! Reading `orchestration_tasks` and `orchestration_messages` rows, whatever storage
//! class a writer put in a column.

use crate::core::domain::{AnomalyKind, TaskId, dedupe_detail};
use crate::core::event::{MessageRow, TaskRow};

/// A task row from `SELECT task_id, state, worked_by, session_id, last_heartbeat,
/// retry_count, last_error …` (the first seven columns).
pub fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok(TaskRow {
        task_id: r.get::<_, Option<String>>(0)?.unwrap_or_default(),
        state: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
        worked_by: r.get(2)?,
        session_id: r.get(3)?,
        last_heartbeat: r.get(4)?,
        retry_count: r.get::<_, Option<i64>>(5)?.unwrap_or(0),
        last_error: r.get(6)?,
    })
}

/// A message row from `SELECT id, task_id, from_session, message_type, message,
/// timestamp …`, every text column taken whatever its storage class.
pub fn message_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MessageRow> {
    Ok(MessageRow {
        id: r.get(0)?,
        task_id: text(r, 1)?,
        from_session: text(r, 2)?,
        message_type: text(r, 3)?,
        message: text(r, 4)?,
        timestamp: text(r, 5)?,
    })
}

/// Whether a row of `SELECT task_id, state, worked_by, session_id, last_heartbeat,
/// retry_count, last_error` holds what `prev` holds (anything unusual reads as changed).
pub(super) fn same_row(r: &rusqlite::Row<'_>, prev: &TaskRow) -> bool {
    use rusqlite::types::ValueRef;
    let text = |i: usize, want: Option<&str>| match r.get_ref(i) {
        Ok(ValueRef::Null) => want.is_none(),
        Ok(ValueRef::Text(t)) => want.is_some_and(|w| w.as_bytes() == t),
        _ => false,
    };
    text(0, Some(&prev.task_id))
        && text(1, Some(&prev.state))
        && text(2, prev.worked_by.as_deref())
        && text(3, prev.session_id.as_deref())
        && text(4, prev.last_heartbeat.as_deref())
        && match r.get_ref(5) {
            Ok(ValueRef::Integer(n)) => n == prev.retry_count,
            Ok(ValueRef::Null) => prev.retry_count == 0,
            _ => false,
        }
        && text(6, prev.last_error.as_deref())
}

/// A text column that may hold any storage class (a writer may have put a number there).
pub fn text(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    use rusqlite::types::ValueRef;
    Ok(match r.get_ref(i)? {
        ValueRef::Null => None,
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    })
}

/// Reads back a report in the Conductor's format into its dedupe key.
pub fn parse_report(text: &str) -> Option<(TaskId, AnomalyKind, String)> {
    let mut lines = text.lines();
    let head = lines.next()?.strip_prefix("SENTINEL: ")?;
    let task = head.rsplit(' ').next().and_then(TaskId::parse)?;
    let kind = AnomalyKind::parse(lines.next()?.strip_prefix("Anomaly: ")?.trim())?;
    let detail = lines.next()?.strip_prefix("Detail: ")?;
    Some((task, kind, dedupe_detail(kind, detail)))
}
