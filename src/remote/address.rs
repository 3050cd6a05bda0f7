//! `ssh://[user@]host[:port]/absolute/path`: where a remote project is.

use std::fmt;

/// A project on another host.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RemoteProject {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
    /// The project folder on the host, absolute.
    pub path: String,
}

const SCHEME: &str = "ssh://";

/// An `ssh://` address that is not one, with the form expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{text} is not a remote project ({why}): write ssh://[user@]host[:port]/absolute/path, e.g. ssh://devbox/srv/orch."
)]
pub struct AddressError {
    /// The address as given, made printable.
    text: String,
    why: &'static str,
}

impl RemoteProject {
    /// Whether `text` is meant as a remote project (and should parse as one).
    pub fn is_remote(text: &str) -> bool {
        text.starts_with(SCHEME)
    }

    /// Parses an `ssh://` address; the error names the problem and the form expected.
    pub fn parse(text: &str) -> Result<Self, AddressError> {
        let bad = |why: &'static str| AddressError {
            text: crate::core::text::printable(text).into_owned(),
            why,
        };
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("it does not start with ssh://"))?;
        let slash = rest
            .find('/')
            .ok_or_else(|| bad("no /absolute/path after the host"))?;
        let (authority, path) = rest.split_at(slash);
        let (user, host_port) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = match host_port.strip_prefix('[') {
            // An IPv6 literal: [::1]:2222.
            Some(v6) => {
                let (h, after) = v6
                    .split_once(']')
                    .ok_or_else(|| bad("an unclosed [ in the host"))?;
                (h, after.strip_prefix(':'))
            }
            None => match host_port.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (host_port, None),
            },
        };
        let port = match port {
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| bad("the port is not a number from 1 to 65535"))?,
            ),
            None => None,
        };
        // Names ssh takes as names, never as options or shell text.
        let name_ok = |s: &str| {
            !s.is_empty()
                && !s.starts_with('-')
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-:%".contains(c))
        };
        if !name_ok(host) {
            return Err(bad(
                "the host is empty or holds characters a host name cannot",
            ));
        }
        if let Some(u) = user
            && !name_ok(u)
        {
            return Err(bad(
                "the user is empty or holds characters a user name cannot",
            ));
        }
        let path = percent_decoded(path).ok_or_else(|| bad("a bad %-escape in the path"))?;
        if path.chars().any(char::is_control) {
            return Err(bad("the path holds a control character"));
        }
        let trimmed = path.trim_end_matches('/');
        Ok(Self {
            user: user.map(str::to_owned),
            host: host.to_owned(),
            port,
            path: if trimmed.is_empty() {
                "/".into()
            } else {
                trimmed.to_owned()
            },
        })
    }

    /// `user@host` or `host`: what ssh is given as its destination.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

impl fmt::Display for RemoteProject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SCHEME)?;
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        f.write_str(&self.path)
    }
}

/// `%20` and friends, as URLs write a space in a path.
fn percent_decoded(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = path.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_is_read() {
        let p = RemoteProject::parse("ssh://ann@devbox:2222/srv/orch/").unwrap();
        assert_eq!(p.user.as_deref(), Some("ann"));
        assert_eq!((p.host.as_str(), p.port), ("devbox", Some(2222)));
        assert_eq!(p.path, "/srv/orch");
        assert_eq!(p.destination(), "ann@devbox");
        assert_eq!(p.to_string(), "ssh://ann@devbox:2222/srv/orch");
        let v6 = RemoteProject::parse("ssh://[::1]:22/a%20b").unwrap();
        assert_eq!(
            (v6.host.as_str(), v6.port, v6.path.as_str()),
            ("::1", Some(22), "/a b")
        );
        assert_eq!(RemoteProject::parse("ssh://h/").unwrap().path, "/");
    }

    #[test]
    fn what_ssh_or_a_shell_would_misread_is_refused() {
        for bad in [
            "ssh://devbox",
            "ssh:///srv",
            "ssh://-oProxyCommand=x/srv",
            "ssh://dev box/srv",
            "ssh://devbox:0/srv",
            "ssh://devbox:99999/srv",
            "ssh://-l@devbox/srv",
            "ssh://devbox/a%zz",
            "ssh://devbox/a%0ab",
            "ssh://de;vbox/srv",
        ] {
            let e = RemoteProject::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains("ssh://[user@]host[:port]/absolute/path"),
                "{bad}: {e}"
            );
        }
    }
}
