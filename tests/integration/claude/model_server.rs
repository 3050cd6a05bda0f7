//! A scripted model server: the Messages API as Claude Code uses it, on 127.0.0.1, so
//! the real `claude` runs offline with every token count chosen by the test.
//!
//! A script is a list of conversations. Each has a marker, text that its first user
//! message holds (a `-p` prompt, a subagent's prompt), and the replies it gets, in
//! order. A request belongs to the conversation whose marker appears earliest in its
//! messages (a parent's history also quotes its subagent's prompt, later on). Once a
//! conversation's replies are used up it gets `done` with zero usage, so the tokens a
//! run bills are exactly the scripted ones, however many turns Claude Code takes.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Frame};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

/// The usage figures of one reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
}

impl Usage {
    pub fn total(self) -> u64 {
        self.input + self.output + self.cache_write + self.cache_read
    }
}

/// What one reply says.
#[derive(Debug, Clone)]
pub enum Say {
    Text(String),
    /// A tool call (`Agent`, `Bash`, `Write`, …) with its input.
    Tool {
        name: String,
        input: Value,
    },
    /// An API error: the HTTP status and the error's `type` (`overloaded_error`, …).
    Error {
        status: u16,
        kind: String,
    },
    /// A text response streamed up to its first block's end, and then nothing more: the
    /// stream stays open (the way a response is when its session is killed).
    Cut(String),
    /// Text that hands on what the last tool result said (a subagent relaying its
    /// refusal to its caller, as a compliant model does).
    Relay,
    /// A `Bash` call running the first command in backticks of the last tool result
    /// (a caller running what its subagent handed it), in the foreground.
    RunNamed,
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub say: Say,
    pub usage: Usage,
}

impl Reply {
    pub fn text(text: &str, usage: Usage) -> Self {
        Self {
            say: Say::Text(text.to_owned()),
            usage,
        }
    }

    pub fn relay(usage: Usage) -> Self {
        Self {
            say: Say::Relay,
            usage,
        }
    }

    pub fn run_named(usage: Usage) -> Self {
        Self {
            say: Say::RunNamed,
            usage,
        }
    }

    pub fn bash(command: &str, usage: Usage) -> Self {
        Self::tool(
            "Bash",
            json!({"command": command, "description": "step"}),
            usage,
        )
    }

    pub fn tool(name: &str, input: Value, usage: Usage) -> Self {
        Self {
            say: Say::Tool {
                name: name.to_owned(),
                input,
            },
            usage,
        }
    }
}

struct Conversation {
    marker: String,
    replies: VecDeque<Reply>,
}

struct State {
    conversations: Vec<Conversation>,
    /// Every request body, in arrival order.
    requests: Vec<Value>,
    next_id: u64,
}

type BoxBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// A body that sends its head and then never ends.
struct CutBody(Option<Bytes>);

impl Body for CutBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut().0.take() {
            Some(head) => Poll::Ready(Some(Ok(Frame::data(head)))),
            // Never woken: the stream stays open until the connection goes.
            None => Poll::Pending,
        }
    }
}

/// The running server; dropping it stops it.
pub struct ModelServer {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ModelServer {
    pub fn start(script: Vec<(&str, Vec<Reply>)>) -> Self {
        let state = Arc::new(Mutex::new(State {
            conversations: script
                .into_iter()
                .map(|(marker, replies)| Conversation {
                    marker: marker.to_owned(),
                    replies: replies.into(),
                })
                .collect(),
            requests: Vec::new(),
            next_id: 1,
        }));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let shared = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                let mut stop_rx = stop_rx;
                loop {
                    let (stream, _) = tokio::select! {
                        _ = &mut stop_rx => return,
                        a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
                    };
                    let state = Arc::clone(&shared);
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(
                            move |req: Request<hyper::body::Incoming>| {
                                let state = Arc::clone(&state);
                                async move { Ok::<_, Infallible>(answer(req, &state).await) }
                            },
                        );
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        });
        let addr = addr_rx.recv().unwrap();
        Self {
            addr,
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().requests.clone()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn answer(req: Request<hyper::body::Incoming>, state: &Mutex<State>) -> Response<BoxBody> {
    let path = req.uri().path().to_owned();
    let body = req
        .into_body()
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if path.ends_with("/count_tokens") {
        return json_response(200, &json!({"input_tokens": 1000}));
    }
    if !path.starts_with("/v1/messages") {
        return json_response(200, &json!({}));
    }
    let (reply, id) = {
        let mut s = state.lock().unwrap();
        s.requests.push(request.clone());
        let id = s.next_id;
        s.next_id += 1;
        let text = request["messages"].as_array().cloned().unwrap_or_default();
        let position = |marker: &str| text.iter().position(|m| m.to_string().contains(marker));
        let which = (0..s.conversations.len())
            .filter_map(|i| position(&s.conversations[i].marker).map(|p| (p, i)))
            .min();
        let reply = which
            .and_then(|(_, i)| s.conversations[i].replies.pop_front())
            .unwrap_or_else(|| Reply::text("done", Usage::default()));
        (reply, id)
    };
    let reply = resolve(reply, &request);
    let model = request["model"]
        .as_str()
        .unwrap_or("claude-sonnet-4-5")
        .to_owned();
    if let Say::Error { status, kind } = &reply.say {
        return json_response(
            *status,
            &json!({"type": "error", "error": {"type": kind, "message": format!("scripted {kind}")}}),
        );
    }
    let (block, stop) = match &reply.say {
        Say::Text(t) | Say::Cut(t) => (json!({"type": "text", "text": t}), "end_turn"),
        Say::Tool { name, input } => (
            json!({"type": "tool_use", "id": format!("toolu_{id:04}"), "name": name, "input": input}),
            "tool_use",
        ),
        Say::Error { .. } | Say::Relay | Say::RunNamed => unreachable!(),
    };
    let u = reply.usage;
    let usage = json!({"input_tokens": u.input, "output_tokens": u.output,
        "cache_creation_input_tokens": u.cache_write, "cache_read_input_tokens": u.cache_read});
    let message = json!({"id": format!("msg_{id:04}"), "type": "message", "role": "assistant",
        "model": model, "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage});
    if request["stream"] != json!(true) {
        return json_response(200, &message);
    }
    // Server-sent events, as the API streams them.
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    let empty_block = match &reply.say {
        Say::Tool { .. } => {
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}})
        }
        _ => json!({"type": "text", "text": ""}),
    };
    let delta = match &reply.say {
        Say::Tool { input, .. } => {
            json!({"type": "input_json_delta", "partial_json": input.to_string()})
        }
        Say::Text(t) | Say::Cut(t) => json!({"type": "text_delta", "text": t}),
        Say::Error { .. } | Say::Relay | Say::RunNamed => unreachable!(),
    };
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": start}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": empty_block}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": usage}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let sse = |events: &[(&str, Value)]| {
        events.iter().fold(String::new(), |mut out, (name, data)| {
            out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
            out
        })
    };
    let body: BoxBody = if matches!(reply.say, Say::Cut(_)) {
        let head = Bytes::from(sse(&events[..4]));
        CutBody(Some(head)).boxed()
    } else {
        Full::new(Bytes::from(sse(&events))).boxed()
    };
    let mut r = Response::new(body);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    r
}

/// The text of the last user message in a request (what the model last heard back: a
/// tool result, or a background subagent's notification).
fn last_heard(request: &Value) -> String {
    let Some(last) = request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    let mut parts = Vec::new();
    let mut push = |v: &Value| match v {
        Value::String(s) => parts.push(s.clone()),
        Value::Array(blocks) => parts.extend(
            blocks
                .iter()
                .filter_map(|p| p["text"].as_str().map(str::to_owned)),
        ),
        _ => {}
    };
    match &last["content"] {
        Value::Array(blocks) => {
            for block in blocks {
                match block["type"].as_str() {
                    Some("tool_result") => push(&block["content"]),
                    Some("text") => push(&block["text"]),
                    _ => {}
                }
            }
        }
        other => push(other),
    }
    parts.join("\n")
}

/// A reply that depends on the request ([`Say::Relay`], [`Say::RunNamed`]) made concrete.
fn resolve(reply: Reply, request: &Value) -> Reply {
    let heard = last_heard(request);
    let say = match reply.say {
        Say::Relay => Say::Text(heard),
        Say::RunNamed => match heard
            .split('`')
            .skip(1)
            .step_by(2)
            .find(|c| c.contains("maestro"))
        {
            Some(command) => Say::Tool {
                name: "Bash".into(),
                input: json!({"command": command, "description": "the command maestro named", "timeout": 120_000}),
            },
            None => Say::Text(format!("nothing named in: {heard}")),
        },
        other => other,
    };
    Reply { say, ..reply }
}

fn json_response(status: u16, v: &Value) -> Response<BoxBody> {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())).boxed());
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}
