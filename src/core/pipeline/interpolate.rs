//! `$name.field` references in step text, replaced by the pipeline's variables.
//!
//! Variables hold data from outside (a Musician's log line in `$event.detail`, a
//! command's output): a value may never become code. So inside the program text of a
//! shell (`sh -c SCRIPT`, `bash -lc SCRIPT`, …) every value is shell-quoted, and a
//! reference inside another interpreter's program text (`python -c`, `node -e`, …) is
//! refused when the definition is loaded, with the safe form: pass the value as an
//! argument of its own (`["-c", "echo \"$1\"", "name", "$event.detail"]`).

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::core::pipeline::expr::{self, Access};

static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*)")
        .expect("static regex")
});

/// Programs whose `-c` argument is shell code.
const SHELLS: [&str; 7] = ["sh", "bash", "dash", "zsh", "ksh", "ash", "mksh"];
/// Programs whose `-c`/`-e` argument is code of another language.
const INTERPRETERS: [&str; 8] = [
    "python",
    "python3",
    "perl",
    "ruby",
    "node",
    "php",
    "lua",
    "osascript",
];

/// What kind of program text an argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Shell,
    Other,
}

/// The argument of `args` that is program text, if any: the one after the first
/// option cluster holding `c` (shells, `python -c`) or `e` (`perl -e`, `node -e`).
/// `program` may be `env` or a path; a wrapped `env sh -c …` is seen through.
pub fn code_argument(program: &str, args: &[String]) -> Option<(usize, Code)> {
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_owned();
    let mut kind = None;
    let mut words = std::iter::once(program.to_owned())
        .chain(args.iter().cloned())
        .enumerate();
    // The interpreter: the program itself, or the first word after `env` and its
    // options (`-u NAME` and `-C DIR` take one more word) and assignments.
    let mut through_env = false;
    let mut skip_next = false;
    for (i, word) in words.by_ref() {
        let name = base(&word);
        let name = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        if skip_next {
            skip_next = false;
            continue;
        }
        if i == 0 && name == "env" {
            through_env = true;
            continue;
        }
        if through_env && (word.starts_with('-') || word.contains('=')) {
            skip_next = matches!(word.as_str(), "-u" | "-C" | "--unset" | "--chdir");
            continue;
        }
        if SHELLS.contains(&name) {
            kind = Some(Code::Shell);
        } else if INTERPRETERS.iter().any(|p| p.trim_end_matches('3') == name) {
            kind = Some(Code::Other);
        }
        break;
    }
    let kind = kind?;
    for (i, word) in words {
        let flags = word.strip_prefix('-')?;
        if flags.starts_with('-') {
            continue;
        }
        let code_flag = match kind {
            Code::Shell => flags.contains('c'),
            Code::Other => flags.contains('c') || flags.contains('e'),
        };
        if code_flag {
            // Words count the program as 0: the next word, the program text, is
            // argument `i`.
            return Some((i, kind)).filter(|(i, _)| *i < args.len());
        }
    }
    None
}

/// Refuses a definition that puts a `$variable` into another interpreter's program
/// text. `args` are the step's arguments as written; the error names the safe form.
pub fn check_code_arguments(program: &str, args: &[String]) -> Result<(), String> {
    if let Some((i, Code::Other)) = code_argument(program, args)
        && let Some(code) = args.get(i)
        && let Some(r) = REFERENCE.find(code)
    {
        return Err(format!(
            "`{}` inside a {program} program would be run as code; pass it as an argument of its own after the program (for example sys.argv[1] or process.argv[2]) and keep the program text constant",
            r.as_str()
        ));
    }
    Ok(())
}

/// A command step's arguments with their references replaced: values in a shell's
/// program text are shell-quoted, other arguments take values as they are (an
/// argument is never split or interpreted).
pub fn command_args(
    program: &str,
    args: &[String],
    vars: &HashMap<String, Value>,
) -> Result<Vec<String>, String> {
    let code = code_argument(program, args);
    args.iter()
        .enumerate()
        .map(|(i, a)| match code {
            Some((c, Code::Shell)) if c == i => interpolate_with(a, vars, shell_quote),
            _ => interpolate(a, vars),
        })
        .collect()
}

fn shell_quote(value: &str) -> Result<String, String> {
    shlex::try_quote(value)
        .map(std::borrow::Cow::into_owned)
        .map_err(|_| "a value holds a NUL byte and cannot be passed to a shell".to_owned())
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
pub fn interpolate(text: &str, vars: &HashMap<String, Value>) -> Result<String, String> {
    interpolate_with(text, vars, |s| Ok(s.to_owned()))
}

fn interpolate_with(
    text: &str,
    vars: &HashMap<String, Value>,
    quote: impl Fn(&str) -> Result<String, String>,
) -> Result<String, String> {
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
        out.push_str(&quote(&value)?);
        last = whole.end;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

/// A whole-string reference (`"$push"`) keeps its JSON value; other text interpolates.
pub fn interpolate_value(text: &str, vars: &HashMap<String, Value>) -> Result<Value, String> {
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
    fn program_text_is_found_through_env_paths_and_option_clusters() {
        assert_eq!(
            code_argument("sh", &args(&["-c", "x"])),
            Some((1, Code::Shell))
        );
        assert_eq!(
            code_argument("/bin/bash", &args(&["-lc", "x"])),
            Some((1, Code::Shell))
        );
        assert_eq!(
            code_argument("env", &args(&["-u", "X", "A=1", "bash", "-ec", "x"])),
            Some((5, Code::Shell))
        );
        assert_eq!(
            code_argument("python3", &args(&["-c", "x"])),
            Some((1, Code::Other))
        );
        assert_eq!(
            code_argument("node", &args(&["-e", "x"])),
            Some((1, Code::Other))
        );
        assert_eq!(code_argument("cargo", &args(&["-c", "x"])), None);
        assert_eq!(code_argument("sh", &args(&["script.sh", "-c"])), None);
    }

    #[test]
    fn a_value_in_shell_code_is_quoted_and_elsewhere_stays_as_it_is() {
        let vars = HashMap::from([(
            "event".to_owned(),
            json!({"detail": "step 2 $(touch pwned) `id`; rm -rf ~ 'x'"}),
        )]);
        let out = command_args(
            "sh",
            &args(&["-c", "echo $event.detail", "name", "$event.detail"]),
            &vars,
        )
        .expect("interpolated");
        assert!(out[1].starts_with("echo 'step 2"), "{}", out[1]);
        assert_eq!(out[3], "step 2 $(touch pwned) `id`; rm -rf ~ 'x'");
        // The quoted script, run by a real shell, prints the value and runs nothing.
        let dir = tempfile::tempdir().expect("tempdir");
        let ran = std::process::Command::new("sh")
            .args(&out[..2])
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
    fn a_variable_in_another_interpreters_code_is_refused_with_the_safe_form() {
        let err = check_code_arguments("python3", &args(&["-c", "print('$event.detail')"]))
            .expect_err("refused");
        assert!(
            err.contains("$event.detail") && err.contains("sys.argv[1]"),
            "{err}"
        );
        assert!(
            check_code_arguments(
                "python3",
                &args(&["-c", "import sys; print(sys.argv[1])", "$event.detail"])
            )
            .is_ok()
        );
    }
}
