//! `maestro usage` as text: one line per session when the terminal is wide enough (or
//! `--wide`), else two lines per session that fit its width: the figures that matter
//! first (task, session, model, total, cost, context), the breakdown and times below.

use serde_json::Value;

use crate::core::text::printable;

/// The widest the one-line table gets (its header at the usual model name's width).
const ONE_LINE_WIDTH: usize = 160;

/// The width to fit: `--wide` fits nothing, else `COLUMNS`, the terminal's, or 80 when
/// the output is not a terminal and says nothing.
pub fn width(wide: bool) -> usize {
    if wide {
        return usize::MAX;
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
        .or_else(|| {
            use std::io::IsTerminal;
            std::io::stdout()
                .is_terminal()
                .then(crossterm::terminal::size)
                .and_then(Result::ok)
                .map(|(c, _)| usize::from(c))
        })
        .unwrap_or(80)
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn cost(v: &Value) -> String {
    v.as_f64()
        .map_or_else(|| "unknown".to_owned(), |c| format!("${c:.2}"))
}

fn models(r: &Value) -> String {
    let names: Vec<&str> = r["models"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    printable(&names.join(",")).into_owned()
}

fn text(r: &Value, key: &str) -> String {
    printable(r[key].as_str().unwrap_or("—")).into_owned()
}

/// Prose folded into lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

fn say(text: &str, width: usize) {
    for line in wrap(text, width) {
        println!("{line}");
    }
}

/// `text` cut to `width` characters, ending in `…` when cut.
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

pub fn print(rows: &[Value], total: &Value, missing: &[Value], prices: &str, width: usize) {
    let mw = rows
        .iter()
        .map(|r| models(r).chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let total_cost = if n(&total["sessions_without_price"]) > 0 && total["cost_usd"].is_f64() {
        format!("{}+?", cost(&total["cost_usd"]))
    } else {
        cost(&total["cost_usd"])
    };
    if width >= ONE_LINE_WIDTH + mw.saturating_sub(20) {
        one_line_per_session(rows, total, &total_cost, mw);
    } else {
        two_lines_per_session(rows, total, &total_cost, width);
    }
    missing_note(missing, width);
    unpriced_note(total, width);
    say(
        &format!("Costs are estimates at {prices}; subscription users do not pay them."),
        width,
    );
}

/// The tasks without a session, one line per reason: "task-02: no session found (…)",
/// or for several "11 tasks without a session found (task-01, task-02, …): …".
fn missing_note(missing: &[Value], width: usize) {
    let mut by_why = std::collections::BTreeMap::<String, Vec<String>>::new();
    for m in missing {
        let task = printable(m["task_id"].as_str().unwrap_or_default()).into_owned();
        // The reason names its task: said once for all the tasks it fits.
        let why = printable(m["why"].as_str().unwrap_or_default()).replace(&task, "the task");
        by_why.entry(why).or_default().push(task);
    }
    for (why, tasks) in by_why {
        let text = match tasks.as_slice() {
            [one] => format!("{one}: no session found ({})", why.replace("the task", one)),
            many => {
                let named: Vec<&str> = many.iter().take(6).map(String::as_str).collect();
                let more = if many.len() > 6 { ", …" } else { "" };
                format!(
                    "{} tasks without a session found ({}{more}): {why}",
                    many.len(),
                    named.join(", ")
                )
            }
        };
        say(&text, width);
    }
}

fn one_line_per_session(rows: &[Value], total: &Value, total_cost: &str, mw: usize) {
    println!(
        "{:<12} {:<10} {:<mw$} {:>10} {:>9} {:>11} {:>12} {:>12} {:>9} {:>6} {:<20} {:<20} {:>4}",
        "TASK",
        "SESSION",
        "MODEL",
        "INPUT",
        "OUTPUT",
        "CACHE WRITE",
        "CACHE READ",
        "TOTAL",
        "COST",
        "CTX%",
        "STARTED",
        "LAST ACTIVITY",
        "COMP"
    );
    for r in rows {
        // Ids whole, or cut with `…`: a session id reads as its first characters.
        let short = |k: &str, w: usize| -> String { fit(&text(r, k), w) };
        println!(
            "{:<12} {:<10} {:<mw$} {:>10} {:>9} {:>11} {:>12} {:>12} {:>9} {:>6.1} {:<20} {:<20} {:>4}",
            short("task_id", 12),
            short("session_id", 10),
            models(r),
            n(&r["input_tokens"]),
            n(&r["output_tokens"]),
            n(&r["cache_write_tokens"]),
            n(&r["cache_read_tokens"]),
            n(&r["total_tokens"]),
            cost(&r["cost_usd"]),
            r["context_percent"].as_f64().unwrap_or(0.0),
            short("started", 19),
            short("last_activity", 19),
            n(&r["compactions"]),
        );
    }
    println!(
        "{:<12} {:<10} {:<mw$} {:>10} {:>9} {:>11} {:>12} {:>12} {:>9}",
        "TOTAL",
        format!("{} sessions", n(&total["sessions"])),
        "",
        n(&total["input_tokens"]),
        n(&total["output_tokens"]),
        n(&total["cache_write_tokens"]),
        n(&total["cache_read_tokens"]),
        n(&total["total_tokens"]),
        total_cost,
    );
}

/// Below the one-line width: the first line holds what a reader compares (task,
/// session, total, cost, context, then the model as room allows), the second the
/// breakdown and times, each cut with `…` to the width.
fn two_lines_per_session(rows: &[Value], total: &Value, total_cost: &str, width: usize) {
    let head = |task: &str, session: &str, total: &str, cost: &str, ctx: &str, model: &str| {
        let fixed = format!("{task:<12} {session:<9} {total:>12} {cost:>9} {ctx:>6}");
        let room = width.saturating_sub(fixed.chars().count() + 1);
        if room >= 5 && !model.is_empty() {
            format!("{fixed} {}", fit(model, room))
        } else {
            fit(&fixed, width)
        }
    };
    println!(
        "{}",
        head("TASK", "SESSION", "TOTAL", "COST", "CTX%", "MODEL")
    );
    for r in rows {
        let task = fit(&text(r, "task_id"), 12);
        let session = fit(&text(r, "session_id"), 9);
        println!(
            "{}",
            head(
                &task,
                &session,
                &n(&r["total_tokens"]).to_string(),
                &cost(&r["cost_usd"]),
                &format!("{:.1}", r["context_percent"].as_f64().unwrap_or(0.0)),
                &models(r),
            )
        );
        let comp = n(&r["compactions"]);
        let detail = format!(
            "  in {} · out {} · cache write {} · read {}{}",
            n(&r["input_tokens"]),
            n(&r["output_tokens"]),
            n(&r["cache_write_tokens"]),
            n(&r["cache_read_tokens"]),
            match comp {
                0 => String::new(),
                1 => " · 1 compaction".to_owned(),
                c => format!(" · {c} compactions"),
            }
        );
        let times = format!(
            "{} → {}",
            text(r, "started").chars().take(16).collect::<String>(),
            text(r, "last_activity")
                .chars()
                .take(16)
                .collect::<String>()
        );
        // The times go whole on a line of their own when both do not fit.
        if detail.chars().count() + 3 + times.chars().count() <= width {
            println!("{detail} · {times}");
        } else {
            println!("{}", fit(&detail, width));
            println!("{}", fit(&format!("  {times}"), width));
        }
    }
    println!(
        "{}",
        head(
            "TOTAL",
            "",
            &n(&total["total_tokens"]).to_string(),
            total_cost,
            "",
            &format!("{} sessions", n(&total["sessions"])),
        )
    );
    println!(
        "{}",
        fit(
            &format!(
                "  in {} · out {} · cache write {} · read {}",
                n(&total["input_tokens"]),
                n(&total["output_tokens"]),
                n(&total["cache_write_tokens"]),
                n(&total["cache_read_tokens"]),
            ),
            width
        )
    );
}

/// Which sessions have no price, and the configuration line (never cut: it is copied)
/// that gives each model one.
fn unpriced_note(total: &Value, width: usize) {
    let unpriced = n(&total["sessions_without_price"]);
    if unpriced == 0 {
        return;
    }
    let models: Vec<&str> = total["unpriced_models"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    say(
        &format!(
            "{unpriced} session{} without a price{}: maestro has no list price for {}. Add one to the configuration, for example:",
            if unpriced == 1 { "" } else { "s" },
            if total["cost_usd"].is_f64() {
                " (not in the total)"
            } else {
                ""
            },
            printable(&models.join(", "))
        ),
        width,
    );
    for m in models {
        println!("  {}", crate::core::sessions::prices::price_line(m));
    }
}
