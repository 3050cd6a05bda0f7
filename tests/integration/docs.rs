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
    crate::common::assert_success(&out);
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
    crate::common::assert_success(&out);
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
    // Step 3 (hooks) follows on the same project.
    let hooks = readme
        .split("**3. Hooks**")
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|b| b.split("```").next())
        .unwrap()
        .to_owned();
    run_by_hand(&format!("{block}{hooks}"));
    // The guide's recipe is the same walk, and runs as written too.
    let guide = std::fs::read_to_string(root().join("docs/guide.md")).unwrap();
    let recipe = sh_blocks(&guide)
        .into_iter()
        .find(|b| b.contains("demo-by-hand"))
        .expect("the guide's recipe");
    run_by_hand(&recipe);
}

/// Runs a by-hand walk line by line in a new folder; the dashboard line runs headless
/// (the same actors) and must show the task and both anomalies.
fn run_by_hand(block: &str) {
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

/// The thresholds that help and the guide name are the code's: the headroom levels
/// (`core::headroom`) and the forecast's crossings (`core::forecast`).
#[test]
fn thresholds_named_in_help_and_docs_are_the_codes() {
    use maestro::core::forecast::{EXIT_AT, HANDOFF_AT};
    use maestro::core::headroom::{CAUTION_AT, CRITICAL_AT};
    let out = maestro().args(["task", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let levels = format!(
        "exit 0 healthy (<{CAUTION_AT}% used), 1 caution (>={CAUTION_AT}% or a self-correction) or no data, 2 critical (>={CRITICAL_AT}%)"
    );
    assert!(help.contains(&levels), "{help}");
    let guide = std::fs::read_to_string(root().join("docs/guide.md")).unwrap();
    assert!(
        guide.contains(&format!(
            "1 caution (>={CAUTION_AT}% or a self-correction) or no data, 2 critical (>={CRITICAL_AT}%)"
        )),
        "docs/guide.md names the headroom levels"
    );
    // Every percentage the guide pairs with a level or a crossing is one of the code's.
    let named: std::collections::BTreeSet<i64> = regex::Regex::new(r"(?:>=|→|reach )(\d+)%")
        .unwrap()
        .captures_iter(&guide)
        .map(|c| c[1].parse().unwrap())
        .collect();
    let known = [
        CAUTION_AT,
        CRITICAL_AT,
        i64::from(HANDOFF_AT),
        i64::from(EXIT_AT),
    ];
    assert!(
        named.iter().all(|n| known.contains(n)),
        "docs/guide.md names {named:?}; the code's thresholds are {known:?}"
    );
    assert!(
        guide.contains(&format!("→{EXIT_AT}%")),
        "the forecast column"
    );
    // The link's beat, as docs/cli.md states it.
    let cli = std::fs::read_to_string(root().join("docs/cli.md")).unwrap();
    let (beat, beats) = (
        maestro::remote::wire::BEAT,
        maestro::remote::wire::SILENT_BEATS,
    );
    assert!(
        cli.contains(&format!("a beat every {} s", beat.as_secs()))
            && cli.contains(&format!("({} s:", (beat * beats).as_secs())),
        "docs/cli.md names the beat"
    );
}

/// Every `maestro` command in a `sh` block of the README and the guide is one maestro
/// accepts as written (the synopsis lists, with `A|B` and `[OPT]`, are `text`): clap
/// checks its words, asked for help at the end instead of running.
#[test]
fn every_maestro_command_in_the_docs_is_accepted_as_written() {
    let mut checked = 0;
    for doc in ["README.md", "docs/guide.md"] {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        for block in sh_blocks(&text) {
            for line in block.lines() {
                let Some(words) = maestro_words(line) else {
                    continue;
                };
                let out = maestro()
                    .args(&words)
                    .arg("--help")
                    .env("PID", "1")
                    .env("SESSION_ID", "s")
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{doc}: `{line}` is not accepted: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 20, "{checked} commands checked");
}

fn sh_blocks(text: &str) -> Vec<String> {
    text.split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .map(str::to_owned)
        .collect()
}

/// A line's `maestro` arguments: shell words up to a comment, a redirection or `&&`.
fn maestro_words(line: &str) -> Option<Vec<String>> {
    let line = line.split("  #").next().unwrap_or(line).trim();
    let words = shlex::split(line)?;
    let (first, rest) = words.split_first()?;
    (first == "maestro").then(|| {
        rest.iter()
            .take_while(|w| !matches!(w.as_str(), ">" | ">>" | "&&" | "|" | ";"))
            .map(|w| {
                w.replace("$PID", "1")
                    .replace("$SESSION_ID", "s")
                    .replace("$PROJECT", ".")
            })
            .collect()
    })
}

/// The guide's install lines for completions, run as written (a shell, `~` expanded)
/// against a fresh, empty home: they work, and leave the file (the manual page's lines:
/// the next test).
#[test]
fn the_guides_install_commands_work_on_a_fresh_home() {
    let text = std::fs::read_to_string(root().join("docs/guide.md")).unwrap();
    let lines: Vec<String> = sh_blocks(&text)
        .iter()
        .flat_map(|b| b.lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| l.starts_with("mkdir -p ~/.local") || l.starts_with("maestro completions"))
        .map(|l| l.split("  #").next().unwrap_or(&l).trim().to_owned())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let home = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_maestro"), bin.path().join("maestro")).unwrap();
    for line in &lines {
        let out = std::process::Command::new("sh")
            .args(["-c", line])
            .env("HOME", home.path())
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bin.path().display(),
                    std::env::var("PATH").unwrap()
                ),
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`{line}` on a fresh home: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let completions = home
        .path()
        .join(".local/share/bash-completion/completions/maestro");
    assert!(std::fs::metadata(&completions).unwrap().len() > 100);
}

/// The guide's lines that install the manual page, run under `sh` with a fresh HOME and
/// a PATH of only `~/.cargo/bin` (where `cargo install` puts maestro) and the system
/// folders: `man maestro` finds the page afterwards.
#[test]
fn the_guides_man_page_lines_make_man_maestro_work_on_a_fresh_home() {
    let Ok(man) = std::process::Command::new("man")
        .arg("-w")
        .arg("sh")
        .output()
    else {
        eprintln!("skipped: man is not installed");
        return;
    };
    if !man.status.success() {
        eprintln!("skipped: man finds no page here (no manual pages installed)");
    }
    let guide = std::fs::read_to_string(root().join("docs/guide.md")).unwrap();
    let lines: Vec<String> = sh_blocks(&guide)
        .iter()
        .flat_map(|b| b.lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| l.contains("man1"))
        .collect();
    assert_eq!(lines.len(), 2, "the guide's man page lines: {lines:?}");
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join(".cargo/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_maestro"), bin.join("maestro")).unwrap();
    let script = format!("set -e\n{}\nman -w maestro\n", lines.join("\n"));
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env_clear()
        .env("HOME", home.path())
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("maestro.1"));
}
