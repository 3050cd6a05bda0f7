//! Bad input: a clear message, the right exit status, and nothing written anywhere.
#![allow(clippy::unwrap_used)]

use crate::common::{Scratch, maestro};

fn run(args: &[&str]) -> (i32, String) {
    let out = maestro().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_flags_exit_2() {
    let s = Scratch::new();
    let root = s.root().to_str().unwrap();
    for args in [
        &["--no-tui", "--project", root, "--stall-after", "soon"][..],
        &["--no-tui", "--project", root, "--spike-threshold", "-3"],
        &["--no-tui", "--project", root, "--spike-threshold", "101"],
        &["--no-tui", "--no-such-flag"],
        &["--no-tui", "--project", "/does/not/exist"],
    ] {
        let (code, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.trim().is_empty());
    }
}

#[test]
fn bad_config_exits_2_naming_the_file_and_key() {
    let s = Scratch::new();
    let cfg = s.root().join("bad.toml");
    std::fs::write(&cfg, "[sentinel]\nstall_after = \"whenever\"\n").unwrap();
    let (code, err) = run(&[
        "--no-tui",
        "--project",
        s.root().to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.toml") && err.contains("sentinel.stall_after"),
        "{err}"
    );
    let (code, err) = run(&[
        "--no-tui",
        "--project",
        s.root().to_str().unwrap(),
        "--config",
        "/no/such.toml",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("/no/such.toml"), "{err}");
}

#[test]
fn wrong_schema_and_non_database_exit_1_and_stay_unchanged() {
    let s = Scratch::without_db();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "not a database",
            b"hello, I am a text file and not SQLite at all.\n".repeat(100),
        ),
        ("obsolete", {
            let p = s.root().join("old.db");
            let c = rusqlite::Connection::open(&p).unwrap();
            c.execute_batch("CREATE TABLE coordination_status (task_id TEXT, status TEXT); INSERT INTO coordination_status VALUES ('task-01','working');").unwrap();
            drop(c);
            std::fs::read(&p).unwrap()
        }),
        ("missing column", {
            let p = s.root().join("partial.db");
            let c = rusqlite::Connection::open(&p).unwrap();
            c.execute_batch(
                "CREATE TABLE orchestration_tasks (task_id TEXT PRIMARY KEY, state TEXT);",
            )
            .unwrap();
            drop(c);
            std::fs::read(&p).unwrap()
        }),
    ];
    for (name, bytes) in cases {
        std::fs::write(s.db(), &bytes).unwrap();
        let (code, err) = run(&["--no-tui", "--project", s.root().to_str().unwrap()]);
        assert_eq!(code, 1, "{name}: {err}");
        assert!(
            err.contains("comms.db") && err.contains("maestro init"),
            "{name}: {err}"
        );
        assert_eq!(
            std::fs::read(s.db()).unwrap(),
            bytes,
            "{name}: file changed"
        );
        assert!(!s.root().join("comms.db-wal").exists(), "{name}");
        assert!(!s.root().join("comms.db-journal").exists(), "{name}");
    }
}

#[test]
fn init_refuses_an_existing_file() {
    let s = Scratch::new();
    let before = std::fs::read(s.db()).unwrap();
    let (code, err) = run(&["init", "--project", s.root().to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read(s.db()).unwrap(), before);
}

#[test]
fn report_to_db_without_a_database_is_refused() {
    let s = Scratch::without_db();
    let (code, err) = run(&[
        "--no-tui",
        "--report-to-db",
        "--project",
        s.root().to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("maestro init"), "{err}");
    assert!(!s.db().exists());
}

#[test]
fn config_default_prints_a_valid_file() {
    let out = maestro().args(["config", "default"]).output().unwrap();
    crate::common::assert_success(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("[sentinel]") && text.contains("stall_after = \"5m\""));
}

/// `maestro … | head`: a reader gone before the first line ends the command quietly
/// (141, as the shell shows for `cat`), never with a panic report.
#[test]
fn a_reader_that_went_away_is_no_crash() {
    let s = Scratch::new();
    for args in [
        vec!["config", "default"],
        vec!["doctor"],
        vec!["usage"],
        vec!["sentinel", "list"],
    ] {
        // The pipe's reading end is closed before the command starts: every write fails.
        let (read, write) = nix::unistd::pipe().unwrap();
        drop(read);
        let out = maestro()
            .args(&args)
            .arg("--project")
            .arg(s.root())
            .stdout(std::process::Stdio::from(write))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("BACKTRACE"),
            "{args:?}: {stderr}"
        );
        assert!(
            matches!(out.status.code(), Some(0 | 1 | 141)),
            "{args:?}: {:?} {stderr}",
            out.status
        );
    }
}

#[test]
fn doctor_never_writes_and_reports_status() {
    let s = Scratch::new();
    let before = std::fs::read(s.db()).unwrap();
    let out = maestro()
        .args(["doctor", "--json", "--project", s.root().to_str().unwrap()])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read(s.db()).unwrap(), before);
    std::fs::write(s.db(), b"garbage").unwrap();
    let out = maestro()
        .args(["doctor", "--project", s.root().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(s.db()).unwrap(), b"garbage");
}

/// Every file of the project with its modification time.
fn listing(root: &std::path::Path) -> Vec<(String, std::time::SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().modified().unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn doctor_leaves_no_trace_and_checks_what_it_claims() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    let before = listing(s.root());
    assert!(
        !before
            .iter()
            .any(|(n, _)| n.ends_with("-wal") || n.ends_with("-shm")),
        "{before:?}"
    );
    let doctor = |extra: &[&str]| {
        maestro()
            .args(["doctor", "--project", s.root().to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = doctor(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("quick_check ok"), "{text}");
    assert_eq!(
        listing(s.root()),
        before,
        "doctor created or touched a file"
    );

    // A theme the dashboard would refuse is an error here too.
    let cfg = s.root().join("bad.toml");
    std::fs::write(&cfg, "[ui]\ntheme = \"nosuchtheme\"\n").unwrap();
    let out = doctor(&["--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("nosuchtheme"));
    std::fs::remove_file(&cfg).unwrap();

    // temp/ that is a file is named as such, not as "does not exist yet".
    std::fs::remove_dir(s.temp()).unwrap();
    std::fs::write(s.temp(), "x").unwrap();
    let out = doctor(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("is not a folder"), "{text}");
}

#[test]
fn doctor_reports_stale_sessions_odd_logs_and_dead_windows() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    s.conn()
        .execute(
            "UPDATE orchestration_tasks SET last_heartbeat = datetime('now', '-20 minutes') WHERE task_id = 'task-01'",
            [],
        )
        .unwrap();
    nix::unistd::mkfifo(
        &s.temp().join("task-02-status"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    std::os::unix::fs::symlink("/nonexistent/log", s.temp().join("task-03-status")).unwrap();
    std::fs::create_dir(s.temp().join("task-04-deviations")).unwrap();
    std::fs::write(s.temp().join("musician-task-01.pid"), "999999\n").unwrap();
    let before = listing(s.root());
    let out = maestro()
        .args(["doctor", "--json", "--project", s.root().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "warnings");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let detail = |name: &str| -> String {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == name)
            .map(|c| c["detail"].as_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    assert!(detail("sessions").contains("task-01"), "{v}");
    let logs = detail("logs");
    assert!(
        logs.contains("task-02-status is not a regular file"),
        "{logs}"
    );
    assert!(
        logs.contains("task-03-status is a dangling symlink"),
        "{logs}"
    );
    assert!(logs.contains("task-04-deviations is a folder"), "{logs}");
    assert!(
        detail("windows").contains("musician-task-01.pid (999999 is not running)"),
        "{v}"
    );
    assert_eq!(listing(s.root()), before, "doctor touched nothing");
}

/// One page of comms.db overwritten with other bytes: doctor says so (exit 2) instead
/// of "ok", and the file is left as it was.
#[test]
fn doctor_finds_a_damaged_page() {
    let s = Scratch::new();
    let conn = s.conn();
    for i in 0..300 {
        conn.execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-01', 'task-00', ?1, 'instruction')",
            [format!("{i} {}", "x".repeat(500))],
        )
        .unwrap();
    }
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    drop(conn);
    for side in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{side}", s.db().display()));
    }
    let mut bytes = std::fs::read(s.db()).unwrap();
    let page = 4096 * 3;
    for (i, b) in bytes[page..page + 4096].iter_mut().enumerate() {
        *b = (i * 7 % 251) as u8;
    }
    std::fs::write(s.db(), &bytes).unwrap();
    let out = maestro()
        .args(["doctor", "--project", s.root().to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("quick_check found damage"), "{text}");
    assert_eq!(std::fs::read(s.db()).unwrap(), bytes, "untouched");
}

/// `maestro init` makes the project: a folder that does not exist yet, comms.db and
/// temp/, and says what comes next.
#[test]
fn init_makes_the_folder_the_database_and_temp() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("work/demo-by-hand");
    let out = crate::common::maestro()
        .args(["init", "--project"])
        .arg(&dir)
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        dir.join("comms.db").is_file() && dir.join("temp").is_dir(),
        "{said}"
    );
    assert!(said.contains("created") && said.contains("temp"), "{said}");
    assert!(
        said.contains("maestro hooks install") && said.contains("maestro demo"),
        "{said}"
    );
    // Again: the database is never touched, and the advice names the way out.
    let before = std::fs::read(dir.join("comms.db")).unwrap();
    let out = crate::common::maestro()
        .args(["init", "--project"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--replace-damaged"));
    // A healthy database is not "replaced" either.
    let out = crate::common::maestro()
        .args(["init", "--replace-damaged", "--project"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not damaged"));
    assert_eq!(std::fs::read(dir.join("comms.db")).unwrap(), before);
}

/// A damaged comms.db leads out of the circle: one command keeps it beside a fresh one.
#[test]
fn a_damaged_database_is_kept_beside_a_fresh_one() {
    let s = tempfile::tempdir().unwrap();
    let db = s.path().join("comms.db");
    std::fs::write(&db, b"this was a database once\0\0").unwrap();
    let out = crate::common::maestro()
        .args(["init", "--replace-damaged", "--project"])
        .arg(s.path())
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let kept: Vec<_> = std::fs::read_dir(s.path())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("comms.db.damaged-")
        })
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        std::fs::read(kept[0].path()).unwrap(),
        b"this was a database once\0\0"
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("kept the damaged database as"), "{said}");
    let doctor = crate::common::maestro()
        .args(["doctor", "--project"])
        .arg(s.path())
        .output()
        .unwrap();
    assert_ne!(
        doctor.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&doctor.stdout)
    );
}

/// A value's error names where the value came from: the flag, or the file.
#[test]
fn a_zero_stall_threshold_names_its_source() {
    let s = crate::common::Scratch::new();
    let out = crate::common::maestro()
        .args(["--no-tui", "--stall-after", "0", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("command line") && err.contains("--stall-after"),
        "{err}"
    );
    assert!(!err.contains("embedded"), "{err}");
    let config = s.root().join("maestro.toml");
    std::fs::write(&config, "[sentinel]\nstall_after = \"0s\"\n").unwrap();
    let out = crate::common::maestro()
        .args(["--no-tui", "--config"])
        .arg(&config)
        .arg("--project")
        .arg(s.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("maestro.toml"), "{err}");
}

/// `maestro launch` fails loudly: no display, or a terminal that exits at once.
#[test]
fn launch_says_when_no_window_opened() {
    use std::os::unix::fs::PermissionsExt;
    let s = crate::common::Scratch::new();
    let bin = tempfile::tempdir().unwrap();
    let kitty = bin.path().join("kitty");
    std::fs::write(
        &kitty,
        "#!/bin/sh\necho 'X11: The DISPLAY environment variable is missing' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&kitty, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let launch = |display: Option<&str>| {
        let mut c = crate::common::maestro();
        c.args(["launch", "--project"])
            .arg(s.root())
            .env("PATH", &path)
            .env_remove("WAYLAND_DISPLAY");
        match display {
            Some(d) => c.env("DISPLAY", d),
            None => c.env_remove("DISPLAY"),
        };
        c.output().unwrap()
    };
    let out = launch(None);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("DISPLAY and WAYLAND_DISPLAY are both unset"),
        "{err}"
    );
    let out = launch(Some(":99"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("before maestro ran in it") && err.contains("X11: The DISPLAY"),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("opened"),
        "claimed a window"
    );
    // A terminal that lives on but runs nothing: no window claimed either, and it is
    // ended (maestro started it).
    std::fs::write(&kitty, "#!/bin/sh\nexec sleep 60\n").unwrap();
    let out = launch(Some(":99"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no maestro process ran in it within 10 s"),
        "{err}"
    );
}

/// A project the user may only read (another user's) is watched, read-only: headless
/// sees its tasks and anomalies, `doctor` and the action verbs say actions are disabled.
#[test]
fn a_project_the_user_may_only_read_is_watched() {
    use std::os::unix::fs::PermissionsExt;
    if !rustix::process::geteuid().is_root()
        || std::process::Command::new("setpriv")
            .arg("--help")
            .output()
            .is_err()
    {
        eprintln!("skipped: running maestro as another user needs root and setpriv");
        return;
    }
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_maestro"));
    // nobody must reach the binary: every folder above it must let others in.
    let reachable = exe
        .ancestors()
        .skip(1)
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
    if !reachable {
        eprintln!(
            "skipped: {} is not reachable by another user",
            exe.display()
        );
        return;
    }
    let s = crate::common::Scratch::new();
    s.set_task("task-01", "working");
    for dir in [s.root(), &s.temp()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let data = tempfile::tempdir().unwrap();
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let as_nobody = |args: &[&str]| {
        // setpriv runs the command in its own place (runuser would wait in a parent
        // of its own, and a kill of that parent would leave maestro running).
        let mut c = std::process::Command::new("setpriv");
        c.args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "--",
            "env",
        ])
        .arg(format!("XDG_DATA_HOME={}", data.path().display()))
        .arg(format!("HOME={}", data.path().display()))
        .arg(exe)
        .args(args)
        .arg("--project")
        .arg(s.root());
        c
    };
    let mut m = crate::common::Running::spawn(as_nobody(&["--no-tui", "--json"]));
    m.wait_json("its tasks", |v| {
        v["event"] == "task" && v["task_id"] == "task-01"
    });
    s.append("task-01-status", "step 1 self-correction: retried\n");
    m.wait_json("an anomaly", |v| {
        v["event"] == "anomaly" && v["task_id"] == "task-01"
    });
    s.set_task("task-02", "working");
    m.wait_json("a new task, written by its owner", |v| {
        v["event"] == "task" && v["task_id"] == "task-02"
    });
    let doctor = as_nobody(&["doctor"]).output().unwrap();
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(said.contains("read-only: you cannot write"), "{said}");
    let approve = as_nobody(&["task", "approve", "task-01", "--yes"])
        .output()
        .unwrap();
    assert_eq!(approve.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&approve.stderr).contains("actions are disabled"));
}
