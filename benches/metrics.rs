//! `/metrics` scrape time with 200 tasks (the label count of ten projects of twenty
//! tasks), and append → anomaly latency while a scraper hits `/metrics` ten times a
//! second. Run with `cargo bench --bench metrics`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

const TASKS: usize = 200;

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
    let root = dir.path();
    std::fs::create_dir(root.join("temp")).unwrap();
    support::init(root);
    let mut conn = rusqlite::Connection::open(root.join("comms.db")).unwrap();
    let tx = conn.transaction().unwrap();
    for i in 1..=TASKS {
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
    .args(["--metrics", &port.to_string(), "--project"])
    .arg(root);
    let (mut child, lines) = support::spawn_stamped(cmd);
    let mut seen = 0;
    while seen < TASKS {
        let (_, l) = lines.recv_timeout(Duration::from_secs(30)).unwrap();
        if l.contains("\"event\":\"task\"") {
            seen += 1;
        }
    }
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..200 {
        let t = Instant::now();
        bytes = scrape(port);
        times.push(t.elapsed());
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "scrape of {TASKS} tasks ({bytes} bytes): p50 {:.2} ms, p99 {:.2} ms",
        ms(support::percentile(&times, 50.0)),
        ms(support::percentile(&times, 99.0))
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
    let mut lat = Vec::new();
    for n in 0..200 {
        let i = 1 + (n * 7) % TASKS;
        let marker = format!("scraped{n}#");
        let start = Instant::now();
        std::fs::OpenOptions::new()
            .append(true)
            .open(root.join(format!("temp/task-{i:02}-status")))
            .unwrap()
            .write_all(format!("step {n} self-correction: {marker}\n").as_bytes())
            .unwrap();
        loop {
            let (at, l) = lines.recv_timeout(Duration::from_secs(10)).unwrap();
            if l.contains(&marker) {
                lat.push(at - start);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(10 + (n as u64 * 13) % 31));
    }
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
