//! `maestro task …`: the operator's actions on one Musician, from the command line. The
//! actions themselves are `core::actions`, shared with the dashboard's keys; here they
//! are parsed, confirmed (destructive ones) and printed.

use serde_json::json;

use crate::cli::args::{MessageArgs, TaskAction, TaskCommand};
use crate::cli::error::CliError;
use crate::cli::project::{Project, confirm};
use crate::core::actions::{self, Target, TaskRequest};
use crate::core::domain::TaskId;
use crate::settings::Settings;

/// Runs a task command; returns the exit status on success (headroom uses 0/1/2).
pub fn run(
    project: &Project,
    settings: &Settings,
    cmd: &TaskCommand,
    as_json: bool,
    yes: bool,
) -> Result<u8, CliError> {
    let raw = match &cmd.action {
        TaskAction::Approve(t)
        | TaskAction::Reject(t)
        | TaskAction::Fix(t)
        | TaskAction::Instruct(t) => &t.task_id,
        TaskAction::Kill(t)
        | TaskAction::Relaunch(t)
        | TaskAction::Launch(t)
        | TaskAction::Freeze(t)
        | TaskAction::Thaw(t)
        | TaskAction::Headroom(t)
        | TaskAction::Focus(t) => &t.task_id,
    };
    if let TaskAction::Focus(_) = &cmd.action {
        return focus(project, settings, raw, as_json);
    }
    let task = TaskId::parse(raw)
        .filter(TaskId::is_musician)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "{raw:?} is not a Musician task id; use one like task-03 or task-03-fix."
            ))
        })?;
    if let TaskAction::Headroom(_) = &cmd.action {
        return Ok(headroom(project, &task, as_json));
    }
    let target = Target {
        root: project.root.clone(),
        db: project.db.clone(),
        temp: project.temp.clone(),
        window_programs: crate::core::windows::window_programs(&settings.launch),
    };
    let done = match answer(&target, &task, &cmd.action)? {
        Some(done) => done,
        None => on_window(&target, settings, &task, &cmd.action, yes)?,
    }
    .map_err(crate::cli::error::runtime)?;
    report(as_json, &done.json, &done.text);
    Ok(0)
}

/// `task focus`: the task's window to the front (the Conductor's too).
fn focus(project: &Project, settings: &Settings, raw: &str, as_json: bool) -> Result<u8, CliError> {
    let task = TaskId::parse(raw).ok_or_else(|| {
        CliError::Usage(format!(
            "{raw:?} is not a task id; use one like task-03 (or task-00 for the Conductor)."
        ))
    })?;
    let said =
        crate::core::focus::focus_task(&project.root, &project.temp, &task, None, &settings.launch)
            .map_err(crate::cli::error::runtime)?;
    report(
        as_json,
        &json!({"ok": true, "task_id": task.as_str()}),
        &said,
    );
    Ok(0)
}

type Outcome = Result<actions::Done, actions::ActionError>;

/// The Conductor's answers (approve, reject, fix, instruct); `None` for other actions.
fn answer(
    target: &Target,
    task: &TaskId,
    action: &TaskAction,
) -> Result<Option<Outcome>, CliError> {
    Ok(Some(match action {
        TaskAction::Approve(t) => {
            actions::review(target, task, actions::APPROVAL, message(&t.message, true)?)
        }
        TaskAction::Reject(t) => actions::review(
            target,
            task,
            actions::REJECTION,
            message(&t.message, false)?,
        ),
        TaskAction::Fix(t) => actions::review(
            target,
            task,
            actions::FIX_PROPOSAL,
            message(&t.message, false)?,
        ),
        TaskAction::Instruct(t) => actions::instruct(
            target,
            task,
            &message(&t.message, false)?.unwrap_or_default(),
        ),
        _ => return Ok(None),
    }))
}

/// What acts on the task's window (freeze, thaw, kill, relaunch), asked first where it
/// stops or ends a process.
fn on_window(
    target: &Target,
    settings: &Settings,
    task: &TaskId,
    action: &TaskAction,
    yes: bool,
) -> Result<Outcome, CliError> {
    let grace = settings.souffleur.recovery.kill_grace;
    let asked = |request: TaskRequest| -> Result<Outcome, CliError> {
        let what = actions::describe(target, &request).map_err(crate::cli::error::runtime)?;
        confirm(&what, yes)?;
        Ok(actions::perform(target, &settings.launch, grace, &request))
    };
    let task = task.clone();
    match action {
        // Stopping a process is asked for like killing it.
        TaskAction::Freeze(_) => asked(TaskRequest::Freeze { task }),
        TaskAction::Kill(_) => asked(TaskRequest::Kill { task }),
        TaskAction::Thaw(_) => Ok(actions::perform(
            target,
            &settings.launch,
            grace,
            &TaskRequest::Thaw { task },
        )),
        TaskAction::Launch(_) => Ok(actions::first_launch::launch_first(
            target,
            &settings.launch,
            &task,
        )),
        TaskAction::Relaunch(_) => {
            let prepared =
                actions::prepare_relaunch(target, &task).map_err(crate::cli::error::runtime)?;
            confirm(&prepared.describe(), yes)?;
            Ok(actions::relaunch(
                target,
                &settings.launch,
                grace,
                &task,
                &prepared,
            ))
        }
        // Focus, headroom and the answers are handled before: nothing to do here.
        _ => Err(CliError::Usage(format!(
            "{task}: this task action does not act on a window"
        ))),
    }
}

/// The message text from `--message` or `--message-file`; `optional` allows none.
fn message(args: &MessageArgs, optional: bool) -> Result<Option<String>, CliError> {
    let text = match (&args.message, &args.message_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(f)) if f.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|e| {
                CliError::Usage(format!(
                    "cannot read the message from standard input ({e}); send UTF-8 text."
                ))
            })?;
            Some(text)
        }
        (None, Some(f)) => Some(std::fs::read_to_string(f).map_err(|e| {
            CliError::Usage(format!(
                "cannot read the message file {} ({e}); pass a readable UTF-8 file.",
                f.display()
            ))
        })?),
        (None, None) => None,
    };
    match text {
        Some(t) if t.trim().is_empty() => Err(CliError::Usage(
            "the message is empty; say what the Musician should do.".into(),
        )),
        None if !optional => Err(CliError::Usage(
            "this action needs --message TEXT or --message-file F.".into(),
        )),
        other => Ok(other),
    }
}

/// The headroom report of `check-context-headroom.sh`, same figures and exit status:
/// 0 healthy, 1 caution / no data / no file, 2 critical.
fn headroom(project: &Project, task: &TaskId, as_json: bool) -> u8 {
    let file = project.temp.join(format!("{task}-status"));
    let text = crate::core::headroom::read_status(&file);
    let h = crate::core::headroom::analyze(text.as_deref());
    if as_json {
        let mut v = serde_json::to_value(&h).unwrap_or_default();
        v["task_id"] = json!(task);
        // The name the first release used for the current value.
        v["context"] = json!(h.current);
        // The figures in percent, as the script prints them.
        v["per_entry"] = json!(h.per_entry_x10.map(|x| x as f64 / 10.0));
        v["per_agent"] = json!(h.per_agent_x10.map(|x| x as f64 / 10.0));
        v["forecast"] = time_forecast(project, task, h.current);
        println!("{}", crate::core::text::json_line(&v));
    } else {
        print!("{}", h.render(task.as_str(), &file.display().to_string()));
    }
    h.level.exit_code()
}

/// When the task should reach 65 % and 75 %, from the moments maestro's event log saw
/// its values arrive (the file itself has none); `null` without a recording that is
/// up to date with the file (its last value is the file's).
fn time_forecast(project: &Project, task: &TaskId, current: Option<i64>) -> serde_json::Value {
    use crate::core::clock::rfc3339;
    let key = crate::core::paths::ProjectKey::of(&project.root);
    let Ok(files) = crate::core::paths::event_log(&key) else {
        return serde_json::Value::Null;
    };
    let Ok(Some(timeline)) = crate::core::event_log::timeline::Timeline::from_event_log(&files)
    else {
        return serde_json::Value::Null;
    };
    let points = timeline.context_points(task.as_str());
    let up_to_date = points.last().map(|(_, v)| i64::from(*v)) == current;
    match crate::core::forecast::forecast(&points) {
        Some(f) if up_to_date => json!({
            "rate_per_min": (f.rate_per_min * 10.0).round() / 10.0,
            "handoff_at": f.handoff_at.map(rfc3339),
            "exit_at": f.exit_at.map(rfc3339),
            "as_of": points.last().map(|(at, _)| rfc3339(*at)),
        }),
        _ => serde_json::Value::Null,
    }
}

fn report(as_json: bool, value: &serde_json::Value, text: &str) {
    if as_json {
        println!("{}", crate::core::text::json_line(value));
    } else {
        println!("{text}");
    }
}
