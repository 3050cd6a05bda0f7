//! Context headroom of a Musician from its `temp/<task>-status` file, with the figures
//! and verdict of the ecosystem's `check-context-headroom.sh` (kyle-skills/musician):
//! current %, trajectory per entry, headroom to the 80 % ceiling, agents completed and
//! in flight with their average cost, agents left, steps, self-correction; CAUTION at
//! 60 % or on a self-correction, CRITICAL at 75 % (the Musician's mandatory exit).
//!
//! Where the script fails on its own bug (its `grep -c … || echo 0` yields "0\n0" when
//! nothing matches, and the arithmetic then aborts), the count is 0, as its comments
//! mean; a negative average is written with its sign in the right place; and "N
//! completed" says N even when there is no average yet.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

/// Context use at which the Musician must have handed off.
pub const CEILING: i64 = 80;
pub const CAUTION_AT: i64 = 60;
pub const CRITICAL_AT: i64 = 75;

/// `[ctx: ` then digits: `[ctx: 42.5%]` reads 42, `[ctx: 65]` reads 65 (as `grep -oP
/// '\[ctx: \K[0-9]+'` does).
static CTX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[ctx: ([0-9]+)").expect("static regex"));
static AGENT_LAUNCHED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"agent.*launched|launched.*agent").expect("static regex"));
static AGENT_RETURNED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"agent.*returned|returned.*agent").expect("static regex"));
static STEP_STARTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"step.*started|started.*step").expect("static regex"));
static STEP_COMPLETED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"step.*completed|completed.*step").expect("static regex"));
static OF_TOTAL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"of ([0-9]+)").expect("static regex"));
static SELF_CORRECTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)self-correction").expect("static regex"));

/// The verdict, and the exit status it maps to (0 / 1 / 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Healthy,
    Caution,
    Critical,
    /// No `[ctx: …]` entry yet (exit 1).
    #[serde(rename = "no data")]
    NoData,
    /// No status file (exit 1).
    #[serde(rename = "no file")]
    FileMissing,
}

impl Level {
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Healthy => 0,
            Self::Caution | Self::NoData | Self::FileMissing => 1,
            Self::Critical => 2,
        }
    }
}

/// Every figure the script prints, from one status file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Headroom {
    pub level: Level,
    /// The last `[ctx: …]` value, percent.
    pub current: Option<i64>,
    /// How many `[ctx: …]` values the file holds.
    pub entries: usize,
    /// Average rise per entry, in tenths of a percent (`None` with fewer than 2).
    pub per_entry_x10: Option<i64>,
    /// `80 − current`.
    pub headroom: Option<i64>,
    pub agents_completed: u64,
    pub agents_in_flight: u64,
    /// Average context per completed agent, in tenths of a percent.
    pub per_agent_x10: Option<i64>,
    pub agents_left: Option<i64>,
    pub steps_completed: u64,
    /// The step in progress (the count of "step … started" lines).
    pub step_in_progress: Option<u64>,
    /// The last "of N" in the file.
    pub steps_total: Option<u64>,
    pub self_correction: bool,
    /// Status entries until 65 % (handoff preparation) and 75 % (exit) at the average
    /// rise per entry; 0 when already there, `None` without a rising trajectory.
    pub entries_to_handoff: Option<i64>,
    pub entries_to_exit: Option<i64>,
}

fn count(re: &Regex, text: &str) -> u64 {
    text.lines().filter(|l| re.is_match(l)).count() as u64
}

/// The most of a status file the report reads (the script reads it whole).
pub const MAX_STATUS_BYTES: u64 = 256 * 1024 * 1024;

/// A Musician's status file as the report reads it: a regular file reached without a
/// symlink, never blocking on a FIFO; `None` when there is no such file.
pub fn read_status(path: &std::path::Path) -> Option<String> {
    crate::core::safe_fs::read_regular(path, MAX_STATUS_BYTES)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The script's text report for `task`, from its status file in `temp`: what the
/// dashboard shows, here or on a remote project's host.
pub fn report(temp: &std::path::Path, task: &str) -> String {
    let file = temp.join(format!("{task}-status"));
    analyze(read_status(&file).as_deref()).render(task, &file.display().to_string())
}

/// Reads a status file's text (`None`: the file is missing).
pub fn analyze(text: Option<&str>) -> Headroom {
    let empty = Headroom {
        level: Level::FileMissing,
        current: None,
        entries: 0,
        per_entry_x10: None,
        headroom: None,
        agents_completed: 0,
        agents_in_flight: 0,
        per_agent_x10: None,
        agents_left: None,
        steps_completed: 0,
        step_in_progress: None,
        steps_total: None,
        self_correction: false,
        entries_to_handoff: None,
        entries_to_exit: None,
    };
    let Some(text) = text else {
        return empty;
    };
    let values: Vec<i64> = CTX
        .captures_iter(text)
        .filter_map(|c| c[1].parse().ok())
        .collect();
    let (Some(first), Some(last)) = (values.first().copied(), values.last().copied()) else {
        return Headroom {
            level: Level::NoData,
            ..empty
        };
    };
    let consumed = last - first;
    let headroom = CEILING - last;
    let per_entry_x10 = (values.len() > 1).then(|| consumed * 10 / (values.len() as i64 - 1));
    let launched = count(&AGENT_LAUNCHED, text);
    let returned = count(&AGENT_RETURNED, text);
    let per_agent_x10 = (returned > 0 && consumed > 0).then(|| consumed * 10 / returned as i64);
    let agents_left = per_agent_x10.filter(|a| *a > 0).map(|a| headroom * 10 / a);
    let started = count(&STEP_STARTED, text);
    let self_correction = SELF_CORRECTION.is_match(text);
    // The words agree with the numbers: no agent fitting in what is left is no health.
    let no_agent_fits = agents_left == Some(0);
    let level = if last >= CRITICAL_AT {
        Level::Critical
    } else if last >= CAUTION_AT || self_correction || no_agent_fits {
        Level::Caution
    } else {
        Level::Healthy
    };
    Headroom {
        level,
        current: Some(last),
        entries: values.len(),
        per_entry_x10,
        headroom: Some(headroom),
        agents_completed: returned,
        agents_in_flight: launched.saturating_sub(returned),
        per_agent_x10,
        agents_left,
        steps_completed: count(&STEP_COMPLETED, text),
        step_in_progress: (started > 0).then_some(started),
        steps_total: OF_TOTAL
            .captures_iter(text)
            .filter_map(|c| c[1].parse().ok())
            .last(),
        self_correction,
        entries_to_handoff: entries_to(65, last, per_entry_x10),
        entries_to_exit: entries_to(75, last, per_entry_x10),
    }
}

/// Entries until `threshold` at `per_entry_x10` tenths of a percent each (rounded up).
fn entries_to(threshold: i64, current: i64, per_entry_x10: Option<i64>) -> Option<i64> {
    if current >= threshold {
        return Some(0);
    }
    let step = per_entry_x10.filter(|p| *p > 0)?;
    Some(((threshold - current) * 10 + step - 1) / step)
}

/// Tenths as "1.5" / "-0.5".
fn tenths(x10: i64) -> String {
    let sign = if x10 < 0 { "-" } else { "" };
    format!("{sign}{}.{}", x10.abs() / 10, x10.abs() % 10)
}

impl Headroom {
    /// The report, line for line as the script prints it.
    pub fn render(&self, task: &str, file: &str) -> String {
        let mut out = format!("=== Context Headroom: {task} ===\n");
        let (Some(current), Some(headroom)) = (self.current, self.headroom) else {
            if self.level == Level::FileMissing {
                out.push_str(&format!("ERROR: Status file not found at {file}\n"));
                out.push_str("=== RESULT: FILE MISSING ===\n");
            } else {
                out.push_str("Current:     (no context entries found in status file)\n");
                out.push_str("=== RESULT: NO DATA ===\n");
            }
            return out;
        };
        out.push_str(&format!(
            "Current:     {current}% (entry {} of status file)\n",
            self.entries
        ));
        match self.per_entry_x10 {
            Some(x10) => {
                let plus = if x10 >= 0 { "+" } else { "" };
                out.push_str(&format!(
                    "Trajectory:  {plus}{}% per entry avg\n",
                    tenths(x10)
                ));
            }
            None => out.push_str("Trajectory:  (only 1 entry — insufficient data)\n"),
        }
        out.push_str(&format!(
            "Headroom:    {headroom}% remaining to {CEILING}% ceiling\n"
        ));
        match self.per_agent_x10 {
            Some(a) => {
                out.push_str(&format!(
                    "Agents:      {} completed, {} in-flight (~{}% per agent avg)\n",
                    self.agents_completed,
                    self.agents_in_flight,
                    tenths(a)
                ));
                if let Some(left) = self.agents_left {
                    out.push_str(&format!(
                        "Est. Agents Left: ~{left} agents fit in remaining budget\n"
                    ));
                }
            }
            None if self.agents_completed + self.agents_in_flight > 0 => {
                out.push_str(&format!(
                    "Agents:      {} completed, {} in-flight (no avg yet)\n",
                    self.agents_completed, self.agents_in_flight
                ));
            }
            None => out.push_str("Agents:      no agent entries found\n"),
        }
        match (self.step_in_progress, self.steps_total) {
            (Some(step), Some(total)) => out.push_str(&format!(
                "Steps:       {} of {total} completed, step {step} in progress\n",
                self.steps_completed
            )),
            (Some(step), None) => out.push_str(&format!(
                "Steps:       {} completed, step {step} in progress\n",
                self.steps_completed
            )),
            (None, _) => out.push_str("Steps:       no step entries found\n"),
        }
        if self.self_correction {
            out.push_str("Self-Correction: YES — estimates unreliable (6x risk)\n");
        } else {
            out.push_str("Self-Correction: NO\n");
        }
        let result = match self.level {
            Level::Critical => format!("CRITICAL (context at {current}%)"),
            Level::Caution if current >= CAUTION_AT => format!("CAUTION (context at {current}%)"),
            Level::Caution if self.self_correction => {
                "CAUTION (self-correction detected)".to_owned()
            }
            Level::Caution => "CAUTION (no further agent fits in the remaining budget)".to_owned(),
            _ => "HEALTHY".to_owned(),
        };
        out.push_str(&format!("=== RESULT: {result} ===\n"));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status file whose context goes through `values`, with agent lines.
    fn with_agents(values: &[i64]) -> String {
        let mut s = String::from(
            "bootstrap started [ctx: 5%]\ntask claimed [ctx: 8%]\nstep 1 of 4 started [ctx: 10%]\n",
        );
        for (i, v) in values.iter().enumerate() {
            s.push_str(&format!("step 1 agent {i} launched [ctx: {v}%]\n"));
            s.push_str(&format!("step 1 agent {i} returned [ctx: {v}%]\n"));
        }
        s
    }

    #[test]
    fn figures_written_out_by_hand() {
        // 5, 8, 10, 20, 20, 35, 35: consumed 30 over 6 intervals = 5.0 per entry;
        // 2 agents returned: 15.0 per agent; headroom 45; 45*10/150 = 3 agents left.
        let h = analyze(Some(&with_agents(&[20, 35])));
        assert_eq!(h.current, Some(35));
        assert_eq!(h.entries, 7);
        assert_eq!(h.per_entry_x10, Some(50));
        assert_eq!(h.headroom, Some(45));
        assert_eq!((h.agents_completed, h.agents_in_flight), (2, 0));
        assert_eq!(h.per_agent_x10, Some(150));
        assert_eq!(h.agents_left, Some(3));
        assert_eq!(
            (h.steps_completed, h.step_in_progress, h.steps_total),
            (0, Some(1), Some(4))
        );
        // 5.0 per entry: 65 % is (65-35)/5 = 6 entries away, 75 % 8.
        assert_eq!(
            (h.entries_to_handoff, h.entries_to_exit),
            (Some(6), Some(8))
        );
        assert_eq!(h.level, Level::Healthy);
        let text = h.render("task-03", "f");
        assert!(
            text.contains("Trajectory:  +5.0% per entry avg\n"),
            "{text}"
        );
        assert!(text.contains("Agents:      2 completed, 0 in-flight (~15.0% per agent avg)\n"));
        assert!(text.contains("Est. Agents Left: ~3 agents fit in remaining budget\n"));
        assert!(text.contains("Steps:       0 of 4 completed, step 1 in progress\n"));
        assert!(text.ends_with("=== RESULT: HEALTHY ===\n"));
    }

    #[test]
    fn the_verdict_at_each_threshold() {
        let cases: &[(i64, Level, u8)] = &[
            (35, Level::Healthy, 0),
            (60, Level::Caution, 1),
            (62, Level::Caution, 1),
            (75, Level::Critical, 2),
            (77, Level::Critical, 2),
            (85, Level::Critical, 2),
            (150, Level::Critical, 2),
        ];
        for (v, level, code) in cases {
            let h = analyze(Some(&format!("step 1 started [ctx: {v}%]\n")));
            assert_eq!((h.level, h.level.exit_code()), (*level, *code), "{v}%");
            assert_eq!(h.headroom, Some(80 - v));
        }
        // 77 %: 3 left to the ceiling, critical (75 % is the mandatory exit).
        let text = analyze(Some("x [ctx: 77%]\n")).render("task-03", "f");
        assert!(
            text.contains("Headroom:    3% remaining to 80% ceiling"),
            "{text}"
        );
        assert!(text.ends_with("=== RESULT: CRITICAL (context at 77%) ===\n"));
    }

    #[test]
    fn self_correction_is_caution_and_lines_without_agents_count_zero() {
        let h = analyze(Some(
            "step 1 started [ctx: 10%]\nstep 1 Self-Correction: redo [ctx: 20%]\n",
        ));
        assert!(h.self_correction);
        assert_eq!((h.level, h.level.exit_code()), (Level::Caution, 1));
        let text = h.render("task-03", "f");
        assert!(
            text.contains("Agents:      no agent entries found\n"),
            "{text}"
        );
        assert!(text.ends_with("=== RESULT: CAUTION (self-correction detected) ===\n"));
        // Launched but none returned yet.
        let h = analyze(Some("step 2 agent 1 launched [ctx: 30%]\n"));
        assert_eq!(
            (h.agents_completed, h.agents_in_flight, h.per_agent_x10),
            (0, 1, None)
        );
        assert!(
            h.render("t", "f")
                .contains("Agents:      0 completed, 1 in-flight (no avg yet)")
        );
    }

    #[test]
    fn context_values_are_read_like_the_script() {
        // The integer part of a decimal, a value without %, several on one line.
        let h = analyze(Some(
            "a [ctx: 42.5%]\nb [ctx: 65]\nc [ctx:70%] [ctx: 61%] [ctx: 66%]\n",
        ));
        assert_eq!(h.entries, 4);
        assert_eq!(h.current, Some(66));
        // 42 -> 66 over 3 intervals: 24*10/3 = 80.
        assert_eq!(h.per_entry_x10, Some(80));
        assert_eq!(analyze(Some("nothing here\n")).level, Level::NoData);
        assert_eq!(analyze(None).level, Level::FileMissing);
        // A falling context: the sign where it belongs.
        let h = analyze(Some("a [ctx: 50%]\nb [ctx: 47%]\n"));
        assert!(
            h.render("t", "f")
                .contains("Trajectory:  -3.0% per entry avg")
        );
    }

    #[test]
    fn healthy_is_never_said_beside_no_agent_left() {
        // The agents took 26.5 points each; at 58 % the 22 points left to the ceiling hold
        // none, though the context is under the caution line.
        let text = "step 1 started [ctx: 5%]\nstep 1 agent 1 launched [ctx: 5%]\nstep 1 agent 1 returned [ctx: 30%]\nstep 1 agent 2 launched [ctx: 30%]\nstep 1 agent 2 returned [ctx: 58%]\n";
        let h = analyze(Some(text));
        assert_eq!(h.agents_left, Some(0), "{h:?}");
        let report = h.render("task-01", "temp/task-01-status");
        assert!(report.contains("Est. Agents Left: ~0"), "{report}");
        assert!(!report.contains("HEALTHY"), "{report}");
        assert!(
            report.ends_with(
                "=== RESULT: CAUTION (no further agent fits in the remaining budget) ===\n"
            ),
            "{report}"
        );
    }
}
