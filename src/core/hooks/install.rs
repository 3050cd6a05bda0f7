//! `maestro hooks install | uninstall`: maestro's entries merged into (or taken out of) a
//! Claude Code settings file, every other key and every other tool's hook kept as it
//! was, in the order it was (Claude Code keeps key order, so does maestro). An entry is
//! maestro's only when its command is exactly what [`hook_command`] writes (a program
//! named `maestro`, `hook`, and `--project DIR` or nothing): a user's own command that
//! mentions maestro (`maestro hook && ~/bin/backup.sh`) is theirs and is never touched.
//! An install from another path replaces the old entry in place.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::core::error::OwnFileError;
use crate::core::hooks::event::EVENTS;
use crate::core::safe_fs;

/// The hook command for this maestro: `'<exe>' hook [--project '<dir>']`, quoted for the
/// shell Claude Code runs it with. A project folder whose name is not UTF-8 cannot be
/// written in a JSON string; it travels as `--project-hex` (its bytes in hex), so its
/// events reach the same spool as the folder's own bytes name.
pub fn hook_command(exe: &Path, project: Option<&Path>, replace_pollers: bool) -> String {
    let quote = |p: &str| {
        shlex::try_quote(p).map_or_else(|_| "maestro".to_owned(), std::borrow::Cow::into_owned)
    };
    let exe = quote(&exe.to_string_lossy());
    let verb = if replace_pollers {
        "hook --replace-pollers"
    } else {
        "hook"
    };
    match project {
        Some(dir) => match dir.to_str() {
            Some(text) => format!("{exe} {verb} --project {}", quote(text)),
            None => format!(
                "{exe} {verb} --project-hex {}",
                hex(dir.as_os_str().as_encoded_bytes())
            ),
        },
        None => format!("{exe} {verb}"),
    }
}

/// What the plugin's hooks add to the command (`maestro` is found on PATH, and may be
/// another program, whose usage error, exit 2, Claude Code would read as "block").
pub const FAIL_OPEN: &str = " 2>/dev/null || true";

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Whether a hook command is one maestro wrote: exactly `<maestro> hook`, `<maestro> hook
/// --project DIR` or `<maestro> hook --project-hex HEX`, quoted as [`hook_command`]
/// quotes it. Anything more (`&& backup.sh`, a pipe, other words) is the user's.
pub fn is_ours(command: &str) -> bool {
    // The plugin's form: whatever `maestro` on PATH is, its failure never blocks a call.
    let command = command.strip_suffix(FAIL_OPEN).unwrap_or(command);
    let Some(mut words) = shlex::split(command) else {
        return false;
    };
    let replace = words.get(2).is_some_and(|w| w == "--replace-pollers");
    if replace {
        words.remove(2);
    }
    let is_maestro = |p: &str| Path::new(p).file_name().is_some_and(|n| n == "maestro");
    let rebuilt = match words.as_slice() {
        [program, verb] if verb == "hook" && is_maestro(program) => {
            hook_command(Path::new(program), None, replace)
        }
        [program, verb, flag, dir]
            if verb == "hook" && flag == "--project" && is_maestro(program) =>
        {
            hook_command(Path::new(program), Some(Path::new(dir)), replace)
        }
        [program, verb, flag, hex]
            if verb == "hook" && flag == "--project-hex" && is_maestro(program) =>
        {
            format!(
                "{} hook{} --project-hex {hex}",
                shlex::try_quote(program).unwrap_or_default(),
                if replace { " --replace-pollers" } else { "" }
            )
        }
        _ => return false,
    };
    rebuilt == command
}

fn entries_of<'a>(settings: &'a Value, event: &str) -> impl Iterator<Item = &'a Value> {
    settings
        .get("hooks")
        .and_then(|h| h.get(event))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The commands of one matcher group.
fn commands(group: &Value) -> impl Iterator<Item = &str> {
    group
        .get("hooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|h| h.get("command").and_then(Value::as_str))
}

/// The events for which the settings hold a maestro entry.
pub fn installed_events(settings: &Value) -> Vec<&'static str> {
    EVENTS
        .into_iter()
        .filter(|e| entries_of(settings, e).any(|g| commands(g).any(is_ours)))
        .collect()
}

/// What in a Claude Code settings file stops maestro from changing it; nothing is
/// changed then.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("its top level is not a JSON object")]
    TopNotObject,
    #[error("its \"hooks\" is not a JSON object")]
    HooksNotObject,
    #[error("its \"hooks\".\"{event}\" is not a JSON array")]
    EventNotArray { event: &'static str },
    #[error(
        "{} belongs to uid {owner}, not to you (uid {uid}); maestro edits only your own settings, keeping their owner. Run this as that user; the file was left untouched",
        .path.display()
    )]
    NotYours { path: PathBuf, owner: u32, uid: u32 },
    #[error(
        "{} is read-only (mode {mode:o}); maestro does not override that. Make it writable (chmod u+w) and run this again; it was left untouched",
        .path.display()
    )]
    ReadOnly { path: PathBuf, mode: u32 },
    #[error(
        "{} is a symlink; maestro edits only a regular file (edit the file it points to, or replace the link with a copy)",
        .path.display()
    )]
    Symlink { path: PathBuf },
    #[error("{} is not a regular file", .path.display())]
    NotRegular { path: PathBuf },
    #[error(transparent)]
    File(#[from] OwnFileError),
    #[error(transparent)]
    Unreadable { source: safe_fs::Refused },
    #[error(
        "{} is not valid JSON (line {}, column {}: {source}); fix it and run this again; it was left untouched",
        .path.display(),
        .source.line(),
        .source.column()
    )]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// The settings with maestro's entry for every event, running `command`. `Ok(None)`:
/// nothing to change. An error names the part of the file that is not as Claude Code
/// writes it (nothing is changed then).
pub fn merged(mut settings: Value, command: &str) -> Result<Option<Value>, SettingsError> {
    let Some(root) = settings.as_object_mut() else {
        return Err(SettingsError::TopNotObject);
    };
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(hooks) = hooks.as_object_mut() else {
        return Err(SettingsError::HooksNotObject);
    };
    let mut changed = false;
    for event in EVENTS {
        let list = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()));
        let Some(list) = list.as_array_mut() else {
            return Err(SettingsError::EventNotArray { event });
        };
        let mut found = false;
        for group in list.iter_mut() {
            let Some(inner) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
                continue;
            };
            for hook in inner.iter_mut() {
                let Some(cmd) = hook
                    .get("command")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                else {
                    continue;
                };
                if !is_ours(&cmd) {
                    continue;
                }
                if found || cmd != command {
                    // A second entry of ours, or one from another path: made current.
                    hook["command"] = json!(command);
                    changed |= cmd != command;
                }
                found = true;
            }
        }
        if !found {
            list.push(json!({"hooks": [{"type": "command", "command": command, "timeout": 5}]}));
            changed = true;
        }
    }
    Ok(changed.then_some(settings))
}

/// The settings without maestro's entries (a group left empty goes, an event left empty
/// goes, `hooks` left empty goes). `None`: there were none.
pub fn removed(mut settings: Value) -> Option<Value> {
    let hooks = settings.get_mut("hooks")?.as_object_mut()?;
    let mut changed = false;
    for event in EVENTS {
        let Some(list) = hooks.get_mut(event).and_then(Value::as_array_mut) else {
            continue;
        };
        for group in list.iter_mut() {
            if let Some(inner) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                let before = inner.len();
                inner.retain(|h| {
                    !h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(is_ours)
                });
                changed |= inner.len() != before;
            }
        }
        list.retain(|g| {
            g.get("hooks")
                .and_then(Value::as_array)
                .is_none_or(|h| !h.is_empty())
        });
        if list.is_empty() {
            hooks.shift_remove(event);
        }
    }
    if hooks.is_empty()
        && let Some(root) = settings.as_object_mut()
    {
        root.shift_remove("hooks");
    }
    changed.then_some(settings)
}

/// Refuses, before anything changes, a settings file maestro could not replace as it
/// was: another user's (the new file would be the caller's), or one without write
/// permission (the user made it read-only; maestro does not override that).
pub fn refuse_unwritable(path: &Path) -> Result<(), SettingsError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.uid() != rustix::process::geteuid().as_raw() => Err(SettingsError::NotYours {
            path: path.to_path_buf(),
            owner: m.uid(),
            uid: rustix::process::geteuid().as_raw(),
        }),
        Ok(m) if m.permissions().mode() & 0o200 == 0 => Err(SettingsError::ReadOnly {
            path: path.to_path_buf(),
            mode: m.permissions().mode() & 0o777,
        }),
        _ => Ok(()),
    }
}

/// A settings file read for a change: its JSON (an empty object when absent) and mode.
pub fn read(path: &Path) -> Result<(Value, Option<u32>), SettingsError> {
    use std::os::unix::fs::PermissionsExt;
    let at = || path.to_path_buf();
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((json!({}), None)),
        Err(e) => return Err(OwnFileError::doing("read", path)(e).into()),
        Ok(m) if m.file_type().is_symlink() => return Err(SettingsError::Symlink { path: at() }),
        Ok(m) if !m.is_file() => return Err(SettingsError::NotRegular { path: at() }),
        Ok(_) => {}
    }
    let bytes = safe_fs::read_regular(path, 16 * 1024 * 1024)
        .map_err(|source| SettingsError::Unreadable { source })?;
    let mode = std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok((json!({}), mode));
    }
    serde_json::from_slice(&bytes)
        .map(|v| (v, mode))
        .map_err(|source| SettingsError::NotJson { path: at(), source })
}

/// Writes settings atomically (a new file is owner-only; an existing one keeps its mode
/// and group, and its owner: [`read`] refused another user's).
pub fn write(path: &Path, settings: &Value, mode: Option<u32>) -> Result<(), OwnFileError> {
    use std::os::unix::fs::MetadataExt;
    let group = std::fs::symlink_metadata(path).ok().map(|m| m.gid());
    if let Some(dir) = path.parent() {
        safe_fs::create_dirs(dir, 0o755).map_err(OwnFileError::doing("create", dir))?;
    }
    // A `Value` always serializes.
    let mut text = serde_json::to_string_pretty(settings).unwrap_or_default();
    text.push('\n');
    safe_fs::write_atomic(path, text.as_bytes(), mode.unwrap_or(0o600))
        .map_err(OwnFileError::doing("write", path))?;
    if let Some(gid) = group {
        let _ = std::os::unix::fs::chown(path, None, Some(gid));
    }
    Ok(())
}

/// The settings file of a project (`.claude/settings.local.json`, not committed) or of
/// the user (`~/.claude/settings.json`, or under `CLAUDE_CONFIG_DIR`).
pub fn settings_path(project: Option<&Path>) -> Option<PathBuf> {
    match project {
        Some(root) => Some(root.join(".claude").join("settings.local.json")),
        None => crate::core::sessions::find::claude_dir().map(|d| d.join("settings.json")),
    }
}

/// Whether the project's own Claude Code settings (`.claude/settings.local.json` or
/// `.claude/settings.json`) hold maestro's hooks: then a user-wide install stands aside.
pub fn project_has_hooks(root: &Path) -> bool {
    ["settings.local.json", "settings.json"].iter().any(|name| {
        safe_fs::read_regular(&root.join(".claude").join(name), 4 * 1024 * 1024)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .is_some_and(|v| !installed_events(&v).is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CMD: &str = "/opt/bin/maestro hook --project /w/p";

    #[test]
    fn an_install_keeps_everything_else_and_a_second_changes_nothing() {
        let before = json!({
            "permissions": {"allow": ["Bash(cargo test:*)"]},
            "env": {"A": "1"},
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "other-tool check"}]}],
                "Custom": [{"hooks": [{"type": "command", "command": "x"}]}]
            }
        });
        let after = merged(before.clone(), CMD).unwrap().unwrap();
        assert_eq!(after["permissions"], before["permissions"]);
        assert_eq!(after["env"], before["env"]);
        assert_eq!(after["hooks"]["Custom"], before["hooks"]["Custom"]);
        assert_eq!(
            after["hooks"]["PreToolUse"][0],
            before["hooks"]["PreToolUse"][0]
        );
        assert_eq!(installed_events(&after).len(), EVENTS.len());
        assert_eq!(merged(after.clone(), CMD).unwrap(), None, "idempotent");
        // Installed again from another path: the entry is updated, not doubled.
        let moved = merged(after.clone(), "/new/maestro hook").unwrap().unwrap();
        assert_eq!(moved["hooks"]["Stop"].as_array().unwrap().len(), 1);
        assert_eq!(
            moved["hooks"]["Stop"][0]["hooks"][0]["command"],
            "/new/maestro hook"
        );
        // Uninstall gives back exactly what was there.
        assert_eq!(removed(moved).unwrap(), before);
        assert_eq!(removed(before.clone()), None);
    }

    #[test]
    fn a_users_own_maestro_command_is_left_as_it_is_and_key_order_kept() {
        let before: Value = serde_json::from_str(
            r#"{"zeta": 1, "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "maestro hook && ~/bin/backup.sh"}]}]}, "alpha": {"b": 1, "a": 2}}"#,
        )
        .unwrap();
        let after = merged(before.clone(), CMD).unwrap().unwrap();
        let stop = after["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(stop.len(), 2, "the user's entry kept, ours added: {stop:?}");
        assert_eq!(
            stop[0]["hooks"][0]["command"],
            "maestro hook && ~/bin/backup.sh"
        );
        let keys: Vec<&String> = after.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["zeta", "hooks", "alpha"]);
        let again = merged(after.clone(), CMD).unwrap();
        assert_eq!(again, None, "not doubled");
        let back = removed(after).unwrap();
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&before).unwrap()
        );
    }

    #[test]
    fn files_not_shaped_like_claude_codes_are_refused() {
        assert!(merged(json!([1]), CMD).is_err());
        assert!(merged(json!({"hooks": 3}), CMD).is_err());
        assert!(
            merged(json!({"hooks": {"Stop": {}}}), CMD)
                .unwrap_err()
                .to_string()
                .contains("Stop")
        );
    }

    /// The plugin folder's hooks are maestro's own entries, for every event it installs.
    #[test]
    fn the_plugin_hooks_every_event_with_maestros_command() {
        let hooks: Value = serde_json::from_str(include_str!(
            "../../../assets/claude-plugin/hooks/hooks.json"
        ))
        .unwrap();
        assert_eq!(installed_events(&hooks), EVENTS.to_vec());
        let events = hooks["hooks"].as_object().unwrap();
        assert_eq!(events.len(), EVENTS.len(), "no event of another kind");
        for group in events.values().flat_map(|v| v.as_array().unwrap()) {
            for cmd in commands(group) {
                assert_eq!(cmd, format!("maestro hook --replace-pollers{FAIL_OPEN}"));
            }
        }
    }

    #[test]
    fn ours_is_told_by_program_and_verb() {
        assert!(is_ours(CMD));
        assert!(is_ours(
            "maestro hook --replace-pollers 2>/dev/null || true"
        ));
        assert!(!is_ours("maestro hook 2>/dev/null || true; rm -rf ~"));
        assert!(is_ours("maestro hook"));
        assert!(is_ours(&hook_command(
            Path::new("/a b/maestro"),
            Some(Path::new("/p q")),
            false
        )));
        assert!(is_ours(&hook_command(
            Path::new("/a b/maestro"),
            Some(Path::new("/p q")),
            true
        )));
        assert!(is_ours("maestro hook --replace-pollers"));
        assert!(!is_ours("maestro hook --project /p --replace-pollers"));
        assert!(!is_ours("maestro-other hook"));
        assert!(!is_ours("/bin/echo maestro hook"));
        assert!(!is_ours("maestro doctor"));
        // A user's own command that runs maestro's hook among other things is theirs.
        assert!(!is_ours("maestro hook && ~/bin/backup.sh"));
        assert!(!is_ours("maestro hook | tee -a log"));
        assert!(!is_ours("maestro hook --project /p extra"));
        assert!(!is_ours("maestro  hook"), "not as maestro writes it");
        let odd = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"/p/\xff");
        assert!(is_ours(&hook_command(
            Path::new("/bin/maestro"),
            Some(Path::new(odd)),
            false
        )));
        assert!(is_ours(&hook_command(
            Path::new("/bin/maestro"),
            Some(Path::new(odd)),
            true
        )));
    }

    #[test]
    fn invalid_json_is_refused_with_line_and_column_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{\n  \"a\": 1,\n  oops\n}\n").unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("line 3, column 3"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\n  \"a\": 1,\n  oops\n}\n"
        );
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(read(&link).unwrap_err().to_string().contains("symlink"));
    }
}
