//! `maestro task launch task-NN`: a Musician's first window, with the relaunch's proof.
//! The window opens with its session held at a gate; it is released, and only once the
//! session runs is the window's PID recorded. Nothing is written to the database: the
//! Musician claims its task itself (`watching → working`), as the skill says.
//!
//! Refused while the task has a live session (that is a relaunch), is finished, is not
//! in the table, or is being launched or relaunched by another maestro.

use rusqlite::OptionalExtension;
use serde_json::json;

use super::{ActionError, Done, Target, db_error, live, not_in_table, relaunch_lock};
use crate::core::domain::{TaskId, TaskState};
use crate::core::recovery::launch::write_pid_file;
use crate::core::store;
use crate::core::text::printable;
use crate::core::windows::LaunchTemplates;

/// Opens the task's first window and returns once its session runs.
pub fn launch_first(
    project: &Target,
    launch: &LaunchTemplates,
    task: &TaskId,
) -> Result<Done, ActionError> {
    let _lock = relaunch_lock::take(project, task)?;
    let conn = store::open_existing(&project.db)?;
    let row: Option<(String, Option<String>)> = conn
        .query_row(
            "SELECT coalesce(state, ''), session_id FROM orchestration_tasks WHERE task_id = ?1",
            [task.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(|e| db_error(project, e))?;
    drop(conn);
    let Some((state, recorded)) = row else {
        return Err(not_in_table(task));
    };
    if TaskState::ends(&state) {
        return Err(ActionError::Finished {
            task: task.clone(),
            state,
        });
    }
    let window = super::window(project, task).ok();
    let running = live::live_sessions(&project.root, task, window, recorded.as_deref());
    if !running.is_empty() {
        return Err(ActionError::AlreadyRunning {
            task: task.clone(),
            pids: running.iter().map(|l| l.process.pid).collect(),
        });
    }
    let (launcher, rt) = super::relaunch::window_launcher(project, launch, task)?;
    let not_launchable = |source| ActionError::NotLaunchable {
        task: task.clone(),
        source,
    };
    let title = format!("Musician: {task}");
    let args = vec![
        "--permission-mode".to_owned(),
        launch.musician_permission.as_str().to_owned(),
        launch.musician_prompt.replace("{task}", task.as_str()),
    ];
    let window = rt
        .block_on(async {
            let held = launcher.open_held(&title, &args).await?;
            held.release().await
        })
        .map_err(not_launchable)?;
    write_pid_file(&project.temp, &task.window_pid_file(), window.pid)?;
    Ok(Done {
        json: json!({"ok": true, "task_id": task, "state": state, "pid": window.pid,
                     "title": title}),
        text: format!(
            "{task}: window \"{}\" (PID {}), its session running (the task is {}; the Musician claims it itself)",
            printable(&title),
            window.pid,
            printable(&state)
        ),
    })
}
