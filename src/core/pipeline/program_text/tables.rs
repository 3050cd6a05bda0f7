//! The programs [`super`] knows: shells, interpreters and the wrappers that run other
//! programs, with the options that carry program text or take one more word.

/// Shells: `-c` makes the first operand the script; without it the operand is a file.
pub(super) const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "ash",
    "mksh",
    "yash",
    "fish",
    "csh",
    "tcsh",
    "busybox-sh",
];

/// An interpreter's command line: which options carry program text, which take one
/// more word, and what its first operand is.
pub(super) struct Interpreter {
    pub(super) names: &'static [&'static str],
    /// Options whose argument is program text (`-c`, `-e`, `--eval`).
    pub(super) code: &'static [&'static str],
    /// Options whose argument is a word of its own (`-I dir`, `-m module`).
    pub(super) with_argument: &'static [&'static str],
    /// Options whose argument is the program file (then no operand is program text).
    pub(super) program_file: &'static [&'static str],
    /// Option parsing ends with the program text (python's `-c` and `-m`).
    pub(super) code_ends_options: bool,
    /// Without a code option or a program file, the first operand is program text
    /// (awk, sed, jq) rather than a script file.
    pub(super) first_operand_is_code: bool,
}

pub(super) const INTERPRETERS: &[Interpreter] = &[
    Interpreter {
        names: &["python", "pypy", "python-dbg"],
        code: &["-c"],
        with_argument: &["-W", "-X", "-m", "--check-hash-based-pycs"],
        program_file: &[],
        code_ends_options: true,
        first_operand_is_code: false,
    },
    Interpreter {
        names: &["perl"],
        code: &["-e", "-E"],
        with_argument: &["-I", "-M", "-m", "-x", "-i"],
        program_file: &[],
        code_ends_options: false,
        first_operand_is_code: false,
    },
    Interpreter {
        names: &["ruby", "irb", "jruby"],
        code: &["-e"],
        with_argument: &["-I", "-r", "-C", "-E", "-F", "--encoding"],
        program_file: &[],
        code_ends_options: false,
        first_operand_is_code: false,
    },
    Interpreter {
        names: &["node", "nodejs", "bun", "deno", "tsx", "ts-node"],
        code: &["-e", "-p", "--eval", "--print", "eval"],
        with_argument: &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
            "-C",
            "--conditions",
        ],
        program_file: &[],
        code_ends_options: false,
        first_operand_is_code: false,
    },
    Interpreter {
        names: &["php"],
        code: &["-r", "-B", "-R", "-E", "-F"],
        with_argument: &["-d", "-c", "-z", "-t"],
        program_file: &["-f"],
        code_ends_options: false,
        first_operand_is_code: false,
    },
    Interpreter {
        names: &["lua", "luajit", "texlua"],
        code: &["-e"],
        with_argument: &["-l"],
        program_file: &[],
        code_ends_options: false,
        first_operand_is_code: false,
    },
    Interpreter {
        names: &[
            "osascript",
            "rscript",
            "r",
            "julia",
            "tclsh",
            "wish",
            "expect",
            "gdb",
        ],
        code: &["-e", "-c", "--eval", "-ex", "--eval-command", "-eval"],
        with_argument: &["-l", "-s", "-x", "-iex"],
        program_file: &["-f"],
        code_ends_options: false,
        first_operand_is_code: false,
    },
    Interpreter {
        names: &["awk", "gawk", "mawk", "nawk", "busybox-awk"],
        code: &["-e", "--source"],
        with_argument: &[
            "-v",
            "-F",
            "--assign",
            "--field-separator",
            "-i",
            "--include",
        ],
        program_file: &["-f", "--file"],
        code_ends_options: false,
        first_operand_is_code: true,
    },
    Interpreter {
        names: &["sed", "gsed"],
        code: &["-e", "--expression"],
        with_argument: &["-l", "--line-length"],
        program_file: &["-f", "--file"],
        code_ends_options: false,
        first_operand_is_code: true,
    },
    Interpreter {
        names: &["jq", "gojq", "jaq", "yq"],
        code: &[],
        with_argument: &["--indent", "-L"],
        program_file: &["-f", "--from-file"],
        code_ends_options: false,
        first_operand_is_code: true,
    },
];

/// Programs that run other programs: their own options (and some fixed operands) come
/// first, then the command they run, read the same way again.
pub(super) struct Wrapper {
    pub(super) names: &'static [&'static str],
    /// Options that take one more word.
    pub(super) with_argument: &'static [&'static str],
    /// Options whose argument is a shell command (`flock -c`, `su -c`, `env -S`).
    pub(super) code: &'static [&'static str],
    /// Operands between the options and the command (`timeout DURATION`).
    pub(super) operands: usize,
    /// `NAME=VALUE` words before the command (`env`, `sudo`).
    pub(super) assignments: bool,
}

pub(super) const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        names: &["env"],
        with_argument: &["-u", "--unset", "-C", "--chdir", "--split-string"],
        code: &["-S"],
        operands: 0,
        assignments: true,
    },
    Wrapper {
        names: &["timeout"],
        with_argument: &["-s", "--signal", "-k", "--kill-after"],
        code: &[],
        operands: 1,
        assignments: false,
    },
    Wrapper {
        names: &[
            "nice",
            "ionice",
            "nohup",
            "stdbuf",
            "setsid",
            "unbuffer",
            "time",
            "caffeinate",
        ],
        with_argument: &[
            "-n",
            "--adjustment",
            "-c",
            "--class",
            "--classdata",
            "-t",
            "-i",
            "-o",
            "-e",
            "-f",
            "--format",
            "--output",
        ],
        code: &[],
        operands: 0,
        assignments: false,
    },
    Wrapper {
        names: &[
            "chrt", "taskset", "chroot", "nsenter", "unshare", "firejail", "bwrap",
        ],
        with_argument: &["-p", "-c", "-t", "--target", "--bind", "--ro-bind"],
        code: &[],
        operands: 1,
        assignments: false,
    },
    Wrapper {
        names: &["su", "runuser", "sg"],
        with_argument: &["-s", "--shell", "-g", "--group", "-G", "-w"],
        code: &["-c", "--command", "--session-command"],
        operands: 1,
        assignments: false,
    },
    Wrapper {
        names: &["sudo", "doas", "newgrp"],
        with_argument: &[
            "-u",
            "--user",
            "-g",
            "--group",
            "-C",
            "-D",
            "--chdir",
            "-h",
            "--host",
            "-p",
            "--prompt",
            "-r",
            "--role",
            "-t",
            "--type",
            "-U",
            "--other-user",
        ],
        // `sudo -s CMD` and `sudo -i CMD` run CMD through the user's shell.
        code: &["-s", "--shell", "-i", "--login"],
        operands: 0,
        assignments: true,
    },
    Wrapper {
        names: &["flock"],
        with_argument: &["-w", "--timeout", "-E", "--conflict-exit-code"],
        code: &["-c", "--command"],
        operands: 1,
        assignments: false,
    },
    Wrapper {
        names: &["xargs"],
        with_argument: &[
            "-I",
            "-d",
            "--delimiter",
            "-E",
            "-L",
            "-n",
            "--max-args",
            "-P",
            "--max-procs",
            "-s",
            "--max-chars",
            "-a",
            "--arg-file",
        ],
        code: &[],
        operands: 0,
        assignments: false,
    },
    Wrapper {
        names: &["strace", "ltrace", "valgrind", "perf"],
        with_argument: &["-o", "-e", "-p", "-s", "-u", "-E"],
        code: &[],
        operands: 0,
        assignments: false,
    },
    Wrapper {
        names: &["script"],
        with_argument: &["-E", "--echo", "-I", "-O", "-B", "-T", "-m"],
        code: &["-c", "--command"],
        operands: 0,
        assignments: false,
    },
];

/// Programs that join their operands into a shell command (`watch CMD`, `ssh HOST CMD`).
pub(super) const JOINS_INTO_SHELL: &[&str] = &["watch", "ssh", "rsh", "mosh", "pwsh", "powershell"];
/// ssh's options that take one more word.
pub(super) const SSH_WITH_ARGUMENT: &str = "BbcDEeFIiJLlmOoPpQRSWw";
