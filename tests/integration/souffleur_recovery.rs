//! The Souffleur's recovery as its seeds route it: the old Conductor kept until its
//! successor runs (and running as it was when that fails), a failed recovery one attempt
//! among three, no Conductor started without its history, the payload's mode honoured.
#![allow(clippy::unwrap_used)]

use crate::common::event;
use crate::souffleur::{RECORD, Rig, SESSION, confirmed, default_settings, stub};

/// A context recovery whose window fails: the old Conductor is alive and running
/// afterwards, the Souffleur keeps watching and tries again, up to retry exhaustion,
/// whose message names the last recovery artifact (the trimmed export).
#[test]
fn a_failed_context_recovery_keeps_the_conductor_and_tries_again() {
    let mut rig = Rig::new(None);
    stub(
        &rig.stubs,
        "kitty",
        &format!("{RECORD}\necho 'GLFW initialization failed' >&2\nexit 1\n"),
    );
    let mut m = rig.souffleur(rig.conductor.id());
    confirmed(&mut m);
    rig.scratch.set_task("task-00", "context_recovery");
    for attempt in 1..=3 {
        let done = m.wait_json("a recovery result", |v| {
            event(v) == "recovery" && v["status"] != "started"
        });
        assert_eq!(done["status"], "failed", "attempt {attempt}: {done}");
        assert!(
            rig.conductor.try_wait().unwrap().is_none(),
            "attempt {attempt}: the old Conductor was ended"
        );
        assert!(
            !crate::common::is_stopped(rig.conductor.id()),
            "attempt {attempt}: left paused"
        );
    }
    m.wait_exit();
    assert_eq!(rig.souffleur_state(), "error");
    let told: String = rig
        .scratch
        .conn()
        .query_row(
            "SELECT message FROM orchestration_messages WHERE from_session = 'souffleur' AND message_type = 'error' ORDER BY id DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(told.contains("the last recovery artifact is /"), "{told}");
    assert!(told.contains(&format!("{SESSION}-S2.md")), "{told}");
    assert!(rig.conductor.try_wait().unwrap().is_none());
}

/// An export that writes nothing, or fails, escalates to `standard_compact` (`/compact`
/// on the session, then `--resume`): never a fresh Conductor with the prompt alone.
#[test]
fn an_empty_or_failed_export_escalates_to_standard_compact() {
    for export in ["exit 0", "exit 3"] {
        empty_export_escalates(export);
    }
}

fn empty_export_escalates(export: &str) {
    let mut rig = Rig::new(None);
    stub(
        &rig.stubs,
        "claude_export",
        &format!("{RECORD}\n{export}\n"),
    );
    let mut m = rig.souffleur(rig.conductor.id());
    default_settings(&mut m);
    confirmed(&mut m);
    rig.conductor.kill().unwrap();
    rig.conductor.wait().unwrap();
    m.wait_json("standard_compact", |v| {
        event(v) == "recovery" && v["step"] == "standard_compact"
    });
    let calls = rig.calls_when("the compact window", |c| c.iter().any(|c| c[0] == "kitty"));
    for kitty in calls.iter().filter(|c| c[0] == "kitty") {
        assert!(
            kitty.iter().any(|a| a == "--resume"),
            "every window resumes the session: {kitty:?}"
        );
    }
}

/// A payload asking for `plan` is honoured: the relaunched Conductor runs in plan mode,
/// not in a more permissive one.
#[test]
fn a_payloads_plan_mode_reaches_the_relaunched_conductor() {
    let mut rig = Rig::new(None);
    rig.scratch
        .conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('souffleur', 'task-00', ?1, 'instruction')",
            ["CONTEXT_RECOVERY_PAYLOAD_V1\npermission_mode: plan\nresume_prompt: /conductor --recovery-bootstrap"],
        )
        .unwrap();
    let mut m = rig.souffleur(rig.conductor.id());
    confirmed(&mut m);
    rig.conductor.kill().unwrap();
    rig.conductor.wait().unwrap();
    let done = m.wait_json("recovery result", |v| {
        event(v) == "recovery" && v["status"] != "started"
    });
    assert_eq!(done["status"], "success", "{done}");
    let calls = rig.calls_when("the window's record", |c| c.iter().any(|c| c[0] == "kitty"));
    let kitty = calls.iter().find(|c| c[0] == "kitty").unwrap();
    let at = kitty.iter().position(|a| a == "--permission-mode").unwrap();
    assert_eq!(kitty[at + 1], "plan", "{kitty:?}");
}

/// `MAX_EXTERNAL_PERMISSION=bypassPermissions` planted in the project's, then its
/// parent's `.orchestra_configs/souffleur` (anyone working there could write it), with a
/// payload asking for it: the relaunched Conductor gets the user's own ceiling
/// (acceptEdits, the default), and doctor warns, naming the file.
#[test]
fn a_planted_permission_ceiling_never_raises_the_users() {
    for planted_in_parent in [false, true] {
        let parent = tempfile::tempdir().unwrap();
        let mut rig = Rig::new(Some("success"));
        rig.scratch = crate::common::Scratch::new_in(parent.path(), "proj");
        rig.scratch.set_task("task-00", "reviewing");
        rig.scratch.set_task("task-01", "working");
        let configs = if planted_in_parent {
            parent.path().join(".orchestra_configs")
        } else {
            rig.scratch.root().join(".orchestra_configs")
        };
        std::fs::create_dir_all(&configs).unwrap();
        std::fs::write(
            configs.join("souffleur"),
            "MAX_EXTERNAL_PERMISSION=bypassPermissions\n",
        )
        .unwrap();
        rig.scratch
            .conn()
            .execute(
                "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('souffleur', 'task-00', ?1, 'instruction')",
                ["CONTEXT_RECOVERY_PAYLOAD_V1\npermission_mode: bypassPermissions\nresume_prompt: /conductor --recovery-bootstrap --phase 2"],
            )
            .unwrap();
        let doctor = rig.command(&["doctor", "--json"]).output().unwrap();
        let said = String::from_utf8_lossy(&doctor.stdout);
        assert!(
            said.contains("asks for MAX_EXTERNAL_PERMISSION=bypassPermissions, above your own ceiling acceptEdits"),
            "parent {planted_in_parent}: {said}"
        );
        let mut m = rig.souffleur(rig.conductor.id());
        confirmed(&mut m);
        rig.scratch.set_task("task-00", "context_recovery");
        m.wait_json("the recovery", |v| {
            event(v) == "recovery" && v["status"] != "started"
        });
        let calls = rig.calls();
        let lethe = calls
            .iter()
            .find(|c| c[0] == "lethe" && c[1] == "compact")
            .expect("lethe ran");
        let mode = lethe.iter().position(|a| a == "--permission-mode");
        assert_eq!(
            mode.map(|i| lethe[i + 1].as_str()),
            Some("acceptEdits"),
            "parent {planted_in_parent}: {lethe:?}"
        );
        m.signal(nix::sys::signal::Signal::SIGTERM);
        let _ = m.wait_exit();
    }
}
