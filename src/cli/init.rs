//! `maestro init`: starts a project where the user points. It makes the folder and
//! `temp/` when they are missing and a fresh `comms.db`, never touches an existing
//! database, and with `--replace-damaged` sets a damaged one aside (kept, renamed) for a
//! fresh one. It says what it made and what to do next.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::args::{GlobalArgs, InitArgs};
use crate::cli::error::{self, CliError};
use crate::cli::project::Project;
use crate::core::schema;

pub fn run(global: &GlobalArgs, init: &InitArgs) -> Result<ExitCode, CliError> {
    let mut made: Vec<PathBuf> = Vec::new();
    if let Some(dir) = global.project()?
        && !dir.exists()
    {
        std::fs::create_dir_all(dir).map_err(|e| {
            CliError::Runtime(format!(
                "cannot create the project folder {} ({e}); pick a folder you can write, or create it first.",
                dir.display()
            ))
        })?;
        made.push(dir.clone());
    }
    let project = Project::from_args(global)?;
    let set_aside = if init.replace_damaged && project.db.exists() {
        Some(schema::set_aside_damaged(&project.db).map_err(error::runtime)?)
    } else {
        None
    };
    schema::init_database(&project.db).map_err(error::runtime)?;
    made.push(project.db.clone());
    if !project.temp.exists() {
        std::fs::create_dir_all(&project.temp).map_err(|e| {
            CliError::Runtime(format!(
                "created {} but not {} ({e}); create that folder by hand.",
                project.db.display(),
                project.temp.display()
            ))
        })?;
        made.push(project.temp.clone());
    }
    if global.json {
        println!(
            "{}",
            crate::core::text::json_line(
                &serde_json::json!({"ok": true, "db": project.db, "made": made, "damaged_kept_as": set_aside})
            )
        );
        return Ok(ExitCode::SUCCESS);
    }
    for path in &made {
        println!("created {}", path.display());
    }
    if let Some(old) = &set_aside {
        println!("kept the damaged database as {}", old.display());
    }
    let here = project.root.display();
    println!(
        "next: `maestro --project {here}` watches it; `maestro hooks install --project {here}` lets it see when a session waits for you; `maestro demo` shows a whole orchestration first."
    );
    Ok(ExitCode::SUCCESS)
}
