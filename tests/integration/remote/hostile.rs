//! A host that sends what no maestro would: every byte has a bound. Its `[remote]
//! maestro` is a script that says hello, then misbehaves.

use std::time::Duration;

use crate::common::{Running, Scratch, event};
use crate::remote::{sshd, watch};

/// A `[remote] maestro` script: hello, then `then` (shell).
pub(super) fn hostile(
    sshd: &crate::remote::sshd::Sshd,
    name: &str,
    then: &str,
) -> std::path::PathBuf {
    let path = sshd.dir().join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho '{{\"frame\":\"hello\",\"protocol\":{},\"version\":\"{}\",\"project\":\"/p\",\"database\":true}}'\n{then}\n",
            maestro::remote::wire::PROTOCOL,
            env!("CARGO_PKG_VERSION")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// The peak resident memory of a process, in MiB.
fn peak_mib(m: &Running) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", m.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        / 1024
}

#[test]
fn three_hundred_megabytes_without_a_newline_drop_the_link_not_the_memory() {
    let Some(sshd) = sshd("three_hundred_megabytes_without_a_newline") else {
        return;
    };
    let project = Scratch::new();
    let script = hostile(
        &sshd,
        "flood",
        "head -c 300000000 /dev/zero | tr '\\0' x\nsleep 60",
    );
    let mut m = watch(
        &sshd.config(Some(script.to_str().unwrap()), "ssh_config"),
        &project,
    );
    m.wait_json("up", |v| event(v) == "link" && v["status"] == "up");
    let down = m.wait_json("down", |v| event(v) == "link" && v["status"] == "down");
    assert!(
        down["detail"].as_str().unwrap().contains("over 1 MiB"),
        "{down}"
    );
    let peak = peak_mib(&m);
    eprintln!("peak RSS after 300 MB without a newline: {peak} MiB");
    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.wait_exit();
    assert!(peak < 120, "peak RSS {peak} MiB");
}

#[test]
fn twenty_megabytes_of_stderr_are_a_short_detail() {
    let Some(sshd) = sshd("twenty_megabytes_of_stderr") else {
        return;
    };
    let project = Scratch::new();
    let script = sshd.dir().join("noisy");
    std::fs::write(
        &script,
        "#!/bin/sh\nhead -c 20000000 /dev/zero | tr '\\0' e >&2\necho ' the last word' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut m = watch(
        &sshd.config(Some(script.to_str().unwrap()), "ssh_config"),
        &project,
    );
    let down = m.wait_json("down", |v| event(v) == "link" && v["status"] == "down");
    let detail = down["detail"].as_str().unwrap();
    assert!(detail.chars().count() <= 400, "{} characters", detail.len());
    let peak = peak_mib(&m);
    eprintln!("peak RSS after 20 MB of stderr: {peak} MiB");
    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.wait_exit();
    assert!(
        m.seen.iter().all(|l| l.len() < 2000),
        "no line carries the flood"
    );
    assert!(peak < 120, "peak RSS {peak} MiB");
}

/// One line that is not UTF-8: one `error` event, and the link stays up until the host
/// ends it itself.
#[test]
fn a_bad_byte_is_skipped_and_the_link_stays_up() {
    let Some(sshd) = sshd("a_bad_byte_is_skipped") else {
        return;
    };
    let project = Scratch::new();
    let script = hostile(
        &sshd,
        "bad-byte",
        "printf 'x\\377y\\n'\nfor i in 1 2 3 4 5 6 7 8; do echo '{\"frame\":\"beat\"}'; sleep 1; done\nexit 0",
    );
    let mut m = watch(
        &sshd.config(Some(script.to_str().unwrap()), "ssh_config"),
        &project,
    );
    m.wait_json("up", |v| event(v) == "link" && v["status"] == "up");
    let error = m.wait_json("the bad line said", |v| event(v) == "error");
    assert!(
        error["detail"].as_str().unwrap().contains("not UTF-8"),
        "{error}"
    );
    // The next link event is the host's own end, eight beats later: not a drop.
    let next = m.wait_json_within("the host's end", Duration::from_secs(20), |v| {
        event(v) == "link"
    });
    let detail = next["detail"].as_str().unwrap();
    assert!(!detail.contains("signal"), "{next}");
    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.wait_exit();
    assert_eq!(
        m.seen.iter().filter(|l| l.contains("not UTF-8")).count(),
        1,
        "said once"
    );
}

/// A host that names a new task in every frame: past 10,000 tasks what names a new one
/// is refused, said once, and the memory stays bounded.
#[test]
fn a_stream_of_new_task_ids_is_refused_past_the_cap() {
    let Some(sshd) = sshd("a_stream_of_new_task_ids") else {
        return;
    };
    let project = Scratch::new();
    let script = hostile(
        &sshd,
        "many-tasks",
        "i=0\nwhile [ $i -lt 15000 ]; do printf '{\"frame\":\"input\",\"t\":\"2026-11-25T10:00:00.000Z\",\"ev\":\"lines\",\"task\":\"task-%06d\",\"kind\":\"status\",\"lines\":[\"step 1 started\"]}\\n' $i; i=$((i+1)); done\nwhile true; do echo '{\"frame\":\"beat\"}'; sleep 1; done",
    );
    let mut m = watch(
        &sshd.config(Some(script.to_str().unwrap()), "ssh_config"),
        &project,
    );
    m.wait_json("up", |v| event(v) == "link" && v["status"] == "up");
    let refused = m.wait_json_within("the refusal", Duration::from_secs(60), |v| {
        event(v) == "error"
            && v["detail"]
                .as_str()
                .is_some_and(|d| d.contains("more than 10000 tasks"))
    });
    assert!(
        refused["detail"].as_str().unwrap().contains("devbox"),
        "{refused}"
    );
    let peak = peak_mib(&m);
    eprintln!("peak RSS after 15,000 task ids: {peak} MiB");
    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.wait_exit();
    assert_eq!(
        m.seen
            .iter()
            .filter(|l| l.contains("more than 10000 tasks"))
            .count(),
        1,
        "said once"
    );
    assert!(peak < 300, "peak RSS {peak} MiB");
}
