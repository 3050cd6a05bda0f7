//! Inputs of a recovery: the `CONTEXT_RECOVERY_PAYLOAD_V1` message, the permission
//! ceiling and compaction threshold from `.orchestra_configs/souffleur`, and the
//! defaults that apply when either is absent or malformed.

use std::path::{Path, PathBuf};

pub const PAYLOAD_HEADER: &str = "CONTEXT_RECOVERY_PAYLOAD_V1";
pub const DEFAULT_PROMPT: &str = "/conductor --recovery-bootstrap";
pub const DEFAULT_FORCE_COMPACT: u64 = 400_000;

pub use crate::core::domain::permission::Permission;

/// The relaunched Conductor's whole prompt, as the Souffleur's launch template words it:
/// the resolved prompt (`/conductor --recovery-bootstrap…`), why it was relaunched,
/// what to read first (the predecessor's exported transcript, or its own resumed one),
/// where the state is, and the predecessor's session id.
pub fn bootstrap_prompt(
    prompt: &str,
    kind: crate::core::domain::souffleur::RecoveryKind,
    export: Option<&std::path::Path>,
    old_session: &str,
) -> String {
    use crate::core::domain::souffleur::RecoveryKind;
    let reason = match kind {
        RecoveryKind::Relaunch => "Your previous Conductor session crashed or became unresponsive.",
        RecoveryKind::ContextRecovery => {
            "Your predecessor requested a fresh session due to high context usage. This is a planned handoff, not a crash."
        }
    };
    let read_first = match export {
        Some(path) => format!(
            "**Recovery context:** {}\n\nRead this file first: it contains the conversation transcript from your predecessor.",
            path.display()
        ),
        None => "**Recovery context:** this session resumes your predecessor's own transcript, compacted: read its summary first.".to_owned(),
    };
    format!(
        "{prompt}\n\n{reason}\n\n{read_first} The orchestration_tasks and orchestration_messages tables in comms.db hold the current state of all tasks: query them to understand where things stand before resuming.\n\nYour predecessor's session ID was: {}",
        crate::core::text::one_line(old_session)
    )
}

/// What the payload asked for (each field optional).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payload {
    pub permission_mode: Option<String>,
    pub resume_prompt: Option<String>,
}

/// Reads a payload message; `None` when it is not one (no header on the first line).
/// Unknown `key: value` lines before the prompt are ignored; a field may appear more
/// than once, the last one wins. `resume_prompt:` starts the prompt, and every line
/// after it (blank ones too) belongs to it, as in the Souffleur's design example.
pub fn parse_payload(text: &str) -> Option<Payload> {
    let mut lines = text.lines();
    if lines.next()?.trim() != PAYLOAD_HEADER {
        return None;
    }
    let mut p = Payload::default();
    while let Some(line) = lines.next() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "permission_mode" if !value.is_empty() => p.permission_mode = Some(value.to_owned()),
            "resume_prompt" => {
                let mut prompt = value.to_owned();
                for rest in lines.by_ref() {
                    prompt.push('\n');
                    prompt.push_str(rest);
                }
                let prompt = prompt.trim();
                if !prompt.is_empty() {
                    p.resume_prompt = Some(prompt.to_owned());
                }
            }
            _ => {}
        }
    }
    Some(p)
}

/// The recovery's resolved inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub permission: Permission,
    pub prompt: String,
    /// Why a requested value was not used, for the operator.
    pub warnings: Vec<String>,
}

/// Applies defaults and the ceiling. The prompt must start with the recovery command;
/// a prompt that does not, or that holds control characters, is replaced.
pub fn resolve(payload: Option<&Payload>, ceiling: Permission) -> Resolved {
    let mut warnings = Vec::new();
    let requested = payload.and_then(|p| p.permission_mode.as_deref());
    // The default is held to the ceiling like a request: a user whose ceiling is
    // `default` never gets acceptEdits for asking nothing (or nonsense).
    let fallback = Permission::AcceptEdits.min(ceiling);
    let permission = match requested.map(|r| (r, Permission::parse(r))) {
        None => fallback,
        Some((_, Some(p))) if p <= ceiling => p,
        Some((_, Some(p))) => {
            warnings.push(format!(
                "payload asked for permission {}, above the ceiling {}; using {}",
                p.as_str(),
                ceiling.as_str(),
                ceiling.as_str()
            ));
            ceiling
        }
        Some((raw, None)) => {
            warnings.push(format!(
                "payload permission {raw:?} is not a known mode; using {}",
                fallback.as_str()
            ));
            fallback
        }
    };
    let prompt = match payload.and_then(|p| p.resume_prompt.as_deref()) {
        // Newlines and tabs belong to a multi-line prompt (it goes as one argv element);
        // other control characters never reach a terminal.
        Some(p)
            if p.starts_with(DEFAULT_PROMPT)
                && !p.chars().any(|c| c.is_control() && c != '\n' && c != '\t') =>
        {
            p.to_owned()
        }
        Some(p) => {
            warnings.push(format!("payload resume prompt {p:?} does not start with {DEFAULT_PROMPT}; using the default"));
            DEFAULT_PROMPT.to_owned()
        }
        None => DEFAULT_PROMPT.to_owned(),
    };
    Resolved {
        permission,
        prompt,
        warnings,
    }
}

/// `.orchestra_configs/souffleur`: `KEY=value` lines, resolved exactly as the
/// ecosystem's `souffleur-config.py` resolves them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrchestraConfig {
    pub max_permission: Permission,
    pub force_compact: u64,
    /// The file the values came from (`None`: no file, every value is the default).
    pub source: Option<PathBuf>,
    /// Where each value came from: `default`, or the file and line.
    pub max_permission_from: String,
    pub force_compact_from: String,
    /// Problems found, each saying which default was used instead.
    pub warnings: Vec<String>,
}

impl Default for OrchestraConfig {
    fn default() -> Self {
        Self {
            max_permission: Permission::AcceptEdits,
            force_compact: DEFAULT_FORCE_COMPACT,
            source: None,
            max_permission_from: "default".into(),
            force_compact_from: "default".into(),
            warnings: Vec::new(),
        }
    }
}

impl OrchestraConfig {
    /// One line for the operator: the values and where each came from.
    pub fn describe(&self) -> String {
        format!(
            "MAX_EXTERNAL_PERMISSION={} ({}), FORCE_COMPACT={} ({})",
            self.max_permission.as_str(),
            self.max_permission_from,
            self.force_compact,
            self.force_compact_from
        )
    }
}

/// Reads the first of `<project>/.orchestra_configs/souffleur` and the parent's that is
/// a regular file, held to `ceiling`, the user's own: a project file (anyone who can
/// write in the project, or in a shared parent, wrote it) may lower the permission
/// ceiling, never raise it; one that asks for more gets the user's, with a warning.
pub fn load_orchestra_config(project: &Path, ceiling: Permission) -> OrchestraConfig {
    let mut config = read_orchestra_config(project);
    config.max_permission_from = if config.max_permission_from == "default" {
        "your maestro configuration".to_owned()
    } else {
        config.max_permission_from
    };
    if config.source.is_none() {
        config.max_permission = ceiling;
    } else if config.max_permission > ceiling {
        config.warnings.push(format!(
            "{} asks for MAX_EXTERNAL_PERMISSION={}, above your own ceiling {}; using {} (only `[souffleur] max_external_permission` in your maestro configuration raises it)",
            config.max_permission_from,
            config.max_permission.as_str(),
            ceiling.as_str(),
            ceiling.as_str()
        ));
        config.max_permission = ceiling;
        "your maestro configuration".clone_into(&mut config.max_permission_from);
    }
    config
}

/// The project's (or its parent's) file as the ecosystem's script reads it. Missing:
/// defaults. Unreadable or not UTF-8: defaults and a warning (the parent's file is not
/// consulted then, as the first hit wins).
fn read_orchestra_config(project: &Path) -> OrchestraConfig {
    let candidates = [Some(project), project.parent()];
    let Some(path) = candidates
        .into_iter()
        .flatten()
        .map(|dir| dir.join(".orchestra_configs").join("souffleur"))
        .find(|p| p.is_file())
    else {
        return OrchestraConfig::default();
    };
    let origin = path.display().to_string();
    let mut config = match std::fs::read(&path).map(String::from_utf8) {
        Ok(Ok(text)) => parse_orchestra_config(&origin, &text),
        Ok(Err(_)) => OrchestraConfig {
            warnings: vec![format!(
                "{origin} is not UTF-8 text; using the defaults (MAX_EXTERNAL_PERMISSION=acceptEdits, FORCE_COMPACT={DEFAULT_FORCE_COMPACT})"
            )],
            ..OrchestraConfig::default()
        },
        Err(e) => OrchestraConfig {
            warnings: vec![format!("cannot read {origin} ({e}); using the defaults")],
            ..OrchestraConfig::default()
        },
    };
    config.source = Some(path);
    config
}

/// A positive integer as Python's `int()` reads one: an optional sign, digits, single
/// underscores only between digits (`250_000` yes, `25__0000` and `"250000"` no).
fn python_positive_int(text: &str) -> Option<u64> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    let well_formed = !digits.is_empty()
        && digits
            .split('_')
            .all(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()));
    if !well_formed {
        return None;
    }
    digits
        .replace('_', "")
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
}

pub fn parse_orchestra_config(origin: &str, text: &str) -> OrchestraConfig {
    let mut c = OrchestraConfig::default();
    // The last value of each key wins, as in the script (with a warning).
    let mut force: Option<(usize, &str)> = None;
    let mut permission: Option<(usize, &str)> = None;
    for (n, raw) in text.lines().enumerate() {
        let line_no = n + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            c.warnings
                .push(format!("{origin}: line {line_no} has no '='; ignored"));
            continue;
        };
        let slot = match key.trim() {
            "FORCE_COMPACT" => &mut force,
            "MAX_EXTERNAL_PERMISSION" => &mut permission,
            other => {
                c.warnings.push(format!(
                    "{origin}: unknown key {other:?} on line {line_no}; ignored"
                ));
                continue;
            }
        };
        if slot.is_some() {
            c.warnings.push(format!(
                "{origin}: {} appears again on line {line_no}; the last value wins",
                key.trim()
            ));
        }
        *slot = Some((line_no, value.trim()));
    }
    if let Some((line_no, value)) = force {
        match python_positive_int(value) {
            Some(n) => {
                c.force_compact = n;
                c.force_compact_from = format!("{origin}:{line_no}");
            }
            None => c.warnings.push(format!(
                "{origin}: FORCE_COMPACT={value:?} on line {line_no} is not a positive integer; using the default {DEFAULT_FORCE_COMPACT}"
            )),
        }
    }
    if let Some((line_no, value)) = permission {
        // The script takes these two only (a narrower mode comes from the payload).
        let ceiling = Permission::parse_exact(value)
            .filter(|p| matches!(p, Permission::AcceptEdits | Permission::BypassPermissions));
        match ceiling {
            Some(p) => {
                c.max_permission = p;
                c.max_permission_from = format!("{origin}:{line_no}");
            }
            None => c.warnings.push(format!(
                "{origin}: MAX_EXTERNAL_PERMISSION={value:?} on line {line_no} is not acceptEdits or bypassPermissions; using the default acceptEdits"
            )),
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_edge_cases() {
        let table: &[(&str, Option<Payload>)] = &[
            ("", None),
            ("permission_mode: bypassPermissions", None),
            ("CONTEXT_RECOVERY_PAYLOAD_V2\npermission_mode: x", None),
            (PAYLOAD_HEADER, Some(Payload::default())),
            (
                "CONTEXT_RECOVERY_PAYLOAD_V1\nfuture_field: 1\npermission_mode: bypassPermissions\nresume_prompt: /conductor --recovery-bootstrap --phase 3\n",
                Some(Payload {
                    permission_mode: Some("bypassPermissions".into()),
                    resume_prompt: Some("/conductor --recovery-bootstrap --phase 3".into()),
                }),
            ),
            (
                "CONTEXT_RECOVERY_PAYLOAD_V1\ngarbage line\npermission_mode:\n",
                Some(Payload::default()),
            ),
        ];
        for (text, expected) in table {
            assert_eq!(&parse_payload(text), expected, "{text:?}");
        }
    }

    #[test]
    fn the_default_mode_is_held_to_the_ceiling_too() {
        let invalid = Payload {
            permission_mode: Some("everything".into()),
            resume_prompt: None,
        };
        for payload in [None, Some(&Payload::default()), Some(&invalid)] {
            assert_eq!(
                resolve(payload, Permission::Default).permission,
                Permission::Default,
                "{payload:?}"
            );
            assert_eq!(
                resolve(payload, Permission::BypassPermissions).permission,
                Permission::AcceptEdits,
                "{payload:?}"
            );
        }
    }

    #[test]
    fn a_narrower_mode_asked_for_is_honoured() {
        for (asked, given) in [
            ("plan", Permission::Plan),
            ("default", Permission::Default),
            ("acceptEdits", Permission::AcceptEdits),
        ] {
            let p = Payload {
                permission_mode: Some(asked.into()),
                resume_prompt: None,
            };
            let r = resolve(Some(&p), Permission::AcceptEdits);
            assert_eq!(r.permission, given, "{asked}");
            assert_eq!(r.permission.as_str(), asked);
            assert!(r.warnings.is_empty(), "{r:?}");
        }
    }

    #[test]
    fn the_prompt_runs_to_the_end_of_the_message() {
        // The Souffleur design's example: a command line, a blank line, a paragraph.
        let text = "CONTEXT_RECOVERY_PAYLOAD_V1\nphase: 3\npermission_mode: acceptEdits\nresume_prompt: /conductor --recovery-bootstrap\n\nYou are resuming as the Conductor.\nRead the handoff first.\n";
        let p = parse_payload(text).expect("a payload");
        assert_eq!(
            p.resume_prompt.as_deref(),
            Some(
                "/conductor --recovery-bootstrap\n\nYou are resuming as the Conductor.\nRead the handoff first."
            )
        );
        assert_eq!(p.permission_mode.as_deref(), Some("acceptEdits"));
        let r = resolve(Some(&p), Permission::AcceptEdits);
        assert!(r.prompt.ends_with("Read the handoff first."), "{r:?}");
        // An empty prompt field is no prompt; an escape code in one is refused.
        assert_eq!(
            parse_payload("CONTEXT_RECOVERY_PAYLOAD_V1\nresume_prompt:\n\n")
                .map(|p| p.resume_prompt),
            Some(None)
        );
        let escape = Payload {
            permission_mode: None,
            resume_prompt: Some("/conductor --recovery-bootstrap\n\u{1b}]52;c;x\u{7}".into()),
        };
        assert_eq!(
            resolve(Some(&escape), Permission::AcceptEdits).prompt,
            DEFAULT_PROMPT
        );
    }

    /// Each row: the file's text, then the values `souffleur-config.py` resolves
    /// (`force_compact_threshold_tokens`, `max_external_permission`).
    #[test]
    fn config_rules_match_souffleur_config_py() {
        let rows: &[(&str, u64, Permission)] = &[
            ("", 400_000, Permission::AcceptEdits),
            ("FORCE_COMPACT=250000", 250_000, Permission::AcceptEdits),
            ("FORCE_COMPACT=250_000", 250_000, Permission::AcceptEdits),
            ("FORCE_COMPACT=25__0000", 400_000, Permission::AcceptEdits),
            ("FORCE_COMPACT=\"250000\"", 400_000, Permission::AcceptEdits),
            ("FORCE_COMPACT=0", 400_000, Permission::AcceptEdits),
            ("FORCE_COMPACT=-5", 400_000, Permission::AcceptEdits),
            ("FORCE_COMPACT=+7", 7, Permission::AcceptEdits),
            ("FORCE_COMPACT = 1000 ", 1000, Permission::AcceptEdits),
            (
                "FORCE_COMPACT=250000\nFORCE_COMPACT=abc",
                400_000,
                Permission::AcceptEdits,
            ),
            (
                "FORCE_COMPACT=abc\nFORCE_COMPACT=9",
                9,
                Permission::AcceptEdits,
            ),
            (
                "MAX_EXTERNAL_PERMISSION=bypassPermissions",
                400_000,
                Permission::BypassPermissions,
            ),
            (
                "MAX_EXTERNAL_PERMISSION=\"bypassPermissions\"",
                400_000,
                Permission::AcceptEdits,
            ),
            (
                "MAX_EXTERNAL_PERMISSION=bypassPermissions\nMAX_EXTERNAL_PERMISSION=plan",
                400_000,
                Permission::AcceptEdits,
            ),
            (
                "MAX_EXTERNAL_PERMISSION=root",
                400_000,
                Permission::AcceptEdits,
            ),
            (
                "# c\nno equals sign\nOTHER=1\nFORCE_COMPACT=5",
                5,
                Permission::AcceptEdits,
            ),
        ];
        for (text, force, permission) in rows {
            let c = parse_orchestra_config("f", text);
            assert_eq!(
                (c.force_compact, c.max_permission),
                (*force, *permission),
                "{text:?}"
            );
        }
        let c = parse_orchestra_config("f", "FORCE_COMPACT=250000\nFORCE_COMPACT=abc");
        assert!(
            c.warnings.iter().any(|w| w.contains("last value wins")),
            "{c:?}"
        );
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("using the default 400000")),
            "{c:?}"
        );
        assert_eq!(c.force_compact_from, "default");
    }

    #[test]
    fn a_config_file_that_is_not_utf8_gives_defaults_not_the_parents() {
        let dir = tempfile::tempdir().expect("tempdir");
        let project = dir.path().join("proj");
        for d in [dir.path(), project.as_path()] {
            std::fs::create_dir_all(d.join(".orchestra_configs")).expect("mkdir");
        }
        std::fs::write(
            dir.path().join(".orchestra_configs/souffleur"),
            "FORCE_COMPACT=7\n",
        )
        .expect("write");
        std::fs::write(
            project.join(".orchestra_configs/souffleur"),
            b"FORCE_COMPACT=\xff\n",
        )
        .expect("write");
        let c = load_orchestra_config(&project, Permission::AcceptEdits);
        assert_eq!(c.force_compact, DEFAULT_FORCE_COMPACT);
        assert!(c.warnings[0].contains("not UTF-8"), "{c:?}");
    }

    #[test]
    fn permission_is_clamped_to_the_ceiling() {
        let wants = |p: &str| Payload {
            permission_mode: Some(p.into()),
            resume_prompt: None,
        };
        let r = resolve(Some(&wants("bypassPermissions")), Permission::AcceptEdits);
        assert_eq!(r.permission, Permission::AcceptEdits);
        assert_eq!(r.warnings.len(), 1);
        let r = resolve(
            Some(&wants("bypassPermissions")),
            Permission::BypassPermissions,
        );
        assert_eq!(r.permission, Permission::BypassPermissions);
        let r = resolve(Some(&wants("yolo")), Permission::BypassPermissions);
        assert_eq!(r.permission, Permission::AcceptEdits);
        let r = resolve(None, Permission::BypassPermissions);
        assert_eq!(
            (r.permission, r.prompt.as_str()),
            (Permission::AcceptEdits, DEFAULT_PROMPT)
        );
    }

    #[test]
    fn prompts_must_be_recovery_prompts() {
        let with = |p: &str| Payload {
            permission_mode: None,
            resume_prompt: Some(p.into()),
        };
        assert_eq!(
            resolve(Some(&with("rm -rf /")), Permission::AcceptEdits).prompt,
            DEFAULT_PROMPT
        );
        assert_eq!(
            resolve(
                Some(&with("/conductor --recovery-bootstrap x")),
                Permission::AcceptEdits
            )
            .prompt,
            "/conductor --recovery-bootstrap x"
        );
    }

    #[test]
    fn orchestra_config_values_and_warnings() {
        let c = parse_orchestra_config(
            "f",
            "# comment\nMAX_EXTERNAL_PERMISSION=bypassPermissions\nFORCE_COMPACT=250_000\n",
        );
        assert_eq!(
            (c.max_permission, c.force_compact),
            (Permission::BypassPermissions, 250_000)
        );
        assert!(c.warnings.is_empty());
        let c = parse_orchestra_config("f", "MAX_EXTERNAL_PERMISSION=root\nFORCE_COMPACT=lots\n");
        assert_eq!(
            c,
            OrchestraConfig {
                warnings: c.warnings.clone(),
                ..OrchestraConfig::default()
            }
        );
        assert_eq!(c.warnings.len(), 2);
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("proj");
        std::fs::create_dir_all(dir.path().join(".orchestra_configs")).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(
            dir.path().join(".orchestra_configs/souffleur"),
            "FORCE_COMPACT=1000\n",
        )
        .unwrap();
        assert_eq!(
            load_orchestra_config(&project, Permission::AcceptEdits).force_compact,
            1000,
            "the parent's file is read"
        );
    }

    /// A project's (or its parent's) file lowers the ceiling, never raises it above the
    /// user's own; one that asks for more is said.
    #[test]
    fn a_project_file_never_raises_the_users_ceiling() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("proj");
        std::fs::create_dir_all(&project).unwrap();
        let none = load_orchestra_config(&project, Permission::BypassPermissions);
        assert_eq!(
            none.max_permission,
            Permission::BypassPermissions,
            "the user's own"
        );
        for planted in [dir.path(), project.as_path()] {
            std::fs::create_dir_all(planted.join(".orchestra_configs")).unwrap();
            std::fs::write(
                planted.join(".orchestra_configs/souffleur"),
                "MAX_EXTERNAL_PERMISSION=bypassPermissions\n",
            )
            .unwrap();
            let c = load_orchestra_config(&project, Permission::AcceptEdits);
            assert_eq!(c.max_permission, Permission::AcceptEdits, "{c:?}");
            assert!(
                c.warnings
                    .iter()
                    .any(|w| w.contains("above your own ceiling")),
                "{c:?}"
            );
        }
        std::fs::write(
            project.join(".orchestra_configs/souffleur"),
            "MAX_EXTERNAL_PERMISSION=acceptEdits\n",
        )
        .unwrap();
        let lowered = load_orchestra_config(&project, Permission::BypassPermissions);
        assert_eq!(lowered.max_permission, Permission::AcceptEdits);
        assert!(lowered.warnings.is_empty(), "{lowered:?}");
    }
}
