//! `maestro sentinel create | export | import`: definitions as files that travel between
//! projects (the seed: "Sentinels travel with projects … shared between projects").
//! Each definition is checked as load checks it before it is written; a file is copied
//! byte for byte, so an export imported elsewhere is the same definition; nothing
//! written runs until trusted in its project.

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::cli::args::CreateArgs;
use crate::cli::error::CliError;
use crate::core::pipeline::files::{read_definition_bytes, valid_name};
use crate::core::pipeline::spec::parse_definition;
use crate::core::text::printable;

/// `create`: from `--file` (kept as it is) or from the inline parts.
pub fn create(dir: &Path, args: &CreateArgs, as_json: bool) -> Result<(), CliError> {
    let (name, bytes) = match &args.file {
        Some(file) => from_file(file, args.name.as_deref())?,
        None => inline(args)?,
    };
    write_new(dir, &name, &bytes, args.force, as_json)
}

/// `import PATH`: another project's definition file, as `create --file`.
pub fn import(dir: &Path, path: &Path, force: bool, as_json: bool) -> Result<(), CliError> {
    let (name, bytes) = from_file(path, None)?;
    write_new(dir, &name, &bytes, force, as_json)
}

/// `export NAME`: the definition as its file holds it, printed or written to `output`.
pub fn export(
    file: &Path,
    output: Option<&Path>,
    force: bool,
    as_json: bool,
) -> Result<(), CliError> {
    let bytes = read_definition_bytes(file).map_err(crate::cli::error::runtime)?;
    let Some(out) = output else {
        let mut stdout = std::io::stdout().lock();
        return stdout
            .write_all(&bytes)
            .and_then(|()| stdout.flush())
            .map_err(|e| CliError::Runtime(format!("cannot write to stdout: {e}")));
    };
    if !force && std::fs::symlink_metadata(out).is_ok() {
        return Err(CliError::Usage(format!(
            "{} exists; pass --force to replace it",
            out.display()
        )));
    }
    crate::core::safe_fs::write_atomic(out, &bytes, 0o644)
        .map_err(|e| CliError::Runtime(format!("cannot write {}: {e}", out.display())))?;
    let detail = format!("wrote {}", out.display());
    say(
        &json!({"ok": true, "path": out, "detail": detail}),
        as_json,
        &detail,
    );
    Ok(())
}

/// A definition file's name and bytes, checked: its `name` (or the file's name) must
/// be a pipeline name, and agree with `name` when one is given.
fn from_file(file: &Path, name: Option<&str>) -> Result<(String, Vec<u8>), CliError> {
    let bytes = read_definition_bytes(file).map_err(|e| CliError::Usage(e.to_string()))?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
        CliError::Usage(format!(
            "{} is not JSON ({e}); fix it first",
            file.display()
        ))
    })?;
    let own = value["name"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| file.file_stem().and_then(|s| s.to_str()).map(str::to_owned));
    let name = match (name, own) {
        (Some(given), Some(own)) if value["name"].is_string() && given != own => {
            return Err(CliError::Usage(format!(
                "{} names itself {own:?}, not {given:?}: leave the name out, or change its \"name\"",
                file.display()
            )));
        }
        (Some(given), _) => given.to_owned(),
        (None, Some(own)) => own,
        (None, None) => {
            return Err(CliError::Usage(format!(
                "{} has no \"name\": give one (`sentinel create NAME --file …`)",
                file.display()
            )));
        }
    };
    check(&value, &name)?;
    Ok((name, bytes))
}

/// The inline parts as one definition: each part must be JSON of its kind, and the
/// whole is checked as load checks it.
fn inline(args: &CreateArgs) -> Result<(String, Vec<u8>), CliError> {
    let Some(name) = args.name.clone() else {
        return Err(CliError::Usage(
            "give the pipeline's name: `sentinel create NAME --steps JSON`".into(),
        ));
    };
    let mut def = Map::new();
    def.insert("name".into(), Value::String(name.clone()));
    for (flag, key, text, array) in [
        ("--steps", "steps", &args.steps, true),
        ("--loop", "loop", &args.looping, false),
        ("--trigger", "trigger", &args.trigger, false),
        ("--safety", "safety", &args.safety, false),
    ] {
        let Some(text) = text else { continue };
        let value: Value = serde_json::from_str(text).map_err(|e| {
            CliError::Usage(format!("{flag} is not JSON ({e}): {}", printable(text)))
        })?;
        let kind_ok = if array {
            value.is_array()
        } else {
            value.is_object()
        };
        if !kind_ok {
            let kind = if array { "an array" } else { "an object" };
            return Err(CliError::Usage(format!("{flag} must be a JSON {kind}")));
        }
        def.insert(key.into(), value);
    }
    let def = Value::Object(def);
    check(&def, &name)?;
    let text = serde_json::to_string_pretty(&def).unwrap_or_default() + "\n";
    Ok((name, text.into_bytes()))
}

/// The checks load makes: a pipeline name, and a definition that parses whole.
fn check(def: &Value, name: &str) -> Result<(), CliError> {
    if !valid_name(name) {
        return Err(CliError::Usage(format!(
            "{name:?} is not a pipeline name (letters, digits, - and _)"
        )));
    }
    parse_definition(def, name, "")
        .map(|_| ())
        .map_err(|e| CliError::Usage(format!("the definition is refused: {e}")))
}

/// Writes `.maestro/sentinels/NAME.json` atomically; an existing one is replaced only
/// with `force` (and then by a rename, never written through).
fn write_new(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    force: bool,
    as_json: bool,
) -> Result<(), CliError> {
    let path = dir.join(format!("{name}.json"));
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::Runtime(format!("cannot make {}: {e}", dir.display())))?;
    let written = write_file(dir, &path, bytes, force);
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(CliError::Usage(format!(
                "{} exists; pass --force to replace it",
                path.display()
            )));
        }
        Err(e) => {
            return Err(CliError::Runtime(format!(
                "cannot write {}: {e}",
                path.display()
            )));
        }
        Ok(()) => {}
    }
    let detail = format!(
        "wrote {}; it runs nothing until trusted: read it (`maestro sentinel show {name}`), then `maestro sentinel trust {name}`",
        path.display()
    );
    say(
        &json!({"ok": true, "name": name, "path": path, "trusted": false, "detail": detail}),
        as_json,
        &detail,
    );
    Ok(())
}

/// The bytes in a temporary file beside `path`, then moved to it: over an existing one
/// only with `force`, otherwise refused if anything has the name (no race: the kernel
/// refuses the link).
fn write_file(dir: &Path, path: &Path, bytes: &[u8], force: bool) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut tmp = tempfile::Builder::new()
        .prefix(".create-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.as_file().sync_all()?;
    let placed = if force {
        tmp.persist(path)
    } else {
        tmp.persist_noclobber(path)
    };
    placed.map(|_| ()).map_err(|e| e.error)
}

fn say(answer: &Value, as_json: bool, detail: &str) {
    if as_json {
        println!("{}", crate::core::text::json_line(answer));
    } else {
        println!("{}", printable(detail));
    }
}
