//! Every fault of the journal, three times each, with two maestros of the project running
//! and a reader that is killed and resumes `--after` every cursor it was given (a plain
//! run while it has none): the reader is told no event twice, loses none outside a
//! `gap`, reads only JSON, and no `--after` run ends on its own. Also: a maestro
//! stopped while it holds the journal's lock holds up no other one.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::{Running, Scratch, event};
use crate::journal_faults::{append, headless, journal_of};
use crate::journal_full_disk::{Tmpfs, fill};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Delete,
    CutFiveBytes,
    OlderCopy,
    OtherProject,
    ReadOnlyAtStart,
    DiskFull,
    Directory,
    Fifo,
    Symlink,
}

/// Two maestros and a reader on one project, its data folder on a small tmpfs where one
/// can be mounted (the full and read-only faults need one).
struct Rig {
    s: Scratch,
    disk: Option<Tmpfs>,
    own: tempfile::TempDir,
    /// The folder of the project's journal.
    dir: PathBuf,
    plain: Vec<Running>,
    reader: Running,
    /// What the reader printed, run by run (a run's lines as they came).
    runs: Vec<Vec<String>>,
    /// Events appended so far, in order, with the round each came in.
    events: Vec<(String, usize)>,
    /// A file a planted symlink points at: never written.
    secret: PathBuf,
}

impl Rig {
    fn new(needs_disk: bool) -> Option<Self> {
        let disk = Tmpfs::mount("2m");
        if needs_disk && disk.is_none() {
            return None;
        }
        let own = tempfile::tempdir().unwrap();
        let s = Scratch::new();
        s.set_task("task-03", "working");
        let mut rig = Self {
            s,
            disk,
            own,
            dir: PathBuf::new(),
            plain: Vec::new(),
            reader: Running::spawn(Command::new("true")),
            runs: Vec::new(),
            events: Vec::new(),
            secret: PathBuf::new(),
        };
        rig.secret = rig.own.path().join("secret");
        std::fs::write(&rig.secret, "not the journal's\n").unwrap();
        append(&rig.log(), "step 1 started [ctx: 40%]\n");
        for _ in 0..2 {
            let mut m = headless(&rig.s, rig.data(), None);
            m.wait_json("started", |v| event(v) == "task");
            rig.plain.push(m);
        }
        journal_of(rig.data())
            .parent()
            .unwrap()
            .clone_into(&mut rig.dir);
        rig.reader = headless(&rig.s, rig.data(), None);
        rig.runs.push(Vec::new());
        Some(rig)
    }

    fn data(&self) -> &Path {
        self.disk.as_ref().map_or(self.own.path(), |d| d.0.path())
    }

    fn log(&self) -> PathBuf {
        self.s.temp().join("task-03-status")
    }

    /// The journal's file now: the last `journal*.tsv` that is a regular file.
    fn journal(&self) -> PathBuf {
        crate::common::walk(&self.dir)
            .into_iter()
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                name.starts_with("journal") && name.ends_with(".tsv")
            })
            .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
            .max_by_key(|p| p.file_name().unwrap().len())
            .expect("a journal")
    }

    /// Appends `n` events in one write; each maestro named in `wait` prints the last.
    fn batch(&mut self, round: usize, n: usize, wait: Waits) {
        let start = self.events.len();
        let mut text = String::new();
        for k in start..start + n {
            let name = format!("EV-{k:04}");
            text.push_str(&format!("{name} self-correction: matrix\n"));
            self.events.push((name, round));
        }
        append(&self.log(), &text);
        let last = self.events.last().unwrap().0.clone();
        let said = |v: &Value| v["detail"].as_str().is_some_and(|d| d.starts_with(&last));
        if wait.plain {
            for m in &mut self.plain {
                m.wait_json(&last, said);
            }
        }
        if wait.reader {
            self.reader.wait_json(&last, said);
            self.take_reader_lines();
        }
    }

    fn take_reader_lines(&mut self) {
        let seen = std::mem::take(&mut self.reader.seen);
        self.runs.last_mut().unwrap().extend(seen);
    }

    /// The last cursor the reader was given, in any of its runs.
    fn last_cursor(&self) -> Option<String> {
        self.runs
            .iter()
            .flatten()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["cursor"].as_str().map(str::to_owned))
            .next_back()
    }

    /// The reader killed (it must still be running) and started again after its last
    /// cursor.
    fn restart_reader(&mut self) {
        assert!(
            self.reader.child.try_wait().unwrap().is_none(),
            "the reader ended on its own: {:?}",
            self.reader.seen
        );
        self.reader.signal(nix::sys::signal::Signal::SIGKILL);
        self.reader.wait_exit();
        self.take_reader_lines();
        let cursor = self.last_cursor();
        self.reader = headless(&self.s, self.data(), cursor.as_deref());
        self.runs.push(Vec::new());
    }

    /// Every maestro stopped (the read-only fault starts them again).
    fn stop_all(&mut self) {
        for m in self.plain.iter_mut().chain([&mut self.reader]) {
            m.signal(nix::sys::signal::Signal::SIGTERM);
            m.wait_exit();
        }
        self.take_reader_lines();
    }

    fn remount(&self, how: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,{how}")])
            .arg(self.data())
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "remount {how}");
    }

    /// One round: events, the fault, events, the reader killed and resumed, the fault
    /// undone where it can be, events the resumed reader must print.
    fn round(&mut self, round: usize, fault: Fault, other: &Path) {
        // Beside the journal: a rename does not cross file systems.
        let older = self.dir.join("older.copy");
        std::fs::copy(self.journal(), &older).unwrap();
        self.batch(round, 5, Waits::ALL);
        let journal = self.journal();
        let mut filler = None;
        match fault {
            Fault::Delete => std::fs::remove_file(&journal).unwrap(),
            Fault::CutFiveBytes => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&journal)
                    .unwrap();
                f.set_len(f.metadata().unwrap().len() - 5).unwrap();
            }
            Fault::OlderCopy => std::fs::rename(&older, &journal).unwrap(),
            Fault::OtherProject => {
                std::fs::copy(other, &older).unwrap();
                std::fs::rename(&older, &journal).unwrap();
            }
            Fault::ReadOnlyAtStart => {
                self.stop_all();
                self.remount("ro");
                let data = self.data().to_owned();
                for m in &mut self.plain {
                    *m = headless(&self.s, &data, None);
                }
                self.reader = headless(&self.s, self.data(), self.last_cursor().as_deref());
                self.runs.push(Vec::new());
            }
            Fault::DiskFull => filler = Some(fill(self.data())),
            Fault::Directory => {
                std::fs::remove_file(&journal).unwrap();
                std::fs::create_dir(&journal).unwrap();
            }
            Fault::Fifo => {
                std::fs::remove_file(&journal).unwrap();
                nix::unistd::mkfifo(&journal, nix::sys::stat::Mode::S_IRWXU).unwrap();
            }
            Fault::Symlink => {
                std::fs::remove_file(&journal).unwrap();
                std::os::unix::fs::symlink(&self.secret, &journal).unwrap();
            }
        }
        self.batch(round, 5, Waits::PLAIN);
        self.restart_reader();
        if fault == Fault::ReadOnlyAtStart {
            // The resumed reader started while the journal could not be written.
            self.reader
                .wait_json("the journal's trouble", |v| event(v) == "error");
            self.take_reader_lines();
            self.remount("rw");
        }
        if let Some(f) = filler {
            std::fs::remove_file(f).unwrap();
        }
        self.batch(round, 5, Waits::ALL);
    }

    /// Runs three rounds of `fault` and checks what the reader was told.
    fn check(mut self, fault: Fault) {
        let other = self.other_projects_journal();
        for round in 0..3 {
            self.round(round, fault, &other);
        }
        self.restart_reader();
        self.batch(3, 1, Waits::ALL);
        assert!(self.reader.child.try_wait().unwrap().is_none());
        self.stop_all();
        let lines: Vec<&String> = self.runs.iter().flatten().collect();
        let parsed: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect();
        let told = |name: &str, new_only: bool| {
            parsed
                .iter()
                .filter(|v| event(v) == "anomaly")
                .filter(|v| v["detail"].as_str().is_some_and(|d| d.starts_with(name)))
                .filter(|v| !new_only || v["replayed"] != true)
                .count()
        };
        let gap_in = |run: usize| {
            self.runs.get(run).is_some_and(|r| {
                r.iter()
                    .any(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| event(&v) == "gap"))
            })
        };
        let any_gap = (0..self.runs.len()).any(gap_in);
        for (name, _) in &self.events {
            assert!(
                told(name, true) <= 1,
                "{fault:?}: {name} told twice as new: {lines:#?}"
            );
            assert!(
                told(name, false) >= 1 || any_gap,
                "{fault:?}: {name} lost outside a gap: {lines:#?}"
            );
        }
        for m in &self.plain {
            let mine: Vec<Value> = m
                .seen
                .iter()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            for (name, _) in &self.events {
                let n = mine
                    .iter()
                    .filter(|v| event(v) == "anomaly" && v["replayed"] != true)
                    .filter(|v| {
                        v["detail"]
                            .as_str()
                            .is_some_and(|d| d.starts_with(name.as_str()))
                    })
                    .count();
                assert!(n <= 1, "{fault:?}: a maestro told {name} {n} times");
            }
        }
        assert_eq!(
            std::fs::read_to_string(&self.secret).unwrap(),
            "not the journal's\n",
            "a planted link is never written through"
        );
    }

    /// Another project's journal, made by a maestro of its own.
    fn other_projects_journal(&self) -> PathBuf {
        let other = Scratch::new();
        let data = self.own.path().join("other-data");
        let mut o = headless(&other, &data, None);
        o.wait_json("started", |v| event(v) == "source");
        o.signal(nix::sys::signal::Signal::SIGTERM);
        o.wait_exit();
        journal_of(&data)
    }
}

/// Which maestros a batch waits for.
#[derive(Clone, Copy)]
struct Waits {
    plain: bool,
    reader: bool,
}

impl Waits {
    const ALL: Self = Self {
        plain: true,
        reader: true,
    };
    const PLAIN: Self = Self {
        plain: true,
        reader: false,
    };
}

fn three_rounds_of(fault: Fault) {
    let needs_disk = matches!(fault, Fault::ReadOnlyAtStart | Fault::DiskFull);
    match Rig::new(needs_disk) {
        Some(rig) => rig.check(fault),
        None => eprintln!("skipped {fault:?}: needs a tmpfs of its own"),
    }
}

#[test]
fn the_journal_deleted_three_times() {
    three_rounds_of(Fault::Delete);
}

#[test]
fn the_journal_cut_by_five_bytes_three_times() {
    three_rounds_of(Fault::CutFiveBytes);
}

#[test]
fn the_journal_replaced_by_an_older_copy_three_times() {
    three_rounds_of(Fault::OlderCopy);
}

#[test]
fn the_journal_replaced_by_another_projects_three_times() {
    three_rounds_of(Fault::OtherProject);
}

#[test]
fn the_journal_read_only_at_start_then_writable_three_times() {
    three_rounds_of(Fault::ReadOnlyAtStart);
}

#[test]
fn the_journals_disk_filled_then_freed_three_times() {
    three_rounds_of(Fault::DiskFull);
}

#[test]
fn a_directory_in_the_journals_place_three_times() {
    three_rounds_of(Fault::Directory);
}

#[test]
fn a_fifo_in_the_journals_place_three_times() {
    three_rounds_of(Fault::Fifo);
}

#[test]
fn a_symlink_in_the_journals_place_three_times() {
    three_rounds_of(Fault::Symlink);
}

/// A maestro stopped (SIGSTOP) for 10 s while another runs; the journal's lock is held
/// meanwhile by a stopped process too (`flock`), as by a maestro frozen mid-append.
#[test]
fn a_maestro_stopped_holding_the_journal_holds_up_no_other() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::os::unix::process::CommandExt;
    let Some(flock) = crate::common::find_on_path("flock") else {
        eprintln!("skipped: needs flock (util-linux)");
        return;
    };
    let mut rig = Rig::new(false).unwrap();
    rig.batch(0, 1, Waits::ALL);
    let before = rig.last_cursor().expect("a cursor");
    // -o: flock itself holds the lock (not the sleep it runs); its own process group,
    // so the sleep goes with it.
    let mut holder = Command::new(flock)
        .arg("-o")
        .arg(rig.journal())
        .args(["sleep", "30"])
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = |id: u32| Pid::from_raw(i32::try_from(id).unwrap());
    crate::common::wait_until("the holder has the lock", || {
        std::fs::read_to_string("/proc/locks").is_ok_and(|l| l.contains(&holder.id().to_string()))
    });
    kill(pid(holder.id()), Signal::SIGSTOP).unwrap();
    kill(pid(rig.plain[0].child.id()), Signal::SIGSTOP).unwrap();
    append(
        &rig.log(),
        "STOPPED-1 self-correction: while a sibling is stopped\n",
    );
    let said = rig.plain[1].wait_json_within("the anomaly", Duration::from_secs(1), |v| {
        v["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("STOPPED-1"))
    });
    assert!(said["cursor"].is_null(), "not kept yet: {said}");
    nix::sys::signal::killpg(pid(holder.id()), Signal::SIGKILL).unwrap();
    let _ = holder.wait();
    kill(pid(rig.plain[0].child.id()), Signal::SIGCONT).unwrap();
    // Once the lock is free, what was told meanwhile is kept: a reader from before the
    // stop gets it once, then what follows.
    rig.batch(1, 1, Waits::PLAIN);
    let mut reader = headless(&rig.s, rig.data(), Some(&before));
    let last = rig.events.last().unwrap().0.clone();
    reader.wait_json(&last, |v| {
        v["detail"].as_str().is_some_and(|d| d.starts_with(&last))
    });
    let stopped = reader
        .seen
        .iter()
        .filter(|l| l.contains("STOPPED-1"))
        .count();
    assert_eq!(stopped, 1, "{:#?}", reader.seen);
}
