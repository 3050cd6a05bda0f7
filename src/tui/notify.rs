//! Desktop notifications: kitty's OSC 99, else OSC 9 / OSC 777, else the bell; or a user
//! command (argv, never a shell). Text from the database or logs is stripped of control
//! characters before it goes into an escape sequence.

use std::io::Write;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notifier {
    Off,
    Terminal(Flavor),
    /// argv template with `{title}` and `{body}`.
    Command(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// kitty: OSC 99 with a title and a body.
    Kitty,
    /// iTerm2, `WezTerm`, Windows Terminal: OSC 9.
    Osc9,
    /// VTE terminals (GNOME Terminal, Tilix): OSC 777.
    Osc777,
    Bell,
}

impl Notifier {
    /// From the `ui.notifications` setting and the environment.
    pub fn from_settings(mode: &str, command: &[String]) -> Self {
        match mode {
            "off" => Self::Off,
            "command" if !command.is_empty() => Self::Command(command.to_vec()),
            _ => Self::Terminal(detect(|k| std::env::var(k).ok())),
        }
    }

    /// Raises one notification. Terminal flavours are written to `out`.
    pub fn notify(&self, title: &str, body: &str, out: &mut dyn Write) {
        match self {
            Self::Off => {}
            Self::Terminal(flavor) => {
                let _ = out.write_all(sequence(*flavor, title, body).as_bytes());
                let _ = out.flush();
            }
            Self::Command(argv) => {
                let filled: Vec<String> = argv
                    .iter()
                    .map(|a| {
                        a.replace("{title}", &clean(title))
                            .replace("{body}", &clean(body))
                    })
                    .collect();
                let spawned = tokio::process::Command::new(&filled[0])
                    .args(&filled[1..])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn();
                if let Ok(mut child) = spawned {
                    // Reap it so it never lingers as a zombie.
                    tokio::spawn(async move {
                        let _ = child.wait().await;
                    });
                }
            }
        }
    }
}

/// Which escape sequence this terminal understands, from its environment.
pub fn detect(env: impl Fn(&str) -> Option<String>) -> Flavor {
    let term = env("TERM").unwrap_or_default();
    let program = env("TERM_PROGRAM").unwrap_or_default();
    if env("KITTY_WINDOW_ID").is_some() || term == "xterm-kitty" {
        Flavor::Kitty
    } else if matches!(program.as_str(), "iTerm.app" | "WezTerm" | "ghostty")
        || env("WT_SESSION").is_some()
    {
        Flavor::Osc9
    } else if env("VTE_VERSION").is_some() {
        Flavor::Osc777
    } else {
        Flavor::Bell
    }
}

/// The escape sequence for one notification.
pub fn sequence(flavor: Flavor, title: &str, body: &str) -> String {
    let (title, body) = (clean(title), clean(body));
    match flavor {
        Flavor::Kitty => format!(
            "\x1b]99;i=maestro:d=0:p=title;{title}\x1b\\\x1b]99;i=maestro:d=1:p=body;{body}\x1b\\"
        ),
        Flavor::Osc9 => format!("\x1b]9;{title}: {body}\x07"),
        Flavor::Osc777 => format!("\x1b]777;notify;{title};{}\x07", body.replace(';', ",")),
        Flavor::Bell => "\x07".to_owned(),
    }
}

/// No control, bidi or zero-width characters (they would end or forge the escape
/// sequence, or draw the text as other text): the one sanitizer's rule, dropped rather
/// than marked inside a desktop notification.
fn clean(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() && !crate::core::text::is_invisible_format(*c))
        .take(300)
        .collect()
}

/// OSC 52: puts `text` on the system clipboard through the terminal.
pub fn clipboard_sequence(text: &str) -> String {
    use base64::Engine;
    format!(
        "\x1b]52;c;{}\x07",
        base64::engine::general_purpose::STANDARD.encode(text)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_follows_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(detect(env(&[("KITTY_WINDOW_ID", "3")])), Flavor::Kitty);
        assert_eq!(detect(env(&[("TERM", "xterm-kitty")])), Flavor::Kitty);
        assert_eq!(detect(env(&[("TERM_PROGRAM", "WezTerm")])), Flavor::Osc9);
        assert_eq!(detect(env(&[("VTE_VERSION", "7000")])), Flavor::Osc777);
        assert_eq!(detect(env(&[("TERM", "xterm-256color")])), Flavor::Bell);
    }

    #[test]
    fn database_text_cannot_break_out_of_the_sequence() {
        let s = sequence(Flavor::Kitty, "task-01\x1b]0;pwned\x07", "body\x1b\\x");
        assert_eq!(
            s.matches('\x1b').count(),
            4,
            "only our own four escapes: {s:?}"
        );
        assert!(s.contains("task-01]0;pwned"));
        let s = sequence(Flavor::Osc777, "t", "a;b");
        assert_eq!(s, "\x1b]777;notify;t;a,b\x07");
    }

    #[test]
    fn clipboard_is_base64() {
        assert_eq!(clipboard_sequence("hi"), "\x1b]52;c;aGk=\x07");
    }
}
