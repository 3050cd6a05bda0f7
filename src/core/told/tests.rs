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
        let err = Cursor::parse(bad).expect_err(bad).to_string();
        assert!(err.contains("`cursor` field"), "{err}");
    }
    let err = Cursor::parse("c1764089705123456789")
        .expect_err("old")
        .to_string();
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
    assert_eq!(
        (t, a.replayed, a.cursor.expect("kept").seq),
        (at(1), false, 1)
    );
    let (_, w) = first.tell(at(2), Some(&task("working")), line("task"));
    let (_, u) = first.tell(at(2), None, line("source"));
    assert_eq!(
        (w.cursor.expect("kept").seq, u.cursor.expect("kept").seq),
        (2, 3),
        "one by one"
    );
    // Within a run a fact told again is the same entry, not a replay.
    let (_, again) = first.tell(at(3), Some(&anomaly), line("anomaly"));
    assert_eq!((again.cursor, again.replayed), (a.cursor, false));
    drop(first);

    // The clock went back an hour: places do not follow it.
    let (mut second, _) = Journal::open(&path);
    assert_eq!(
        second.id(),
        a.cursor.expect("kept").journal,
        "the same journal"
    );
    let (t, restated) = second.tell(at(-3600), Some(&anomaly), line("anomaly"));
    assert_eq!(
        (t, restated.cursor, restated.replayed),
        (at(1), a.cursor, true)
    );
    let (t, moved) = second.tell(at(-3599), Some(&task("complete")), line("task"));
    assert_eq!(
        (t, moved.cursor.expect("kept").seq, moved.replayed),
        (at(-3599), 4, false)
    );
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
    assert_eq!(
        news.cursor.expect("kept").seq,
        told.cursor.expect("kept").seq + 1
    );
    let (_, more) = dashboard.tell(at(4), None, line("source"));
    assert_eq!(
        more.cursor.expect("kept").seq,
        news.cursor.expect("kept").seq + 1
    );
}

#[test]
fn planted_files_are_never_followed_and_a_torn_line_is_skipped() {
    let dir = tempfile::tempdir().expect("dir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "the user's\n").expect("write");
    let link = dir.path().join("linked.tsv");
    std::os::unix::fs::symlink(&secret, &link).expect("symlink");
    // The journal goes beside what took its name, never through it.
    let (mut j, problem) = Journal::open(&link);
    assert_eq!(problem, None);
    let (_, told) = j.tell(at(1), None, line("x"));
    assert!(told.cursor.is_some(), "kept beside the link");
    assert_eq!(
        std::fs::read_to_string(&secret).expect("read"),
        "the user's\n"
    );
    let beside = std::fs::read_to_string(dir.path().join("linked.2.tsv")).expect("beside");
    assert!(beside.starts_with("#maestro-journal 1 "), "{beside}");
    let fifo = dir.path().join("fifo.tsv");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    // Returns at once, passing it by.
    assert_eq!(Journal::open(&fifo).1, None);
    assert!(dir.path().join("fifo.2.tsv").is_file());

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
        .map(|i| {
            j.tell(at(i), None, line(&format!("e{i}")))
                .1
                .cursor
                .expect("kept")
        })
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
    let err = follow_after(&path, other).expect_err("foreign").to_string();
    assert!(err.contains("belongs to journal"), "{err}");
    let ahead = Cursor {
        journal: j.id(),
        seq: 999,
    };
    let err = follow_after(&path, ahead).expect_err("ahead").to_string();
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
    let (mut reader, gap) = follow_after(&path, first.cursor.expect("kept")).expect("follow");
    let gap = gap.expect("a gap");
    assert!(gap.count.is_some_and(|c| c > 0));
    let got = reader.next_entries();
    assert_eq!(got.first().map(|(s, _)| *s), Some(gap.before.seq + 1));
    assert_eq!(
        got.last().map(|(s, _)| *s),
        Some(last.cursor.expect("kept").seq)
    );
    // A second journal opened on the cut file goes on after it.
    let (mut again, _) = Journal::open(&path);
    assert_eq!(
        again
            .tell(at(9), None, line("n"))
            .1
            .cursor
            .expect("kept")
            .seq,
        last.cursor.expect("kept").seq + 1
    );
}

/// The journal's own file changed under it: each time a new journal with a new id, said
/// once as news, and cursors of it accepted by a reader.
#[test]
fn a_journal_deleted_cut_short_or_replaced_starts_a_new_one() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("journal.tsv");
    let (mut j, _) = Journal::open(&path);
    let first = j.tell(at(1), None, line("a")).1.cursor.expect("kept");
    assert!(j.take_news().is_empty());

    std::fs::remove_file(&path).expect("rm");
    let after_rm = j.tell(at(2), None, line("b")).1.cursor.expect("kept");
    assert_ne!(after_rm.journal, first.journal, "a new id");
    let news = j.take_news();
    assert!(news.len() == 1 && news[0].contains("deleted"), "{news:?}");
    assert!(follow_after(&path, after_rm).is_ok());
    // A cursor of the journal it replaced resumes at its start, after a gap of unknown size.
    let (_, gap) = follow_after(&path, first).expect("the old place resumes");
    let gap = gap.expect("a gap");
    assert_eq!(gap.count, None);
    assert_eq!(
        gap.before,
        Cursor {
            journal: after_rm.journal,
            seq: 0
        }
    );

    // Cut short mid-line.
    j.tell(at(3), None, line("c"));
    let len = std::fs::metadata(&path).expect("meta").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    f.set_len(len - 10).expect("truncate");
    let cut = j.tell(at(4), None, line("d")).1.cursor.expect("kept");
    assert_ne!(cut.journal, after_rm.journal);
    assert!(j.take_news()[0].contains("cut short"));
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(
        text.lines().skip(1).all(|l| l.contains("\t{")),
        "only whole entries: {text}"
    );

    // Replaced by an older copy of itself, then by another project's journal.
    let copy = dir.path().join("copy.tsv");
    std::fs::copy(&path, &copy).expect("copy");
    let kept = j.tell(at(5), None, line("e")).1.cursor.expect("kept");
    std::fs::rename(&copy, &path).expect("rename");
    let older = j.tell(at(6), None, line("f")).1.cursor.expect("kept");
    assert_ne!(older.journal, kept.journal);
    assert!(j.take_news()[0].contains("replaced"));
    let other = dir.path().join("other.tsv");
    let (mut o, _) = Journal::open(&other);
    o.tell(at(1), None, line("x"));
    drop(o);
    std::fs::rename(&other, &path).expect("rename");
    let foreign = j.tell(at(7), None, line("g")).1.cursor.expect("kept");
    assert_ne!(foreign.journal, older.journal);
    assert_eq!(j.take_news().len(), 1);
}

/// Two maestros of a project: the second follows the new journal the first started,
/// instead of starting a third.
#[test]
fn a_sibling_follows_the_new_journal_another_started() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("journal.tsv");
    let (mut a, _) = Journal::open(&path);
    let (mut b, _) = Journal::open(&path);
    a.tell(at(1), None, line("a"));
    b.tell(at(2), None, line("b"));
    std::fs::remove_file(&path).expect("rm");
    let from_a = a.tell(at(3), None, line("c")).1.cursor.expect("kept");
    let from_b = b.tell(at(4), None, line("d")).1.cursor.expect("kept");
    assert_eq!(from_b.journal, from_a.journal, "one new journal");
    assert_eq!(from_b.seq, from_a.seq + 1, "one place each");
    assert!(b.take_news()[0].contains("another maestro started a new journal"));
}

/// A reader of a journal replaced under it is told so once, then reads the new one; a
/// torn line that is not one whole object is never handed out.
#[test]
fn a_reader_is_told_of_a_new_journal_and_never_gets_a_torn_line() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("journal.tsv");
    let (mut j, _) = Journal::open(&path);
    let c = j.tell(at(1), None, line("a")).1.cursor.expect("kept");
    let (mut reader, _) = follow_after(&path, c).expect("follow");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open");
    std::io::Write::write_all(
        &mut f,
        b"2\t0\t0\t1\t{\"event\":\"x\",\"cur\n3\t0\t0\t1\t{\"ev\"}{\"a\":1}\n",
    )
    .expect("write");
    assert!(
        reader.next_entries().is_empty(),
        "a torn line is not handed out"
    );
    std::fs::remove_file(&path).expect("rm");
    let new = j.tell(at(2), None, line("b")).1.cursor.expect("kept");
    let got = reader.next_entries();
    assert_eq!(reader.take_replaced(), Some(new.journal));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].1.contains("\"b\""));
}

/// A journal deleted while no maestro ran: the next one names it (the side file
/// remembers it, even when an older maestro made it), so its cursors still resume.
#[test]
fn a_journal_deleted_between_runs_is_named_by_the_next() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("journal.tsv");
    let (mut first, _) = Journal::open(&path);
    let (_, told) = first.tell(at(1), None, line("e"));
    let old = told.cursor.expect("kept");
    drop(first);
    // As an older maestro left it: no side file.
    std::fs::remove_file(dir.path().join("journal.tsv.lock")).expect("side file");
    drop(Journal::open(&path));
    std::fs::remove_file(&path).expect("delete");
    let (next, _) = Journal::open(&path);
    assert_ne!(next.id(), old.journal);
    let (_, gap) = follow_after(&path, old).expect("the old cursor resumes");
    assert_eq!(
        gap.map(|g| g.count),
        Some(None),
        "after a gap of unknown size"
    );
}
