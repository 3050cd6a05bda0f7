//! Which words of a command step's argv another program reads as code.
//!
//! A pipeline variable holds text from outside (a Musician's log line in
//! `$event.detail`, a permission prompt, a command's output), so it may fill a word a
//! program takes as data, never one it parses as a program: a shell's `-c` script, an
//! interpreter's `-e`/`-c` text, an awk or sed program, a `jq` filter, a remote command
//! over ssh, the options of a wrapper (`timeout`, `env`, `nice`, …) that decide what
//! runs. Such a definition is refused when it is trusted and when it is loaded, and the
//! runner never interpolates those words: they reach the program exactly as written.
//!
//! The safe forms pass the value as an argument of its own (`sh -c 'echo "$1"' _
//! "$event.detail"`) or through the environment (`$MAESTRO_EVENT_DETAIL`).

use std::sync::LazyLock;

use regex::Regex;

/// What a word of the argv is to the program that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Data: a program's own argument.
    Plain,
    /// Data, where the program still reads options: a value starting with `-` would be
    /// taken as one (`perl -e CODE $x`), so such a value is refused when the step runs.
    OptionsOpen,
    /// Program text: a script, an expression, a remote command.
    Code,
    /// An option, its argument, or an operand before the command that decides what runs
    /// or how (a wrapper's options, a script's path, `env NAME=VALUE`).
    Control,
}

impl Role {
    /// Whether a pipeline variable may fill this word.
    pub fn takes_values(self) -> bool {
        matches!(self, Self::Plain | Self::OptionsOpen)
    }
}

mod tables;

use tables::{
    INTERPRETERS, Interpreter, JOINS_INTO_SHELL, SHELLS, SSH_WITH_ARGUMENT, WRAPPERS, Wrapper,
};

/// A program's name as the tables list it: no folder, no version (`/usr/bin/python3.12`
/// is `python`), lower case.
fn base(word: &str) -> String {
    let name = word.rsplit('/').next().unwrap_or(word);
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
        .to_ascii_lowercase()
}

/// The role of each word of `args` when `program` runs them.
pub fn roles(program: &str, args: &[String]) -> Vec<Role> {
    let words: Vec<&str> = std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .collect();
    let mut roles = vec![Role::Plain; words.len()];
    command_at(&words, 0, &mut roles);
    roles.remove(0);
    roles
}

/// Reads the command that starts at `words[at]` (its program).
fn command_at(words: &[&str], at: usize, roles: &mut [Role]) {
    let name = base(words[at]);
    if name == "busybox" && at + 1 < words.len() {
        roles[at + 1] = Role::Control;
        return command_at(words, at + 1, roles);
    }
    if SHELLS.contains(&name.as_str()) {
        shell(words, at + 1, roles);
    } else if let Some(lang) = INTERPRETERS
        .iter()
        .find(|i| i.names.contains(&name.as_str()))
    {
        interpreter(lang, words, at + 1, roles);
    } else if let Some(w) = WRAPPERS.iter().find(|w| w.names.contains(&name.as_str())) {
        wrapper(w, words, at + 1, roles);
    } else if JOINS_INTO_SHELL.contains(&name.as_str()) {
        joined(&name, words, at + 1, roles);
    } else if name == "make" || name == "gmake" {
        // `NAME=VALUE` on make's command line is a make expression (`$(shell …)`).
        for i in at + 1..words.len() {
            if words[i].contains('=') || words[i].starts_with('-') {
                roles[i] = Role::Control;
            }
        }
    } else if name == "git" {
        git(words, at + 1, roles);
    } else {
        // Any other program: a shell or interpreter it runs with program text
        // (`find … -exec sh -c SCRIPT`, `parallel bash -c …`) is read the same way.
        if let Some(i) = (at + 1..words.len()).find(|&i| runs_code_from(words, i)) {
            command_at(words, i, roles);
        }
    }
}

/// Whether `words[i]` names a shell or interpreter followed by a code option.
fn runs_code_from(words: &[&str], i: usize) -> bool {
    let name = base(words[i]);
    let next = words.get(i + 1).copied().unwrap_or("");
    if SHELLS.contains(&name.as_str()) {
        return next.starts_with('-') && !next.starts_with("--") && next.contains('c');
    }
    INTERPRETERS
        .iter()
        .find(|l| l.names.contains(&name.as_str()))
        .is_some_and(|l| l.code.iter().any(|c| option_matches(next, c)) || l.first_operand_is_code)
}

/// Whether `word` is option `opt`, alone, attached (`-ecode`), or `--opt=value`.
fn option_matches(word: &str, opt: &str) -> bool {
    if opt.starts_with("--") || !opt.starts_with('-') {
        word == opt || word.starts_with(&format!("{opt}="))
    } else {
        word == opt || (word.starts_with(opt) && !word.starts_with("--"))
    }
}

/// Whether `word` is `opt` without its argument attached (so the next word is it).
fn takes_next(word: &str, opt: &str) -> bool {
    word == opt
}

fn is_option(word: &str) -> bool {
    word.len() > 1 && (word.starts_with('-') || word.starts_with('+'))
}

fn shell(words: &[&str], mut i: usize, roles: &mut [Role]) {
    let mut script = false;
    let mut from_stdin = false;
    while i < words.len() {
        let w = words[i];
        if w == "--" || w == "-" {
            roles[i] = Role::Control;
            i += 1;
            break;
        }
        if !is_option(w) {
            break;
        }
        roles[i] = Role::Control;
        i += 1;
        if let Some(long) = w.strip_prefix("--") {
            if matches!(long, "rcfile" | "init-file") && i < words.len() {
                roles[i] = Role::Control;
                i += 1;
            }
            continue;
        }
        let letters = &w[1..];
        script |= letters.contains('c');
        from_stdin |= letters.contains('s');
        // `-o OPTION` / `+O SHOPT`: each takes the next word.
        for _ in letters.chars().filter(|c| matches!(c, 'o' | 'O')) {
            if i < words.len() {
                roles[i] = Role::Control;
                i += 1;
            }
        }
    }
    if i < words.len() && (script || !from_stdin) {
        // The script (`-c`), or the file of the script to run.
        roles[i] = if script { Role::Code } else { Role::Control };
    }
}

fn interpreter(lang: &Interpreter, words: &[&str], mut i: usize, roles: &mut [Role]) {
    let mut had_program = false;
    while i < words.len() {
        let w = words[i];
        if w == "--" {
            roles[i] = Role::Control;
            i += 1;
            break;
        }
        // `node eval CODE`-style subcommands are listed with the code options.
        let subcommand = !w.starts_with('-') && lang.code.contains(&w);
        if !is_option(w) && !subcommand {
            break;
        }
        roles[i] = Role::Control;
        i += 1;
        if let Some(opt) = lang.code.iter().find(|o| option_matches(w, o)) {
            had_program = true;
            if takes_next(w, opt) && i < words.len() {
                roles[i] = Role::Code;
                i += 1;
            } else {
                roles[i - 1] = Role::Code;
            }
            if lang.code_ends_options {
                return;
            }
        } else if let Some(opt) = lang.program_file.iter().find(|o| option_matches(w, o)) {
            had_program = true;
            if takes_next(w, opt) && i < words.len() {
                roles[i] = Role::Control;
                i += 1;
            }
        } else if let Some(opt) = lang.with_argument.iter().find(|o| option_matches(w, o)) {
            let module = *opt == "-m" && lang.code_ends_options;
            if takes_next(w, opt) && i < words.len() {
                roles[i] = Role::Control;
                i += 1;
            }
            if module {
                return;
            }
        } else if lang.names.contains(&"jq") && matches!(w, "--arg" | "--argjson") {
            // `jq --arg NAME VALUE`: the value is data, the name is not.
            if i < words.len() {
                roles[i] = Role::Control;
            }
            i = (i + 2).min(words.len());
        } else if lang.names.contains(&"jq") && matches!(w, "--slurpfile" | "--rawfile") {
            // `jq --rawfile NAME FILE`: both decide what the filter reads.
            for _ in 0..2 {
                if i < words.len() {
                    roles[i] = Role::Control;
                    i += 1;
                }
            }
        }
    }
    if i >= words.len() {
        return;
    }
    if had_program {
        // Program text came with an option; what follows is data, but a value that
        // starts with `-` would still be read as an option.
        roles[i] = Role::OptionsOpen;
    } else if lang.first_operand_is_code {
        roles[i] = Role::Code;
    } else {
        // The script file to run.
        roles[i] = Role::Control;
    }
}

fn wrapper(w: &Wrapper, words: &[&str], mut i: usize, roles: &mut [Role]) {
    while i < words.len() {
        let word = words[i];
        if word == "--" {
            roles[i] = Role::Control;
            i += 1;
            break;
        }
        if w.assignments && !word.starts_with('-') && word.contains('=') {
            roles[i] = Role::Control;
            i += 1;
            continue;
        }
        if !is_option(word) {
            break;
        }
        roles[i] = Role::Control;
        i += 1;
        if let Some(opt) = w.code.iter().find(|o| option_matches(word, o)) {
            if takes_next(word, opt) && i < words.len() {
                roles[i] = Role::Code;
            } else {
                roles[i - 1] = Role::Code;
            }
            // The shell command is the whole of what runs; later words are the shell's.
            for r in roles.iter_mut().skip(i) {
                *r = Role::Code;
            }
            return;
        }
        if w.with_argument.iter().any(|o| takes_next(word, o)) && i < words.len() {
            roles[i] = Role::Control;
            i += 1;
        }
    }
    for _ in 0..w.operands {
        if i < words.len() {
            roles[i] = Role::Control;
            i += 1;
        }
    }
    // `flock FILE -c CMD`, `su USER -c CMD`: the shell command after the operands.
    if i < words.len() && w.code.iter().any(|o| option_matches(words[i], o)) {
        for r in roles.iter_mut().skip(i) {
            *r = Role::Code;
        }
        roles[i] = Role::Control;
        return;
    }
    if i < words.len() {
        roles[i] = Role::Control;
        command_at(words, i, roles);
    }
}

/// `watch CMD…`, `ssh [options] HOST CMD…`: every word of the command is shell text.
fn joined(name: &str, words: &[&str], mut i: usize, roles: &mut [Role]) {
    if name == "ssh" || name == "rsh" || name == "mosh" {
        while i < words.len() && is_option(words[i]) {
            let w = words[i];
            roles[i] = Role::Control;
            i += 1;
            let last = w.chars().last().unwrap_or(' ');
            if w.len() == 2 && SSH_WITH_ARGUMENT.contains(last) && i < words.len() {
                roles[i] = Role::Control;
                i += 1;
            }
        }
        if i < words.len() {
            roles[i] = Role::Control; // the destination
            i += 1;
        }
    }
    for r in roles.iter_mut().skip(i) {
        *r = Role::Code;
    }
}

/// git runs programs named by `-c core.sshCommand=…`, `--upload-pack`, `--exec`.
fn git(words: &[&str], at: usize, roles: &mut [Role]) {
    const WITH_PROGRAM: [&str; 5] = [
        "--upload-pack",
        "--receive-pack",
        "--exec",
        "-u",
        "--config",
    ];
    let mut i = at;
    while i < words.len() {
        let w = words[i];
        let takes_word = matches!(w, "-c" | "--config-env" | "-C") || WITH_PROGRAM.contains(&w);
        if takes_word || WITH_PROGRAM.iter().any(|o| option_matches(w, o)) {
            roles[i] = Role::Control;
            if takes_word && i + 1 < words.len() {
                roles[i + 1] = Role::Control;
                i += 1;
            }
        }
        i += 1;
    }
}

static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*)")
        .expect("static regex")
});

/// The first pipeline reference in `word`: `$event…`, any `$name.field` or `$name[0]`,
/// or a bare `$name` that is one of `variables` (the definition's `outputTo` names).
/// A bare `$HOME` is a shell's own variable and stays as it is.
pub fn pipeline_reference<'w>(word: &'w str, variables: &[String]) -> Option<&'w str> {
    REFERENCE.captures_iter(word).find_map(|c| {
        let name = &c[1];
        let accessed = !c[2].is_empty();
        (accessed || name == "event" || variables.iter().any(|v| v == name))
            .then(|| c.get(0).map_or("", |m| m.as_str()))
    })
}

/// Refuses a command whose program text (or an option that decides what runs) holds a
/// pipeline variable. The error names the argument (`args[1]`, counted from 0) and the
/// safe form.
pub fn check(program: &str, args: &[String], variables: &[String]) -> Result<(), (usize, String)> {
    for (i, (role, word)) in roles(program, args).into_iter().zip(args).enumerate() {
        if role.takes_values() {
            continue;
        }
        let Some(reference) = pipeline_reference(word, variables) else {
            continue;
        };
        let field = reference
            .trim_start_matches("$event.")
            .split(['.', '['])
            .next()
            .unwrap_or("detail");
        let env = if reference.starts_with("$event.") {
            format!("MAESTRO_EVENT_{}", env_name(field))
        } else {
            "MAESTRO_EVENT_DETAIL".to_owned()
        };
        let what = match role {
            Role::Code => "it is program text that a shell or interpreter runs".to_owned(),
            _ => format!(
                "it would decide what {program} runs (an option, or the program or script to run)"
            ),
        };
        return Err((
            i,
            format!(
                "`{reference}` may not fill this word: {what}, and event text is data, never code. Pass the value as an argument of its own after the program text and quote it there (\"args\": [\"-c\", \"printf '%s\\\\n' \\\"$1\\\"\", \"_\", \"{reference}\"]), or read it from the environment (\"${env}\"); see docs/cli.md, \"Values are data\""
            ),
        ));
    }
    Ok(())
}

/// Environment variables a shell, the dynamic linker or an interpreter reads as code or
/// as where to find code: a pipeline variable may not fill them.
pub fn is_code_environment(name: &str) -> bool {
    const NAMES: [&str; 22] = [
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PROMPT_COMMAND",
        "PS1",
        "PS4",
        "IFS",
        "PATH",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "NODE_OPTIONS",
        "NODE_PATH",
        "RUBYOPT",
        "RUBYLIB",
        "EDITOR",
        "VISUAL",
        "PAGER",
    ];
    NAMES.contains(&name)
        || name.starts_with("LD_")
        || name.starts_with("GIT_")
        || name.starts_with("BASH_FUNC_")
        || name.starts_with("DYLD_")
}

/// `task_id` → `TASK_ID`: the environment name of an event field.
pub fn env_name(field: &str) -> String {
    field
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
