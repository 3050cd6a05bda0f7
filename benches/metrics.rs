//! Ten projects of twenty tasks in one headless maestro: its idle cost (CPU, RSS),
//! the `/metrics` scrape time, and append → anomaly latency without and with a
//! scraper hitting `/metrics` ten times a second. Run with `cargo bench --bench metrics`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

const PROJECTS: usize = 10;
const PER_PROJECT: usize = 20;
const TASKS: usize = PROJECTS * PER_PROJECT;

fn scrape(port: u16) -> usize {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut body = Vec::new();
    s.read_to_end(&mut body).unwrap();
    body.len()
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let roots: Vec<_> = (0..PROJECTS)
        .map(|p| dir.path().join(format!("project-{p}")))
        .collect();
    for root in &roots {
        support::project_with_tasks(root, PER_PROJECT);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new(support::exe());
    cmd.args([
        "--no-tui",
        "--json",
        "--stall-after",
        "1h",
        "--task-stale-after",
        "1h",
    ])
    .args([
        "--conductor-stale-after",
        "1h",
        "--metrics",
        &port.to_string(),
    ]);
    for root in &roots {
        cmd.arg("--project").arg(root);
    }
    let (mut child, lines) = support::spawn_stamped(cmd);
    let mut seen = 0;
    while seen < TASKS {
        let (_, l) = lines.recv_timeout(Duration::from_secs(30)).unwrap();
        if l.contains("\"event\":\"task\"") && l.contains("\"task_id\":\"task-") {
            seen += 1;
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let (cpu, rss) = support::idle_cost(child.id(), Duration::from_secs(5));
    println!(
        "{PROJECTS} projects x {PER_PROJECT} tasks, idle: CPU {cpu:.2} % of one core over 5 s, RSS {:.1} MB",
        rss as f64 / 1024.0
    );
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..200 {
        let t = Instant::now();
        bytes = scrape(port);
        times.push(t.elapsed());
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "scrape of {PROJECTS} projects x {PER_PROJECT} tasks ({bytes} bytes): p50 {:.2} ms, p99 {:.2} ms",
        ms(support::percentile(&times, 50.0)),
        ms(support::percentile(&times, 99.0))
    );
    let unscraped = appends(&roots, &lines, 100, "quiet");
    println!(
        "append -> anomaly, no scraper: p50 {:.3} ms, p99 {:.3} ms",
        ms(support::percentile(&unscraped, 50.0)),
        ms(support::percentile(&unscraped, 99.0))
    );
    // Appends while a scraper runs ten times a second.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let scraper = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                scrape(port);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let lat = appends(&roots, &lines, 200, "scraped");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    scraper.join().unwrap();
    println!(
        "append -> anomaly while scraped 10/s: p50 {:.3} ms, p99 {:.3} ms",
        ms(support::percentile(&lat, 50.0)),
        ms(support::percentile(&lat, 99.0))
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Isolated self-correction lines appended across the projects' logs; the time until
/// each one's anomaly is printed.
fn appends(
    roots: &[std::path::PathBuf],
    lines: &std::sync::mpsc::Receiver<(Instant, String)>,
    samples: usize,
    tag: &str,
) -> Vec<Duration> {
    let mut lat = Vec::new();
    for n in 0..samples {
        let root = &roots[n % roots.len()];
        let i = 1 + (n * 7) % PER_PROJECT;
        let marker = format!("{tag}{n}#");
        lat.push(support::timed_append(
            &root.join(format!("temp/task-{i:02}-status")),
            &format!("step {n} self-correction: {marker}\n"),
            &marker,
            n,
            lines,
        ));
    }
    lat
}
