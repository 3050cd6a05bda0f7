//! A whole orchestration left alone, with real Claude Code sessions, finishes. Three
//! Musicians (real `claude -p` sessions, scripted by the model server, each opened by
//! `maestro task launch` in its window) each work, ask for a checkpoint review, wait on
//! `maestro musician watch --pause`, work on, ask for their final review and complete.
//! The Conductor is driven by `maestro conductor watch`: it approves each review it is
//! told and relaunches a Musician it is told is dead.
//!
//! Faults injected (maestro runs under umask 000 throughout); each task's fate is drawn
//! from a seed (`ORCH_SEED` replays a draw):
//! - one Musician hits the same error twice (each told, each answered with a fix); its
//!   first launch is asked twice at once (one window opens, the other is refused);
//! - one asks for a context handoff: the first relaunch is interrupted (SIGKILL, SIGINT
//!   or SIGHUP, drawn too) while it holds the old session stopped, and nothing may stay
//!   stopped; the old session runs
//!   again and a second relaunch replaces it, or, had the first released its successor,
//!   the guardian ends the old one;
//! - one Musician's session is killed while it works: the watcher must tell it. Its
//!   first relaunch finds no claude on PATH, its second a gate folder opened to others
//!   while its window starts: each must change nothing; then two, asked for at once
//!   from inside a Claude Code session (one runs, one is refused), bring a session of
//!   its own that finishes the task.
//!
//! Also: the hooks are installed by maestro under umask 000 into a project with no
//! `.claude/`; the shell of the first Conductor watcher is killed (the watcher must end
//! with it); the real Conductor session is killed and `maestro souffleur` recovers one
//! (the recovery prompt, its permission held to the ceiling against the payload, a
//! clean environment); twenty 1 MB messages flood the Conductor; the Souffleur fails; a
//! headless maestro watches beside the run with its journal on a full disk (given room
//! midway) and its journal's names taken. The poller guard is on throughout.
//!
//! At the end: every task `complete`, one handoff for the killed task, each review,
//! error, death and message told once (a message by `conductor watch` or by the hook's
//! hand-over to the recovered Conductor, never both), no process left stopped, no
//! session doubled.
mod beside;
mod conductor;
mod podium;
mod scripts;
mod world;

use std::time::{Duration, Instant};

use super::{ModelServer, Reply};
use crate::common::wait_until;
use conductor::{handle, watch_once};
use scripts::{Fate, TASKS, musician, relaunched};
use world::{
    conductor_messages, end_windows, flood_and_fail_the_souffleur, kill_when_seen,
    launch_musicians, setup, stopped_processes,
};

/// The longest the whole orchestration may take.
const WHOLE: Duration = Duration::from_secs(240);

/// What the Conductor was told, and did.
#[derive(Default)]
pub(super) struct Told {
    /// (task, state) as told, in order.
    states: Vec<(String, String)>,
    /// Message ids told.
    messages: Vec<i64>,
    relaunches: usize,
    refused_relaunches: usize,
    souffleur_failed: usize,
    /// Relaunches killed mid-proof.
    killed_mid_proof: usize,
    /// The test's last message heard: every fault has been made.
    faults_done: bool,
}

/// The tasks each fate befell, drawn from the seed (`ORCH_SEED`, else the clock): one
/// of the six orders of the three fates.
struct Draw {
    dying: &'static str,
    erring: &'static str,
    handing: &'static str,
    /// What interrupts the handoff's first relaunch.
    interrupt: nix::sys::signal::Signal,
}

impl Draw {
    fn new() -> Self {
        let seed: u64 = std::env::var("ORCH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64)
            });
        let mut fates = [Fate::Dies, Fate::Errs, Fate::HandsOff];
        let draw = (seed % 6) as usize;
        fates.rotate_left(draw % 3);
        if draw >= 3 {
            fates.swap(1, 2);
        }
        let of = |f: Fate| TASKS[fates.iter().position(|x| *x == f).unwrap_or(0)];
        let d = Self {
            dying: of(Fate::Dies),
            erring: of(Fate::Errs),
            handing: of(Fate::HandsOff),
            interrupt: {
                use nix::sys::signal::Signal::{SIGHUP, SIGINT, SIGKILL};
                [SIGKILL, SIGINT, SIGHUP][(seed / 6 % 3) as usize]
            },
        };
        eprintln!(
            "ORCH_SEED={seed}: {}'s session is killed, {} errs twice, {} hands off (its relaunch interrupted by {})",
            d.dying, d.erring, d.handing, d.interrupt
        );
        d
    }

    fn fate_of(&self, task: &str) -> Fate {
        if task == self.dying {
            Fate::Dies
        } else if task == self.erring {
            Fate::Errs
        } else {
            Fate::HandsOff
        }
    }

    /// Every session's script: each task's first session and its relaunched one.
    fn script(&self) -> Vec<(String, Vec<Reply>)> {
        let mut script = Vec::new();
        // A relaunch's prompt begins with the first one's, then says where to pick up:
        // its conversation is listed first, so the longer marker wins the tie.
        for task in TASKS {
            script.push((relaunch_marker(task), relaunched(task)));
            script.push((format!("ORCH-{task}"), musician(task, self.fate_of(task))));
        }
        script.extend(podium::scripts());
        script
    }
}

#[test]
fn a_whole_orchestration_left_alone_finishes_under_faults() {
    let name = "a_whole_orchestration_left_alone_finishes_under_faults";
    let Some(claude) = super::claude_or_skip(name) else {
        return;
    };
    let draw = Draw::new();
    let script = draw.script();
    let server = ModelServer::start(
        script
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect(),
    );
    let world = setup(&claude, &server);
    let beside = beside::Beside::start(&world);
    let podium = podium::Podium::start(&world, &claude);
    // A maestro reporting to the database: the Sentinel's reports become messages to
    // the Conductor, and the hook hands a working Conductor what is not told yet.
    let mut reporter =
        crate::common::Running::spawn(world.maestro(&["--no-tui", "--json", "--report-to-db"]));
    reporter.wait_json("the reporter started", |v| {
        v["task_id"] == "task-00" && v["event"] == "task"
    });
    // The first watcher, its shell killed: it ends; the baseline is kept.
    watch_once(&world, true);
    launch_musicians(&world, draw.erring);
    let room = beside.as_ref().map(beside::Beside::room);
    let told = std::thread::scope(|scope| {
        let killer = scope.spawn(|| {
            kill_when_seen(&world, draw.dying);
            // Once the dead task's relaunches are over (one runs without claude: a
            // recovery meanwhile would fail for that, as it must).
            wait_until("the dead task relaunched", || {
                world::session_of(draw.dying, true).is_some()
            });
            podium.kill_and_recover(&world);
            if let Some(filler) = &room {
                std::fs::remove_file(filler).unwrap();
            }
            flood_and_fail_the_souffleur(&world);
            wait_until("the recovered Conductor's short call over", || {
                podium::checked(&server)
            });
            // Told to the Conductor last: its loop goes on until it has heard it.
            world::say_faults_done(&world);
        });
        let told = conduct(&world, draw.interrupt, &|| {
            podium::handed_over(&server).0.len()
        });
        killer.join().unwrap();
        told
    });
    every_task_finished_once(&world, &draw, &told, &server);
    every_event_told_once(&world, &draw, &told, &server);
    reporter.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(reporter.wait_exit(), 0);
    podium::one_conductor_recovered(&world);
    if let Some(b) = beside {
        b.finish();
    }
    end_windows(&world);
}

/// What only a relaunched session's prompt holds (as a transcript or a request quotes it).
fn relaunch_marker(task: &str) -> String {
    format!("ORCH-{task}\\n\\nPrevious session:")
}

/// The Conductor's loop: watchers in a row, each event handled, until every task is
/// complete and every message for the Conductor told (a flood is told in bounded
/// tellings, the last ones after the work is done).
fn conduct(
    world: &world::World,
    interrupt: nix::sys::signal::Signal,
    handed_over: &dyn Fn() -> usize,
) -> Told {
    let mut told = Told::default();
    let started = Instant::now();
    while !told.faults_done
        || TASKS.iter().any(|t| world.state(t) != "complete")
        || told.messages.len() + handed_over() < conductor_messages(world).len()
    {
        assert!(
            started.elapsed() < WHOLE,
            "the orchestration did not finish: {:?}; told {:?}",
            TASKS.iter().map(|t| world.state(t)).collect::<Vec<_>>(),
            told.states
        );
        for event in watch_once(world, false) {
            // Shown when the test fails: what the Conductor was told, in order.
            eprintln!("told: {event}");
            handle(world, &event, &mut told, interrupt);
        }
    }
    told
}

/// The transcripts under the test's home that hold `marker`.
fn transcripts_holding(world: &world::World, marker: &str) -> usize {
    crate::common::walk(&world.rig.rig.home.path().join(".claude/projects"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(marker)))
        .count()
}

/// Every task complete; one relaunch each for the dead and the handing task (the one
/// asked beside the first refused, the one killed mid-proof never doubling a session);
/// no process stopped.
fn every_task_finished_once(world: &world::World, draw: &Draw, told: &Told, server: &ModelServer) {
    for task in TASKS {
        assert_eq!(world.state(task), "complete", "{task}");
    }
    // The handoff's first relaunch was killed mid-proof; a second ran unless the first
    // had released its session.
    assert!(
        (1..=2).contains(&told.relaunches)
            && (told.refused_relaunches, told.killed_mid_proof) == (3, 1),
        "{} relaunches, {} refused, {} killed; {:?}; errors the sessions saw: {:?}",
        told.relaunches,
        told.refused_relaunches,
        told.killed_mid_proof,
        told.states,
        super::replace_pollers::tool_results(server, true)
    );
    assert_eq!(conductor::handoffs(world, draw.dying), 1);
    // One new session of each relaunched task, each with a transcript of its own (not
    // taken for a child of the session that asked for it).
    assert_eq!(transcripts_holding(world, &relaunch_marker(draw.dying)), 1);
    assert_eq!(
        transcripts_holding(world, &relaunch_marker(draw.handing)),
        1
    );
    assert_eq!(stopped_processes(world.rig.root()), Vec::<u32>::new());
}

/// Each review (two per task), error, death and message told once: a message by the
/// watcher or by the hook's hand-over to the working Conductor (never both); a
/// hand-over bounded.
fn every_event_told_once(world: &world::World, draw: &Draw, told: &Told, server: &ModelServer) {
    let count = |task: &str, state: &str| {
        told.states
            .iter()
            .filter(|(t, s)| t == task && s == state)
            .count()
    };
    for task in TASKS {
        assert_eq!(count(task, "needs_review"), 2, "{task}: {:?}", told.states);
    }
    assert_eq!(count(draw.erring, "error"), 2, "{:?}", told.states);
    assert_eq!(count(draw.handing, "error"), 1, "{:?}", told.states);
    let deaths: Vec<&(String, String)> = told.states.iter().filter(|(_, s)| s == "dead").collect();
    assert_eq!(deaths, [&(draw.dying.to_owned(), "dead".to_owned())]);
    let mut ids = conductor_messages(world);
    let (handed, longest) = podium::handed_over(server);
    eprintln!("handed over by the hook: {handed:?} (longest {longest} bytes)");
    let mut got = told.messages.clone();
    got.extend(&handed);
    got.sort_unstable();
    ids.sort_unstable();
    assert_eq!(
        got, ids,
        "each message once (handed over by the hook: {handed:?})"
    );
    assert!(longest < 16 * 1024, "a hand-over of {longest} bytes");
    assert_eq!(told.souffleur_failed, 1, "{:?}", told.states);
}
