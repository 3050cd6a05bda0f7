//! Nothing lost, nothing twice: maestro and its reader killed at random points, over and
//! over, while a Musician's lines and the Conductor's messages keep coming; the reader
//! resumes with `--after` its last handled cursor each time. Every anomaly and message is
//! handled exactly once and none after a cursor is marked replayed, with SIGKILL and
//! SIGTERM, with the wall clock stepped back an hour between runs, and with a second
//! maestro telling the project while the reader is stopped.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::common::{Scratch, maestro};

/// A small, seeded generator: the rounds are the same from run to run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

/// Appends a self-correction line and inserts a Conductor message every few ms until
/// stopped; counts what it wrote.
struct Writer {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(s: &Scratch) -> Self {
        let (stop, written) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (db, log) = (s.db(), s.temp().join("task-01-status"));
        let thread = {
            let (stop, written) = (stop.clone(), written.clone());
            std::thread::spawn(move || {
                let conn = rusqlite::Connection::open(db).unwrap();
                conn.busy_timeout(Duration::from_secs(5)).unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let mut f = std::fs::OpenOptions::new()
                        .append(true)
                        .create(true)
                        .open(&log)
                        .unwrap();
                    std::io::Write::write_all(
                        &mut f,
                        format!("step {n} self-correction: mark-{n}\n").as_bytes(),
                    )
                    .unwrap();
                    conn.execute(
                        "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-01', 'task-00', ?1, 'instruction')",
                        [format!("msg-{n}")],
                    )
                    .unwrap();
                    written.store(n, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(7));
                }
            })
        };
        Self {
            stop,
            written,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        self.written.load(Ordering::SeqCst)
    }
}

/// What the reader handled: each anomaly line and message, how many times.
#[derive(Default)]
struct Handled {
    counts: HashMap<String, u32>,
    cursor: Option<String>,
}

impl Handled {
    /// Takes one printed line; `resumed`: the run was given a cursor.
    fn take(&mut self, line: &str, resumed: bool) {
        let v: Value = serde_json::from_str(line).unwrap();
        let key = match v["event"].as_str() {
            Some("anomaly") => v["detail"].as_str().map(|d| format!("a:{d}")),
            Some("message") => v["message"].as_str().map(|m| format!("m:{m}")),
            _ => None,
        };
        if resumed {
            assert!(
                v.get("replayed").is_none(),
                "replayed after a cursor: {line}"
            );
        }
        if let Some(key) = key {
            *self.counts.entry(key).or_default() += 1;
        }
        self.cursor = v["cursor"].as_str().map(str::to_owned);
    }
}

/// The libfaketime library, when installed.
fn faketime() -> Option<&'static str> {
    [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
}

fn spawn(s: &Scratch, data: &std::path::Path, after: Option<&str>, back_an_hour: bool) -> Child {
    let mut cmd: Command = maestro();
    cmd.env("XDG_DATA_HOME", data)
        .args(["--no-tui", "--json", "--project"])
        .arg(s.root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(c) = after {
        cmd.args(["--after", c]);
    }
    if back_an_hour && let Some(lib) = faketime() {
        cmd.env("LD_PRELOAD", lib).env("FAKETIME", "-3600");
    }
    cmd.spawn().unwrap()
}

/// One round: the reader reads for a while (`lines` lines at most, or `ms`), then it
/// and maestro are killed (SIGKILL or SIGTERM), lines left in the pipe unread.
fn round(s: &Scratch, data: &std::path::Path, handled: &mut Handled, rng: &mut Lcg, back: bool) {
    let after = handled.cursor.clone();
    let mut child = spawn(s, data, after.as_deref(), back);
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (lines, end) = (
        rng.next(400),
        Instant::now() + Duration::from_millis(50 + rng.next(400)),
    );
    let mut read = 0;
    // A reader with no cursor yet handles at least one line: it has a place after.
    let first = Instant::now() + crate::common::DEADLINE;
    while read < lines.max(u64::from(after.is_none())) {
        let until = if after.is_none() && read == 0 {
            first
        } else {
            end
        };
        let Ok(line) = rx.recv_timeout(until.saturating_duration_since(Instant::now())) else {
            break;
        };
        handled.take(&line, after.is_some());
        read += 1;
    }
    drop(rx);
    let signal = if rng.next(2) == 0 {
        Signal::SIGKILL
    } else {
        Signal::SIGTERM
    };
    let _ = kill(Pid::from_raw(child.id() as i32), signal);
    let _ = child.wait();
}

/// The last run: read until everything written is handled.
fn read_to_the_end(s: &Scratch, data: &std::path::Path, handled: &mut Handled, written: u64) {
    let mut child = spawn(s, data, handled.cursor.clone().as_deref(), false);
    let resumed = handled.cursor.is_some();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let end = Instant::now() + Duration::from_secs(60);
    let done = |h: &Handled| {
        (1..=written).all(|n| {
            h.counts
                .contains_key(&format!("a:step {n} self-correction: mark-{n}"))
                && h.counts.contains_key(&format!("m:msg-{n}"))
        })
    };
    while !done(handled) {
        let line = rx
            .recv_timeout(end.saturating_duration_since(Instant::now()))
            .expect("everything written arrives");
        handled.take(&line, resumed);
    }
    // A moment for anything doubled to show itself, then a clean stop.
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        handled.take(&line, resumed);
    }
    let _ = child.wait();
}

fn kills_lose_and_double_nothing(rounds: u32, back: bool, second_maestro: bool) {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    let data = tempfile::tempdir().unwrap();
    let writer = Writer::start(&s);
    let mut handled = Handled::default();
    let mut rng = Lcg(0x5eed_0042);
    for r in 0..rounds {
        round(&s, data.path(), &mut handled, &mut rng, back && r % 2 == 1);
        if second_maestro && r % 3 == 2 {
            // A dashboard left open beside the script, while the script is stopped.
            let mut other = spawn(&s, data.path(), None, false);
            std::thread::sleep(Duration::from_millis(150 + rng.next(200)));
            let _ = kill(Pid::from_raw(other.id() as i32), Signal::SIGTERM);
            let _ = other.wait();
        }
    }
    let written = writer.finish();
    eprintln!(
        "written {written}, handled before the last run {}",
        handled.counts.len()
    );
    read_to_the_end(&s, data.path(), &mut handled, written);
    let twice: Vec<_> = handled.counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "handled more than once: {twice:?}");
    assert_eq!(
        handled.counts.len() as u64,
        2 * written,
        "every anomaly and message once"
    );
}

#[test]
fn random_kills_of_maestro_and_its_reader_lose_and_double_nothing() {
    kills_lose_and_double_nothing(30, false, false);
}

#[test]
fn with_the_clock_stepped_back_an_hour_between_runs() {
    if faketime().is_none() {
        eprintln!(
            "skipped with_the_clock_stepped_back_an_hour_between_runs: libfaketime is not installed (apt-get install faketime)"
        );
        return;
    }
    kills_lose_and_double_nothing(30, true, false);
}

#[test]
fn with_a_second_maestro_telling_the_project_while_the_reader_is_stopped() {
    kills_lose_and_double_nothing(30, false, true);
}

/// A cursor of another project's journal, and one past this journal's end, are refused
/// with the reason (exit 2), before anything is printed.
#[test]
fn a_foreign_or_impossible_cursor_is_refused() {
    let (a, b) = (Scratch::new(), Scratch::new());
    let data = tempfile::tempdir().unwrap();
    let first_cursor = |s: &Scratch| {
        let mut m = spawn(s, data.path(), None, false);
        let mut out = BufReader::new(m.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let _ = kill(Pid::from_raw(m.id() as i32), Signal::SIGTERM);
        let _ = m.wait();
        serde_json::from_str::<Value>(&line).unwrap()["cursor"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let of_b = first_cursor(&b);
    first_cursor(&a);
    let refuse = |cursor: &str| {
        let out = maestro()
            .env("XDG_DATA_HOME", data.path())
            .args(["--no-tui", "--json", "--after", cursor, "--project"])
            .arg(a.root())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{cursor}");
        assert!(out.stdout.is_empty());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refuse(&of_b);
    assert!(err.contains("belongs to journal"), "{err}");
    let (id, _) = of_b.split_once('-').unwrap();
    let a_id = first_cursor(&a).split_once('-').unwrap().0.to_owned();
    assert_ne!(id, a_id);
    let err = refuse(&format!("{a_id}-999999"));
    assert!(err.contains("past the end"), "{err}");
}

/// Each of maestro's own files for a project (the journal, the event log, their lock,
/// the pipelines' lock) replaced by a symlink to a file of the user's, or by a FIFO: the
/// start is not held up, and nothing is written through.
#[test]
fn own_files_planted_as_links_or_fifos_are_never_written_through_and_never_hang() {
    for planted in ["journal.tsv", "events.jsonl", "events.lock", "pipelines"] {
        for fifo in [false, true] {
            let s = Scratch::new();
            let data = tempfile::tempdir().unwrap();
            let key = maestro::core::paths::ProjectKey::of(s.root()).key;
            let dir = data.path().join("maestro");
            let path = if planted == "pipelines" {
                dir.join("locks").join(format!("pipelines-{key}.lock"))
            } else {
                dir.join("events").join(&key).join(planted)
            };
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let secret = data.path().join("users-file");
            std::fs::write(&secret, "the user's own\n").unwrap();
            if fifo {
                nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
            } else {
                std::os::unix::fs::symlink(&secret, &path).unwrap();
            }
            let mut m = spawn(&s, data.path(), None, false);
            let mut out = BufReader::new(m.stdout.take().unwrap());
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = out.read_line(&mut line);
                let _ = tx.send(line);
            });
            let line = rx
                .recv_timeout(crate::common::DEADLINE)
                .unwrap_or_else(|_| {
                    panic!(
                        "{planted} as a {}: the start hung",
                        if fifo { "FIFO" } else { "link" }
                    )
                });
            assert!(line.contains("\"event\""), "{planted}: {line}");
            let _ = kill(Pid::from_raw(m.id() as i32), Signal::SIGTERM);
            let _ = m.wait();
            assert_eq!(
                std::fs::read_to_string(&secret).unwrap(),
                "the user's own\n",
                "{planted}: written through"
            );
        }
    }
}
