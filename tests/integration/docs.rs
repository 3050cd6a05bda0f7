//! What the command line says about itself: shell completions and the manual page,
//! generated from the same definitions that parse the arguments.
#![allow(clippy::unwrap_used)]

use crate::common::maestro;

#[test]
fn completions_and_the_manual_page_come_from_the_command_line() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef maestro"),
        ("fish", "complete -c maestro"),
    ] {
        let out = maestro().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains(marker),
            "{shell}: {}",
            &script[..script.len().min(200)]
        );
        for verb in ["hooks", "sentinel", "souffleur", "replay"] {
            assert!(script.contains(verb), "{shell} completes {verb}");
        }
    }
    let out = maestro().arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH maestro 1"), "{}", &page[..200]);
    assert!(
        page.contains("hooks") && page.contains("\\-\\-no\\-tui"),
        "the verbs and flags are in the page"
    );
    let bad = maestro().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

/// Each verb's `--help` shows the options that act on it; the top level shows them all.
#[test]
fn each_verb_helps_with_its_own_options() {
    let help = |args: &[&str]| {
        let dir = tempfile::tempdir().unwrap();
        let out = maestro()
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{args:?} wrote nothing"
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let init = help(&["init", "--help"]);
    for absent in [
        "--theme",
        "--metrics",
        "--until-complete",
        "--spike-threshold",
        "--yes",
        "--config",
        "more than once",
        "--no-tui",
    ] {
        assert!(
            !init.contains(absent),
            "init --help shows {absent}:\n{init}"
        );
    }
    assert!(init.contains("--project"));
    assert!(help(&["task", "approve", "--help"]).contains("--yes"));
    assert!(help(&["help", "souffleur"]).contains("--stall-after"));
    let top = help(&["--help"]);
    for all in [
        "--theme",
        "--metrics",
        "--until-complete",
        "--spike-threshold",
    ] {
        assert!(top.contains(all), "maestro --help shows {all}");
    }
    // Hidden is not refused: a global option still works after any verb.
    let dir = tempfile::tempdir().unwrap();
    let out = maestro()
        .args(["init", "--theme", "light", "--project"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
}

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn files_under(dir: &std::path::Path, ext: &str, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, ext, out);
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
}

/// Every document the README, the docs, the source (its messages and `--help` included)
/// and the default configuration name is in the repository.
#[test]
fn every_document_named_exists() {
    let mut files = vec![root().join("README.md"), root().join("config/default.toml")];
    files_under(&root().join("docs"), "md", &mut files);
    files_under(&root().join("src"), "rs", &mut files);
    let named = regex::Regex::new(r"([A-Za-z0-9_./-]+\.md)\b").unwrap();
    let mut missing = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for c in named.captures_iter(&text) {
            let doc = c[1].trim_start_matches("./");
            // A link inside docs/ is relative to it; a name elsewhere to the root.
            let here = f.parent().unwrap().join(doc);
            if !root().join(doc).is_file() && !here.is_file() {
                missing.push(format!(
                    "{} names {doc}",
                    f.strip_prefix(root()).unwrap().display()
                ));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "documents named but not in the repository: {missing:#?}"
    );
}

/// The headless JSON events docs/cli.md lists are exactly those the code prints.
#[test]
fn the_documented_events_are_the_events() {
    let doc = std::fs::read_to_string(root().join("docs/cli.md")).unwrap();
    let section = doc
        .split("## Headless JSON")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let row = regex::Regex::new(r"(?m)^\| `([a-z_]+)` \|").unwrap();
    let documented: std::collections::BTreeSet<String> = row
        .captures_iter(section)
        .map(|c| c[1].to_owned())
        .collect();
    let code = std::fs::read_to_string(root().join("src/core/event_json.rs")).unwrap();
    let printed = regex::Regex::new(r#""event": "([a-z_]+)""#).unwrap();
    let emitted: std::collections::BTreeSet<String> = printed
        .captures_iter(&code)
        .map(|c| c[1].to_owned())
        .collect();
    assert_eq!(
        documented, emitted,
        "docs/cli.md and src/core/event_json.rs disagree"
    );
}

/// Every source path the documents name (in backticks, or as a link) is in the
/// repository: a file that became a folder is named as the folder.
#[test]
fn every_source_path_named_exists() {
    let mut files = vec![root().join("README.md")];
    files_under(&root().join("docs"), "md", &mut files);
    let quoted =
        regex::Regex::new(r"`((?:src|tests|benches|assets|config|themes)/[^`\s]*)`").unwrap();
    let linked =
        regex::Regex::new(r"\]\(((?:\.\./)?(?:src|tests|benches|assets|config|themes)/[^)#\s]*)")
            .unwrap();
    let mut missing = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for c in quoted
            .captures_iter(&text)
            .chain(linked.captures_iter(&text))
        {
            let path = c[1].trim_end_matches([',', '.', ':']);
            let here = f.parent().unwrap().join(path);
            let from_root = root().join(path.trim_start_matches("../"));
            if !here.exists() && !from_root.exists() {
                missing.push(format!(
                    "{} names {path}",
                    f.strip_prefix(root()).unwrap().display()
                ));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "paths named but not in the repository: {missing:#?}"
    );
}

/// The README's quick start runs as written: `init` on a folder that does not exist, a
/// row with sqlite3, log lines, then the dashboard, here in its headless form (the same
/// actors), which must show the task and both anomalies.
#[test]
fn the_readmes_quick_start_runs_as_written() {
    if std::process::Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_err()
    {
        eprintln!("skipped: sqlite3 is not installed (.ci/run installs it)");
        return;
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = readme
        .split("**2. A project by hand.**")
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|b| b.split("```").next())
        .unwrap()
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_maestro"))
        .parent()
        .unwrap()
        .to_owned();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let sh = |line: &str| {
        let out = std::process::Command::new("sh")
            .args(["-c", line])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("XDG_DATA_HOME", crate::common::data_home())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let mut dashboard = None;
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        if line.starts_with("maestro --project") {
            // The dashboard: the same project, headless, reading what the lines wrote.
            let mut c = crate::common::maestro();
            c.current_dir(dir.path())
                .args(["--no-tui", "--json", "--project", "demo-by-hand"]);
            let mut m = crate::common::Running::spawn(c);
            m.wait_json("task-01 working", |v| {
                v["event"] == "task" && v["task_id"] == "task-01" && v["state"] == "working"
            });
            dashboard = Some(m);
        } else {
            sh(line);
        }
    }
    let mut m = dashboard.expect("the quick start opens the dashboard");
    let self_correction =
        |v: &serde_json::Value| v["event"] == "anomaly" && v["anomaly"] == "self-correction";
    let spike = |v: &serde_json::Value| v["event"] == "anomaly" && v["anomaly"] == "context-spike";
    m.wait_all("the two anomalies", &[&self_correction, &spike]);
}
