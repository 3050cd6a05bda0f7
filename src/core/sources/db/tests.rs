//! The database source against real `SQLite` files.
use super::*;

#[test]
fn reports_parse_back_into_keys() {
    let text = "SENTINEL: [14:41:03] task-04\nAnomaly: stalled\nDetail: No new entries in temp/task-04-status for 7 minutes. Last entry: \"x\"";
    let (task, kind, detail) = parse_report(text).unwrap();
    assert_eq!(task.as_str(), "task-04");
    assert_eq!(kind, AnomalyKind::Stalled);
    assert_eq!(detail, "Last entry: \"x\"");
    assert!(parse_report("SENTINEL: [x] ../etc\nAnomaly: stalled\nDetail: y").is_none());
    assert!(parse_report("hello").is_none());
}
