//! `$name.field` references in step text, replaced by the pipeline's variables.
//!
//! Variables hold data from outside (a Musician's log line in `$event.detail`, a
//! command's output): a value may never become code. Which words of a command another
//! program parses as code is [`program_text`]'s to say: those are refused at load when
//! they hold a variable and are passed exactly as written; only data words are filled.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::core::pipeline::expr::{self, Access, ConditionError};
use crate::core::pipeline::program_text::{self, Role};

static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*)")
        .expect("static regex")
});

/// Why a step's text cannot be filled in.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FillError {
    /// A reference to a variable that is not set.
    #[error(transparent)]
    Reference(#[from] ConditionError),
    /// A word another program reads as code holds a variable.
    #[error("args[{index}]: {why}")]
    ProgramText { index: usize, why: String },
    #[error(
        "args[{index}]: its value starts with `-` and {program} would read it as an option; put \"--\" before it in the definition"
    )]
    ReadAsOption { index: usize, program: String },
}

/// A command step's arguments with the variables filled in the words that are data.
/// Program text and the options that decide what runs are passed as written (a `$HOME`
/// there is the shell's); one holding a pipeline variable is refused, as at load. A
/// value that starts with `-` where the program still reads options is refused too.
pub fn command_args(
    program: &str,
    args: &[String],
    vars: &HashMap<String, Value>,
) -> Result<Vec<String>, FillError> {
    let names: Vec<String> = vars.keys().cloned().collect();
    program_text::check(program, args, &names)
        .map_err(|(index, why)| FillError::ProgramText { index, why })?;
    program_text::roles(program, args)
        .into_iter()
        .zip(args)
        .enumerate()
        .map(|(i, (role, a))| match role {
            Role::Plain => Ok(interpolate(a, vars)?),
            Role::OptionsOpen => {
                let value = interpolate(a, vars)?;
                if value.starts_with('-') && a.starts_with('$') {
                    Err(FillError::ReadAsOption {
                        index: i,
                        program: program.to_owned(),
                    })
                } else {
                    Ok(value)
                }
            }
            Role::Code | Role::Control => Ok(a.clone()),
        })
        .collect()
}

fn path_of(accessors: &str) -> Vec<Access> {
    let mut out = Vec::new();
    let mut rest = accessors;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            out.push(Access::Field(r[..end].to_owned()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').unwrap_or(r.len());
            out.push(Access::Index(r[..end].parse().unwrap_or(usize::MAX)));
            rest = r.get(end + 1..).unwrap_or("");
        } else {
            break;
        }
    }
    out
}

/// Replaces each `$name.field` in text with its value (strings as they are, other
/// values as JSON). A missing variable is a step error.
pub fn interpolate(text: &str, vars: &HashMap<String, Value>) -> Result<String, ConditionError> {
    let mut out = String::new();
    let mut last = 0;
    for c in REFERENCE.captures_iter(text) {
        let whole = c.get(0).map_or(0..0, |m| m.range());
        out.push_str(&text[last..whole.start]);
        let v = expr::lookup(vars, &c[1], &path_of(&c[2]))?;
        let value = match v {
            Value::String(s) => s,
            Value::Array(items) if items.iter().all(Value::is_string) => items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        };
        out.push_str(&value);
        last = whole.end;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

/// A whole-string reference (`"$push"`) keeps its JSON value; other text interpolates.
pub fn interpolate_value(
    text: &str,
    vars: &HashMap<String, Value>,
) -> Result<Value, ConditionError> {
    if let Some(c) = REFERENCE.captures(text)
        && c.get(0).is_some_and(|m| m.range() == (0..text.len()))
    {
        return expr::lookup(vars, &c[1], &path_of(&c[2]));
    }
    interpolate(text, vars).map(Value::String)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_value_travels_as_an_argument_and_program_text_is_passed_as_written() {
        let vars = HashMap::from([(
            "event".to_owned(),
            json!({"detail": "step 2 $(touch pwned) `id`; rm -rf ~ 'x'"}),
        )]);
        let out = command_args(
            "sh",
            &args(&[
                "-c",
                "printf '%s\\n' \"$1\" \"$HOME\" > /dev/null; printf '%s\\n' \"$1\"",
                "name",
                "$event.detail",
            ]),
            &vars,
        )
        .expect("interpolated");
        assert_eq!(out[3], "step 2 $(touch pwned) `id`; rm -rf ~ 'x'");
        // Run by a real shell, it prints the value and runs nothing.
        let dir = tempfile::tempdir().expect("tempdir");
        let ran = std::process::Command::new("sh")
            .args(&out)
            .current_dir(dir.path())
            .output()
            .expect("sh");
        assert_eq!(
            String::from_utf8_lossy(&ran.stdout),
            "step 2 $(touch pwned) `id`; rm -rf ~ 'x'\n"
        );
        assert!(!dir.path().join("pwned").exists());
    }

    #[test]
    fn a_variable_in_program_text_is_refused_even_when_the_definition_was_not_checked() {
        let vars = HashMap::from([("event".to_owned(), json!({"detail": "$(touch pwned)"}))]);
        let err = command_args("sh", &args(&["-c", "echo $event.detail"]), &vars)
            .expect_err("refused")
            .to_string();
        assert!(err.starts_with("args[1]:"), "{err}");
        let err = command_args(
            "perl",
            &args(&["-e", "print @ARGV", "$event.detail"]),
            &HashMap::from([("event".to_owned(), json!({"detail": "-esystem(1)"}))]),
        )
        .expect_err("refused")
        .to_string();
        assert!(err.contains("--"), "{err}");
    }
}
