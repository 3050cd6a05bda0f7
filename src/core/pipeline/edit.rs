//! Changing definition files safely, for the command line and the dashboard alike: the
//! whole definition is checked before anything is written, and the file is replaced
//! atomically (a temporary file in the same folder, then a rename).

use std::path::Path;

use serde_json::Value;

use crate::core::paths::ProjectKey;
use crate::core::pipeline::files::{definition_file, read_definition_bytes};
use crate::core::pipeline::spec::parse_definition;
use crate::core::pipeline::trust::{TrustStore, content_hash};
use crate::core::safe_fs;

pub fn read_definition(path: &Path) -> Result<Value, String> {
    let bytes = read_definition_bytes(path)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not JSON ({e}); fix it first.", path.display()))
}

/// Checks `def` as a whole, then writes it over `path` atomically. The operator's own
/// edit keeps the trust the definition had: if the old content was trusted, the new
/// one is.
pub fn write_definition(path: &Path, name: &str, def: &Value) -> Result<(), String> {
    parse_definition(def, name, "")
        .map_err(|e| format!("{}: the change would make it unusable: {e}", path.display()))?;
    let text = serde_json::to_string_pretty(def).unwrap_or_default() + "\n";
    let project = path
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(ProjectKey::of);
    let old = read_definition_bytes(path).ok().map(|b| content_hash(&b));
    let new = content_hash(text.as_bytes());
    // Both contents are trusted while the file is replaced (a host reading the folder
    // in between never finds its running pipeline untrusted), then the new one only.
    let mut trust = project
        .map(|p| TrustStore::load(&p))
        .filter(|t| old.as_ref().is_some_and(|old| t.is_trusted(name, old)));
    if let Some(t) = trust.as_mut() {
        t.also_trust(name, &new);
        t.save()?;
    }
    safe_fs::write_atomic(path, text.as_bytes(), 0o644)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if let Some(t) = trust.as_mut() {
        t.trust(name, &new);
        t.save()?;
    }
    Ok(())
}

/// Replaces the `steps` of pipeline `name` with `steps` (a JSON array, as text).
pub fn replace_steps(dir: &Path, name: &str, steps: &str) -> Result<(), String> {
    let path = definition_file(dir, name)?;
    let steps: Value =
        serde_json::from_str(steps).map_err(|e| format!("the steps are not JSON ({e})"))?;
    if !steps.is_array() {
        return Err("the steps must be a JSON list".into());
    }
    let mut def = read_definition(&path)?;
    def["steps"] = steps;
    write_definition(&path, name, &def)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_edit_leaves_the_file_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.json");
        let original = r#"{"steps": [], "safety": {"maxIterations": 1}}"#;
        std::fs::write(&path, original).unwrap();
        let err = replace_steps(dir.path(), "p", r#"[{"type": "command"}]"#).unwrap_err();
        assert!(err.contains("steps[0].command"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
        replace_steps(
            dir.path(),
            "p",
            r#"[{"type": "command", "command": "true"}]"#,
        )
        .unwrap();
        assert_eq!(
            read_definition(&path).unwrap()["steps"][0]["command"],
            "true"
        );
        assert!(
            std::fs::read_dir(dir.path()).unwrap().count() == 1,
            "no temporary file left"
        );
        assert!(definition_file(dir.path(), "../p").is_err());
    }
}
