//! The dashboard's effects carried out off its draw loop: task actions (here, or on a
//! remote project's host over its link) and pipeline requests.

use tokio::sync::mpsc;

use crate::core::actions::TaskRequest;
use crate::core::domain::TaskId;
use crate::tui::app::{self, Effect, UiState};

/// What the dashboard's task actions need: the project and the launch settings.
#[derive(Debug, Clone)]
pub struct ActionAccess {
    pub target: crate::core::actions::Target,
    pub launch: crate::settings::LaunchTemplates,
    /// How long an ended session has between SIGTERM and SIGKILL, and the rest of
    /// `[souffleur]`'s recovery timings.
    pub recovery: crate::core::recovery::RecoveryTimings,
    /// A remote project: its host's maestro carries the actions out.
    pub remote: Option<crate::remote::link::Requests>,
}

/// A task action's answer, back from the blocking pool.
pub(super) enum ActionAnswer {
    Described(TaskRequest, Result<String, ActionFailed>),
    Done(Result<String, ActionFailed>),
    /// A task request carried out (or refused): its answer, and what was asked.
    Performed(TaskRequest, Result<String, ActionFailed>),
    Headroom(TaskId, String),
}

/// Why a task action has no outcome to show, said to the operator.
#[derive(Debug, thiserror::Error)]
pub enum ActionFailed {
    #[error(transparent)]
    Action(#[from] crate::core::actions::ActionError),
    #[error(transparent)]
    Focus(#[from] crate::core::focus::FocusError),
    #[error(transparent)]
    Remote(#[from] crate::remote::link::AskError),
    #[error("task actions are not available in this view")]
    Unavailable,
    #[error("focusing a window on another host ({host}) is not possible from here")]
    FocusElsewhere { host: String },
}

/// Runs a task effect off the draw loop; its answer comes back on `answers`.
pub(super) fn task_effect(
    effect: Effect,
    access: Option<&ActionAccess>,
    project: usize,
    answers: &mpsc::UnboundedSender<(usize, ActionAnswer)>,
) {
    let Some(access) = access.cloned() else {
        let _ = answers.send((project, ActionAnswer::Done(Err(ActionFailed::Unavailable))));
        return;
    };
    let answers = answers.clone();
    tokio::task::spawn_blocking(move || {
        if let Some(link) = &access.remote {
            if let Some(answer) = remote_answer(link, effect) {
                let _ = answers.send((project, answer));
            }
            return;
        }
        let answer = match effect {
            Effect::DescribeTask(request) => {
                let what =
                    crate::core::actions::describe(&access.target, &request).map_err(Into::into);
                ActionAnswer::Described(request, what)
            }
            Effect::Task(request) => {
                let outcome = crate::core::actions::perform(
                    &access.target,
                    &access.launch,
                    access.recovery.kill_grace,
                    &request,
                )
                .map(|d| d.text)
                .map_err(Into::into);
                ActionAnswer::Performed(request, outcome)
            }
            Effect::Focus(task) => ActionAnswer::Done(
                crate::core::focus::focus_task(
                    &access.target.root,
                    &access.target.temp,
                    &task,
                    None,
                    &access.launch,
                )
                .map_err(Into::into),
            ),
            Effect::Headroom(task) => {
                let report = crate::core::headroom::report(&access.target.temp, task.as_str());
                ActionAnswer::Headroom(task, report)
            }
            _ => return,
        };
        let _ = answers.send((project, answer));
    });
}

/// A task effect on a remote project: asked of its host's maestro over the link.
fn remote_answer(link: &crate::remote::link::Requests, effect: Effect) -> Option<ActionAnswer> {
    use crate::remote::wire::Ask;
    Some(match effect {
        Effect::DescribeTask(request) => {
            let what = link.blocking_ask(Ask::Describe {
                request: request.clone(),
            });
            ActionAnswer::Described(request, what.map_err(Into::into))
        }
        Effect::Task(request) => {
            let outcome = link.blocking_ask(Ask::Perform {
                request: request.clone(),
            });
            ActionAnswer::Performed(request, outcome.map_err(Into::into))
        }
        Effect::Headroom(task) => {
            let text = link
                .blocking_ask(Ask::Headroom { task: task.clone() })
                .unwrap_or_else(|e| e.to_string());
            ActionAnswer::Headroom(task, text)
        }
        Effect::Focus(_) => ActionAnswer::Done(Err(ActionFailed::FocusElsewhere {
            host: link.host().to_owned(),
        })),
        _ => return None,
    })
}

/// Where the dashboard finds a project's pipelines.
#[derive(Debug, Clone)]
pub struct PipelineAccess {
    pub dir: std::path::PathBuf,
    pub project: std::path::PathBuf,
}

impl PipelineAccess {
    pub fn for_project(root: &std::path::Path) -> Self {
        Self {
            dir: crate::core::paths::definitions_dir(root),
            project: root.to_path_buf(),
        }
    }

    /// Asks the host; the answer's detail, or why there is none.
    async fn ask(&self, req: serde_json::Value) -> String {
        let project = self.project.clone();
        let answer = tokio::task::spawn_blocking(move || {
            crate::core::pipeline::host::request(&project, &req)
        })
        .await
        .ok()
        .flatten();
        match answer {
            Some(a) => host_answer(a["ok"] == true, a["detail"].as_str().unwrap_or_default()),
            None => "no maestro hosts this project's pipelines".into(),
        }
    }
}

/// The pipeline host's answer in a few words: what it said, once (its detail is often
/// the word `accepted` itself), or why it refused.
fn host_answer(ok: bool, detail: &str) -> String {
    match (ok, detail.trim()) {
        (true, "" | "accepted" | "ok") => "applied".to_owned(),
        (true, said) => said.to_owned(),
        (false, "") => "refused".to_owned(),
        (false, why) => format!("refused: {why}"),
    }
}

#[cfg(test)]
#[test]
fn a_host_answer_says_each_word_once() {
    assert_eq!(host_answer(true, "accepted"), "applied");
    assert_eq!(host_answer(true, "started"), "started");
    assert_eq!(
        host_answer(false, "no such pipeline"),
        "refused: no such pipeline"
    );
}

/// Carries out a pipeline effect; returns the note for the status bar.
pub(super) async fn pipeline_effect(
    effect: Effect,
    ui: &mut UiState,
    access: Option<&PipelineAccess>,
) {
    use crate::core::pipeline::edit;
    let Some(access) = access else {
        ui.note = Some("pipelines are not available here".into());
        return;
    };
    match effect {
        Effect::Pipeline { op, name } => {
            let answer = access
                .ask(serde_json::json!({"op": op, "name": name}))
                .await;
            ui.note = Some(format!("{name} {op}: {answer}"));
        }
        Effect::EditSteps(name) => {
            let steps = crate::core::pipeline::files::definition_file(&access.dir, &name)
                .and_then(|p| edit::read_definition(&p))
                .map(|d| serde_json::to_string_pretty(&d["steps"]).unwrap_or_default());
            match steps {
                Ok(text) => ui.open_editor(name, &text),
                Err(e) => ui.note = Some(e.to_string()),
            }
        }
        Effect::DescribeTrust(name) => {
            match crate::core::pipeline::trust::describe_for_trust(&access.dir, &name) {
                Ok((hash, question)) => {
                    ui.overlay = Some(app::Overlay::Confirm(app::Confirm::Trust {
                        name,
                        hash,
                        question,
                    }));
                }
                Err(e) => ui.note = Some(e.to_string()),
            }
        }
        Effect::Trust { name, hash } => {
            let key = crate::core::paths::ProjectKey::of(&access.project);
            match crate::core::pipeline::trust::trust_content(&key, &name, &hash) {
                Ok(()) => {
                    let answer = access
                        .ask(serde_json::json!({"op": "reload", "name": name}))
                        .await;
                    ui.note = Some(format!("{name}: trusted ({answer})"));
                }
                Err(e) => ui.note = Some(e.to_string()),
            }
        }
        Effect::SaveSteps { name, steps } => {
            match edit::replace_steps(&access.dir, &name, &steps) {
                Ok(()) => {
                    let answer = access
                        .ask(serde_json::json!({"op": "reload", "name": name}))
                        .await;
                    ui.note = Some(format!("{name}: steps saved ({answer})"));
                    ui.steps_saved();
                }
                Err(e) => ui.note = Some(e.to_string()),
            }
        }
        _ => {}
    }
}
