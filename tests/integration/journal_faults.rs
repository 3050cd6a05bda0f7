//! The journal against its own file and against big logs: a status log past the start-up
//! read (8 MiB) is not retold after a restart; a journal deleted, truncated, replaced,
//! read-only or on a full disk (`journal_full_disk.rs`) is noticed, said on stdout, and
//! never gives a cursor that `--after` refuses or that later names another event;
//! comms.db replaced by a copy of itself tells no message twice.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{Running, Scratch, event, maestro};
use crate::journal_full_disk::Tmpfs;

/// `maestro --no-tui --json` on `s` with its own data folder, `--after` when given.
pub fn headless(s: &Scratch, data: &Path, after: Option<&str>) -> Running {
    let mut cmd: Command = maestro();
    cmd.env("XDG_DATA_HOME", data)
        .args(["--no-tui", "--json", "--project"])
        .arg(s.root());
    if let Some(c) = after {
        cmd.args(["--after", c]);
    }
    Running::spawn(cmd)
}

pub fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

pub(crate) fn stop(mut m: Running) -> Vec<String> {
    m.signal(nix::sys::signal::Signal::SIGTERM);
    let _ = m.rest();
    let _ = m.wait_exit();
    std::mem::take(&mut m.seen)
}

/// The anomalies among `lines`, by their detail.
fn anomalies(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| event(v) == "anomaly")
        .map(|v| v["detail"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The last cursor printed among `lines`.
fn last_cursor(lines: &[String]) -> String {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["cursor"].as_str().map(str::to_owned))
        .next_back()
        .expect("a cursor")
}

/// A marker anomaly appended now, and the reader waited for until it says it: what it
/// printed before is everything it had to catch up on.
pub(crate) fn marker(m: &mut Running, log: &Path, name: &str) -> Value {
    append(log, &format!("{name} self-correction: marker\n"));
    m.wait_json(name, |v| {
        event(v) == "anomaly" && v["detail"].as_str().is_some_and(|d| d.contains(name))
    })
}

#[test]
fn a_status_log_past_the_start_up_read_is_not_retold_when_resumed() {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    let data = tempfile::tempdir().unwrap();
    let log = s.temp().join("task-03-status");
    append(&log, "step 0 started [ctx: 40%]\n");
    let mut m = headless(&s, data.path(), None);
    m.wait_json("started", |v| {
        event(v) == "task" && v["task_id"] == "task-03"
    });
    // 110,000 lines (about 9.2 MB), a self-correction in every 500.
    let mut text = String::new();
    for i in 1..=110_000u32 {
        if i % 500 == 0 {
            text.push_str(&format!(
                "step {i} self-correction: retried the flaky part of the plan [ctx: 40%]\n"
            ));
        } else {
            text.push_str(&format!(
                "step {i} agent returned fine, moving on to the next part of the plan [ctx: 40%]\n"
            ));
        }
        if text.len() > 1 << 20 {
            append(&log, &text);
            text.clear();
        }
    }
    append(&log, &text);
    assert!(std::fs::metadata(&log).unwrap().len() > 9_000_000);
    marker(&mut m, &log, "FIRST-M1");
    let first = stop(m);
    assert_eq!(anomalies(&first).len(), 221, "220 and the marker");
    let after = last_cursor(&first);

    // Resumed after the last cursor: nothing of the log is told again.
    let mut m = headless(&s, data.path(), Some(&after));
    marker(&mut m, &log, "SECOND-M2");
    let second = stop(m);
    assert_eq!(
        anomalies(&second),
        ["SECOND-M2 self-correction: marker"],
        "{second:?}"
    );

    // 300 more plain lines, and again.
    let mut plain = String::new();
    for i in 0..300 {
        plain.push_str(&format!("step x{i} agent returned fine [ctx: 40%]\n"));
    }
    append(&log, &plain);
    let mut m = headless(&s, data.path(), Some(&last_cursor(&second)));
    marker(&mut m, &log, "THIRD-M3");
    let third = stop(m);
    assert_eq!(
        anomalies(&third),
        ["THIRD-M3 self-correction: marker"],
        "{third:?}"
    );
}

/// The journal file of a project in `data`.
pub fn journal_of(data: &Path) -> PathBuf {
    crate::common::walk(&data.join("maestro/events"))
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "journal.tsv"))
        .expect("a journal")
}

/// A reader resuming after `cursor` starts (it would exit 2 at once on a cursor its
/// journal refuses): its first lines, up to the marker.
pub(crate) fn resumes_after(s: &Scratch, data: &Path, cursor: &str, name: &str) -> Vec<String> {
    let log = s.temp().join("task-03-status");
    let mut m = headless(s, data, Some(cursor));
    marker(&mut m, &log, name);
    stop(m)
}

pub(crate) fn json_lines(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// A project with a working task-03 and a running maestro that has told its start.
pub(crate) fn running(data: &Path) -> (Scratch, Running) {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    append(
        &s.temp().join("task-03-status"),
        "step 1 started [ctx: 40%]\n",
    );
    let mut m = headless(&s, data, None);
    m.wait_json("started", |v| {
        event(v) == "task" && v["task_id"] == "task-03"
    });
    (s, m)
}

#[test]
fn a_journal_deleted_while_running_is_started_anew_and_its_cursors_resume() {
    let data = tempfile::tempdir().unwrap();
    let (s, mut m) = running(data.path());
    let log = s.temp().join("task-03-status");
    let journal = journal_of(data.path());
    std::fs::remove_file(&journal).unwrap();
    let said = marker(&mut m, &log, "AFTER-RM");
    let cursor = said["cursor"].as_str().expect("a cursor").to_owned();
    let lines = stop(m);
    assert!(
        json_lines(&lines)
            .iter()
            .any(|v| event(v) == "error" && v["detail"].as_str().unwrap().contains("deleted")),
        "said: {lines:?}"
    );
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(
        text.starts_with("#maestro-journal 1 "),
        "a new journal: {text}"
    );
    // Its cursor is accepted, and nothing before it comes again.
    let again = resumes_after(&s, data.path(), &cursor, "NEXT-START");
    assert_eq!(anomalies(&again), ["NEXT-START self-correction: marker"]);
}

#[test]
fn a_journal_cut_short_mid_run_never_gives_a_reader_a_line_that_is_not_json() {
    let data = tempfile::tempdir().unwrap();
    let (s, mut m) = running(data.path());
    let log = s.temp().join("task-03-status");
    let early = marker(&mut m, &log, "EARLY-1")["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    marker(&mut m, &log, "EARLY-2");
    let journal = journal_of(data.path());
    let len = std::fs::metadata(&journal).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&journal)
        .unwrap();
    f.set_len(len - 40).unwrap();
    marker(&mut m, &log, "LATE-1");
    marker(&mut m, &log, "LATE-2");
    let lines = stop(m);
    assert!(
        json_lines(&lines)
            .iter()
            .any(|v| event(v) == "error" && v["detail"].as_str().unwrap().contains("cut short")),
        "said: {lines:?}"
    );
    // A reader of the old journal's place resumes: a gap of unknown size, then the new
    // journal's events, each once, and nothing told before the cut told again as new.
    let after = resumes_after(&s, data.path(), &early, "NEXT-1");
    let said = json_lines(&after);
    assert_eq!(event(&said[0]), "gap", "{after:?}");
    assert!(said[0]["count"].is_null(), "{after:?}");
    assert_eq!(
        anomalies(&after),
        [
            "LATE-1 self-correction: marker",
            "LATE-2 self-correction: marker",
            "NEXT-1 self-correction: marker"
        ]
    );
    let text = std::fs::read_to_string(&journal).unwrap();
    for line in text.lines().skip(1) {
        let json = line.splitn(5, '\t').nth(4).expect("an entry");
        serde_json::from_str::<Value>(json).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    let late: Vec<&str> = text.lines().filter(|l| l.contains("LATE-")).collect();
    assert_eq!(late.len(), 2, "each later anomaly once: {text}");
}

#[test]
fn a_reader_of_a_journal_replaced_by_an_older_copy_or_another_projects_gets_a_gap() {
    let data = tempfile::tempdir().unwrap();
    let (s, mut m) = running(data.path());
    let log = s.temp().join("task-03-status");
    let journal = journal_of(data.path());
    let first = marker(&mut m, &log, "ONE")["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let copy = data.path().join("copy.tsv");
    std::fs::copy(&journal, &copy).unwrap();
    // A reader following along from the first marker.
    let mut reader = headless(&s, data.path(), Some(&first));
    marker(&mut m, &log, "TWO");
    reader.wait_json("TWO", |v| {
        v["detail"].as_str().is_some_and(|d| d.contains("TWO"))
    });
    std::fs::rename(&copy, &journal).unwrap();
    marker(&mut m, &log, "THREE");
    reader.wait_json("the gap", |v| event(v) == "gap");
    reader.wait_json("THREE", |v| {
        v["detail"].as_str().is_some_and(|d| d.contains("THREE"))
    });
    // Another project's journal put in its place.
    let other = Scratch::new();
    let other_data = tempfile::tempdir().unwrap();
    let mut o = headless(&other, other_data.path(), None);
    o.wait_json("started", |v| event(v) == "source");
    stop(o);
    std::fs::copy(journal_of(other_data.path()), &copy).unwrap();
    std::fs::rename(&copy, &journal).unwrap();
    marker(&mut m, &log, "FOUR");
    reader.wait_json("the second gap", |v| event(v) == "gap");
    reader.wait_json("FOUR", |v| {
        v["detail"].as_str().is_some_and(|d| d.contains("FOUR"))
    });
    stop(m);
    let seen = stop(reader);
    let told = anomalies(&seen);
    for name in ["TWO", "THREE", "FOUR"] {
        assert_eq!(
            told.iter().filter(|d| d.contains(name)).count(),
            1,
            "{name} once: {told:?} in {seen:#?}"
        );
    }
    json_lines(&seen);
}

/// The journal made read-only (its file for a user, its file system for root): said on
/// stdout at start, and no event gets a cursor.
#[test]
fn a_read_only_journal_is_said_on_stdout_and_gives_no_cursor() {
    use std::os::unix::fs::PermissionsExt;
    let disk = Tmpfs::mount("4m");
    let own = tempfile::tempdir().unwrap();
    let data = disk.as_ref().map_or(own.path(), |d| d.0.path());
    let (s, m) = running(data);
    stop(m);
    let journal = journal_of(data);
    if let Some(d) = &disk {
        let ro = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(d.0.path())
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ro, "remount read-only");
    } else {
        std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o400)).unwrap();
        if std::fs::OpenOptions::new()
            .append(true)
            .open(&journal)
            .is_ok()
        {
            eprintln!(
                "skipped: this user writes a read-only file anyway and cannot mount a read-only tmpfs"
            );
            return;
        }
    }
    let log = s.temp().join("task-03-status");
    let mut m = headless(&s, data, None);
    let said = m.wait_json("the journal's trouble", |v| event(v) == "error");
    assert!(
        said["detail"].as_str().unwrap().contains("journal"),
        "{said}"
    );
    let anomaly = marker(&mut m, &log, "RO-1");
    assert!(anomaly["cursor"].is_null(), "{anomaly}");
    let lines = stop(m);
    assert!(
        json_lines(&lines).iter().all(|v| v["cursor"].is_null()),
        "{lines:?}"
    );
}

#[test]
fn comms_db_replaced_by_a_copy_of_itself_tells_no_message_twice() {
    let data = tempfile::tempdir().unwrap();
    let (s, mut m) = running(data.path());
    s.conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-03', 'task-00', 'rebase (MSG-1)', 'instruction')",
            [],
        )
        .unwrap();
    m.wait_json("the message", |v| event(v) == "message");
    let copy = s.root().join("comms.copy");
    std::fs::copy(s.db(), &copy).unwrap();
    std::fs::rename(&copy, s.db()).unwrap();
    s.conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-03', 'task-00', 'then test (MSG-2)', 'instruction')",
            [],
        )
        .unwrap();
    m.wait_json("the second message", |v| {
        event(v) == "message" && v["message"].as_str().is_some_and(|t| t.contains("MSG-2"))
    });
    let lines = stop(m);
    let messages: Vec<Value> = json_lines(&lines)
        .into_iter()
        .filter(|v| event(v) == "message")
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
}

/// The key an older maestro gave a project: FNV-1a of its canonical path.
fn legacy_key(root: &Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in std::fs::canonicalize(root)
        .unwrap()
        .as_os_str()
        .as_encoded_bytes()
    {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// A journal an older maestro kept under the project's old key is carried over to the
/// new key: the cursor it gave still resumes, and nothing before it comes again.
#[test]
fn a_journal_kept_under_the_old_project_key_is_carried_over() {
    let data = tempfile::tempdir().unwrap();
    let (s, mut m) = running(data.path());
    let log = s.temp().join("task-03-status");
    let said = marker(&mut m, &log, "BEFORE-UPGRADE");
    let cursor = said["cursor"].as_str().expect("a cursor").to_owned();
    stop(m);
    let folder = journal_of(data.path()).parent().unwrap().to_path_buf();
    let old = folder.with_file_name(legacy_key(s.root()));
    std::fs::rename(&folder, &old).unwrap();
    let again = resumes_after(&s, data.path(), &cursor, "AFTER-UPGRADE");
    assert_eq!(anomalies(&again), ["AFTER-UPGRADE self-correction: marker"]);
    assert!(
        !json_lines(&again).iter().any(|v| event(v) == "gap"),
        "{again:?}"
    );
    assert!(folder.join("journal.tsv").is_file() && !old.exists());
}

/// A log that appears already holding one 50 MB line (no newline yet) is read from that
/// line's start, not from its last 8 MiB: when the newline comes the line is told, cut,
/// as it is in a file that grew to it.
#[test]
fn a_new_log_holding_one_huge_line_tells_it_cut_when_it_ends() {
    let data = tempfile::tempdir().unwrap();
    let (s, mut m) = running(data.path());
    s.set_task("task-04", "working");
    let log = s.temp().join("task-04-status");
    let mut line = b"step 1 self-correction: HUGE-LINE ".to_vec();
    line.resize(50_000_000, b'x');
    // It appears whole (written beside, then renamed in), as a copied log does.
    let beside = s.root().join("task-04-status.part");
    std::fs::write(&beside, &line).unwrap();
    std::fs::rename(&beside, &log).unwrap();
    m.wait_json("the note on the large log", |v| {
        v["detail"]
            .as_str()
            .is_some_and(|d| d.contains("task-04-status holds"))
    });
    append(&log, "\n");
    let told = m.wait_json("the huge line", |v| {
        event(v) == "anomaly" && v["task_id"] == "task-04"
    });
    let detail = told["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("step 1 self-correction: HUGE-LINE"),
        "{detail}"
    );
    assert!(
        detail.contains('…'),
        "cut: {}",
        &detail[..detail.len().min(200)]
    );
    stop(m);
}

/// The journal's name and its first seven places beside it taken by folders, then the
/// journal itself taken mid-run: the journal moves on to a free name each time (no bound
/// on how many are taken), its cursors are never null, and a cursor of the first
/// journal still resumes.
#[test]
fn taken_journal_names_never_leave_the_journal_without_a_place() {
    let data = tempfile::tempdir().unwrap();
    let (s, mut m) = running(data.path());
    let log = s.temp().join("task-03-status");
    let first = marker(&mut m, &log, "FIRST");
    let first = first["cursor"].as_str().expect("a cursor").to_owned();
    drop(stop(m));
    let journal = journal_of(data.path());
    let dir = journal.parent().unwrap().to_path_buf();
    for n in 2..=8 {
        std::fs::create_dir(dir.join(format!("journal.{n}.tsv"))).unwrap();
    }
    std::fs::rename(&journal, dir.join("kept-aside")).unwrap();
    std::fs::create_dir(&journal).unwrap();
    let mut m = headless(&s, data.path(), None);
    let next = marker(&mut m, &log, "AFTER-TAKEN");
    assert!(next["cursor"].is_string(), "{next}");
    drop(stop(m));
    assert!(dir.join("journal.9.tsv").is_file());
    // The first journal's cursor: a gap of unknown size, then the new journal.
    let after = resumes_after(&s, data.path(), &first, "RESUMED");
    assert!(
        json_lines(&after).iter().any(|v| event(v) == "gap"),
        "{after:?}"
    );
}
