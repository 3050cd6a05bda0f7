//! Scale: what maestro costs as the bytes it watches grow. On 1,000 tasks with 1 MB of
//! status log each (1 GB), written as a Musician writes them (every progress line with
//! its step, agent and `[ctx: N%]`; a deviations log of `Low:`/`Medium:` lines and a
//! rare `High:`), and again with the context on 1 line in 100 (the sparse variant): the
//! time from start until a line appended at start is reported, beside `grep -c` over
//! the same files in the same run; the dashboard's peak
//! RSS on that project, a real process in a pty (`script`); and the peak RSS of a
//! headless maestro fed for 20 s by a hostile host that names a new task and a new
//! session in every pair of frames, through a real sshd (skipped, saying why, without one). Beside them, the Log
//! pane's index of one 1 GB log: built once, then a page of lines read by number.
//! Run with `cargo bench --bench scale` (`MAESTRO_BENCH_QUICK=1`: 100 tasks;
//! `MAESTRO_BENCH_SOAK=600`: then the dashboard under 1,000 lines/s for 10 minutes).
#![allow(clippy::unwrap_used)]

#[path = "../tests/integration/remote/sshd.rs"]
mod sshd;
mod support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LINE_BYTES: usize = 100;
const LOG_BYTES: usize = 1_000_000;
const RUNS: usize = 3;

fn main() {
    let quick = std::env::var_os("MAESTRO_BENCH_QUICK").is_some();
    let tasks = if quick { 100 } else { 1_000 };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mb = (tasks * LOG_BYTES) as f64 / 1e6;
    println!("{tasks} tasks x 1 MB of status log ({mb:.0} MB), {RUNS} runs each");
    // The sparse variant first, so the project is left with the protocol's lines.
    start_up(root, tasks, Shape::Sparse);
    let files = start_up(root, tasks, Shape::Protocol);
    let (peak_mb, settled, cpu) = dashboard_peak(root);
    println!(
        "dashboard in a pty: peak RSS {peak_mb:.1} MB (goal 150 MB: {}), settled after {:.1} s, {cpu:.1} s of CPU",
        if peak_mb <= 150.0 { "met" } else { "MISSED" },
        settled.as_secs_f64()
    );
    index_of_a_large_log(root, &files[0], if quick { 100 } else { 1_000 });
    hostile_host();
    if let Some(seconds) = std::env::var("MAESTRO_BENCH_SOAK")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        soak(seconds);
    }
}

/// One log of `copies` MB: how long its line index takes to build (read once) and a
/// page of 50 lines from its middle to read.
fn index_of_a_large_log(root: &Path, one: &Path, copies: usize) {
    let path = root.join("temp/one-large-log");
    let body = std::fs::read(one).unwrap();
    let mut out = std::fs::File::create(&path).unwrap();
    for _ in 0..copies {
        out.write_all(&body).unwrap();
    }
    drop(out);
    let start = Instant::now();
    let mut index = maestro::core::log_file::LineIndex::new(&path, 64 * 1024);
    index.refresh().unwrap();
    let built = start.elapsed();
    let start = Instant::now();
    let page = index.read(index.lines() / 2, 50).unwrap();
    let read = start.elapsed();
    assert_eq!(page.len(), 50);
    println!(
        "the Log pane's index of one {} MB log ({} lines): built in {:.2} s; 50 lines from its middle read in {:.2} ms",
        copies,
        index.lines(),
        built.as_secs_f64(),
        read.as_secs_f64() * 1000.0
    );
    std::fs::remove_file(&path).unwrap();
}

/// How the status lines are written.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// As the Musician protocol writes them: every line with its context.
    Protocol,
    /// Ordinary lines, the context on 1 in 100 (last round's bench).
    Sparse,
}

/// The start-up figures on one shape of logs: `grep -c` over the files, and maestro's
/// start to a line appended at start to the log read last and to the one read first.
fn start_up(root: &Path, tasks: usize, shape: Shape) -> Vec<PathBuf> {
    let files = project(root, tasks, shape);
    let name = match shape {
        Shape::Protocol => "protocol-shaped lines ([ctx: N%] on every line)",
        Shape::Sparse => "sparse lines ([ctx: N%] on 1 line in 100)",
    };
    let grep = median((0..=RUNS).map(|_| grep_count(&files)).skip(1).collect());
    // The logs are read in name order: the last one is the worst case, the first one
    // shows appends let through while the others are still being read.
    let mut order: Vec<&PathBuf> = files.iter().collect();
    order.sort();
    let (first, last) = (order[0].clone(), order[order.len() - 1].clone());
    let live = median((0..RUNS).map(|n| time_to_live(root, &last, n)).collect());
    let early = median(
        (0..RUNS)
            .map(|n| time_to_live(root, &first, RUNS + n))
            .collect(),
    );
    let goal = (grep * 2).max(Duration::from_secs(1));
    println!("{name}:");
    println!(
        "  grep -c over the files: median {:.2} s",
        grep.as_secs_f64()
    );
    println!(
        "  start -> a line appended at start to the log read last, reported (--no-tui --json): median {:.2} s (goal {:.2} s: {}); to the log read first: {:.2} s",
        live.as_secs_f64(),
        goal.as_secs_f64(),
        if live <= goal { "met" } else { "MISSED" },
        early.as_secs_f64()
    );
    files
}

/// One status line of task progress, about `LINE_BYTES` long.
fn status_line(i: usize, shape: Shape) -> String {
    let ctx = 10 + (i / 1000) % 80;
    let mut line = match shape {
        Shape::Protocol => match i % 3 {
            0 => format!("step {} agent {} launched [ctx: {ctx}%]", i / 3, i % 4),
            1 => format!(
                "step {} agent {} returned: compiled the module and ran its tests [ctx: {ctx}%]",
                i / 3,
                i % 4
            ),
            _ => format!("step {} progressing normally [ctx: {ctx}%]", i / 3),
        },
        Shape::Sparse if i.is_multiple_of(100) => format!("step {i} checked [ctx: {ctx}%]"),
        Shape::Sparse => format!("progress {i}: an ordinary line of work, nothing in it to judge"),
    };
    while line.len() < LINE_BYTES - 1 {
        line.push('.');
    }
    line
}

/// A project of `tasks` working tasks, each with 1 MB of status lines of `shape`:
/// context values that climb a point at a time, nothing the Sentinel reports; and, for
/// the protocol's shape, a deviations log of `Low:` and `Medium:` lines with a rare
/// `High:` (reported at start, as the Sentinel reports them).
fn project(root: &Path, tasks: usize, shape: Shape) -> Vec<PathBuf> {
    if !root.join("comms.db").exists() {
        support::project_with_tasks(root, tasks);
    }
    let mut body = String::with_capacity(LOG_BYTES + LINE_BYTES);
    let mut i = 0;
    while body.len() < LOG_BYTES {
        body.push_str(&status_line(i, shape));
        body.push('\n');
        i += 1;
    }
    let deviations: String = (0..200)
        .map(|i| match i % 100 {
            99 => format!("High: step {i} skipped the integration tests\n"),
            n if n % 3 == 0 => format!("Medium: step {i} renamed a public function\n"),
            _ => format!("Low: step {i} reordered the imports\n"),
        })
        .collect();
    (1..=tasks)
        .map(|i| {
            let path = root.join(format!("temp/task-{i:02}-status"));
            std::fs::write(&path, &body).unwrap();
            let deviations_path = root.join(format!("temp/task-{i:02}-deviations"));
            if shape == Shape::Protocol {
                std::fs::write(&deviations_path, &deviations).unwrap();
            } else {
                let _ = std::fs::remove_file(&deviations_path);
            }
            path
        })
        .collect()
}

fn grep_count(files: &[PathBuf]) -> Duration {
    let start = Instant::now();
    let out = Command::new("grep")
        .arg("-c")
        .arg("ctx")
        .args(files)
        .output()
        .unwrap();
    assert!(out.status.success(), "grep failed");
    start.elapsed()
}

/// Starts a headless maestro, appends a self-correction to `file` at once, and times
/// the anomaly's arrival on stdout from the start.
fn time_to_live(root: &Path, file: &Path, n: usize) -> Duration {
    let marker = format!("scale-marker-{n}");
    let mut cmd = support::quiet_headless();
    cmd.arg("--project").arg(root);
    let start = Instant::now();
    let (mut child, lines) = support::spawn_stamped(cmd);
    std::fs::OpenOptions::new()
        .append(true)
        .open(file)
        .unwrap()
        .write_all(format!("step 1 self-correction: {marker}\n").as_bytes())
        .unwrap();
    let took = loop {
        let (at, line) = lines.recv_timeout(Duration::from_secs(120)).unwrap();
        if line.contains(&marker) {
            break at - start;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    took
}

/// The dashboard on `root` in a pty (200x50), run by `script`: the `script` process
/// (whose end follows the dashboard's) and the dashboard's PID.
fn start_dashboard(root: &Path) -> (std::process::Child, u32) {
    let command = format!(
        "stty rows 50 cols 200; exec {} --project {} --stall-after 1h --task-stale-after 1h --conductor-stale-after 1h",
        support::exe(),
        root.display()
    );
    let mut script = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("script (util-linux) runs the dashboard in a pty");
    let mut screen = script.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        while screen.read(&mut buf).is_ok_and(|n| n > 0) {}
    });
    let pid = find_dashboard(root, Duration::from_secs(20)).expect("the dashboard's process");
    (script, pid)
}

fn stop_dashboard(mut script: std::process::Child, pid: u32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = script.wait();
}

/// The dashboard on the project: its peak RSS once it has read everything and gone
/// quiet, how long that took, and the CPU it spent.
fn dashboard_peak(root: &Path) -> (f64, Duration, f64) {
    let start = Instant::now();
    let (script, pid) = start_dashboard(root);
    // Settled: two half-seconds in a row with under 5 % of a core.
    let hz = support::clock_ticks();
    let mut quiet = 0;
    let mut last = support::cpu_ticks(pid);
    let settled = loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = support::cpu_ticks(pid);
        let share = (now - last) as f64 / hz / 0.5;
        last = now;
        quiet = if share < 0.05 { quiet + 1 } else { 0 };
        if quiet == 2 || start.elapsed() > Duration::from_secs(120) {
            break start.elapsed().saturating_sub(Duration::from_secs(1));
        }
    };
    let peak = support::vm_kb(pid, "VmHWM:") as f64 / 1000.0;
    let cpu = support::cpu_ticks(pid) as f64 / hz;
    stop_dashboard(script, pid);
    (peak, settled, cpu)
}

/// With `MAESTRO_BENCH_SOAK=SECONDS`: the dashboard on 10 working tasks while 1,000
/// status lines a second are appended among them, its RSS every 30 s: it must level
/// off, not grow with the lines.
fn soak(seconds: u64) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    support::project_with_tasks(root, 10);
    let (script, pid) = start_dashboard(root);
    let mut logs: Vec<std::fs::File> = (1..=10)
        .map(|i| {
            std::fs::OpenOptions::new()
                .append(true)
                .open(root.join(format!("temp/task-{i:02}-status")))
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    let mut next = start;
    let mut n: u64 = 0;
    let mut samples = Vec::new();
    while start.elapsed() < Duration::from_secs(seconds) {
        // 100 lines every 100 ms, spread over the tasks.
        for _ in 0..100 {
            let log = &mut logs[usize::try_from(n % 10).unwrap()];
            writeln!(
                log,
                "step {n} progress of some length to look like work [ctx: {}%]",
                10 + (n / 5000) % 80
            )
            .unwrap();
            n += 1;
        }
        next += Duration::from_millis(100);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        if n.is_multiple_of(30_000) {
            samples.push(format!(
                "{}s {:.1} MB",
                start.elapsed().as_secs(),
                support::vm_kb(pid, "VmRSS:") as f64 / 1000.0
            ));
        }
    }
    println!(
        "dashboard soak, 1,000 lines/s over 10 tasks for {seconds} s ({n} lines), RSS: {}",
        samples.join(", ")
    );
    stop_dashboard(script, pid);
}

/// The maestro process (not `script`, not a shell) whose command line names `root`.
fn find_dashboard(root: &Path, within: Duration) -> Option<u32> {
    let deadline = Instant::now() + within;
    let exe = support::exe();
    let root = root.display().to_string();
    while Instant::now() < deadline {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            let argv = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let argv: Vec<&[u8]> = argv.split(|b| *b == 0).collect();
            if argv.first() == Some(&exe.as_bytes()) && argv.contains(&root.as_bytes()) {
                return Some(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A host whose `[remote] maestro` says hello, then names a new task and a new session
/// in every pair of frames for 20 s: the local maestro's peak RSS, and what it said.
fn hostile_host() {
    let Some(sshd) = sshd::Sshd::start("cargo bench --bench scale (hostile host)", support::exe())
    else {
        return;
    };
    let script = sshd.dir().join("new-tasks");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho '{{\"frame\":\"hello\",\"protocol\":{},\"version\":\"{}\",\"project\":\"/p\",\"database\":true}}'\ni=0\nwhile true; do printf '{{\"frame\":\"input\",\"t\":\"2026-11-25T10:00:00.000Z\",\"ev\":\"lines\",\"task\":\"task-%06d\",\"kind\":\"status\",\"lines\":[\"step 1 started\"]}}\\n{{\"frame\":\"input\",\"t\":\"2026-11-25T10:00:00.000Z\",\"ev\":\"session\",\"report\":{{\"status\":\"lost\",\"task_id\":\"task-000001\",\"session_id\":\"s-%09d\",\"detail\":\"gone\"}}}}\\n' $i $i; i=$((i+1)); done\n",
            maestro::remote::wire::PROTOCOL,
            env!("CARGO_PKG_VERSION")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = sshd.config(Some(script.to_str().unwrap()), "ssh_config");
    let project = tempfile::tempdir().unwrap();
    support::init(project.path());
    let mut cmd = Command::new(support::exe());
    cmd.args(["--no-tui", "--json", "--config"])
        .arg(&config)
        .arg("--project")
        .arg(format!("ssh://devbox{}", project.path().display()));
    let (mut child, lines) = support::spawn_stamped(cmd);
    let start = Instant::now();
    let mut refused = false;
    while start.elapsed() < Duration::from_secs(20) {
        if let Ok((_, line)) = lines.recv_timeout(Duration::from_millis(200)) {
            refused |= line.contains("more than 10000 tasks");
        }
    }
    let peak = support::vm_kb(child.id(), "VmHWM:") as f64 / 1000.0;
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "hostile host, a new task id and a new session id in every pair of frames for 20 s: peak RSS {peak:.1} MB (goal 300 MB: {}); the refusal said: {}",
        if peak <= 300.0 { "met" } else { "MISSED" },
        if refused { "yes" } else { "no" }
    );
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}
