//! A line of segments that gives way by need: when the line is too narrow, the least
//! needed segment is dropped whole, then the next, so each is drawn whole or not at all.
//! Only a segment marked to shrink (an answer, an error: text the line quotes) is cut,
//! and then it ends in `…`. The status line is laid out so (issue: no word cut).

use ratatui::text::Span;

use crate::tui::panes::ctx::fit;

/// One part of a line, with how much it is needed.
pub struct Segment<'a> {
    pub span: Span<'a>,
    /// Higher is kept longer; of equals, the rightmost goes first.
    pub keep: u8,
    /// Cut (ending in `…`) to the room the others leave when its turn to go comes,
    /// rather than dropped, while that room holds [`MIN_CUT`] columns.
    pub shrinks: bool,
}

/// The fewest columns a shrinking segment is shown in.
pub const MIN_CUT: usize = 16;

impl<'a> Segment<'a> {
    pub fn new(span: Span<'a>, keep: u8) -> Self {
        Self {
            span,
            keep,
            shrinks: false,
        }
    }

    pub fn shrinking(span: Span<'a>, keep: u8) -> Self {
        Self {
            span,
            keep,
            shrinks: true,
        }
    }

    /// Its width, or the fewest columns it may be cut to once `shrunk`.
    fn needs(&self, shrunk: bool) -> usize {
        if shrunk {
            self.span.width().min(MIN_CUT)
        } else {
            self.span.width()
        }
    }
}

/// The segments that fit in `width`, in their order, each with its place in `segments`;
/// the shrinking ones cut to the room left.
pub fn lay_out<'a>(segments: Vec<Segment<'a>>, width: usize) -> Vec<(usize, Span<'a>)> {
    // (place, segment, shrunk): a shrinking segment whose turn comes is shrunk first,
    // and goes at its next turn.
    let mut kept: Vec<(usize, Segment<'a>, bool)> = segments
        .into_iter()
        .enumerate()
        .filter(|(_, s)| s.span.width() > 0)
        .map(|(i, s)| (i, s, false))
        .collect();
    while kept.len() > 1
        && kept
            .iter()
            .map(|(_, s, shrunk)| s.needs(*shrunk))
            .sum::<usize>()
            > width
    {
        let least = kept
            .iter()
            .enumerate()
            .min_by_key(|(at, (_, s, shrunk))| (s.keep, *shrunk, std::cmp::Reverse(*at)))
            .map_or(0, |(at, _)| at);
        match &mut kept[least] {
            (_, s, shrunk) if s.shrinks && !*shrunk => *shrunk = true,
            _ => {
                kept.remove(least);
            }
        }
    }
    let kept: Vec<(usize, Segment<'a>)> = kept.into_iter().map(|(i, s, _)| (i, s)).collect();
    let fixed: usize = kept
        .iter()
        .filter(|(_, s)| !s.shrinks)
        .map(|(_, s)| s.span.width())
        .sum();
    let mut room = width.saturating_sub(fixed);
    // A segment alone may be wider than the line: it is cut too.
    let alone = kept.len() == 1;
    kept.into_iter()
        .map(|(i, s)| {
            let w = s.span.width();
            if !s.shrinks && !alone {
                return (i, s.span);
            }
            let limit = if alone { width } else { room };
            let shown = w.min(limit);
            if s.shrinks {
                room = room.saturating_sub(shown);
            }
            if w <= limit {
                return (i, s.span);
            }
            (i, Span::styled(fit(&s.span.content, limit), s.span.style))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(segments: Vec<Segment<'static>>, width: usize) -> String {
        lay_out(segments, width)
            .into_iter()
            .map(|(_, s)| s.content.into_owned())
            .collect()
    }

    fn status() -> Vec<Segment<'static>> {
        vec![
            Segment::new(Span::raw(" maestro · "), 1),
            Segment::new(Span::raw("orch · "), 2),
            Segment::new(Span::raw("db ok"), 9),
            Segment::new(Span::raw(" · 12 tasks"), 7),
            Segment::new(Span::raw(" · 3 anomalies"), 6),
            Segment::new(Span::raw(" · 3 messages"), 5),
            Segment::shrinking(Span::raw(" · 12:00:01 cannot read temp/task-03-status"), 4),
        ]
    }

    #[test]
    fn the_least_needed_goes_first_and_whole() {
        assert_eq!(
            line(status(), 200),
            " maestro · orch · db ok · 12 tasks · 3 anomalies · 3 messages · 12:00:01 cannot read temp/task-03-status"
        );
        // The label and the name go first, whole, before the error is cut; then it is
        // cut to the room left, marked; then the counts go, each whole.
        assert_eq!(
            line(status(), 80),
            "db ok · 12 tasks · 3 anomalies · 3 messages · 12:00:01 cannot read temp/task-03…"
        );
        assert_eq!(
            line(status(), 70),
            "db ok · 12 tasks · 3 anomalies · 3 messages · 12:00:01 cannot read te…"
        );
        assert_eq!(
            line(status(), 60),
            "db ok · 12 tasks · 3 anomalies · 3 messages · 12:00:01 cann…"
        );
        assert_eq!(
            line(status(), 45),
            "db ok · 12 tasks · 3 anomalies · 3 messages"
        );
        assert_eq!(line(status(), 40), "db ok · 12 tasks · 3 anomalies");
        assert_eq!(line(status(), 17), "db ok · 12 tasks");
        assert_eq!(line(status(), 3), "db…");
    }
}
