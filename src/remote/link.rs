//! The local end of a remote project: one ssh connection to `maestro serve`, its
//! inputs handed to a hub of our own, requests sent and answered on the same pipes.
//! A connection that ends is reported `down` with why, tried again with backoff
//! (`retrying`), and caught up once `up` ([`CatchUp`]).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::core::event::{CoreEvent, LinkReport};
use crate::core::event_log::input::{TaskTable, event_of};
use crate::remote::bounded::{Frame as Read, FrameReader, ReadError};
use crate::remote::catch_up::CatchUp;
use crate::remote::wire::{self, Ask, Frame, Request};
use crate::remote::{RemoteProject, RemoteSettings, ssh};

/// The first wait before connecting again, and the longest.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long ssh and the remote maestro have to say hello.
const HELLO_WITHIN: Duration = Duration::from_secs(60);
/// The widest `link` detail, in terminal cells: ssh's last words, not all it wrote.
const DETAIL_MAX: usize = 400;

type Answer = oneshot::Sender<Result<String, AskError>>;

/// Why a question to the host has no answer, or its refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    #[error("the link to {host} is closed.")]
    Closed { host: String },
    #[error("the link to {host} closed before the answer.")]
    ClosedBeforeAnswer { host: String },
    #[error("the link to {host} is down; nothing was done. Try again once it is back up.")]
    Down { host: String },
    #[error("the link to {host} went down; nothing was sent.")]
    NotSent { host: String },
    #[error(
        "the link to {host} went down before the answer: check the task there before trying again."
    )]
    DownBeforeAnswer { host: String },
    #[error(transparent)]
    Refused(#[from] wire::Refused),
}

/// Asks the remote maestro something (an action, a question) over the link.
#[derive(Debug, Clone)]
pub struct Requests {
    tx: mpsc::Sender<(Ask, Answer)>,
    host: String,
}

impl Requests {
    /// The host the link reaches.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Sends `ask` and waits for its answer, from a thread that may block (the
    /// dashboard's action pool).
    pub fn blocking_ask(&self, ask: Ask) -> Result<String, AskError> {
        let (answer, reply) = oneshot::channel();
        let host = || self.host.clone();
        self.tx
            .blocking_send((ask, answer))
            .map_err(|_| AskError::Closed { host: host() })?;
        reply
            .blocking_recv()
            .map_err(|_| AskError::ClosedBeforeAnswer { host: host() })?
    }
}

/// Starts the link; it runs until `cancel`, sending its inputs to `events`.
pub fn spawn(
    project: RemoteProject,
    settings: RemoteSettings,
    events: mpsc::Sender<CoreEvent>,
    cancel: CancellationToken,
) -> Requests {
    let (tx, asks) = mpsc::channel(16);
    let host = project.host.clone();
    tokio::spawn(run(project, settings, events, asks, cancel));
    Requests { tx, host }
}

/// How one connection ended.
enum Ended {
    Cancelled,
    /// Down, with why; whether it had been up (then the backoff starts over).
    Down {
        detail: String,
        was_up: bool,
    },
}

async fn run(
    project: RemoteProject,
    settings: RemoteSettings,
    events: mpsc::Sender<CoreEvent>,
    mut asks: mpsc::Receiver<(Ask, Answer)>,
    cancel: CancellationToken,
) {
    let mut catch_up = CatchUp::default();
    // Across reconnections: the hub keeps what the host named.
    let mut caps = crate::remote::bounded::Caps::default();
    let mut backoff = BACKOFF_FIRST;
    let mut attempts = 0u64;
    let report = |status: &'static str, detail: String| {
        let events = events.clone();
        let project = project.to_string();
        async move {
            let _ = events
                .send(CoreEvent::Link(LinkReport {
                    project,
                    status,
                    detail,
                }))
                .await;
        }
    };
    loop {
        if attempts > 0 {
            report(
                "retrying",
                format!("connecting to {} (attempt {})", project.host, attempts + 1),
            )
            .await;
        }
        attempts += 1;
        let link = Link {
            project: &project,
            settings: &settings,
            events: &events,
            catch_up: &mut catch_up,
            caps: &mut caps,
        };
        match link.follow(&mut asks, &cancel, &report).await {
            Ended::Cancelled => return,
            Ended::Down { detail, was_up } => {
                if was_up {
                    backoff = BACKOFF_FIRST;
                }
                report("down", detail).await;
            }
        }
        // While waiting, a request is answered at once: nothing can carry it.
        let wait = tokio::time::sleep(backoff);
        tokio::pin!(wait);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = &mut wait => break,
                Some((_, answer)) = asks.recv() => {
                    let _ = answer.send(Err(AskError::Down {
                        host: project.host.clone(),
                    }));
                }
            }
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

struct Link<'a> {
    project: &'a RemoteProject,
    settings: &'a RemoteSettings,
    events: &'a mpsc::Sender<CoreEvent>,
    catch_up: &'a mut CatchUp,
    caps: &'a mut crate::remote::bounded::Caps,
}

impl Link<'_> {
    /// `ssh … maestro serve --project PATH`, in a process group of its own (the
    /// terminal's signals are the dashboard's), ended with the link.
    fn start_ssh(&self) -> Result<Child, Ended> {
        let args = [
            "serve".to_owned(),
            "--project".to_owned(),
            self.project.path.clone(),
        ];
        let argv = ssh::argv(self.settings, self.project, &ssh::LINK_OPTIONS, &args)
            .map_err(|detail| down(detail.to_string(), false))?;
        Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                down(
                    format!("cannot run {} ({e}): fix [remote] ssh.", argv[0]),
                    false,
                )
            })
    }

    /// One input from the host: past its bounds it is refused (said, the link stays
    /// up); else what the hub was not handed yet goes to it. `Err`: the hub is gone.
    async fn pass_input(
        &mut self,
        input: &crate::core::event_log::input::Input,
        table: &mut TaskTable,
        host: &str,
    ) -> Result<(), ()> {
        match self.caps.admit(input) {
            Ok(()) => {}
            Err(None) => return Ok(()),
            Err(Some(detail)) => {
                let _ = self
                    .events
                    .send(CoreEvent::SourceFailed {
                        source: "remote",
                        task: None,
                        detail: format!("{host}: {detail}"),
                    })
                    .await;
                return Ok(());
            }
        }
        let Some(event) = event_of(input, table) else {
            return Ok(());
        };
        for event in self.catch_up.filter(event) {
            self.events.send(event).await.map_err(drop)?;
        }
        Ok(())
    }

    /// ssh started, its pipes taken, the host's maestro's hello heard.
    async fn connect(&self, cancel: &CancellationToken) -> Result<Connected, Ended> {
        let mut child = self.start_ssh()?;
        let mut stderr = keep_stderr(&mut child);
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(down("ssh started without its pipes.", false));
        };
        let mut lines = FrameReader::new(stdout);
        let version = self
            .await_hello(&mut lines, &mut child, &mut stderr, cancel)
            .await?;
        Ok(Connected {
            child,
            stderr,
            stdin,
            lines,
            version,
        })
    }

    /// One connection, from ssh's start to its end.
    async fn follow<F, Fut>(
        mut self,
        asks: &mut mpsc::Receiver<(Ask, Answer)>,
        cancel: &CancellationToken,
        report: &F,
    ) -> Ended
    where
        F: Fn(&'static str, String) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let host = self.project.host.clone();
        let Connected {
            mut child,
            mut stderr,
            mut stdin,
            mut lines,
            version,
        } = match self.connect(cancel).await {
            Ok(connected) => connected,
            Err(ended) => return ended,
        };
        self.catch_up.reconnected();
        report("up", format!("maestro {version} on {host}")).await;
        let mut table = TaskTable::default();
        let mut pending: HashMap<u64, Answer> = HashMap::new();
        let mut next_id = 0u64;
        // A host that stops (SIGSTOP, a hung disk) keeps ssh open and sends nothing:
        // three missed beats and it is down, not "nothing changed".
        let silence = wire::BEAT * wire::SILENT_BEATS;
        let mut heard = tokio::time::Instant::now();
        let mut said_not_utf8 = false;
        let why = loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    let _ = child.kill().await;
                    return Ended::Cancelled;
                }
                // Read before judging silence: what waits in the pipe was said.
                read = lines.next() => {
                    let line = match read {
                        Ok(Some(Read::Line(line))) => line,
                        Ok(Some(Read::NotUtf8(bytes))) => {
                            heard = tokio::time::Instant::now();
                            self.skip_not_utf8(bytes, &mut said_not_utf8).await;
                            continue;
                        }
                        Ok(None) => break None,
                        Err(ReadError::TooLong) => break Some(format!(
                            "{host} sent a frame over {} MiB without its end; the link is dropped (is [remote] maestro a maestro?).",
                            crate::remote::bounded::MAX_FRAME >> 20
                        )),
                        Err(ReadError::Io(e)) => break Some(format!("cannot read from ssh ({e})")),
                    };
                    if self.take_frame(&line, &mut table, &mut pending).await.is_err() {
                        return Ended::Cancelled;
                    }
                    // Time spent waiting for this side's reader (a slow script, a paused
                    // pager) is not the host's silence: it is silent only while this
                    // side reads.
                    heard = tokio::time::Instant::now();
                }
                () = tokio::time::sleep_until(heard + silence) => {
                    break Some(format!(
                        "{host} sent nothing for {}s ({} beats): the host or its maestro stopped answering; connecting again.",
                        silence.as_secs(),
                        wire::SILENT_BEATS
                    ));
                }
                Some((ask, answer)) = asks.recv() => {
                    next_id += 1;
                    match send_ask(&mut stdin, next_id, ask, answer, &host).await {
                        Ok(answer) => {
                            pending.insert(next_id, answer);
                        }
                        Err(e) => break Some(format!("cannot write to ssh ({e})")),
                    }
                }
            }
        };
        self.hang_up(pending, why, &mut child, &mut stderr).await
    }

    /// One whole frame from the host: an input for the hub, the reply to a request, a
    /// beat (the host's heartbeats are known up to now). `Err`: the hub is gone.
    async fn take_frame(
        &mut self,
        line: &str,
        table: &mut TaskTable,
        pending: &mut HashMap<u64, Answer>,
    ) -> Result<(), ()> {
        let project = self.project;
        match serde_json::from_str::<Frame>(line) {
            Ok(Frame::Input { line }) => self.pass_input(&line.input, table, &project.host).await,
            Ok(Frame::Reply { id, outcome }) => {
                if let Some(answer) = pending.remove(&id) {
                    let _ = answer.send(outcome.into_result().map_err(AskError::from));
                }
                Ok(())
            }
            Ok(Frame::Beat {}) => self.events.send(CoreEvent::Heard).await.map_err(drop),
            // A second hello, or a line from a newer maestro: nothing to act on.
            Ok(Frame::Hello { .. }) | Err(_) => Ok(()),
        }
    }

    /// A line that is not UTF-8: skipped, said once a connection; the link stays up.
    async fn skip_not_utf8(&self, bytes: usize, said: &mut bool) {
        if std::mem::replace(said, true) {
            return;
        }
        let _ = self
            .events
            .send(CoreEvent::SourceFailed {
                source: "remote",
                task: None,
                detail: format!(
                    "{} sent a line that is not UTF-8 ({bytes} bytes); skipped, and any more like it",
                    self.project.host
                ),
            })
            .await;
    }

    /// The remote maestro's hello, within [`HELLO_WITHIN`]: its version when it speaks
    /// this protocol, or why the link is down.
    async fn await_hello(
        &self,
        lines: &mut FrameReader<tokio::process::ChildStdout>,
        child: &mut Child,
        stderr: &mut Stderr,
        cancel: &CancellationToken,
    ) -> Result<String, Ended> {
        let host = &self.project.host;
        let hello = tokio::select! {
            () = cancel.cancelled() => return Err(Ended::Cancelled),
            h = tokio::time::timeout(HELLO_WITHIN, lines.next()) => h,
        };
        let first = match hello {
            Ok(Ok(Some(Read::Line(line)))) => line,
            Ok(_) => {
                let detail = ended_why(self.settings, self.project, child, stderr).await;
                return Err(down(detail, false));
            }
            Err(_) => {
                let _ = child.kill().await;
                return Err(down(
                    format!("no answer from {host} within {}s.", HELLO_WITHIN.as_secs()),
                    false,
                ));
            }
        };
        match check_hello(&first, host) {
            Ok(version) => Ok(version),
            Err(detail) => {
                let _ = child.kill().await;
                Err(down(detail.to_string(), false))
            }
        }
    }

    /// The end of a connection that was up: every question still waiting is answered
    /// that the link went down; a link maestro drops ends its ssh, one the host ended is
    /// asked why (ssh exits by itself: killing it first would read as "killed by
    /// signal 9").
    async fn hang_up(
        &self,
        pending: HashMap<u64, Answer>,
        why: Option<String>,
        child: &mut Child,
        stderr: &mut Stderr,
    ) -> Ended {
        let host = &self.project.host;
        for (_, answer) in pending {
            let _ = answer.send(Err(AskError::DownBeforeAnswer { host: host.clone() }));
        }
        let detail = match why {
            Some(w) => {
                let _ = child.start_kill();
                w
            }
            None => ended_why(self.settings, self.project, child, stderr).await,
        };
        down(detail, true)
    }
}

/// An operator's request, sent to the host as request `id` (its answer kept for the
/// reply); a write that fails answers that nothing was sent and says why the link is
/// down.
async fn send_ask(
    stdin: &mut tokio::process::ChildStdin,
    id: u64,
    ask: Ask,
    answer: Answer,
    host: &str,
) -> Result<Answer, std::io::Error> {
    let mut text = wire::encode(&Request { id, ask });
    text.push('\n');
    match stdin.write_all(text.as_bytes()).await {
        Ok(()) => Ok(answer),
        Err(e) => {
            let _ = answer.send(Err(AskError::NotSent {
                host: host.to_owned(),
            }));
            Err(e)
        }
    }
}

fn down(detail: impl AsRef<str>, was_up: bool) -> Ended {
    Ended::Down {
        detail: crate::core::text::fit(detail.as_ref(), DETAIL_MAX),
        was_up,
    }
}

/// A host whose maestro cannot be spoken with, and which side to update.
#[derive(Debug, thiserror::Error)]
pub enum HelloError {
    #[error(
        "the maestro on {host} did not say hello as `maestro serve` does (it said {said:?}): update it to {mine}."
    )]
    NoHello {
        host: String,
        said: String,
        mine: &'static str,
    },
    #[error(
        "the maestro on {host} ({version}, protocol {protocol}) is newer than this one ({mine}, protocol {ours}): update this maestro to {version}."
    )]
    Newer {
        host: String,
        version: String,
        protocol: u32,
        mine: &'static str,
        ours: u32,
    },
    #[error(
        "the maestro on {host} ({version}, protocol {protocol}) is older than this one ({mine}, protocol {ours}): update the maestro on {host} to {mine}."
    )]
    Older {
        host: String,
        version: String,
        protocol: u32,
        mine: &'static str,
        ours: u32,
    },
}

/// The hello line, checked: the remote maestro's version (printable) when it speaks
/// the same protocol, or both versions and which to update.
fn check_hello(line: &str, host: &str) -> Result<String, HelloError> {
    let Ok(Frame::Hello {
        protocol, version, ..
    }) = serde_json::from_str::<Frame>(line)
    else {
        return Err(HelloError::NoHello {
            host: host.to_owned(),
            said: crate::core::text::printable(&line.chars().take(120).collect::<String>())
                .into_owned(),
            mine: wire::VERSION,
        });
    };
    let (ours, mine) = (wire::PROTOCOL, wire::VERSION);
    let version = crate::core::text::printable(&version).into_owned();
    let host = host.to_owned();
    if protocol > ours {
        return Err(HelloError::Newer {
            host,
            version,
            protocol,
            mine,
            ours,
        });
    }
    if protocol < ours {
        return Err(HelloError::Older {
            host,
            version,
            protocol,
            mine,
            ours,
        });
    }
    Ok(version)
}

/// The last bytes ssh (and the remote side) wrote on stderr, read as they come until
/// ssh closes it ([`crate::remote::bounded::STDERR_KEPT`] at most).
struct Stderr {
    kept: Arc<Mutex<Vec<u8>>>,
    reader: Option<tokio::task::JoinHandle<()>>,
}

/// A connection whose host said hello: ssh, what it says on stderr, its pipes, and the
/// host's maestro's version.
struct Connected {
    child: Child,
    stderr: Stderr,
    stdin: tokio::process::ChildStdin,
    lines: FrameReader<tokio::process::ChildStdout>,
    version: String,
}

fn keep_stderr(child: &mut Child) -> Stderr {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let mut reader = None;
    if let Some(err) = child.stderr.take() {
        let kept = kept.clone();
        reader = Some(tokio::spawn(async move {
            crate::remote::bounded::keep_tail(err, &kept).await;
        }));
    }
    Stderr { kept, reader }
}

/// Why the connection ended, from ssh's exit and its stderr.
async fn ended_why(
    settings: &RemoteSettings,
    project: &RemoteProject,
    child: &mut Child,
    stderr: &mut Stderr,
) -> String {
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    let Ok(Ok(status)) = status else {
        let _ = child.kill().await;
        return format!("the connection to {} stopped answering.", project.host);
    };
    // ssh has ended: its stderr ends too, once the reader has taken the last line.
    if let Some(reader) = stderr.reader.take() {
        let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
    }
    let text = String::from_utf8_lossy(
        &stderr
            .kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
    .into_owned();
    if let Some(why) = ssh::failure(settings, project, status.code(), &text) {
        return why;
    }
    let said = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(|l| l.strip_prefix("maestro: ").unwrap_or(l))
        .map(|l| crate::core::text::printable(l).into_owned());
    match (said, status.code()) {
        (Some(s), _) => format!("{}: {s}", project.host),
        (None, Some(code)) => format!("the connection to {} ended (exit {code}).", project.host),
        (None, None) => {
            use std::os::unix::process::ExitStatusExt;
            format!(
                "the connection to {} ended (ssh killed by signal {}).",
                project.host,
                status.signal().unwrap_or_default()
            )
        }
    }
}
