//! `--metrics`: `/metrics` scraped over real HTTP and read by a Prometheus text parser,
//! its values following a scripted orchestration.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};

use crate::common::{Running, Scratch, event};

/// A free loopback port (bound, then released for maestro to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn scrape(port: u16) -> prometheus_parse::Scrape {
    try_scrape(port).expect("the scrape was answered")
}

/// One scrape; `None` when the connection was closed before an answer.
fn try_scrape(port: u16) -> Option<prometheus_parse::Scrape> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    Some(prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).unwrap())
}

pub fn value(
    scrape: &prometheus_parse::Scrape,
    metric: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
}

/// Scrapes until `pred` holds (the hub publishes within milliseconds).
pub fn scrape_until(
    port: u16,
    what: &str,
    pred: impl Fn(&prometheus_parse::Scrape) -> bool,
) -> prometheus_parse::Scrape {
    let end = std::time::Instant::now() + crate::common::DEADLINE;
    loop {
        let s = scrape(port);
        if pred(&s) {
            return s;
        }
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}: {:?}",
            s.samples
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn metrics_follow_a_scripted_orchestration() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    let port = free_port();
    let mut m = s.headless(&["--metrics", &port.to_string()]);
    m.wait_json("the task", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    let t = |state: &'static str| {
        move |sc: &prometheus_parse::Scrape| {
            value(
                sc,
                "maestro_task_state",
                &[("task", "task-01"), ("state", state)],
            ) == Some(1.0)
        }
    };
    let first = scrape_until(port, "task-01 working", t("working"));
    assert_eq!(
        value(&first, "maestro_source_up", &[("source", "database")]),
        Some(1.0)
    );
    assert_eq!(value(&first, "maestro_conductor_up", &[]), Some(1.0));
    assert!(value(&first, "maestro_build_info", &[]).is_some());
    // A state change.
    s.set_task("task-01", "needs_review");
    scrape_until(port, "task-01 needs_review", t("needs_review"));
    // An anomaly increments its counter.
    s.set_task("task-01", "working");
    s.append(
        "task-01-status",
        "step 2 self-correction: again [ctx: 30%]\n",
    );
    let after = scrape_until(port, "the anomaly counted", |sc| {
        value(
            sc,
            "maestro_anomalies_total",
            &[("kind", "self-correction")],
        ) == Some(1.0)
    });
    assert_eq!(
        value(
            &after,
            "maestro_task_context_percent",
            &[("task", "task-01"), ("source", "self")]
        ),
        Some(30.0)
    );
    // The log folder goes away: maestro is deaf to it and says so.
    std::fs::remove_dir_all(s.temp()).unwrap();
    scrape_until(port, "temp not up", |sc| {
        value(sc, "maestro_source_up", &[("source", "temp")]) == Some(0.0)
    });
}

#[test]
fn the_rules_file_names_only_metrics_that_exist() {
    // The alerting rules and the Grafana dashboard's queries alike.
    let rules = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/assets/prometheus/maestro.rules.yml"
    ))
    .unwrap()
        + &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/assets/grafana/maestro.json"
        ))
        .unwrap();
    // A project with one of everything, so every family is described.
    let mut snap = maestro::core::snapshot::Snapshot {
        tasks: vec![std::sync::Arc::new(maestro::core::snapshot::TaskView {
            row: maestro::core::event::TaskRow::new("task-01", "working"),
            heartbeat: Some(time::OffsetDateTime::now_utc()),
            ctx: std::collections::VecDeque::from([40]),
            last_anomaly: None,
            watched: true,
            forecast: None,
            sessions: vec![std::sync::Arc::new(
                maestro::core::sessions::figures::SessionFigures::of(
                    maestro::core::sessions::figures::Whose {
                        task_id: "task-01",
                        session_id: "s1",
                        file: std::path::Path::new("/h/s1.jsonl"),
                        found_by: "transcript",
                    },
                    &maestro::core::sessions::tally::Tally::new(),
                    &[],
                    0,
                    &maestro::core::sessions::ContextWindows::default(),
                ),
            )],
            session_lost: false,
            needs_you: None,
            waiting_since: None,
        })],
        ..maestro::core::snapshot::Snapshot::default()
    };
    snap.counts.anomalies.insert("stalled", 1);
    snap.budgets
        .insert((Some("task-01".into()), "task_usd"), 1.02);
    snap.counts.messages.insert("system".into(), 1);
    snap.counts
        .recoveries
        .insert(("lethe".into(), "success".into()), 1);
    snap.counts
        .pipeline_runs
        .insert(("p".into(), "completed".into()), 1);
    let feed = maestro::metrics::ProjectFeed {
        name: "p".into(),
        snapshots: tokio::sync::watch::channel(std::sync::Arc::new(snap)).1,
        // The default settings: the Conductor is down past 240 s.
        rules: maestro::settings::Settings::resolve(None, &maestro::settings::Overrides::default())
            .unwrap()
            .rules,
    };
    let exposed = maestro::metrics::render(
        &[feed],
        maestro::core::clock::Clock::system(time::UtcOffset::UTC),
    );
    let families: Vec<&str> = exposed
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let known = |name: &str| {
        families
            .iter()
            .any(|f| name == *f || name.strip_suffix("_total") == Some(f))
    };
    let mut named = 0;
    for word in rules.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if word.starts_with("maestro_") {
            named += 1;
            assert!(
                known(word),
                "{word} is not a metric maestro exposes ({families:?})"
            );
        }
    }
    assert!(named >= 6, "the rules use the metrics");
}

/// The raw body of one scrape.
fn scrape_text(port: u16) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n").unwrap().1.to_owned()
}

/// Parses an exposition with the official Prometheus client's parser (Debian's
/// `python3-prometheus-client`) and prints `name<TAB>labels as JSON` per sample.
fn official_parse(body: &str) -> Option<Result<String, String>> {
    let python = "/usr/bin/python3";
    let probe = std::process::Command::new(python)
        .args(["-c", "import prometheus_client.parser"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "skipped: the official parser is missing (apt-get install python3-prometheus-client)"
        );
        return None;
    }
    let script = "import sys, json\nfrom prometheus_client.parser import text_string_to_metric_families as parse\nfor f in parse(sys.stdin.read()):\n    for s in f.samples:\n        print(s.name + '\\t' + json.dumps(s.labels, sort_keys=True))\n";
    let mut child = std::process::Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Some(if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    })
}

/// A task id and a project name written by someone else, holding `"`, `}`, `\` and a
/// newline, neither break the scrape nor add a line of their own.
#[test]
fn hostile_label_values_are_escaped_and_forge_nothing() {
    let parent = tempfile::tempdir().unwrap();
    let s = Scratch::new_in(parent.path(), "pro\"j}\\x");
    let forged = "task-9\"} 1\nmaestro_forged 1\n#";
    s.conn()
        .execute(
            "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, 'working', datetime('now'))",
            [forged],
        )
        .unwrap();
    s.set_task("task-01", "working");
    let port = free_port();
    let mut m = s.headless(&["--metrics", &port.to_string()]);
    m.wait_json("the task", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    let body = loop {
        let body = scrape_text(port);
        if body.contains("task-01") {
            break body;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(
        !body.lines().any(|l| l.starts_with("maestro_forged")),
        "{body}"
    );
    let Some(parsed) = official_parse(&body) else {
        return;
    };
    let samples = parsed.unwrap_or_else(|e| panic!("the scrape does not parse: {e}\n{body}"));
    assert!(
        !samples.lines().any(|l| l.starts_with("maestro_forged")),
        "{samples}"
    );
    assert!(
        samples.contains(r#""project": "pro\"j}\\x""#),
        "the project name comes back whole: {samples}"
    );
    if body.contains("task-9") {
        let raw = serde_json::to_string(forged).unwrap();
        assert!(
            samples.contains(&raw),
            "the task id comes back whole: {samples}"
        );
    }
}

/// Any local process can connect to `--metrics`. Hundreds of connections that send half
/// a request and wait, under a limit of 256 open files, neither blind the sources (a
/// new task and its anomaly are reported) nor keep a real scrape out.
#[test]
fn idle_connections_do_not_blind_the_monitor() {
    let s = Scratch::new();
    let port = free_port();
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(r#"ulimit -n 256 && exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_maestro"))
        .args([
            "--no-tui",
            "--json",
            "--metrics",
            &port.to_string(),
            "--project",
        ])
        .arg(s.root())
        .env("XDG_DATA_HOME", crate::common::data_home());
    let mut m = crate::common::Running::spawn(cmd);
    m.wait_json("started", |v| {
        event(v) == "task" && v["task_id"] == "task-00"
    });
    let _ = scrape(port);
    let mut held = Vec::new();
    for _ in 0..400 {
        if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n");
            held.push(c);
        }
    }
    assert!(held.len() >= 300, "only {} connections", held.len());
    // Meanwhile a Musician starts and trips the Sentinel.
    s.set_task("task-05", "working");
    m.wait_json("the new task", |v| {
        event(v) == "task" && v["task_id"] == "task-05"
    });
    s.append(
        "task-05-status",
        "step 1 self-correction: retried the build [ctx: 20%]\n",
    );
    m.wait_json("the new task's anomaly", |v| {
        event(v) == "anomaly" && v["task_id"] == "task-05"
    });
    // A real scrape gets through while the idle ones are still held: at the cap the
    // oldest idle connection makes room, never the newest.
    let end = std::time::Instant::now() + crate::common::DEADLINE;
    loop {
        let sc = try_scrape(port).expect("a scrape is answered beside 400 idle connections");
        if value(
            &sc,
            "maestro_task_state",
            &[("task", "task-05"), ("state", "working")],
        ) == Some(1.0)
        {
            break;
        }
        assert!(std::time::Instant::now() < end, "no scrape got through");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    drop(held);
}

/// A configured budget is a series from the start, at 0, so its rule can be checked.
#[test]
fn configured_budgets_are_series_before_any_money_is_spent() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    let cfg = s.root().join("budget.toml");
    std::fs::write(&cfg, "[budget]\norchestration_usd = 20\ntask_usd = 5\n").unwrap();
    let port = free_port();
    let mut m = s.headless(&[
        "--metrics",
        &port.to_string(),
        "--config",
        cfg.to_str().unwrap(),
    ]);
    m.wait_json("the task", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    let sc = scrape_until(port, "the budgets", |sc| {
        value(
            sc,
            "maestro_budget_used_ratio",
            &[("budget", "task_usd"), ("task", "task-01")],
        )
        .is_some()
    });
    assert_eq!(
        value(
            &sc,
            "maestro_budget_used_ratio",
            &[("budget", "orchestration_usd")]
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &sc,
            "maestro_budget_used_ratio",
            &[("budget", "task_usd"), ("task", "task-01")]
        ),
        Some(0.0)
    );
}

/// The role's process serves `--metrics` as every verb that runs a core does (one life:
/// it used to start without it).
#[test]
fn the_souffleur_serves_metrics_when_asked() {
    let rig = crate::souffleur::Rig::new(None);
    let port = free_port();
    let invocation = format!(
        "PID:{} SESSION_ID:{}",
        rig.conductor.id(),
        crate::souffleur::SESSION
    );
    let mut role = Running::spawn(rig.command(&[
        "souffleur",
        &invocation,
        "--no-tui",
        "--json",
        "--metrics",
        &port.to_string(),
    ]));
    crate::souffleur::confirmed(&mut role);
    let scraped = scrape_until(port, "the role's project in /metrics", |s| {
        value(s, "maestro_source_up", &[("source", "database")]) == Some(1.0)
    });
    assert!(value(&scraped, "maestro_build_info", &[]).is_some());
}
