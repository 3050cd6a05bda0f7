//! `maestro serve --project DIR`: the far end of a remote project's link, run by
//! `ssh HOST -- maestro serve …` (see `remote`). It runs the project's core as
//! `--no-tui` would, and writes on stdout a hello, then every input its hub takes
//! (`remote::wire`); it answers the requests that come on stdin. It ends when stdin
//! closes (the link went away) or on a signal. It writes to `comms.db` only what an
//! operator's action asks for: Sentinel reports are the watching maestro's to make.

use std::process::ExitCode;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cli::error::CliError;
use crate::cli::project::Project;
use crate::core::actions::Target;
use crate::core::clock::Clock;
use crate::core::event_log::input::Line;
use crate::core::runtime;
use crate::core::sources::db::DbWrites;
use crate::remote::wire::{self, Ask, Frame, Outcome, Request};
use crate::settings::Settings;

/// Inputs waiting for the link before the hub waits too.
const TAP_QUEUE: usize = 1024;

pub async fn run(
    project: &Project,
    settings: &Settings,
    clock: Clock,
) -> Result<ExitCode, CliError> {
    let config = runtime::CoreConfig {
        db_writes: DbWrites {
            report_to_db: false,
            ..settings.db_writes
        },
        presenter: runtime::Presenter::Link,
        ..project.core_config(settings)
    };
    let (tap, mut inputs) = mpsc::channel::<Line>(TAP_QUEUE);
    let (frames_tx, mut frames) = mpsc::channel::<String>(64);
    let mut out = tokio::io::stdout();
    let hello = Frame::Hello {
        protocol: wire::PROTOCOL,
        version: wire::VERSION.into(),
        project: project.root.display().to_string(),
        database: runtime::database_exists(&project.db),
    };
    write_line(&mut out, &wire::encode(&hello)).await?;
    let mut life = crate::cli::life::Life::lend(&config, tap, clock)?;
    let core = life.core();
    // Nobody reads these here: the watching maestro's hub judges, from the inputs.
    core.without_snapshots();
    let mut happenings = std::mem::replace(&mut core.happenings, mpsc::channel(1).1);
    tokio::spawn(async move { while happenings.recv().await.is_some() {} });
    let stop = life.stop.clone();
    let target = Target {
        root: project.root.clone(),
        db: project.db.clone(),
        temp: project.temp.clone(),
        window_programs: crate::core::windows::window_programs(&settings.launch),
    };
    let doer = Doer {
        target,
        launch: settings.launch.clone(),
        recovery: settings.souffleur.recovery.clone(),
    };
    tokio::spawn(requests(doer, frames_tx, stop.clone()));
    // A beat when nothing else was sent for a beat's length.
    let mut beat = tokio::time::interval(wire::BEAT);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    beat.reset();
    loop {
        let text = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            Some(reply) = frames.recv() => reply,
            line = inputs.recv() => match line {
                Some(line) => wire::encode(&Frame::Input { line }),
                None => break,
            },
            _ = beat.tick() => wire::encode(&Frame::Beat {}),
        };
        beat.reset();
        if write_line(&mut out, &text).await.is_err() {
            break;
        }
    }
    life.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

async fn write_line(out: &mut tokio::io::Stdout, text: &str) -> Result<(), CliError> {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text.as_bytes());
    bytes.push(b'\n');
    out.write_all(&bytes)
        .await
        .and(out.flush().await)
        .map_err(|e| CliError::Runtime(format!("cannot write to stdout: {e}")))
}

/// Reads requests from stdin until it closes (then everything stops), each answered
/// by a reply frame.
async fn requests(doer: Doer, replies: mpsc::Sender<String>, stop: CancellationToken) {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        // Without an id there is no one to answer; a line not understood is left.
        let Ok(request) = serde_json::from_str::<Request>(&line) else {
            continue;
        };
        let (doer, replies) = (doer.clone(), replies.clone());
        tokio::task::spawn_blocking(move || {
            let outcome = match doer.answer(request.ask) {
                Ok(text) => Outcome::Ok(text),
                // The answer crosses the link as text.
                Err(e) => Outcome::Refused(e.to_string()),
            };
            let frame = Frame::Reply {
                id: request.id,
                outcome,
            };
            let _ = replies.blocking_send(wire::encode(&frame));
        });
    }
    stop.cancel();
}

/// Where the requests act, and with what.
#[derive(Clone)]
struct Doer {
    target: Target,
    launch: crate::settings::LaunchTemplates,
    recovery: crate::core::recovery::RecoveryTimings,
}

impl Doer {
    /// What the dashboard would have done with the request, done here.
    fn answer(&self, ask: Ask) -> Result<String, crate::core::actions::ActionError> {
        match ask {
            Ask::Describe { request } => crate::core::actions::describe(&self.target, &request),
            Ask::Perform { request } => crate::core::actions::perform(
                &self.target,
                &self.launch,
                self.recovery.kill_grace,
                &request,
            )
            .map(|d| d.text),
            Ask::Headroom { task } => Ok(crate::core::headroom::report(
                &self.target.temp,
                task.as_str(),
            )),
        }
    }
}
