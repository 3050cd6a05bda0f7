//! Where each pane goes for a terminal size and what there is to show. Shared by drawing
//! and by mouse handling (a click focuses the pane under it), so the two always agree.
//!
//! Width is given by need from 110 columns on ([`wide`]): the anomalies get the whole
//! width, the messages the column they need. Height is given by priority, not by
//! proportion: the status line; every Musician row
//! (up to a cap that grows with the window); the anomalies, with a row for each unread
//! one (up to 3) whenever any exist; then the log; then the messages. Heartbeats and
//! Watchdog fold into one line each (side by side, a strip) when space is short and
//! unfold when there is room. A pane too short for its borders is drawn as a one-line
//! summary, so a pane that holds items never shows zero of them.

use ratatui::layout::{Constraint, Layout, Rect};

use crate::tui::app::Pane;

/// Smallest terminal the dashboard draws in; below it, a "too small" message.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 12;
/// From this width on, panes sit in two columns.
const WIDE: u16 = 110;
/// A pane shorter than this is drawn as a one-line summary (no room for its borders and
/// a row).
pub const SUMMARY_BELOW: u16 = 3;

/// The panes the layout's design places, each by its own priority.
const DESIGNED: [Pane; 6] = [
    Pane::Tasks,
    Pane::Log,
    Pane::Anomalies,
    Pane::Messages,
    Pane::Heartbeats,
    Pane::Watchdog,
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneRects {
    pub tasks: Rect,
    pub log: Rect,
    pub anomalies: Rect,
    pub messages: Rect,
    pub heartbeats: Rect,
    pub watchdog: Rect,
    pub status: Rect,
    /// A pane of the list the design does not place yet (a new one): it shares the
    /// Messages' area, side by side, until the design gives it its own.
    pub others: Vec<(Pane, Rect)>,
}

impl PaneRects {
    pub fn get(&self, pane: Pane) -> Rect {
        #[allow(unreachable_patterns)] // reached by a pane the design does not place
        match pane {
            Pane::Tasks => self.tasks,
            Pane::Log => self.log,
            Pane::Anomalies => self.anomalies,
            Pane::Messages => self.messages,
            Pane::Heartbeats => self.heartbeats,
            Pane::Watchdog => self.watchdog,
            other => self
                .others
                .iter()
                .find(|(p, _)| *p == other)
                .map_or_else(Rect::default, |(_, r)| *r),
        }
    }

    /// Gives the panes the design does not place a share of the Messages' area.
    fn place_the_others(self) -> Self {
        let others: Vec<Pane> = Pane::ALL
            .into_iter()
            .filter(|p| !DESIGNED.contains(p))
            .collect();
        self.share_messages(others)
    }

    /// The Messages' area split side by side between Messages and `others`.
    fn share_messages(mut self, others: Vec<Pane>) -> Self {
        if others.is_empty() {
            return self;
        }
        let n = u32::try_from(others.len() + 1).unwrap_or(u32::MAX);
        let shares =
            Layout::horizontal((0..n).map(|_| Constraint::Ratio(1, n))).split(self.messages);
        self.messages = shares[0];
        self.others = others
            .into_iter()
            .zip(shares.iter().skip(1).copied())
            .collect();
        self
    }

    /// The panes on screen in reading order: top to bottom, then left to right (Tab's
    /// order).
    pub fn reading_order(&self) -> Vec<Pane> {
        let mut shown: Vec<Pane> = Pane::ALL
            .into_iter()
            .filter(|p| {
                let r = self.get(*p);
                r.width > 0 && r.height > 0
            })
            .collect();
        shown.sort_by_key(|p| {
            let r = self.get(*p);
            (r.y, r.x)
        });
        shown
    }

    /// The pane under a cell, if any.
    pub fn pane_at(&self, column: u16, row: u16) -> Option<Pane> {
        Pane::ALL.into_iter().find(|p| {
            let r = self.get(*p);
            column >= r.x && column < r.x + r.width && row >= r.y && row < r.y + r.height
        })
    }
}

/// What there is to show, as far as the layout cares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Content {
    /// Musician rows in the Tasks pane.
    pub task_rows: usize,
    /// Rows of the Heartbeats pane (participants with a heartbeat).
    pub heartbeat_rows: usize,
    pub anomalies: usize,
    pub unread_anomalies: usize,
    pub messages: usize,
    /// This process holds the Souffleur role (the Watchdog pane says more).
    pub role: bool,
    /// Columns the widest of the first messages needs (its first line whole).
    pub message_width: u16,
    /// Of the first anomalies, how many are wider than the screen (each folds onto a
    /// second line when the band has room).
    pub wide_anomalies: usize,
    /// Lines the Log pane has to show (up to [`MEASURED_ROWS`]).
    pub log_rows: usize,
}

/// Rows looked at for a width: the ones a screen can show, never the whole history.
pub const MEASURED_ROWS: usize = 40;

/// A pane's claim on height: what it cannot do without, and what it would like.
#[derive(Debug, Clone, Copy)]
struct Claim {
    min: u16,
    want: u16,
}

/// Gives each claim its minimum, then, in order, up to what it wants; returns the
/// heights and what is left over. `None` when the minimums do not fit.
fn share(total: u16, claims: &[Claim]) -> Option<(Vec<u16>, u16)> {
    let mins: u16 = claims.iter().map(|c| c.min).sum();
    let mut left = total.checked_sub(mins)?;
    let mut heights: Vec<u16> = claims.iter().map(|c| c.min).collect();
    for (h, c) in heights.iter_mut().zip(claims) {
        let more = c.want.saturating_sub(*h).min(left);
        *h += more;
        left -= more;
    }
    Some((heights, left))
}

/// Room by need: while a pane of a stack hides rows (shorter than it needs) and another
/// leaves rows empty (taller than it needs), a row moves from the one with the most to
/// spare to the first in order that lacks one. A pane left two rows high (no room for
/// a bordered row) gives the second to the first that still lacks rows, or to `sink`.
fn rebalance(heights: &mut [u16], needs: &[u16], sink: usize) {
    while let Some(short) = (0..heights.len()).find(|i| heights[*i] < needs[*i]) {
        let spare = (0..heights.len())
            .filter(|j| heights[*j] > needs[*j])
            .max_by_key(|j| heights[*j] - needs[*j]);
        let Some(spare) = spare else { break };
        heights[spare] -= 1;
        heights[short] += 1;
    }
    for i in 0..heights.len() {
        if heights[i] == SUMMARY_BELOW - 1 {
            heights[i] -= 1;
            let to = (0..heights.len())
                .find(|j| *j != i && heights[*j] < needs[*j])
                .unwrap_or(sink);
            heights[to] += 1;
        }
    }
}

/// Rows a list pane needs to show `rows` items whole: its borders and a row each, or a
/// summary line when it has none.
fn need_of(rows: usize) -> u16 {
    if rows == 0 {
        1
    } else {
        u16::try_from(rows).unwrap_or(u16::MAX).saturating_add(2)
    }
}

/// What the Tasks pane needs: every Musician row, with its borders, header, the
/// Conductor's line and the selected task's detail line.
fn tasks_need(c: &Content) -> u16 {
    u16::try_from(c.task_rows.max(1))
        .unwrap_or(u16::MAX)
        .saturating_add(5)
}

/// What the anomalies need: a row each (two for one wider than the screen).
fn anomalies_need(c: &Content) -> u16 {
    need_of(c.anomalies + c.wide_anomalies.min(c.anomalies))
}

/// Heights stacked from the top of `area`.
fn stack(area: Rect, heights: &[u16]) -> Vec<Rect> {
    let mut y = area.y;
    heights
        .iter()
        .map(|h| {
            let r = Rect {
                y,
                height: *h,
                ..area
            };
            y += h;
            r
        })
        .collect()
}

/// The anomalies' claim: a summary line when there are none; else borders and a row
/// per unread one (up to 3), at least one row.
fn anomalies_claim(c: &Content) -> Claim {
    if c.anomalies == 0 {
        return Claim { min: 1, want: 1 };
    }
    let rows = if c.unread_anomalies > 0 {
        c.unread_anomalies.min(3)
    } else {
        c.anomalies.min(2)
    } as u16;
    Claim {
        min: 1,
        want: 2 + rows,
    }
}

fn watchdog_height(c: &Content) -> u16 {
    if c.role { 11 } else { 6 }
}

/// The panes for `area`; `None` when too small.
pub fn layout(area: Rect, c: &Content) -> Option<PaneRects> {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        return None;
    }
    let [main, status] = Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(area);
    // Musician rows up to a cap that grows with the window: borders, header, the
    // Conductor's line and the selected task's detail line come with them.
    let task_cap = (main.height * 45 / 100).max(9);
    let tasks = Claim {
        min: 5,
        want: (c.task_rows.max(1) as u16 + 5).min(task_cap),
    };
    let hb_want = c.heartbeat_rows.max(1) as u16 + 2;
    let designed = if area.width >= WIDE {
        wide(main, status, c, tasks, hb_want)
    } else {
        narrow(main, status, c, tasks, hb_want)
    };
    designed.map(PaneRects::place_the_others)
}

/// One column: tasks, anomalies, log, messages, and the heartbeats/watchdog strip.
fn narrow(main: Rect, status: Rect, c: &Content, tasks: Claim, hb_want: u16) -> Option<PaneRects> {
    let unfolded = hb_want.max(watchdog_height(c));
    let messages_want = if c.messages == 0 { 1 } else { 4 };
    let claims = [
        tasks,
        anomalies_claim(c),
        Claim { min: 1, want: 6 },
        Claim {
            min: 1,
            want: messages_want,
        },
        Claim { min: 1, want: 1 },
    ];
    let (mut h, mut left) = share(main.height, &claims)?;
    // The strip unfolds only when it can show the panes whole.
    if left >= unfolded - 1 {
        h[4] = unfolded;
        left -= unfolded - 1;
    }
    // What is left: the log first, the messages and anomalies after.
    let more_messages = if c.messages > 0 { left / 3 } else { 0 };
    let more_anomalies = if c.anomalies > 3 { left / 6 } else { 0 };
    h[3] += more_messages;
    h[1] += more_anomalies;
    h[2] += left - more_messages - more_anomalies;
    // Two lines are no more than one for a summary: the log takes the second.
    for i in [1, 3] {
        if h[i] == SUMMARY_BELOW - 1 {
            h[i] -= 1;
            h[2] += 1;
        }
    }
    // No pane hides rows while another leaves some empty.
    let needs = [
        tasks_need(c),
        anomalies_need(c),
        need_of(c.log_rows).max(3),
        need_of(c.messages),
        h[4],
    ];
    rebalance(&mut h, &needs, 2);
    let rows = stack(main, &h);
    let [heartbeats, watchdog] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(rows[4]);
    Some(PaneRects {
        tasks: rows[0],
        anomalies: rows[1],
        log: rows[2],
        messages: rows[3],
        heartbeats,
        watchdog,
        status,
        others: Vec::new(),
    })
}

/// From [`WIDE`] on, width by need: Tasks across the top (every column it has), the
/// anomalies in a band under them as wide as the screen (a report is read whole, not
/// cut at a column's edge), then the Log beside a column of heartbeats, watchdog and
/// messages, the column as wide as the messages need (between 38 % and half).
fn wide(main: Rect, status: Rect, c: &Content, tasks: Claim, hb_want: u16) -> Option<PaneRects> {
    let band = if c.anomalies == 0 {
        Claim { min: 1, want: 1 }
    } else {
        let rows = c.anomalies.min(6).max(c.unread_anomalies.min(3)) + c.wide_anomalies.min(3);
        Claim {
            min: 1,
            want: 2 + rows as u16,
        }
    };
    let (h, rest) = share(main.height, &[tasks, band, Claim { min: 3, want: 3 }])?;
    let mut h = [h[0], h[1], h[2] + rest];
    // The bottom (the Log beside the column) needs what the taller of the two needs.
    let column_need = need_of(c.heartbeat_rows.max(1)) + watchdog_height(c) + need_of(c.messages);
    let bottom_need = need_of(c.log_rows).max(3).max(column_need);
    rebalance(&mut h, &[tasks_need(c), anomalies_need(c), bottom_need], 2);
    let rows = stack(main, &h);
    let bottom = rows[2];
    let column = c
        .message_width
        .saturating_add(2)
        .clamp(bottom.width * 38 / 100, bottom.width / 2);
    let [log, right] =
        Layout::horizontal([Constraint::Min(0), Constraint::Length(column)]).areas(bottom);
    // A Log with rows to spare gives them to the heartbeats, under it: no list hides
    // rows beside empty ones.
    let log_need = u16::try_from(c.log_rows)
        .unwrap_or(u16::MAX)
        .saturating_add(2)
        .max(3);
    let spare = log.height.saturating_sub(log_need).min(hb_want);
    if spare >= SUMMARY_BELOW {
        let [log, heartbeats] =
            Layout::vertical([Constraint::Min(0), Constraint::Length(spare)]).areas(log);
        let (mut r, more) = share(
            right.height,
            &[
                Claim {
                    min: 1,
                    want: watchdog_height(c),
                },
                Claim { min: 1, want: 1 },
            ],
        )?;
        r[1] += more;
        rebalance(&mut r, &[watchdog_height(c), need_of(c.messages)], 1);
        let col = stack(right, &r);
        return Some(PaneRects {
            tasks: rows[0],
            anomalies: rows[1],
            log,
            heartbeats,
            watchdog: col[0],
            messages: col[1],
            status,
            others: Vec::new(),
        });
    }
    let claims = [
        Claim {
            min: 1,
            want: hb_want.min(right.height * 30 / 100).max(3),
        },
        Claim {
            min: 1,
            want: watchdog_height(c),
        },
        Claim {
            min: 1,
            want: if c.messages == 0 { 1 } else { 4 },
        },
    ];
    let (mut r, more) = share(right.height, &claims)?;
    r[2] += more;
    rebalance(
        &mut r,
        &[
            need_of(c.heartbeat_rows.max(1)),
            watchdog_height(c),
            need_of(c.messages),
        ],
        2,
    );
    let col = stack(right, &r);
    Some(PaneRects {
        tasks: rows[0],
        anomalies: rows[1],
        log,
        heartbeats: col[0],
        watchdog: col[1],
        messages: col[2],
        status,
        others: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(tasks: usize, unread: usize) -> Content {
        Content {
            task_rows: tasks,
            heartbeat_rows: tasks + 2,
            anomalies: unread,
            unread_anomalies: unread,
            messages: 6,
            role: false,
            message_width: 70,
            wide_anomalies: 0,
            // A Log with more lines than any screen has rows.
            log_rows: MEASURED_ROWS,
        }
    }

    /// A Log with rows to spare gives them to the heartbeats, under it.
    #[test]
    fn a_short_log_gives_its_rows_to_the_heartbeats() {
        let area = Rect::new(0, 0, 120, 40);
        let full = layout(area, &content(12, 3)).expect("fits");
        let short = layout(
            area,
            &Content {
                log_rows: 8,
                ..content(12, 3)
            },
        )
        .expect("fits");
        assert!(
            shown(short.heartbeats) > shown(full.heartbeats),
            "{short:?}\n{full:?}"
        );
        assert!(shown(short.heartbeats) >= 3, "{short:?}");
        assert!(
            shown(short.log) >= 8,
            "the Log's lines stay whole: {short:?}"
        );
        assert_eq!(short.heartbeats.x, short.log.x, "under the Log");
    }

    /// Rows inside a pane's borders (a summary line counts as one).
    fn shown(r: Rect) -> u16 {
        if r.height < SUMMARY_BELOW {
            r.height
        } else {
            r.height - 2
        }
    }

    /// (width, height, Musicians, unread anomalies): every Musician row up to the cap,
    /// a row per unread anomaly (up to 3), no pane with items at zero height, and the
    /// panes tile the screen without overlapping.
    #[test]
    fn priorities_hold_at_every_size() {
        for (w, h) in [
            (80, 24),
            (80, 20),
            (100, 30),
            (120, 40),
            (200, 60),
            (60, 12),
            (109, 24),
            (110, 24),
        ] {
            for (tasks, unread) in [(0, 0), (4, 0), (4, 4), (12, 2), (12, 9), (40, 1)] {
                let c = content(tasks, unread);
                let r = layout(Rect::new(0, 0, w, h), &c).unwrap();
                let case = format!("{w}x{h}, {tasks} tasks, {unread} unread: {r:?}");
                let area: u32 = Pane::ALL
                    .iter()
                    .map(|p| u32::from(r.get(*p).width) * u32::from(r.get(*p).height))
                    .sum::<u32>()
                    + u32::from(r.status.width);
                assert_eq!(
                    area,
                    u32::from(w) * u32::from(h),
                    "tiles the screen: {case}"
                );
                for p in Pane::ALL {
                    assert!(r.get(p).height >= 1, "{p:?} has a line: {case}");
                }
                let task_rows = r.tasks.height.saturating_sub(4);
                let cap = ((h - 1) * 45 / 100).max(9) - 4;
                assert!(
                    task_rows >= (tasks as u16).min(cap).min(task_rows.max(1)),
                    "{case}"
                );
                if h >= 24 {
                    assert!(
                        task_rows >= (tasks as u16).min(4),
                        "the first Musicians show: {case}"
                    );
                    if unread > 0 {
                        assert!(
                            shown(r.anomalies) >= (unread as u16).min(3),
                            "a row per unread anomaly: {case}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn at_80x24_the_heartbeats_and_watchdog_fold_and_unfold_with_room() {
        let r = layout(Rect::new(0, 0, 80, 24), &content(4, 4)).unwrap();
        assert_eq!((r.heartbeats.height, r.watchdog.height), (1, 1), "{r:?}");
        assert_eq!(r.heartbeats.y, r.watchdog.y, "one strip");
        assert_eq!(
            r.tasks.height, 9,
            "4 Musicians, header, Conductor line, detail line, borders"
        );
        assert_eq!(r.anomalies.height, 5, "3 of the 4 unread");
        let tall = layout(Rect::new(0, 0, 100, 40), &content(4, 4)).unwrap();
        assert!(tall.heartbeats.height >= 8, "{tall:?}");
    }

    /// A pane of the list the design does not place shares the Messages' area: the two
    /// split its width and nothing else moves.
    #[test]
    fn a_pane_the_design_does_not_place_shares_the_messages_area() {
        let laid = layout(Rect::new(0, 0, 120, 40), &content(4, 1)).unwrap();
        let undesigned = Pane::ALL.into_iter().filter(|p| !DESIGNED.contains(p));
        assert!(
            laid.others.iter().map(|(p, _)| *p).eq(undesigned),
            "the others are the panes the design leaves out"
        );
        // The design alone, then one more pane beside Messages.
        let designed = layout(Rect::new(0, 0, 120, 40), &content(4, 1))
            .map(|r| PaneRects {
                messages: r.others.iter().fold(r.messages, |m, (_, o)| m.union(*o)),
                others: Vec::new(),
                ..r
            })
            .unwrap();
        let messages = designed.messages;
        let shared = designed.clone().share_messages(vec![Pane::Watchdog]);
        let [(pane, other)] = shared.others.as_slice() else {
            panic!("one other: {shared:?}");
        };
        assert_eq!(*pane, Pane::Watchdog);
        assert_eq!(shared.messages.width + other.width, messages.width);
        assert_eq!((other.y, other.height), (messages.y, messages.height));
        assert_eq!(other.x, shared.messages.x + shared.messages.width);
        assert_eq!((shared.tasks, shared.log), (designed.tasks, designed.log));
    }

    #[test]
    fn a_click_finds_the_pane_drawn_there() {
        let r = layout(Rect::new(0, 0, 120, 40), &content(4, 1)).unwrap();
        for p in Pane::ALL {
            let rect = r.get(p);
            assert_eq!(r.pane_at(rect.x, rect.y), Some(p));
        }
        assert_eq!(r.pane_at(0, 39), None, "the status line is no pane");
    }

    /// Tab visits the panes as they sit on screen: top to bottom, then left to right,
    /// at every size (at 80x24 Anomalies sit above the Log, and come first).
    #[test]
    fn tab_follows_the_screen() {
        for (w, h) in [(80, 24), (100, 30), (120, 40), (200, 60)] {
            let rects = layout(Rect::new(0, 0, w, h), &content(4, 2)).expect("room");
            let order = rects.reading_order();
            assert_eq!(order.first(), Some(&Pane::Tasks), "{w}x{h}");
            let at = |p: Pane| order.iter().position(|q| *q == p);
            let (a, l) = (rects.get(Pane::Anomalies), rects.get(Pane::Log));
            if a.y < l.y {
                assert!(at(Pane::Anomalies) < at(Pane::Log), "{w}x{h}: {order:?}");
            }
            for pair in order.windows(2) {
                let (r0, r1) = (rects.get(pair[0]), rects.get(pair[1]));
                assert!((r0.y, r0.x) <= (r1.y, r1.x), "{w}x{h}: {order:?}");
            }
        }
    }
}
