//! A headless maestro beside the orchestration, its journal on a disk that is full when
//! the run starts and gets room back midway, its journal's name and the next seven
//! taken: it must tell the whole run all the same, say once that it cannot keep its
//! journal, move on to a free name, and count in the journal's `gap` every event it let
//! go.

use std::path::PathBuf;

use serde_json::Value;

use super::scripts::TASKS;
use super::world::World;
use crate::common::{Running, event};
use crate::journal_full_disk::{Tmpfs, errors_saying, fill, gaps_and_kept_later};

pub(super) struct Beside {
    _disk: Tmpfs,
    filler: PathBuf,
    /// The folder of its journals.
    journals: PathBuf,
    m: Running,
}

impl Beside {
    /// Started and its disk filled; `None`, having said why, where no tmpfs can be
    /// mounted (the rest of the run goes on without it).
    pub(super) fn start(world: &World) -> Option<Self> {
        // Room for the whole run once the filler goes (the flood is 20 MB).
        let disk = Tmpfs::mount("64m")?;
        let mut cmd = world.maestro(&["--no-tui", "--json"]);
        cmd.env("XDG_DATA_HOME", disk.0.path());
        let mut m = Running::spawn(cmd);
        m.wait_json("the first event kept", |v| v["cursor"].is_string());
        // Its journal's name and the next seven taken (folders), mid-run.
        let journal = crate::journal_faults::journal_of(disk.0.path());
        let journals = journal
            .parent()
            .expect("the journal's folder")
            .to_path_buf();
        let folder = &journals;
        for n in 2..=8 {
            std::fs::create_dir(folder.join(format!("journal.{n}.tsv"))).unwrap();
        }
        std::fs::rename(&journal, folder.join("kept-aside")).unwrap();
        std::fs::create_dir(&journal).unwrap();
        let filler = fill(disk.0.path());
        Some(Self {
            _disk: disk,
            filler,
            journals,
            m,
        })
    }

    /// The file filling its disk: removing it gives room back.
    pub(super) fn room(&self) -> PathBuf {
        self.filler.clone()
    }

    /// Stopped: each task's completion told, the full disk said once, events kept again
    /// once there was room, and the gap counting every event told without a cursor and
    /// not kept later.
    pub(super) fn finish(mut self) {
        let complete =
            TASKS.map(|task| move |v: &Value| v["task_id"] == task && v["state"] == "complete");
        let told_before = |c: &dyn Fn(&Value) -> bool| {
            self.m
                .seen
                .iter()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|v| c(&v))
        };
        let left: Vec<&dyn Fn(&Value) -> bool> = complete
            .iter()
            .map(|c| c as &dyn Fn(&Value) -> bool)
            .filter(|c| !told_before(*c))
            .collect();
        self.m.wait_all("every task complete", &left);
        self.m.signal(nix::sys::signal::Signal::SIGTERM);
        assert_eq!(self.m.wait_exit(), 0);
        let printed: Vec<Value> = self
            .m
            .seen
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let said_full = errors_saying(&printed, "cannot write the journal");
        assert_eq!(said_full, 1, "the full disk said once");
        let not_kept = printed.iter().filter(|v| v["cursor"].is_null()).count();
        let last = printed.iter().rev().find(|v| event(v) != "error");
        assert!(not_kept > 0, "nothing was let go while the disk was full");
        assert!(
            last.is_some_and(|v| v["cursor"].is_string()),
            "not kept again once there was room: {last:?}"
        );
        // The journal moved on to the first free name.
        let journal = self.journals.join("journal.9.tsv");
        let text = std::fs::read_to_string(journal).unwrap();
        let (counted, kept_later) = gaps_and_kept_later(&text);
        assert_eq!(
            counted,
            not_kept - kept_later,
            "told {not_kept} without a cursor, kept {kept_later} later"
        );
    }
}
