//! Remote projects through a real sshd on 127.0.0.1 (skipped, saying why, without
//! `openssh-server`): events per second through one link, append → anomaly through
//! it beside a local project, and what ten remote projects cost this machine (maestro
//! and its ssh clients; the ten `maestro serve` run on the "host", here the same
//! machine, and are shown apart). Run with `cargo bench --bench remote`.
#![allow(clippy::unwrap_used)]

#[path = "../tests/integration/remote/sshd.rs"]
mod sshd;
mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

const BURST: usize = 20_000;
const PROJECTS: usize = 10;
const PER_PROJECT: usize = 20;

fn main() {
    let Some(sshd) = sshd::Sshd::start("cargo bench --bench remote", support::exe()) else {
        return;
    };
    let config = sshd.config(None, "ssh_config");
    let dir = tempfile::tempdir().unwrap();

    let one = project(dir.path(), "one", 1);
    let local = project(dir.path(), "local", 1);
    for (label, place) in [
        ("local", local.display().to_string()),
        ("remote", format!("ssh://devbox{}", one.display())),
    ] {
        let (mut child, lines) = watch(&config, &[place]);
        wait_for(&lines, 1, "\"event\":\"task\"");
        let root = if label == "local" { &local } else { &one };
        let lat = appends(root, &lines, 100);
        println!(
            "append -> anomaly, {label} project: p50 {:.3} ms, p99 {:.3} ms (100 appends)",
            ms(support::percentile(&lat, 50.0)),
            ms(support::percentile(&lat, 99.0))
        );
        let start = Instant::now();
        let mut burst = String::new();
        for n in 0..BURST {
            burst.push_str(&format!("step {n} self-correction: burst\n"));
        }
        append(root, &burst);
        wait_for(&lines, BURST, "burst");
        let took = start.elapsed();
        println!(
            "{BURST} anomalies in one burst, {label} project: {:.2} s, {:.0} events/s",
            took.as_secs_f64(),
            BURST as f64 / took.as_secs_f64()
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    let roots: Vec<PathBuf> = (0..PROJECTS)
        .map(|p| project(dir.path(), &format!("p{p}"), PER_PROJECT))
        .collect();
    let places: Vec<String> = roots
        .iter()
        .map(|r| format!("ssh://devbox{}", r.display()))
        .collect();
    let (mut child, lines) = watch(&config, &places);
    wait_for(&lines, PROJECTS * PER_PROJECT, "\"task_id\":\"task-");
    std::thread::sleep(Duration::from_secs(1));
    let pid = child.id();
    let ssh: Vec<u32> = children(pid);
    let serves = pgrep(&format!("maestro serve --project {}", dir.path().display()));
    let before: Vec<u64> = ssh
        .iter()
        .chain(&serves)
        .map(|p| support::cpu_ticks(*p))
        .collect();
    let (cpu, rss) = support::idle_cost(pid, Duration::from_secs(5));
    let hz = support::clock_ticks();
    let used: Vec<f64> = ssh
        .iter()
        .chain(&serves)
        .zip(&before)
        .map(|(p, b)| (support::cpu_ticks(*p) - b) as f64 / hz / 5.0 * 100.0)
        .collect();
    let ssh_cpu: f64 = used[..ssh.len()].iter().sum();
    let serve_cpu: f64 = used[ssh.len()..].iter().sum();
    let kb = |pids: &[u32]| {
        pids.iter()
            .map(|p| support::vm_kb(*p, "VmRSS:"))
            .sum::<u64>() as f64
            / 1024.0
    };
    println!(
        "{PROJECTS} remote projects x {PER_PROJECT} tasks, idle over 5 s: maestro CPU {cpu:.2} % of one core, RSS {:.1} MB; its {} ssh clients CPU {ssh_cpu:.2} %, RSS {:.1} MB in all",
        rss as f64 / 1024.0,
        ssh.len(),
        kb(&ssh)
    );
    println!(
        "  on the host: {} maestro serve, CPU {serve_cpu:.2} %, RSS {:.1} MB in all",
        serves.len(),
        kb(&serves)
    );
    let _ = child.kill();
    let _ = child.wait();
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A project with `tasks` working tasks.
fn project(parent: &Path, name: &str, tasks: usize) -> PathBuf {
    let root = parent.join(name);
    support::project_with_tasks(&root, tasks);
    root
}

fn watch(config: &Path, places: &[String]) -> (std::process::Child, Receiver<(Instant, String)>) {
    let mut cmd = support::quiet_headless();
    cmd.arg("--config").arg(config);
    for p in places {
        cmd.args(["--project", p]);
    }
    support::spawn_stamped(cmd)
}

fn wait_for(lines: &Receiver<(Instant, String)>, n: usize, needle: &str) {
    let mut seen = 0;
    while seen < n {
        let (_, l) = lines.recv_timeout(Duration::from_secs(60)).unwrap();
        if l.contains(needle) {
            seen += 1;
        }
    }
}

fn append(root: &Path, text: &str) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(root.join("temp/task-01-status"))
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

/// Isolated self-correction lines; the time until each one's anomaly is printed.
fn appends(root: &Path, lines: &Receiver<(Instant, String)>, samples: usize) -> Vec<Duration> {
    let file = root.join("temp/task-01-status");
    (0..samples)
        .map(|n| {
            let marker = format!("mark{n}#");
            let line = format!("step {n} self-correction: {marker}\n");
            support::timed_append(&file, &line, &marker, n, lines)
        })
        .collect()
}

fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

/// The maestro processes whose command line holds `pattern` (not the ssh clients that
/// name them).
fn pgrep(pattern: &str) -> Vec<u32> {
    let out = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "maestro")
        })
        .collect()
}
