//! What the benchmarks share: the binary, a fresh project, a child's stdout lines with
//! the moment each arrived, and readings of `/proc` and of a sample.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The release binary the benchmarks run.
pub fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_maestro")
}

/// The rows the orchestration's setup writes when its Conductor starts (`init` writes
/// none): `task-00` and `souffleur`, `watching`, fresh heartbeats.
pub fn conductor_started(root: &Path) {
    let conn = rusqlite::Connection::open(root.join("comms.db")).unwrap();
    conn.execute_batch(
        "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES ('souffleur', 'watching', datetime('now')), ('task-00', 'watching', datetime('now'))",
    )
    .unwrap();
}

/// `maestro init --project root` (comms.db with the orchestration schema).
pub fn init(root: &Path) {
    let out = Command::new(exe())
        .args(["init", "--project"])
        .arg(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A project at `root` with `tasks` working tasks (`task-01` …), each with one status
/// line.
pub fn project_with_tasks(root: &Path, tasks: usize) {
    std::fs::create_dir_all(root.join("temp")).unwrap();
    init(root);
    let mut conn = rusqlite::Connection::open(root.join("comms.db")).unwrap();
    let tx = conn.transaction().unwrap();
    for i in 1..=tasks {
        tx.execute(
            "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, 'working', datetime('now'))",
            [format!("task-{i:02}")],
        )
        .unwrap();
        std::fs::write(
            root.join(format!("temp/task-{i:02}-status")),
            "step 1 started [ctx: 12%]\n",
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

/// `maestro --no-tui --json` with every age threshold at an hour: only the appends a
/// benchmark makes raise anything.
pub fn quiet_headless() -> Command {
    let mut cmd = Command::new(exe());
    cmd.args(["--no-tui", "--json", "--stall-after", "1h"])
        .args(["--task-stale-after", "1h", "--conductor-stale-after", "1h"]);
    cmd
}

/// Appends `line` to `file` and waits for the output line holding `marker`: how long
/// that took, then a pause that varies (appends never fall on one rhythm).
pub fn timed_append(
    file: &Path,
    line: &str,
    marker: &str,
    n: usize,
    lines: &mpsc::Receiver<(Instant, String)>,
) -> Duration {
    use std::io::Write;
    let start = Instant::now();
    std::fs::OpenOptions::new()
        .append(true)
        .open(file)
        .unwrap()
        .write_all(line.as_bytes())
        .unwrap();
    let took = loop {
        let (at, l) = lines.recv_timeout(Duration::from_secs(10)).unwrap();
        if l.contains(marker) {
            break at - start;
        }
    };
    std::thread::sleep(Duration::from_millis(10 + (n as u64 * 13) % 31));
    took
}

/// Starts `cmd` with stdout piped; its lines arrive with the moment each was read.
pub fn spawn_stamped(mut cmd: Command) -> (Child, mpsc::Receiver<(Instant, String)>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    (child, lines)
}

/// A `/proc/<pid>/status` figure in kB (`VmRSS:`, `VmHWM:`), 0 when absent.
pub fn vm_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// utime + stime of a process, in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The `p`-th percentile (0–100) of a sample, nearest rank.
pub fn percentile(v: &[Duration], p: f64) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    let idx = ((p / 100.0) * (s.len() - 1) as f64).round() as usize;
    s[idx]
}

/// Clock ticks a second (`getconf CLK_TCK`), for [`cpu_ticks`].
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(100.0)
}

/// CPU share of one core and RSS (kB) of `pid` over `period`.
pub fn idle_cost(pid: u32, period: Duration) -> (f64, u64) {
    let hz = clock_ticks();
    let before = cpu_ticks(pid);
    std::thread::sleep(period);
    let used = (cpu_ticks(pid) - before) as f64 / hz;
    (used / period.as_secs_f64() * 100.0, vm_kb(pid, "VmRSS:"))
}
