use super::*;
use crate::core::told::read::follow_after;

fn at(s: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_764_000_000 + s).expect("time")
}

fn line(tag: &str) -> impl FnOnce(Cursor) -> String + '_ {
    move |c| format!("{{\"event\":\"{tag}\",\"cursor\":\"{c}\"}}")
}

#[test]
fn cursors_print_and_parse_and_strange_or_old_ones_are_refused() {
    let c = Cursor {
        journal: 0x3f9c_2a7d_1e5b_4c60,
        seq: 1042,
    };
    assert_eq!(c.to_string(), "3f9c2a7d1e5b4c60-1042");
    assert_eq!(Cursor::parse(&c.to_string()), Ok(c));
    for bad in [
        "",
        "-",
        "3f9c2a7d1e5b4c60-",
        "3f9c-12",
        "zz9c2a7d1e5b4c60-1",
        "3f9c2a7d1e5b4c60-1 2",
    ] {
        let err = Cursor::parse(bad).expect_err(bad);
        assert!(err.contains("`cursor` field"), "{err}");
    }
    let err = Cursor::parse("c1764089705123456789").expect_err("old");
    assert!(err.contains("older ledger"), "{err}");
}

#[test]
fn a_restart_restates_with_the_first_time_and_cursor_and_news_takes_the_next_place() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("journal.tsv");
    let anomaly = Identity::new("anomaly|task-01|1", "");
    let task = |state: &str| Identity::new("task|task-01", state);

    let (mut first, problem) = Journal::open(&path);
    assert_eq!(problem, None);
    let (t, a) = first.tell(at(1), Some(&anomaly), line("anomaly"));
    assert_eq!((t, a.replayed, a.cursor.seq), (at(1), false, 1));
    let (_, w) = first.tell(at(2), Some(&task("working")), line("task"));
    let (_, u) = first.tell(at(2), None, line("source"));
    assert_eq!((w.cursor.seq, u.cursor.seq), (2, 3), "one by one");
    // Within a run a fact told again is the same entry, not a replay.
    let (_, again) = first.tell(at(3), Some(&anomaly), line("anomaly"));
    assert_eq!((again.cursor, again.replayed), (a.cursor, false));
    drop(first);

    // The clock went back an hour: places do not follow it.
    let (mut second, _) = Journal::open(&path);
    assert_eq!(second.id(), a.cursor.journal, "the same journal");
    let (t, restated) = second.tell(at(-3600), Some(&anomaly), line("anomaly"));
    assert_eq!(
        (t, restated.cursor, restated.replayed),
        (at(1), a.cursor, true)
    );
    let (t, moved) = second.tell(at(-3599), Some(&task("complete")), line("task"));
    assert_eq!((t, moved.cursor.seq, moved.replayed), (at(-3599), 4, false));
    drop(second);
    let (mut third, _) = Journal::open(&path);
    assert!(
        third
            .tell(at(9), Some(&task("complete")), line("task"))
            .1
            .replayed
    );
}

#[test]
fn two_maestros_share_one_journal_and_one_event_has_one_cursor() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("journal.tsv");
    let (mut dashboard, _) = Journal::open(&path);
    let (mut script, _) = Journal::open(&path);
    assert_eq!(dashboard.id(), script.id());
    let fact = Identity::new("message|7", "");
    let (_, told) = dashboard.tell(at(1), Some(&fact), line("message"));
    let (_, seen) = script.tell(at(2), Some(&fact), line("message"));
    assert_eq!(seen.cursor, told.cursor, "one event, one cursor");
    assert!(!seen.replayed, "told during this run: not a restatement");
    // News from either takes the next place after both.
    let (_, news) = script.tell(at(3), None, line("source"));
    assert_eq!(news.cursor.seq, told.cursor.seq + 1);
    let (_, more) = dashboard.tell(at(4), None, line("source"));
    assert_eq!(more.cursor.seq, news.cursor.seq + 1);
}

#[test]
fn planted_files_are_never_followed_and_a_torn_line_is_skipped() {
    let dir = tempfile::tempdir().expect("dir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "the user's\n").expect("write");
    let link = dir.path().join("linked.tsv");
    std::os::unix::fs::symlink(&secret, &link).expect("symlink");
    let (mut j, problem) = Journal::open(&link);
    assert!(problem.is_some_and(|p| p.contains("cannot use the journal")));
    j.tell(at(1), None, line("x"));
    assert_eq!(
        std::fs::read_to_string(&secret).expect("read"),
        "the user's\n"
    );
    let fifo = dir.path().join("fifo.tsv");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    // Returns at once, refusing it.
    assert!(Journal::open(&fifo).1.is_some());

    let path = dir.path().join("journal.tsv");
    let (mut j, _) = Journal::open(&path);
    j.tell(at(1), Some(&Identity::new("message|1", "")), line("m"));
    drop(j);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open");
    std::io::Write::write_all(&mut f, b"garbage\n12\t3").expect("write");
    drop(f);
    let (mut j, problem) = Journal::open(&path);
    assert_eq!(problem, None);
    assert!(
        j.tell(at(2), Some(&Identity::new("message|1", "")), line("m"))
            .1
            .replayed
    );
}

#[test]
fn a_reader_resumes_after_its_place_follows_new_entries_and_refuses_another_journal() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("journal.tsv");
    let (mut j, _) = Journal::open(&path);
    let cursors: Vec<Cursor> = (0..5)
        .map(|i| j.tell(at(i), None, line(&format!("e{i}"))).1.cursor)
        .collect();
    let (mut reader, gap) = follow_after(&path, cursors[1]).expect("follow");
    assert_eq!(gap, None);
    let got: Vec<u64> = reader.next_entries().iter().map(|(s, _)| *s).collect();
    assert_eq!(got, [3, 4, 5]);
    j.tell(at(9), None, line("late"));
    let late = reader.next_entries();
    assert_eq!(late.len(), 1);
    assert!(late[0].1.contains("\"late\""), "{late:?}");

    let other = Cursor {
        journal: j.id() ^ 0xff,
        seq: 2,
    };
    let err = follow_after(&path, other).expect_err("foreign");
    assert!(err.contains("belongs to journal"), "{err}");
    let ahead = Cursor {
        journal: j.id(),
        seq: 999,
    };
    let err = follow_after(&path, ahead).expect_err("ahead");
    assert!(err.contains("past the end") && err.contains("-6"), "{err}");
}

#[test]
fn a_journal_past_its_bound_is_cut_from_the_front_and_a_reader_before_it_gets_a_gap() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("journal.tsv");
    let (mut j, _) = Journal::open(&path);
    let pad = "x".repeat(200);
    let first = j
        .tell(at(0), None, |c| {
            format!("{{\"cursor\":\"{c}\",\"p\":\"{pad}\"}}")
        })
        .1;
    let mut last = first.clone();
    for i in 0..2000 {
        last = j
            .tell(at(i), None, |c| {
                format!("{{\"cursor\":\"{c}\",\"p\":\"{pad}\"}}")
            })
            .1;
    }
    let size = std::fs::metadata(&path).expect("meta").len();
    assert!(size <= MAX_BYTES + 1024, "bounded: {size}");
    let (mut reader, gap) = follow_after(&path, first.cursor).expect("follow");
    let gap = gap.expect("a gap");
    assert!(gap.count > 0);
    let got = reader.next_entries();
    assert_eq!(got.first().map(|(s, _)| *s), Some(gap.before.seq + 1));
    assert_eq!(got.last().map(|(s, _)| *s), Some(last.cursor.seq));
    // A second journal opened on the cut file goes on after it.
    let (mut again, _) = Journal::open(&path);
    assert_eq!(
        again.tell(at(9), None, line("n")).1.cursor.seq,
        last.cursor.seq + 1
    );
}
