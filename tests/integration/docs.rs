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
