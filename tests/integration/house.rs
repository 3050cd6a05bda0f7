//! The house rules a newcomer relies on to find things: only `main.rs` and `lib.rs` at
//! the top of `src/`, no circle of modules that import each other, of any length (one
//! subject split in two, or a type living in the wrong home), every import between
//! rooms pointing down (docs/architecture.md draws the floors), no file past the
//! 700-line ceiling, and SQL written only by `core/store` and the sources that own a
//! connection.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

pub(crate) fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// `core::pipeline::host` for `src/core/pipeline/host.rs` (and for `…/host/mod.rs`).
fn module_of(file: &Path) -> String {
    let rel = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

#[test]
fn only_main_and_lib_sit_at_the_top_of_src() {
    let loose: Vec<String> = std::fs::read_dir(src())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "main.rs" && n != "lib.rs")
        .collect();
    assert!(loose.is_empty(), "files loose beside main.rs: {loose:?}");
}

/// Which modules each module imports (`use crate::…` and paths in the code), leaving
/// out a module's own parents and children.
fn use_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(f)).collect();
    let path = regex::Regex::new(r"crate::([a-z_]+(?:::[a-z_]+)*)").unwrap();
    let braced = regex::Regex::new(r"crate::((?:[a-z_]+::)+)\{([^}]*)\}").unwrap();
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let me = module_of(f);
        let text = std::fs::read_to_string(f).unwrap();
        // Paths inside a braced `use crate::a::{b, c::d}` are read as `a::b`, `a::c::d`.
        let text = braced
            .replace_all(&text, |c: &regex::Captures| {
                c[2].split(',').fold(String::new(), |mut out, item| {
                    out.push_str(&format!("crate::{}{} ", &c[1], item.trim()));
                    out
                })
            })
            .into_owned();
        for c in path.captures_iter(&text) {
            let mut target = c[1].to_owned();
            // The longest prefix that is a module file.
            while !modules.contains(&target) {
                match target.rfind("::") {
                    Some(i) => target.truncate(i),
                    None => break,
                }
            }
            let related =
                me.starts_with(&format!("{target}::")) || target.starts_with(&format!("{me}::"));
            if modules.contains(&target) && target != me && !related {
                uses.entry(me.clone()).or_default().insert(target);
            }
        }
    }
    uses
}

/// The strongly connected components of more than one module (Tarjan's algorithm):
/// every circle of imports, whatever its length.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(lw));
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(iw));
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn the_circle_finder_finds_circles_of_any_length() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["d"]),
        ("d", vec!["e"]),
        ("e", vec!["a"]),
        ("x", vec!["y", "a"]),
        ("y", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(circles(&graph), [["a", "b", "c", "d", "e"]]);
}

#[test]
fn no_circle_of_modules() {
    let found = circles(&use_graph());
    assert!(
        found.is_empty(),
        "modules that import each other, around a circle (one subject split in two, or a type living in the wrong home): {found:#?}"
    );
}

/// The room a module stands in, as docs/architecture.md draws the house: a folder or
/// file directly under `src/core/`, else one directly under `src/` (`cli::demo` is in
/// `cli`, `core::hub::link` in `core::hub`).
fn room_of(module: &str) -> String {
    let mut parts = module.split("::");
    match (parts.next(), parts.next()) {
        (Some("core"), Some(second)) => format!("core::{second}"),
        (Some(first), _) => first.to_owned(),
        (None, _) => String::new(),
    }
}

/// Which rooms each room imports, through any of their files.
fn room_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut rooms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, targets) in use_graph() {
        let from = room_of(&module);
        for target in targets {
            let to = room_of(&target);
            if to != from {
                rooms.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    rooms
}

#[test]
fn rooms_are_read_from_the_top_two_levels() {
    assert_eq!(room_of("core::hub::link"), "core::hub");
    assert_eq!(room_of("core::procs"), "core::procs");
    assert_eq!(room_of("cli::demo::scenario"), "cli");
    assert_eq!(room_of("tui"), "tui");
}

/// Two folders that import each other through their files are one subject split in
/// two, or a thing living on the wrong floor: one of those imports runs back up.
#[test]
fn every_import_between_rooms_points_down() {
    let found = circles(&room_graph());
    assert!(
        found.is_empty(),
        "rooms (folders or files of src/ and src/core/) that import each other through their files; move what the lower one needs down, or hand it down from the higher one: {found:#?}"
    );
}

/// The floors picture names every room, so a new room is placed on purpose.
#[test]
fn the_architecture_notes_name_every_room() {
    let notes =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let rooms: BTreeSet<String> = files
        .iter()
        .map(|f| room_of(&module_of(f)))
        .filter(|r| !matches!(r.as_str(), "lib" | "main" | "core"))
        .collect();
    let unnamed: Vec<&String> = rooms
        .iter()
        .filter(|r| {
            let short = r.trim_start_matches("core::");
            !notes.contains(&format!("`{short}`"))
        })
        .collect();
    assert!(
        unnamed.is_empty(),
        "rooms missing from the floors in docs/architecture.md: {unnamed:?}"
    );
}

#[test]
fn no_file_passes_the_ceiling() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        &mut files,
    );
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 700).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these by subject: {long:?}");
}

/// A file's lines but its `#[cfg(test)] mod … { … }` blocks (a `#[cfg(test)]` on
/// anything else, a constant say, leaves what follows it counted).
pub(crate) fn outside_test_modules(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut all = text.lines().peekable();
    while let Some(line) = all.next() {
        let test_module = line.starts_with("#[cfg(test)]")
            && all
                .peek()
                .is_some_and(|next| next.starts_with("mod ") || next.starts_with("pub mod "));
        if test_module {
            all.by_ref().take_while(|l| *l != "}").for_each(drop);
            continue;
        }
        lines.push(line);
    }
    lines
}

/// Every function in `src/` outside tests, as `file::name` and its length: from its
/// `fn` line to the closing brace at the same indentation (rustfmt's layout). Test files
/// (`tests.rs`, `tests_*.rs`, `tests/`) and what follows a file's `#[cfg(test)]` are
/// left out.
fn function_lengths() -> Vec<(String, usize)> {
    let signature =
        regex::Regex::new(r"^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?fn\s+(\w+)").unwrap();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut out = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let in_tests = f.components().any(|c| c.as_os_str() == "tests");
        if in_tests || name == "tests.rs" || name.starts_with("tests_") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let lines = outside_test_modules(&text);
        let rel = f.strip_prefix(src()).unwrap().display().to_string();
        for (i, line) in lines.iter().enumerate() {
            let Some(c) = signature.captures(line) else {
                continue;
            };
            // A signature without a body (a trait's) ends in `;` before any `{`.
            let Some(open) = lines[i..]
                .iter()
                .position(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'))
            else {
                continue;
            };
            if lines[i + open].trim_end().ends_with(';') {
                continue;
            }
            let close = format!("{}}}", &c[1]);
            if let Some(end) = lines[i..].iter().position(|l| *l == close) {
                out.push((format!("{rel}::{}", &c[6]), end + 1));
            }
        }
    }
    out
}

/// A function a reader holds in mind: none in `src/` (tests aside) passes 100 lines.
#[test]
fn no_function_passes_100_lines() {
    let lengths = function_lengths();
    let long: Vec<String> = lengths
        .iter()
        .filter(|(_, n)| *n > 100)
        .map(|(name, n)| format!("{name} ({n} lines)"))
        .collect();
    assert!(long.is_empty(), "split these along their seams: {long:?}");
}

#[test]
fn sql_is_written_only_by_the_store_and_the_sources() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let writes = regex::Regex::new(r#""\s*(INSERT|UPDATE|DELETE)\s"#).unwrap();
    let allowed = [
        "core/store/",
        "core/sources/",
        "core/schema.rs",
        "core/replay/",
    ];
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| {
            let rel = f
                .strip_prefix(src())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            !allowed.iter().any(|a| rel.starts_with(a))
                && writes.is_match(&std::fs::read_to_string(f).unwrap())
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "SQL writes outside core/store: {offenders:?}"
    );
}

/// Settings sit above the core: they read TOML into the core's own types, and no core
/// module imports them back.
#[test]
fn the_core_never_imports_the_settings() {
    let mut files = Vec::new();
    rust_files(&src().join("core"), &mut files);
    let back: Vec<String> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .contains("crate::settings")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(back.is_empty(), "core modules importing settings: {back:?}");
}

/// The core draws nothing: no file under `src/core` names the terminal libraries, so a
/// headless maestro, `serve` and the hooks never depend on how a screen is drawn.
#[test]
fn the_core_imports_neither_ratatui_nor_crossterm() {
    let mut files = Vec::new();
    rust_files(&src().join("core"), &mut files);
    let drawn: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            text.contains("ratatui::") || text.contains("crossterm::")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        drawn.is_empty(),
        "core modules importing a terminal library: {drawn:?}"
    );
}

/// Errors are types that keep their cause: no function in `src` (tests aside) answers
/// with bare text (`Result<_, String>`), which would drop the cause and leave callers
/// matching on words.
#[test]
fn no_function_fails_with_bare_text() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let pattern = regex::Regex::new(r"Result<[^;{]*,\s*String>").unwrap();
    let texty: Vec<String> = files
        .iter()
        .filter(|f| {
            let name = f.file_name().unwrap().to_string_lossy();
            !name.starts_with("tests") && !name.ends_with("_tests.rs")
        })
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let outside = outside_test_modules(&text).join("\n");
            pattern
                .find_iter(&outside)
                .map(|m| format!("{}: {}", f.display(), m.as_str()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(texty.is_empty(), "text errors: {texty:#?}");
}

/// The draw reads the dashboard's state and writes none: every drawing function in the
/// TUI (`fn draw…`) takes the state by `&` (no `&mut UiState`, no `&mut self`, no
/// `&mut DrawCtx`), and nothing in the TUI can be written through a shared reference
/// (no `Cell`, `RefCell` or lock), so a frame cannot change what the next key sees.
/// What only a frame can measure is returned to the loop.
#[test]
fn the_draw_takes_the_state_by_shared_reference() {
    let mut files = Vec::new();
    rust_files(&src().join("tui"), &mut files);
    let interior = regex::Regex::new(r"\b(Cell|RefCell|OnceCell|Mutex|RwLock)\s*<").unwrap();
    let draw = regex::Regex::new(r"fn draw(_\w+)?(<[^>]*>)?\(([^)]*)\)").unwrap();
    let mut writes = Vec::new();
    let mut draws = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let outside = outside_test_modules(&text).join("\n");
        for m in interior.find_iter(&outside) {
            writes.push(format!("{}: {}", f.display(), m.as_str()));
        }
        for sig in draw.captures_iter(&outside) {
            draws += 1;
            let params = &sig[3];
            if ["&mut UiState", "&mut self", "&mut DrawCtx"]
                .iter()
                .any(|w| params.contains(w))
            {
                writes.push(format!("{}: {}", f.display(), &sig[0]));
            }
        }
    }
    assert!(draws > 20, "the drawing functions were not found ({draws})");
    assert!(writes.is_empty(), "the draw could write state: {writes:#?}");
}

/// Where a setting's value comes from before it is resolved: the file's mirror, the
/// flags, a demo scenario's own file, the event log's record of a run (read by
/// replays). A key named there is an input, not a declaration.
const SETTING_INPUTS: &[(&str, &str)] = &[
    ("settings/mod.rs", "Section"),
    ("settings/mod.rs", "ConfigFile"),
    ("settings/mod.rs", "Overrides"),
    ("cli/args.rs", ""),
    ("cli/demo/scenario.rs", ""),
    ("core/event_log/input.rs", "RecordedSettings"),
];

/// Fields named like a setting that are something else, or the part that does the
/// work with the value it was handed (the line cutters take the length they cut at).
const NAMED_ALIKE: &[(&str, &str)] = &[
    ("NeedsYouBook", "claude"), // Claude Code's folder, not `[launch] claude`
    ("SessionSettings", "claude"), // the same folder
    ("SessionFigures", "context_window"), // a session's window, as measured
    ("Theme", "terminal"),      // the terminal's own colours
    ("TerminalGuard", "terminal"), // the terminal itself
    ("LineIndex", "max_line"),  // cuts lines at what `Reading` says
    ("LineAssembler", "max_line"), // the same
];

/// A value the settings hand on as it is: a scalar copied from layer to layer (a
/// built object passed whole is not a declaration of its keys).
fn scalar_type(ty: &str) -> bool {
    let ty = ty
        .trim()
        .trim_start_matches("Option<")
        .trim_end_matches('>');
    let ty = ty.rsplit("::").next().unwrap_or(ty);
    matches!(
        ty,
        "Duration"
            | "bool"
            | "u8"
            | "u16"
            | "u32"
            | "u64"
            | "usize"
            | "f64"
            | "String"
            | "PathBuf"
            | "Vec<String"
    )
}

/// Each key of the configuration is declared once between the file and the flags and
/// where it is used: one field of a scalar type, in the built object a component takes
/// whole (`Rules`, `Deadlines`, `Reading`, `DbWrites`, `RoleTimings`, …), never a copy
/// in each layer it passes through.
#[test]
fn each_setting_is_declared_once() {
    let defaults = std::fs::read_to_string(src().join("../config/default.toml")).unwrap();
    let key = regex::Regex::new(r"(?m)^([a-z_]+)\s*=").unwrap();
    let keys: BTreeSet<String> = key
        .captures_iter(&defaults)
        .map(|c| c[1].to_owned())
        .collect();
    let structure = regex::Regex::new(r"(?s)struct\s+(\w+)[^{;(]*\{(.*?)\n\}").unwrap();
    let field =
        regex::Regex::new(r"(?m)^\s*(?:pub(?:\([a-z]+\))?\s+)?(\w+)\s*:\s*([^,\n]+),").unwrap();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut declared: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy();
        if name.starts_with("tests") || name.ends_with("_tests.rs") {
            continue;
        }
        let rel = f
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = outside_test_modules(&std::fs::read_to_string(f).unwrap()).join("\n");
        for s in structure.captures_iter(&text) {
            let owner = &s[1];
            let input = SETTING_INPUTS
                .iter()
                .any(|(file, part)| rel == *file && owner.contains(part));
            for fl in field.captures_iter(&s[2]) {
                let (name, ty) = (&fl[1], &fl[2]);
                if input || !keys.contains(name) || !scalar_type(ty) {
                    continue;
                }
                if NAMED_ALIKE.contains(&(owner, name)) {
                    continue;
                }
                declared
                    .entry(name.to_owned())
                    .or_default()
                    .push(format!("{rel}: {owner}"));
            }
        }
    }
    // The reader finds the declarations (a parser that finds nothing passes nothing).
    assert_eq!(
        declared.get("conductor_stale_after").map(Vec::as_slice),
        Some(&["core/hub/mod.rs: Deadlines".to_owned()][..])
    );
    let twice: Vec<_> = declared.iter().filter(|(_, at)| at.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "settings declared more than once: {twice:#?}"
    );
}
