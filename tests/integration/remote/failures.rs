//! A remote project that cannot be watched says why, in the operator's words.
#![allow(clippy::unwrap_used)]

use crate::common::{Scratch, event, maestro};
use crate::remote::{address, sshd, watch};

fn down_detail(config: &std::path::Path, project: &Scratch) -> String {
    let mut m = watch(config, project);
    let down = m.wait_json("the link down", |v| {
        event(v) == "link" && v["status"] == "down"
    });
    down["detail"].as_str().unwrap().to_owned()
}

#[test]
fn a_host_without_maestro() {
    let Some(sshd) = sshd("a_host_without_maestro") else {
        return;
    };
    let project = Scratch::new();
    let config = sshd.config(Some("/opt/nowhere/maestro"), "ssh_config");
    let detail = down_detail(&config, &project);
    assert!(
        detail.starts_with(
            "maestro is not installed on devbox (ran `/opt/nowhere/maestro`): install it there"
        ),
        "{detail}"
    );
    // A command says the same, and fails.
    let out = maestro()
        .args(["doctor", "--config"])
        .arg(&config)
        .args(["--project", &address(&project)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("maestro is not installed on devbox"),
        "{out:?}"
    );
}

#[test]
fn a_version_mismatch_names_both_versions_and_which_to_update() {
    let Some(sshd) = sshd("a_version_mismatch") else {
        return;
    };
    let project = Scratch::new();
    // A maestro from the future: its hello speaks protocol 99.
    let newer = sshd.dir().join("newer-maestro");
    std::fs::write(
        &newer,
        "#!/bin/sh\necho '{\"frame\":\"hello\",\"protocol\":99,\"version\":\"9.0.0\",\"project\":\"/p\",\"database\":true}'\ncat >/dev/null\n",
    )
    .unwrap();
    std::fs::set_permissions(&newer, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = sshd.config(Some(newer.to_str().unwrap()), "ssh_config");
    let detail = down_detail(&config, &project);
    assert!(
        detail.contains("(9.0.0, protocol 99) is newer than this one")
            && detail.contains(&format!(
                "({}, protocol {})",
                env!("CARGO_PKG_VERSION"),
                maestro::remote::wire::PROTOCOL
            ))
            && detail.ends_with("update this maestro to 9.0.0."),
        "{detail}"
    );
}

#[test]
fn authentication_refused_is_told_in_sshs_words_and_a_path_that_is_no_project_as_locally() {
    let Some(sshd) = sshd("authentication_refused") else {
        return;
    };
    let project = Scratch::new();
    let stranger = sshd.config(None, "stranger_config");
    let detail = down_detail(&stranger, &project);
    assert!(
        detail.starts_with("ssh could not reach devbox: ") && detail.contains("Permission denied"),
        "{detail}"
    );
    let config = sshd.config(None, "ssh_config");
    let mut m = crate::common::Running::spawn({
        let mut cmd = maestro();
        cmd.args(["--no-tui", "--json", "--config"])
            .arg(&config)
            .args(["--project", "ssh://devbox/nonexistent/orch"]);
        cmd
    });
    let down = m.wait_json("the link down", |v| {
        event(v) == "link" && v["status"] == "down"
    });
    let local = maestro()
        .args(["doctor", "--project", "/nonexistent/orch"])
        .output()
        .unwrap();
    let local = String::from_utf8_lossy(&local.stderr);
    let local = local.trim().strip_prefix("maestro: ").unwrap();
    assert_eq!(down["detail"], format!("devbox: {local}"), "{down}");
}
