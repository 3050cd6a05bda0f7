//! Timestamps as Claude Code writes them on every transcript line
//! (`2026-11-20T14:02:15.407Z`), as milliseconds since the epoch.

/// An RFC 3339 timestamp as milliseconds since the epoch.
pub fn epoch_ms(text: &str) -> Option<i64> {
    utc_ms(text).or_else(|| rfc3339_ms(text))
}

/// Claude Code's own form, `2026-11-20T14:02:15.407Z` (on every line of a
/// transcript), read by hand; `None` for any other form, left to the full parser.
fn utc_ms(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let shape = b.len() == 24
        && [
            (4, b'-'),
            (7, b'-'),
            (10, b'T'),
            (13, b':'),
            (16, b':'),
            (19, b'.'),
            (23, b'Z'),
        ]
        .iter()
        .all(|&(i, c)| b[i] == c);
    if !shape {
        return None;
    }
    let number = |from: usize, to: usize| {
        b[from..to].iter().try_fold(0i64, |n, d| {
            d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
        })
    };
    let (year, month, day) = (number(0, 4)?, number(5, 7)?, number(8, 10)?);
    let (hour, minute, second) = (number(11, 13)?, number(14, 16)?, number(17, 19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if !(1..=month_days).contains(&day) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    // Days since 1970-01-01 (Howard Hinnant's days_from_civil; years start in March).
    let y = if month <= 2 { year - 1 } else { year };
    let (era, year_of_era) = (y.div_euclid(400), y.rem_euclid(400));
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Some((((days * 24 + hour) * 60 + minute) * 60 + second) * 1000 + number(20, 23)?)
}

fn rfc3339_ms(text: &str) -> Option<i64> {
    let t =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Claude Code's form read by hand gives what the RFC 3339 parser gives,
        /// days that do not exist included.
        #[test]
        fn a_timestamp_read_by_hand_is_the_one_parsed(
            year in 0u32..10_000, month in 0u32..14, day in 0u32..33,
            hour in 0u32..25, minute in 0u32..61, second in 0u32..61, ms in 0u32..1000,
        ) {
            let text = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{ms:03}Z");
            if let Some(fast) = utc_ms(&text) {
                proptest::prop_assert_eq!(Some(fast), rfc3339_ms(&text), "{}", text);
            }
            proptest::prop_assert_eq!(epoch_ms(&text), rfc3339_ms(&text), "{}", text);
        }
    }

    #[test]
    fn claude_codes_timestamps_are_read_by_hand() {
        for text in [
            "2026-11-20T14:02:15.407Z",
            "2024-02-29T23:59:59.999Z",
            "1970-01-01T00:00:00.000Z",
        ] {
            assert!(utc_ms(text).is_some(), "{text}");
            assert_eq!(utc_ms(text), rfc3339_ms(text), "{text}");
        }
        assert_eq!(utc_ms("2026-11-20T14:02:15.407+01:00"), None);
        assert_eq!(
            epoch_ms("2026-11-20T15:02:15.407+01:00"),
            utc_ms("2026-11-20T14:02:15.407Z")
        );
    }
}
