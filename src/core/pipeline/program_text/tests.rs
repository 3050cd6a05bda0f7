//! Which words are program text, on the command lines the review tried.

use super::*;

fn roles_of(argv: &[&str]) -> Vec<Role> {
    let args: Vec<String> = argv[1..].iter().map(|s| (*s).to_owned()).collect();
    roles(argv[0], &args)
}

fn refused(argv: &[&str]) -> bool {
    let args: Vec<String> = argv[1..].iter().map(|s| (*s).to_owned()).collect();
    check(argv[0], &args, &["fix".to_owned()]).is_err()
}

use Role::{Code, Control, OptionsOpen, Plain};

#[test]
fn a_shells_script_is_code_wherever_its_options_put_it() {
    assert_eq!(
        roles_of(&["sh", "-c", "x", "n", "$a"]),
        [Control, Code, Plain, Plain]
    );
    assert_eq!(
        roles_of(&["bash", "-o", "pipefail", "-c", "x", "$a"]),
        [Control, Control, Control, Code, Plain]
    );
    assert_eq!(roles_of(&["/bin/bash", "-lc", "x"]), [Control, Code]);
    assert_eq!(
        roles_of(&["bash", "-c", "-e", "x"]),
        [Control, Control, Code]
    );
    assert_eq!(
        roles_of(&["sh", "write.sh", "out", "$a"]),
        [Control, Plain, Plain]
    );
    assert_eq!(roles_of(&["sh", "-s", "$a"]), [Control, Plain]);
}

#[test]
fn wrappers_are_seen_through() {
    assert_eq!(
        roles_of(&["timeout", "5", "sh", "-c", "x", "$a"]),
        [Control, Control, Control, Code, Plain]
    );
    assert_eq!(
        roles_of(&["env", "-u", "X", "A=1", "bash", "-ec", "x"]),
        [Control, Control, Control, Control, Control, Code]
    );
    assert_eq!(
        roles_of(&[
            "nice", "-n", "5", "timeout", "-s", "KILL", "9", "python3", "-c", "x", "$a"
        ]),
        [
            Control, Control, Control, Control, Control, Control, Control, Control, Code, Plain
        ]
    );
    assert_eq!(
        roles_of(&["xargs", "-0", "sh", "-c", "x"]),
        [Control, Control, Control, Code]
    );
    assert_eq!(
        roles_of(&["flock", "/tmp/l", "-c", "x"]),
        [Control, Control, Code]
    );
    assert_eq!(roles_of(&["env", "-S", "x y"]), [Control, Code]);
}

#[test]
fn interpreters_awk_sed_jq_and_remote_commands() {
    assert_eq!(
        roles_of(&["python3", "-c", "x", "$a"]),
        [Control, Code, Plain]
    );
    assert_eq!(
        roles_of(&["python3.12", "-W", "ignore", "s.py", "$a"]),
        [Control, Control, Control, Plain]
    );
    assert_eq!(
        roles_of(&["perl", "-e", "x", "$a"]),
        [Control, Code, OptionsOpen]
    );
    assert_eq!(roles_of(&["node", "--eval=x", "$a"]), [Code, OptionsOpen]);
    assert_eq!(roles_of(&["awk", "{print}", "f"]), [Code, Plain]);
    assert_eq!(
        roles_of(&["awk", "-F", ":", "-f", "p.awk", "$a"]),
        [Control, Control, Control, Control, OptionsOpen]
    );
    assert_eq!(
        roles_of(&["sed", "-n", "s/a/b/", "f"]),
        [Control, Code, Plain]
    );
    assert_eq!(
        roles_of(&["sed", "-e", "s/a/b/", "$a"]),
        [Control, Code, OptionsOpen]
    );
    assert_eq!(
        roles_of(&["jq", "-r", "--arg", "d", "$a", ".x"]),
        [Control, Control, Control, Plain, Code]
    );
    assert_eq!(
        roles_of(&["ssh", "-p", "22", "host", "echo", "$a"]),
        [Control, Control, Control, Code, Code]
    );
    assert_eq!(roles_of(&["watch", "echo", "$a"]), [Code, Code]);
    assert_eq!(
        roles_of(&["find", ".", "-exec", "sh", "-c", "x", "$a", ";"])[4],
        Code
    );
}

#[test]
fn a_programs_own_arguments_stay_data() {
    assert!(
        roles_of(&["maestro", "task", "freeze", "$a"])
            .iter()
            .all(|r| *r == Plain)
    );
    assert!(roles_of(&["cargo", "-c", "x"]).iter().all(|r| *r == Plain));
    assert!(
        roles_of(&["printf", "%s", "sh", "$a"])
            .iter()
            .all(|r| *r == Plain)
    );
}

#[test]
fn the_seen_injections_are_refused_and_the_safe_forms_kept() {
    assert!(refused(&["sh", "-c", "echo \"$event.detail\" > f"]));
    assert!(refused(&[
        "bash",
        "-o",
        "pipefail",
        "-c",
        "echo $event.detail"
    ]));
    assert!(refused(&["timeout", "5", "sh", "-c", "echo $event.detail"]));
    assert!(refused(&["sh", "-c", "echo $fix"]), "a bare output name");
    assert!(refused(&["python3", "-c", "print('$event.detail')"]));
    assert!(refused(&["awk", "{print \"$event.detail\"}"]));
    assert!(refused(&["env", "BASH_ENV=$event.detail", "bash", "s.sh"]));
    assert!(refused(&["ssh", "h", "echo", "$event.detail"]));
    assert!(!refused(&["sh", "-c", "echo \"$1\"", "_", "$event.detail"]));
    assert!(!refused(&[
        "sh",
        "-c",
        "echo \"$MAESTRO_EVENT_DETAIL\" \"$HOME\""
    ]));
    assert!(!refused(&["sh", "write.sh", "out", "$a.stdout"]));
    assert!(!refused(&[
        "maestro",
        "task",
        "freeze",
        "$event.task_id",
        "--yes"
    ]));
    let args = vec!["-c".to_owned(), "echo $event.task_id".to_owned()];
    let (i, why) = check("sh", &args, &[]).expect_err("refused");
    assert_eq!(i, 1);
    assert!(
        why.contains("MAESTRO_EVENT_TASK_ID") && why.contains("$1"),
        "{why}"
    );
}
