//! End-to-end figures for the core at 10, 100 and 1,000 active tasks, each against a
//! baseline measured by the same driver in the same run. Run with
//! `cargo bench --bench pipeline` (set `MAESTRO_BENCH_QUICK=1` for 300 samples instead
//! of 1,000 and a shorter poller run).
//!
//! - append → anomaly: one line appended to one of N status files, isolated (10 to
//!   40 ms apart, after 20 uncounted), until maestro prints its report, read from its
//!   stdout by this process; the same against `tail -F -n0 FILES | grep
//!   --line-buffered` on a project of the same shape, both running, timed in turns;
//! - commit → event: a message committed by this (other) process, from the moment the
//!   commit returns until maestro prints it;
//! - the same appends to maestro's core run inside this process, stamped as the hub
//!   hands each anomaly over: what the process boundary, JSON and stdout add;
//! - at 100 tasks also: throughput (lines/s and MB/s through the log source and the
//!   Sentinel), idle CPU and RSS, and a 10-second poller as the seed's baseline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const SIZES: [usize; 3] = [10, 100, 1000];
/// The size the throughput, idle and poller figures are taken at.
const DETAIL_SIZE: usize = 100;

struct Row {
    tasks: usize,
    tail: Vec<Duration>,
    ours: Vec<Duration>,
    /// The core in this process: no process boundary, JSON or stdout.
    inside: Vec<Duration>,
    commits: Vec<Duration>,
}

fn main() {
    let quick = std::env::var_os("MAESTRO_BENCH_QUICK").is_some();
    let samples = if quick { 300 } else { 1000 };
    println!("maestro pipeline benchmark: {samples} samples per latency and size");
    let mut rows = Vec::new();
    for tasks in SIZES {
        // Two projects of the same shape, one for each reader: an append wakes one.
        let (tail_dir, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let tail_project = Project::create(tail_dir.path(), tasks);
        let project = Project::create(dir.path(), tasks);

        let mut tail = Stream::tail_grep(&tail_project);
        let mut maestro = Stream::maestro(&project);
        // Ready when every task has been seen (`init` writes no participant rows).
        for _ in 0..tasks {
            maestro.next_matching(
                |l| l.contains("\"event\":\"task\""),
                Duration::from_secs(60),
            );
        }
        if tasks == DETAIL_SIZE {
            let idle = Duration::from_secs(if quick { 5 } else { 10 });
            let (cpu, rss) = support::idle_cost(maestro.pid(), idle);
            println!(
                "idle ({}s, {tasks} quiet tasks): CPU {cpu:.3}% of a core, RSS {:.1} MB",
                idle.as_secs(),
                rss as f64 / 1024.0
            );
        }
        // The setup's own writes (two projects' files, the readers' start) reach the
        // disk before the clock starts: their write-back is the harness's, not a cost
        // of either reader (maestro's journal would wait on it, `tail` writes nothing).
        settle_disk();
        let (theirs, ours) = side_by_side(
            (&tail_project, &mut tail),
            (&project, &mut maestro),
            samples,
        );
        drop(tail);
        let commits = commit_latency(&project, &mut maestro, samples);
        println!("{tasks} tasks:");
        report(
            "  append -> match (tail -F | grep --line-buffered)",
            &theirs,
        );
        report("  append -> anomaly event (maestro)", &ours);
        report("  db commit returned -> message event (maestro)", &commits);
        if tasks == DETAIL_SIZE {
            let (lines, bytes, secs) = throughput(&project, &mut maestro, quick);
            println!(
                "  throughput: {lines} lines ({:.1} MB) in {secs:.3}s = {:.0} lines/s, {:.1} MB/s",
                bytes as f64 / 1e6,
                lines as f64 / secs,
                bytes as f64 / 1e6 / secs
            );
            let peak = support::vm_kb(maestro.pid(), "VmHWM:");
            println!(
                "  peak RSS after the throughput run: {:.1} MB",
                peak as f64 / 1024.0
            );
        }
        drop(maestro);
        let mut core = Stream::in_process(&project);
        settle_disk();
        let inside = append_latency(&project, &mut core, samples, "i");
        drop(core);
        report(
            "  append -> anomaly handed over (maestro's core in this process)",
            &inside,
        );
        if tasks == DETAIL_SIZE {
            let poll_samples = if quick { 10 } else { 30 };
            let polled = poller_latency(&project, poll_samples);
            report("  append -> detection (10 s poller)", &polled);
            let p50 = |v: &[Duration]| support::percentile(v, 50.0).as_secs_f64();
            println!(
                "  poller / maestro at p50 = {:.0}x",
                p50(&polled) / p50(&ours)
            );
        }
        rows.push(Row {
            tasks,
            tail: theirs,
            ours,
            inside,
            commits,
        });
    }
    table(&rows);
}

/// The README's table: the sizes side by side, with the ratios the goals name.
fn table(rows: &[Row]) {
    let ms = |v: &[Duration], p: f64| support::percentile(v, p).as_secs_f64() * 1000.0;
    println!();
    println!(
        "| tasks | tail \\| grep p50 / p99 | maestro p50 / p99 | ratio p50 / p99 | core in process p50 / p99 | vs 10-task p50 | commit -> event p50 / p99 |"
    );
    println!("|---|---|---|---|---|---|---|");
    let base = ms(&rows[0].ours, 50.0);
    for r in rows {
        println!(
            "| {} | {:.3} / {:.3} ms | {:.3} / {:.3} ms | {:.2}x / {:.2}x | {:.3} / {:.3} ms | {:.2}x | {:.2} / {:.2} ms |",
            r.tasks,
            ms(&r.tail, 50.0),
            ms(&r.tail, 99.0),
            ms(&r.ours, 50.0),
            ms(&r.ours, 99.0),
            ms(&r.ours, 50.0) / ms(&r.tail, 50.0),
            ms(&r.ours, 99.0) / ms(&r.tail, 99.0),
            ms(&r.inside, 50.0),
            ms(&r.inside, 99.0),
            ms(&r.ours, 50.0) / base,
            ms(&r.commits, 50.0),
            ms(&r.commits, 99.0),
        );
    }
}

struct Project {
    root: PathBuf,
    tasks: usize,
}

impl Project {
    fn create(root: &Path, tasks: usize) -> Self {
        let temp = root.join("temp");
        std::fs::create_dir(&temp).unwrap();
        support::init(root);
        let conn = rusqlite::Connection::open(root.join("comms.db")).unwrap();
        conn.execute_batch("BEGIN").unwrap();
        for i in 1..=tasks {
            let id = task(i);
            conn.execute(
                "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, 'working', datetime('now'))",
                [&id],
            )
            .unwrap();
            std::fs::write(
                temp.join(format!("{id}-status")),
                "task claimed [ctx: 5%]\n",
            )
            .unwrap();
        }
        conn.execute_batch("COMMIT").unwrap();
        Self {
            root: root.to_path_buf(),
            tasks,
        }
    }

    fn status(&self, i: usize) -> PathBuf {
        self.root.join("temp").join(format!("{}-status", task(i)))
    }

    fn append(&self, i: usize, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.status(i))
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }
}

fn task(i: usize) -> String {
    format!("task-{i:02}")
}

/// A child whose stdout lines arrive stamped with the moment they were read.
struct Stream {
    /// The process read, or `None` for the core run inside this bench.
    child: Option<Child>,
    lines: mpsc::Receiver<(Instant, String)>,
    /// Ends the in-process core's thread, then waits for it.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Stream {
    fn spawn(cmd: Command) -> Self {
        let (child, lines) = support::spawn_stamped(cmd);
        Self {
            child: Some(child),
            lines,
            stop: None,
            thread: None,
        }
    }

    /// maestro's core inside this process, with the flags `maestro` gets: each
    /// happening is stamped as the hub hands it over, before any JSON or stdout.
    fn in_process(p: &Project) -> Self {
        use maestro::core::event::What;
        let (tx, lines) = mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let overrides = maestro::settings::Overrides {
            stall_after: Some(Duration::from_secs(3600)),
            task_stale_after: Some(Duration::from_secs(3600)),
            conductor_stale_after: Some(Duration::from_secs(3600)),
            ..Default::default()
        };
        let settings = maestro::settings::Settings::resolve(None, &overrides).unwrap();
        let project = maestro::cli::project::Project {
            root: p.root.clone(),
            db: p.root.join("comms.db"),
            temp: p.root.join("temp"),
        };
        let config = project.core_config(&settings);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let clock = maestro::core::clock::Clock::system(time::UtcOffset::UTC);
                let mut core = maestro::core::runtime::start(&config, clock).unwrap();
                // As `--no-tui` without `--metrics`: nothing reads snapshots.
                core.without_snapshots();
                tokio::pin!(stopped);
                loop {
                    tokio::select! {
                        _ = &mut stopped => break,
                        h = core.happenings.recv() => {
                            let Some(h) = h else { break };
                            let at = Instant::now();
                            let line = match &h.what {
                                What::Task { .. } => "\"event\":\"task\"".to_owned(),
                                What::Anomaly(a) => a.detail.clone(),
                                _ => continue,
                            };
                            if tx.send((at, line)).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        });
        Self {
            child: None,
            lines,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn maestro(p: &Project) -> Self {
        let mut cmd = Command::new(support::exe());
        cmd.args([
            "--no-tui",
            "--json",
            "--stall-after",
            "1h",
            "--task-stale-after",
            "1h",
        ])
        .args(["--conductor-stale-after", "1h", "--project"])
        .arg(&p.root);
        Self::spawn(cmd)
    }

    fn tail_grep(p: &Project) -> Self {
        #[allow(unused_mut)]
        let files: Vec<String> = (1..=p.tasks)
            .map(|i| p.status(i).display().to_string())
            .collect();
        let script = format!(
            "exec tail -q -n0 -F {} 2>/dev/null | grep --line-buffered self-correction",
            files.join(" ")
        );
        let s = Self::spawn({
            let mut c = Command::new("sh");
            // Its own process group: the shell, `tail` and `grep` end together.
            c.arg("-c").arg(script).process_group(0);
            c
        });
        // Ready once a warm-up line comes through.
        loop {
            p.append(1, "warm-up self-correction\n");
            if s.lines.recv_timeout(Duration::from_millis(200)).is_ok() {
                break;
            }
        }
        s
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(std::process::id(), Child::id)
    }

    fn next_matching(&mut self, pred: impl Fn(&str) -> bool, within: Duration) -> Instant {
        let end = Instant::now() + within;
        loop {
            let (at, line) = self
                .lines
                .recv_timeout(end.saturating_duration_since(Instant::now()))
                .expect("expected output did not arrive in time");
            if pred(&line) {
                return at;
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if let Some(child) = &mut self.child {
            // A pipeline's shell leads its group (`tail_grep`): the whole group goes,
            // or its `tail` and `grep` would outlive the run and wake every second.
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Appends not counted, for both readers alike: the first touch of code and files after
/// start is not what a running orchestration sees.
const WARM_UP: usize = 20;

fn append_latency(p: &Project, s: &mut Stream, samples: usize, tag: &str) -> Vec<Duration> {
    let mut out = Vec::with_capacity(samples + WARM_UP);
    for n in 0..samples + WARM_UP {
        out.push(one_append(p, s, n, tag));
        pause(n);
    }
    out.split_off(WARM_UP)
}

/// Two readers timed in turns, sample by sample (which goes first alternates), each
/// on its own project: whatever the machine does over the minutes of a run (another
/// load, a clock's speed) weighs on both alike, which one reader after the other
/// does not give. Each line is as isolated as in [`append_latency`].
fn side_by_side(
    (pa, a): (&Project, &mut Stream),
    (pb, b): (&Project, &mut Stream),
    samples: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
    for n in 0..samples + WARM_UP {
        if n % 2 == 0 {
            out_a.push(one_append(pa, a, n, "t"));
            pause(n);
            out_b.push(one_append(pb, b, n, "m"));
        } else {
            out_b.push(one_append(pb, b, n, "m"));
            pause(n);
            out_a.push(one_append(pa, a, n, "t"));
        }
        pause(n);
    }
    (out_a.split_off(WARM_UP), out_b.split_off(WARM_UP))
}

/// Isolated lines, 10 to 40 ms apart, as a real orchestration writes them.
fn pause(n: usize) {
    std::thread::sleep(Duration::from_millis(10 + (n as u64 * 13) % 31));
}

/// Writes back what is dirty (`sync`), so a timed run starts on a quiet disk.
fn settle_disk() {
    let _ = Command::new("sync").status();
}

/// One line appended to a file of `p` (spread over the files, in an order unrelated
/// to their names): from before the append until the reader printed it.
fn one_append(p: &Project, s: &mut Stream, n: usize, tag: &str) -> Duration {
    let marker = format!("{tag}{n}#");
    let i = 1 + (n * 7919) % p.tasks;
    let start = Instant::now();
    p.append(i, &format!("step {n} self-correction: {marker}\n"));
    s.next_matching(|l| l.contains(&marker), Duration::from_secs(10)) - start
}

fn commit_latency(p: &Project, s: &mut Stream, samples: usize) -> Vec<Duration> {
    let conn = rusqlite::Connection::open(p.root.join("comms.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    let mut out = Vec::with_capacity(samples);
    for n in 0..samples {
        let marker = format!("commit{n}#");
        conn.execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-01', 'bench', ?1, 'system')",
            [&marker],
        )
        .unwrap();
        // From the commit's own return: what maestro adds.
        let start = Instant::now();
        let at = s.next_matching(|l| l.contains(&marker), Duration::from_secs(10));
        out.push(at - start);
        std::thread::sleep(Duration::from_millis(2));
    }
    out
}

/// Appends many plain lines in large writes, then one marker per file, and times until
/// every marker's report is printed.
fn throughput(p: &Project, s: &mut Stream, quick: bool) -> (usize, usize, f64) {
    let per_file = if quick { 2_000 } else { 10_000 };
    let line = "step 7 agent 2 returned: parsed 1024 tokens, 12 warnings [ctx: 40%]\n";
    let chunk: String = line.repeat(500);
    let mut files: Vec<std::fs::File> = (1..=p.tasks)
        .map(|i| {
            std::fs::OpenOptions::new()
                .append(true)
                .open(p.status(i))
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    for _ in 0..per_file / 500 {
        for f in &mut files {
            f.write_all(chunk.as_bytes()).unwrap();
        }
    }
    for (i, f) in files.iter_mut().enumerate() {
        writeln!(f, "end self-correction: done{i}#").unwrap();
    }
    let mut pending: std::collections::HashSet<String> =
        (0..p.tasks).map(|i| format!("done{i}#")).collect();
    let mut last = start;
    while !pending.is_empty() {
        let (at, l) = s
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("markers arrive");
        if let Some(key) = pending.iter().find(|k| l.contains(k.as_str())).cloned() {
            pending.remove(&key);
            last = at;
        }
    }
    let lines = p.tasks * (per_file + 1);
    let bytes = p.tasks * per_file * line.len();
    (lines, bytes, (last - start).as_secs_f64())
}

/// A reader that rescans every file each 10 s: what the seed's Sentinel does before its
/// LLM turn even starts.
fn poller_latency(p: &Project, samples: usize) -> Vec<Duration> {
    let (tx, rx) = mpsc::channel::<(Instant, String)>();
    let paths: Vec<PathBuf> = (1..=p.tasks).map(|i| p.status(i)).collect();
    let (stop, stopped) = mpsc::channel::<()>();
    let mut offsets: Vec<u64> = paths
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .collect();
    let poller = std::thread::spawn(move || {
        while let Err(mpsc::RecvTimeoutError::Timeout) =
            stopped.recv_timeout(Duration::from_secs(10))
        {
            for (f, off) in paths.iter().zip(offsets.iter_mut()) {
                let Ok(data) = std::fs::read(f) else { continue };
                let new = String::from_utf8_lossy(&data[*off as usize..]).into_owned();
                *off = data.len() as u64;
                for l in new.lines().filter(|l| l.contains("self-correction")) {
                    let _ = tx.send((Instant::now(), l.to_owned()));
                }
            }
        }
    });
    let mut starts = HashMap::new();
    for n in 0..samples {
        let marker = format!("poll{n}#");
        starts.insert(marker.clone(), Instant::now());
        p.append(
            1 + n % p.tasks,
            &format!("step {n} self-correction: {marker}\n"),
        );
        // Spread the appends over the poll period.
        std::thread::sleep(Duration::from_millis(10_000 / samples as u64 * 3 / 2));
    }
    let mut out = Vec::new();
    while out.len() < samples {
        let Ok((at, line)) = rx.recv_timeout(Duration::from_secs(30)) else {
            panic!(
                "poller gave {} of {samples}; thread finished: {}",
                out.len(),
                poller.is_finished()
            );
        };
        if let Some((_, start)) = starts.iter().find(|(m, _)| line.contains(m.as_str())) {
            out.push(at - *start);
        }
    }
    drop(stop);
    poller.join().unwrap();
    out
}

fn report(name: &str, v: &[Duration]) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name}: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (n={})",
        ms(support::percentile(v, 50.0)),
        ms(support::percentile(v, 99.0)),
        ms(*v.iter().max().unwrap()),
        v.len()
    );
}
