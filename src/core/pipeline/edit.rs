//! Changing definition files safely, for the command line and the dashboard alike: the
//! whole definition is checked before anything is written, and the file is replaced
//! atomically (a temporary file in the same folder, then a rename).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::core::paths::ProjectKey;
use crate::core::pipeline::files::{
    DefinitionFileError, definition_file, read_definition_bytes, read_definition_json,
};
use crate::core::pipeline::spec::{DefinitionError, parse_definition};
use crate::core::pipeline::trust::{TrustError, TrustStore, content_hash};
use crate::core::safe_fs;

/// Why a definition cannot be changed; each says the fix.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error(transparent)]
    File(#[from] DefinitionFileError),
    #[error("{}: the change would make it unusable: {source}", .path.display())]
    Unusable {
        path: PathBuf,
        source: DefinitionError,
    },
    #[error("the steps are not JSON ({source})")]
    StepsNotJson { source: serde_json::Error },
    #[error("the steps must be a JSON list")]
    StepsNotList,
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Trust(#[from] TrustError),
}

pub fn read_definition(path: &Path) -> Result<Value, DefinitionFileError> {
    read_definition_json(path)
}

/// Checks `def` as a whole, then writes it over `path` atomically. The operator's own
/// edit keeps the trust the definition had: if the old content was trusted, the new
/// one is.
pub fn write_definition(path: &Path, name: &str, def: &Value) -> Result<(), EditError> {
    parse_definition(def, name, "").map_err(|source| EditError::Unusable {
        path: path.to_path_buf(),
        source,
    })?;
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
    safe_fs::write_atomic(path, text.as_bytes(), 0o644).map_err(|source| EditError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    if let Some(t) = trust.as_mut() {
        t.trust(name, &new);
        t.save()?;
    }
    Ok(())
}

/// Replaces the `steps` of pipeline `name` with `steps` (a JSON array, as text).
pub fn replace_steps(dir: &Path, name: &str, steps: &str) -> Result<(), EditError> {
    let path = definition_file(dir, name)?;
    let steps: Value =
        serde_json::from_str(steps).map_err(|source| EditError::StepsNotJson { source })?;
    if !steps.is_array() {
        return Err(EditError::StepsNotList);
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
        let err = replace_steps(dir.path(), "p", r#"[{"type": "command"}]"#)
            .unwrap_err()
            .to_string();
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
