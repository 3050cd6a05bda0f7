//! Which pipeline definitions the operator trusts, like direnv's `allow`: a definition
//! is a program (its steps run commands), and a project folder is written by others
//! (Musicians, a clone, whoever can write there). So nothing in `.maestro/sentinels/`
//! runs until the operator said `maestro sentinel trust NAME` for that exact content.
//!
//! Trust is kept in maestro's data directory, never in the project: one file per
//! project (`<data dir>/trust/<project key>.json`, keyed by the canonical project path)
//! mapping each definition's name to the SHA-256 of the file's bytes. A changed file
//! has another hash, so it is untrusted again until trusted anew.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::core::paths::{self, PathError, ProjectKey};
use crate::core::pipeline::files;
use crate::core::safe_fs;

/// The SHA-256 of a definition's bytes, in hex.
pub fn content_hash(bytes: &[u8]) -> String {
    use std::fmt::Write;
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    /// The canonical project folder these entries are about (for a reader's sake).
    project: String,
    /// Definition name → SHA-256 of the trusted content (two only for the moment an
    /// edit of the operator's replaces the file).
    trusted: BTreeMap<String, Vec<String>>,
}

/// A project's trusted definitions.
#[derive(Debug)]
pub struct TrustStore {
    path: Option<PathBuf>,
    file: TrustFile,
}

impl TrustStore {
    /// Reads the project's trust file; none (or no data directory) trusts nothing.
    pub fn load(project: &ProjectKey) -> Self {
        let path = paths::trust_file(project).ok();
        let file = path
            .as_deref()
            .and_then(|p| safe_fs::read_regular(p, files::MAX_DEFINITION_BYTES).ok())
            .and_then(|bytes| serde_json::from_slice::<TrustFile>(&bytes).ok())
            .unwrap_or_default();
        Self {
            path,
            file: TrustFile {
                project: project.root.display().to_string(),
                ..file
            },
        }
    }

    /// Whether `name` is trusted with exactly this content.
    pub fn is_trusted(&self, name: &str, hash: &str) -> bool {
        self.file
            .trusted
            .get(name)
            .is_some_and(|h| h.iter().any(|h| h == hash))
    }

    /// Trusts this content of `name` (and no other).
    pub fn trust(&mut self, name: &str, hash: &str) {
        self.file
            .trusted
            .insert(name.to_owned(), vec![hash.to_owned()]);
    }

    /// Trusts this content of `name` besides the one trusted now: while an edit
    /// replaces the file, both the old and the new content are the operator's.
    pub fn also_trust(&mut self, name: &str, hash: &str) {
        let hashes = self.file.trusted.entry(name.to_owned()).or_default();
        if !hashes.iter().any(|h| h == hash) {
            hashes.push(hash.to_owned());
        }
    }

    /// False if it was not trusted.
    pub fn untrust(&mut self, name: &str) -> bool {
        self.file.trusted.remove(name).is_some()
    }

    /// Writes the trust file atomically (0600 in a 0700 folder).
    pub fn save(&self) -> Result<(), TrustError> {
        let Some(path) = &self.path else {
            return Err(TrustError::Place(PathError::NoDataDir));
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            })
            .map_err(|source| TrustError::Folder {
                dir: dir.to_path_buf(),
                source,
            })?;
        let text = serde_json::to_string_pretty(&self.file).unwrap_or_default() + "\n";
        safe_fs::write_atomic(path, text.as_bytes(), 0o600).map_err(|source| TrustError::Write {
            path: path.clone(),
            source,
        })
    }
}

/// Why the trust file cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(transparent)]
    Place(#[from] PathError),
    #[error("cannot create {} ({source}).", .dir.display())]
    Folder {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {} ({source}).", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What trusting `name` would trust: the content's hash, and a question that shows
/// every step (type, program and arguments, trigger), for the dashboard's dialog.
pub fn describe_for_trust(
    dir: &Path,
    name: &str,
) -> Result<(String, String), files::DefinitionFileError> {
    let path = files::definition_file(dir, name)?;
    let bytes = files::read_definition_bytes(&path)?;
    let raw: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|source| files::DefinitionFileError::NotJson {
            path: path.clone(),
            source,
        })?;
    crate::core::pipeline::spec::parse_definition(&raw, name, "")?;
    let printable =
        |v: &serde_json::Value| crate::core::text::printable(&v.to_string()).into_owned();
    let mut lines = vec![format!(
        "Trust pipeline {name} ({} bytes, trigger {})? Its steps will run as you whenever it is triggered:",
        bytes.len(),
        printable(&raw["trigger"])
    )];
    for (i, step) in raw["steps"].as_array().into_iter().flatten().enumerate() {
        let what = match step["type"].as_str() {
            Some("command") => format!(
                "command {} {}",
                printable(&step["command"]),
                printable(&step["params"]["args"])
            ),
            _ => printable(step),
        };
        let shown: String = what.chars().take(200).collect();
        lines.push(format!("  {i}: {shown}"));
    }
    Ok((content_hash(&bytes), lines.join("\n")))
}

/// Trusts `name` with the content of this hash (what the operator was shown), and
/// saves.
pub fn trust_content(project: &ProjectKey, name: &str, hash: &str) -> Result<(), TrustError> {
    let mut store = TrustStore::load(project);
    store.trust(name, hash);
    store.save()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_for_one_content_and_survives_a_reload() {
        let data = tempfile::tempdir().expect("tempdir");
        let project = ProjectKey {
            root: PathBuf::from("/p"),
            key: "0123456789abcdef".into(),
        };
        let mut store = TrustStore {
            path: Some(data.path().join("trust").join("p.json")),
            file: TrustFile::default(),
        };
        let a = content_hash(b"{\"steps\":[]}");
        assert!(!store.is_trusted("x", &a));
        store.trust("x", &a);
        store.save().expect("save");
        let bytes = std::fs::read(data.path().join("trust/p.json")).expect("read");
        let back: TrustFile = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(back.trusted.get("x"), Some(&vec![a.clone()]));
        // Another content of the same name is not trusted.
        assert!(!store.is_trusted("x", &content_hash(b"{\"steps\":[1]}")));
        assert!(store.untrust("x"));
        assert!(!store.is_trusted("x", &a));
        let _ = project;
    }

    #[test]
    fn the_hash_is_sha256() {
        assert_eq!(
            content_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
