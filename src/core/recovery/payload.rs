//! Inputs of a recovery: the `CONTEXT_RECOVERY_PAYLOAD_V1` message, the permission
//! ceiling and compaction threshold from `.orchestra_configs/souffleur`, and the
//! defaults that apply when either is absent or malformed.

use std::path::Path;

pub const PAYLOAD_HEADER: &str = "CONTEXT_RECOVERY_PAYLOAD_V1";
pub const DEFAULT_PROMPT: &str = "/conductor --recovery-bootstrap";
pub const DEFAULT_FORCE_COMPACT: u64 = 400_000;

/// Claude Code permission modes maestro passes on, from least to most powerful.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    AcceptEdits,
    BypassPermissions,
}

impl Permission {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "acceptEdits" => Some(Self::AcceptEdits),
            "bypassPermissions" => Some(Self::BypassPermissions),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AcceptEdits => "acceptEdits",
            Self::BypassPermissions => "bypassPermissions",
        }
    }
}

/// What the payload asked for (each field optional).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payload {
    pub permission_mode: Option<String>,
    pub resume_prompt: Option<String>,
}

/// Reads a payload message; `None` when it is not one (no header on the first line).
/// Unknown fields are ignored; a field may appear once, the last one wins.
pub fn parse_payload(text: &str) -> Option<Payload> {
    let mut lines = text.lines();
    if lines.next()?.trim() != PAYLOAD_HEADER {
        return None;
    }
    let mut p = Payload::default();
    for line in lines {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        match key.trim() {
            "permission_mode" => p.permission_mode = Some(value.to_owned()),
            "resume_prompt" => p.resume_prompt = Some(value.to_owned()),
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
    let permission = match requested.map(|r| (r, Permission::parse(r))) {
        None => Permission::AcceptEdits,
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
                "payload permission {raw:?} is not a known mode; using acceptEdits"
            ));
            Permission::AcceptEdits
        }
    };
    let prompt = match payload.and_then(|p| p.resume_prompt.as_deref()) {
        Some(p) if p.starts_with(DEFAULT_PROMPT) && !p.chars().any(char::is_control) => {
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

/// `.orchestra_configs/souffleur`: `KEY=value` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrchestraConfig {
    pub max_permission: Permission,
    pub force_compact: u64,
    /// Bad values, each with the default used instead.
    pub warnings: Vec<String>,
}

impl Default for OrchestraConfig {
    fn default() -> Self {
        Self {
            max_permission: Permission::AcceptEdits,
            force_compact: DEFAULT_FORCE_COMPACT,
            warnings: Vec::new(),
        }
    }
}

/// Reads `<project>/.orchestra_configs/souffleur`, else the parent's. Missing: defaults.
pub fn load_orchestra_config(project: &Path) -> OrchestraConfig {
    let candidates = [Some(project), project.parent()];
    for dir in candidates.into_iter().flatten() {
        let path = dir.join(".orchestra_configs").join("souffleur");
        if let Ok(text) = std::fs::read_to_string(&path) {
            return parse_orchestra_config(&path.display().to_string(), &text);
        }
    }
    OrchestraConfig::default()
}

pub fn parse_orchestra_config(origin: &str, text: &str) -> OrchestraConfig {
    let mut c = OrchestraConfig::default();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"');
        match key.trim() {
            "MAX_EXTERNAL_PERMISSION" => match Permission::parse(value) {
                Some(p) => c.max_permission = p,
                None => c.warnings.push(format!(
                    "{origin}: MAX_EXTERNAL_PERMISSION={value:?} is not acceptEdits or bypassPermissions; using acceptEdits"
                )),
            },
            "FORCE_COMPACT" => match value.replace('_', "").parse::<u64>() {
                Ok(n) if n > 0 => c.force_compact = n,
                _ => c.warnings.push(format!(
                    "{origin}: FORCE_COMPACT={value:?} is not a positive number of tokens; using {DEFAULT_FORCE_COMPACT}"
                )),
            },
            _ => {}
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
            load_orchestra_config(&project).force_compact,
            1000,
            "the parent's file is read"
        );
    }
}
