//! Pipeline definitions: the seed's JSON shape (camelCase keys), checked once into
//! typed steps. Every problem is reported with the JSON path where it is
//! (`steps[1].command`), so a user can find it in the file.

use std::time::Duration;

use regex::Regex;
use serde_json::Value;

use crate::core::pipeline::expr::{self, ConditionError, Expr};
use crate::core::pipeline::program_text;

#[derive(Debug, Clone)]
pub struct Definition {
    pub name: String,
    pub steps: Vec<Step>,
    pub looping: Loop,
    pub trigger: Trigger,
    pub max_iterations: Option<u64>,
    pub timeout: Option<Duration>,
    /// `safety.maxStepTimeoutMs`: a step that runs longer is a step error.
    pub max_step_timeout: Option<Duration>,
    /// `safety.onTimeout: "pause"`: at `timeoutMs` the run pauses (its variables and
    /// iteration kept) instead of stopping.
    pub pause_on_timeout: bool,
    /// `safety.maxMemoryMb`: the address space each command step's processes may use.
    pub max_memory_mb: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    Fail,
    Skip,
    Retry,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    Finished,
    Error,
    Match,
}

#[derive(Debug, Clone)]
pub enum StepKind {
    Command {
        program: String,
        args: Vec<String>,
        cwd: Option<String>,
        env: Vec<(String, String)>,
        timeout: Option<Duration>,
        wait: bool,
    },
    Watch {
        execution_id: String,
        rules: Vec<(Regex, String)>,
        until: Until,
    },
    Llm {
        prompt: String,
        model: Option<String>,
    },
    Condition {
        check: Expr,
        then: Vec<Step>,
        otherwise: Vec<Step>,
    },
    Sentinel {
        definition: Box<Definition>,
        wait: bool,
    },
    Emit {
        event: String,
        data: Option<String>,
    },
}

#[derive(Debug, Clone)]
pub struct Step {
    pub kind: StepKind,
    pub output_to: Option<String>,
    pub on_error: OnError,
}

#[derive(Debug, Clone)]
pub enum Loop {
    Once,
    Count(u64),
    Until(Expr),
    While(Expr),
    Continuous(Duration),
    Event(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    Manual,
    Immediate,
    /// A named event on the bus (maestro's own happenings, or an `emit` step's), when
    /// `filter` (over `$event`) holds.
    Event {
        name: String,
        filter: Option<Expr>,
    },
    Schedule(Schedule),
}

pub use super::schedule::Schedule;
use super::schedule::cron_expression;

/// What is wrong in a pipeline definition, and where (`steps[2].params.args[0]`), as
/// globset says which glob and what of it.
#[derive(Debug, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct DefinitionError {
    pub at: String,
    pub problem: Problem,
}

/// The part of a definition that is wrong, and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// A value that breaks a rule of the format (the text says which, and the fix).
    #[error("{0}")]
    Rule(String),
    #[error("{shown:?}{more} is not a valid condition ({source})")]
    Condition {
        shown: String,
        more: &'static str,
        source: ConditionError,
    },
    #[error("not a regular expression ({source})")]
    Pattern { source: regex::Error },
}

type Res<T> = Result<T, DefinitionError>;

/// A rule broken at `path`.
/// The largest `safety.maxMemoryMb` (1 TiB): past it, no budget at all.
const MAX_MEMORY_MB: u64 = 1 << 20;

/// A whole number from `low` to `high` at `path`, if one is given; the error says
/// `must be {what} from {low} to {high}`.
fn number_in(
    v: Option<&Value>,
    (low, high, what): (u64, u64, &str),
    path: &str,
) -> Res<Option<u64>> {
    v.map(|v| {
        v.as_u64()
            .filter(|n| (low..=high).contains(n))
            .ok_or_else(|| at(path, format!("must be {what} from {low} to {high}")))
    })
    .transpose()
}

fn at(path: &str, what: impl std::fmt::Display) -> DefinitionError {
    DefinitionError {
        at: path.to_owned(),
        problem: Problem::Rule(what.to_string()),
    }
}

fn obj<'a>(v: &'a Value, path: &str) -> Res<&'a serde_json::Map<String, Value>> {
    v.as_object().ok_or_else(|| at(path, "must be an object"))
}

fn string(m: &serde_json::Map<String, Value>, key: &str, path: &str) -> Res<Option<String>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(at(&format!("{path}.{key}"), "must be a string")),
    }
}

fn required(m: &serde_json::Map<String, Value>, key: &str, path: &str) -> Res<String> {
    string(m, key, path)?
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| at(&format!("{path}.{key}"), "is required (a non-empty string)"))
}

/// The longest `timeoutMs` or `intervalMs` a definition may ask for: a week.
pub const MAX_MILLIS: u64 = 7 * 24 * 3600 * 1000;
/// The most iterations a definition may ask for.
pub const MAX_ITERATIONS: u64 = 1_000_000;
/// The shortest schedule: a pipeline started more often than once a second would
/// only pile up runs.
pub const MIN_SCHEDULE_MS: u64 = 1000;

fn millis(m: &serde_json::Map<String, Value>, key: &str, path: &str) -> Res<Option<Duration>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_MILLIS).contains(n))
            .map(|n| Some(Duration::from_millis(n)))
            .ok_or_else(|| {
                at(
                    &format!("{path}.{key}"),
                    format!("must be a number of milliseconds from 1 to {MAX_MILLIS} (a week)"),
                )
            }),
    }
}

/// Whether a relative folder stays inside the project as written (no absolute path,
/// no `..`); the runner checks the resolved folder again.
pub fn stays_inside(dir: &str) -> bool {
    let p = std::path::Path::new(dir);
    !p.is_absolute()
        && p.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
}

fn condition(src: &str, path: &str) -> Res<Expr> {
    expr::parse(src).map_err(|source| {
        // Quoted in an error line: a long condition is shown by its beginning.
        let shown: String = src.chars().take(80).collect();
        let more = if shown.len() < src.len() { "…" } else { "" };
        DefinitionError {
            at: path.to_owned(),
            problem: Problem::Condition {
                shown,
                more,
                source,
            },
        }
    })
}

/// Checks a whole definition. `fallback_name` is used when it has no `name`.
pub fn parse_definition(v: &Value, fallback_name: &str, path: &str) -> Res<Definition> {
    let m = obj(v, if path.is_empty() { "definition" } else { path })?;
    let p = |k: &str| {
        if path.is_empty() {
            k.to_owned()
        } else {
            format!("{path}.{k}")
        }
    };
    let name = string(m, "name", path)?.unwrap_or_else(|| fallback_name.to_owned());
    // The name is shown on terminals and in every pipeline event.
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(at(
            &p("name"),
            "must be 1 to 100 characters without control characters",
        ));
    }
    let steps = steps(m.get("steps"), &p("steps"))?;
    let mut outputs = Vec::new();
    output_names(&steps, &mut outputs);
    check_program_text(&steps, &p("steps"), &outputs)?;
    let looping = match m.get("loop") {
        None => Loop::Once,
        Some(l) => parse_loop(obj(l, &p("loop"))?, &p)?,
    };
    let trigger = match m.get("trigger") {
        None => Trigger::Manual,
        Some(t) => parse_trigger(obj(t, &p("trigger"))?, &p)?,
    };
    let safety = match m.get("safety") {
        None => None,
        Some(s) => Some(obj(s, &p("safety"))?),
    };
    let max_iterations = number_in(
        safety
            .and_then(|s| s.get("maxIterations"))
            .or_else(|| m.get("maxIterations")),
        (1, MAX_ITERATIONS, "a number"),
        &p("safety.maxIterations"),
    )?;
    let timeout = match safety {
        Some(s) if s.contains_key("timeoutMs") => millis(s, "timeoutMs", &p("safety"))?,
        _ => millis(m, "timeoutMs", path)?,
    };
    let max_step_timeout = match safety {
        Some(s) => millis(s, "maxStepTimeoutMs", &p("safety"))?,
        None => None,
    };
    let pause_on_timeout = match safety.and_then(|s| s.get("onTimeout")) {
        None | Some(Value::Null) => false,
        Some(v) if v == "stop" || v == "pause" => v == "pause",
        Some(_) => return Err(at(&p("safety.onTimeout"), "must be \"stop\" or \"pause\"")),
    };
    let max_memory_mb = number_in(
        safety
            .and_then(|s| s.get("maxMemoryMb"))
            .filter(|v| !v.is_null()),
        (16, MAX_MEMORY_MB, "a number of megabytes"),
        &p("safety.maxMemoryMb"),
    )?;
    if max_iterations.is_none() && timeout.is_none() {
        return Err(at(
            &p("safety"),
            "every definition needs safety.maxIterations or safety.timeoutMs (no unbounded loops)",
        ));
    }
    Ok(Definition {
        name,
        steps,
        looping,
        trigger,
        max_iterations,
        timeout,
        max_step_timeout,
        pause_on_timeout,
        max_memory_mb,
    })
}

/// A definition's `loop`, its fields named from `p` (the definition's path).
fn parse_loop(lm: &serde_json::Map<String, Value>, p: &dyn Fn(&str) -> String) -> Res<Loop> {
    Ok(match string(lm, "type", &p("loop"))?.as_deref() {
        Some("once") => Loop::Once,
        Some("count") => Loop::Count(
            lm.get("max")
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
                .ok_or_else(|| at(&p("loop.max"), "a count loop needs a positive `max`"))?,
        ),
        Some("until") => Loop::Until(condition(
            &required(lm, "check", &p("loop"))?,
            &p("loop.check"),
        )?),
        Some("while") => Loop::While(condition(
            &required(lm, "check", &p("loop"))?,
            &p("loop.check"),
        )?),
        Some("continuous") => {
            Loop::Continuous(millis(lm, "intervalMs", &p("loop"))?.unwrap_or_default())
        }
        Some("event") => Loop::Event(required(lm, "event", &p("loop"))?),
        other => {
            return Err(at(
                &p("loop.type"),
                format!("{other:?}: use once, count, until, while, continuous or event"),
            ));
        }
    })
}

/// A definition's `trigger`, its fields named from `p` (the definition's path).
fn parse_trigger(tm: &serde_json::Map<String, Value>, p: &dyn Fn(&str) -> String) -> Res<Trigger> {
    Ok(match string(tm, "type", &p("trigger"))?.as_deref() {
        Some("manual") => Trigger::Manual,
        Some("immediate") => Trigger::Immediate,
        Some("event") => Trigger::Event {
            name: required(tm, "event", &p("trigger"))?,
            filter: string(tm, "filter", &p("trigger"))?
                .map(|f| condition(&f, &p("trigger.filter")))
                .transpose()?,
        },
        Some("schedule") => Trigger::Schedule(match string(tm, "cronExpression", &p("trigger"))? {
            Some(expression) => cron_expression(&expression)
                .map_err(|problem| at(&p("trigger.cronExpression"), problem))?,
            None => Schedule::Every(
                millis(tm, "intervalMs", &p("trigger"))?
                    .ok_or_else(|| {
                        at(
                            &p("trigger"),
                            "a schedule needs cronExpression (\"*/5 * * * *\") or intervalMs",
                        )
                    })
                    .and_then(|d| {
                        if d < Duration::from_millis(MIN_SCHEDULE_MS) {
                            Err(at(
                                &p("trigger.intervalMs"),
                                format!("must be at least {MIN_SCHEDULE_MS} (one second)"),
                            ))
                        } else {
                            Ok(d)
                        }
                    })?,
            ),
        }),
        other => {
            return Err(at(
                &p("trigger.type"),
                format!("{other:?}: use immediate, event, schedule or manual"),
            ));
        }
    })
}

/// Every `outputTo` name of these steps and the steps under their conditions.
fn output_names(steps: &[Step], out: &mut Vec<String>) {
    for step in steps {
        out.extend(step.output_to.iter().cloned());
        if let StepKind::Condition {
            then, otherwise, ..
        } = &step.kind
        {
            output_names(then, out);
            output_names(otherwise, out);
        }
    }
}

/// Refuses a variable (an event field or another step's output) in program text
/// (docs/cli.md, "Values are data").
fn check_program_text(steps: &[Step], path: &str, outputs: &[String]) -> Res<()> {
    for (i, step) in steps.iter().enumerate() {
        let here = format!("{path}[{i}]");
        match &step.kind {
            StepKind::Command { program, args, .. } => program_text::check(program, args, outputs)
                .map_err(|(j, why)| at(&format!("{here}.params.args[{j}]"), why))?,
            StepKind::Condition {
                then, otherwise, ..
            } => {
                check_program_text(then, &format!("{here}.then"), outputs)?;
                check_program_text(otherwise, &format!("{here}.else"), outputs)?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn steps(v: Option<&Value>, path: &str) -> Res<Vec<Step>> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let items = v
        .as_array()
        .ok_or_else(|| at(path, "must be a list of steps"))?;
    items
        .iter()
        .enumerate()
        .map(|(i, s)| parse_step(s, &format!("{path}[{i}]")))
        .collect()
}

/// A `command` step: its program, arguments (no variable where a shell or interpreter
/// would read code), environment, folder inside the project, timeout and `wait`.
fn command_step(m: &serde_json::Map<String, Value>, path: &str) -> Res<StepKind> {
    let program = required(m, "command", path)?;
    let params = match m.get("params") {
        None => serde_json::Map::new(),
        Some(p) => obj(p, &format!("{path}.params"))?.clone(),
    };
    let pp = format!("{path}.params");
    let args = match params.get("args") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| at(&format!("{pp}.args[{i}]"), "must be a string"))
            })
            .collect::<Res<_>>()?,
        Some(_) => return Err(at(&format!("{pp}.args"), "must be a list of strings")),
    };
    let env = match params.get("env") {
        None => Vec::new(),
        Some(Value::Object(e)) => e
            .iter()
            .map(|(k, v)| {
                v.as_str()
                    .map(|s| (k.clone(), s.to_owned()))
                    .ok_or_else(|| at(&format!("{pp}.env.{k}"), "must be a string"))
            })
            .collect::<Res<_>>()?,
        Some(_) => return Err(at(&format!("{pp}.env"), "must be an object of strings")),
    };
    let wait = match params.get("wait") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(at(&format!("{pp}.wait"), "must be true or false")),
    };
    if let Some((name, _)) = env.iter().find(|(k, v)| {
        program_text::is_code_environment(k) && program_text::pipeline_reference(v, &[]).is_some()
    }) {
        return Err(at(
            &format!("{pp}.env.{name}"),
            format!(
                "a variable may not fill {name}: programs read it as code or as where to find code; set it to a constant"
            ),
        ));
    }
    program_text::check(&program, &args, &[])
        .map_err(|(i, why)| at(&format!("{pp}.args[{i}]"), why))?;
    let cwd = string(&params, "cwd", &pp)?;
    if let Some(dir) = &cwd
        && !stays_inside(dir)
    {
        return Err(at(
            &format!("{pp}.cwd"),
            "must be a folder inside the project (relative, without `..`)",
        ));
    }
    Ok(StepKind::Command {
        program,
        args,
        cwd,
        env,
        timeout: millis(&params, "timeoutMs", &pp)?,
        wait,
    })
}

/// A `watch` step: the execution it follows, its rules and when it ends.
fn watch_step(m: &serde_json::Map<String, Value>, path: &str) -> Res<StepKind> {
    let rules = match m.get("rules") {
        None => Vec::new(),
        Some(Value::Array(rs)) => rs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let rp = format!("{path}.rules[{i}]");
                let rm = obj(r, &rp)?;
                let pattern = required(rm, "pattern", &rp)?;
                let re = Regex::new(&pattern).map_err(|source| DefinitionError {
                    at: format!("{rp}.pattern"),
                    problem: Problem::Pattern { source },
                })?;
                Ok((re, required(rm, "classification", &rp)?))
            })
            .collect::<Res<_>>()?,
        Some(_) => {
            return Err(at(
                &format!("{path}.rules"),
                "must be a list of {pattern, classification}",
            ));
        }
    };
    let until = match string(m, "until", path)?.as_deref() {
        None | Some("finished") => Until::Finished,
        Some("error") => Until::Error,
        Some("match") => Until::Match,
        Some(other) => {
            return Err(at(
                &format!("{path}.until"),
                format!("{other:?}: use finished, error or match"),
            ));
        }
    };
    Ok(StepKind::Watch {
        execution_id: required(m, "executionId", path)?,
        rules,
        until,
    })
}

/// Checks one step (used for `sentinel step add/update` too).
pub fn parse_step(v: &Value, path: &str) -> Res<Step> {
    let m = obj(v, path)?;
    let output_to = string(m, "outputTo", path)?;
    if let Some(name) = &output_to
        && !name.chars().all(|c| c.is_alphanumeric() || c == '_')
    {
        return Err(at(
            &format!("{path}.outputTo"),
            "must be a variable name (letters, digits, _)",
        ));
    }
    let on_error = match string(m, "onError", path)?.as_deref() {
        None | Some("fail") => OnError::Fail,
        Some("skip") => OnError::Skip,
        Some("retry") => OnError::Retry,
        Some(other) => {
            return Err(at(
                &format!("{path}.onError"),
                format!("{other:?}: use fail, skip or retry"),
            ));
        }
    };
    let kind = match string(m, "type", path)?.as_deref() {
        Some("command") => command_step(m, path)?,
        Some("watch") => watch_step(m, path)?,
        Some("llm") => StepKind::Llm {
            prompt: required(m, "prompt", path)?,
            model: string(m, "model", path)?,
        },
        Some("condition") => StepKind::Condition {
            check: condition(&required(m, "check", path)?, &format!("{path}.check"))?,
            then: steps(m.get("then"), &format!("{path}.then"))?,
            otherwise: steps(m.get("else"), &format!("{path}.else"))?,
        },
        Some("sentinel") => {
            let d = m.get("definition").ok_or_else(|| {
                at(
                    &format!("{path}.definition"),
                    "is required (an inline definition)",
                )
            })?;
            StepKind::Sentinel {
                definition: Box::new(parse_definition(
                    d,
                    "nested",
                    &format!("{path}.definition"),
                )?),
                wait: m.get("await").and_then(Value::as_bool).unwrap_or(true),
            }
        }
        Some("emit") => StepKind::Emit {
            event: required(m, "event", path)?,
            data: string(m, "data", path)?,
        },
        other => {
            return Err(at(
                &format!("{path}.type"),
                format!("{other:?}: use command, llm, watch, condition, sentinel or emit"),
            ));
        }
    };
    Ok(Step {
        kind,
        output_to,
        on_error,
    })
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
