//! Inputs the coverage-guided fuzz targets of this crate (`netprobe-cli/fuzz`, `scripts/fuzz.sh`)
//! found to crash a parser or a target's own check, replayed through the same public entry points
//! and the same checks as the target that found them: each must finish quickly, without a panic.
//! The inputs live in `netprobe-cli/fuzz/regressions/<target>/` (scripts/fuzz.sh also replays them
//! as seeds); netprobe-core/tests/fuzz_regressions.rs does the same for the core's targets.

use netprobe_cli::backend::tracefs::cleanup::session_owner;
use netprobe_cli::backend::tracefs::probe::{
    kernel_isspace, parse_error_log, parse_listing, EventName, GroupName, ProbePath,
};
use netprobe_cli::filter::{Expr, MAX_FILTER_LEN};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Far above what any of these inputs takes (microseconds), far below a hang.
const BOUND: Duration = Duration::from_secs(5);

fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no inputs in {}", dir.display());
    files
}

/// 32 `!` in a row (the `filter_expr` target): the filter parsed, but the printer's `!(…)` for
/// each counted as 64 nesting levels, so the printed filter was refused. What parses must print
/// back to text that parses to the same expression.
#[test]
fn filters_print_back_to_the_same_expression() {
    for input in inputs("filter_expr") {
        let data = std::fs::read(&input).unwrap();
        let started = Instant::now();
        let Ok(text) = std::str::from_utf8(&data) else {
            continue;
        };
        if let Ok(e) = Expr::parse(text) {
            let printed = e.to_string();
            if printed.len() <= MAX_FILTER_LEN {
                let again = Expr::parse(&printed)
                    .unwrap_or_else(|err| panic!("{}: {printed}: {err}", input.display()));
                assert_eq!(again, e, "{}: {printed}", input.display());
            }
            let _ = e.names();
        }
        assert!(started.elapsed() < BOUND, "{}", input.display());
    }
}

/// A probe path holding U+3000 (the `tracefs_text` target): the target asserted no Unicode
/// whitespace, while the rule is the kernel's (`isspace()` bytes, lib/ctype.c, and control
/// characters). A path the rules accept never splits a `uprobe_events` line.
#[test]
fn tracefs_texts_parse_and_accepted_paths_never_split_a_probe_line() {
    for input in inputs("tracefs_text") {
        let data = std::fs::read(&input).unwrap();
        let started = Instant::now();
        let text = String::from_utf8_lossy(&data);
        for p in parse_listing(&text) {
            let _ = session_owner(&p.group);
        }
        let _ = parse_error_log(&text);
        for word in text.split(['\n', ' ']).take(64) {
            let _ = GroupName::new(word);
            let _ = EventName::new(word);
            let _ = EventName::sanitized(word, "entry");
            let _ = session_owner(word);
        }
        if let Ok(path) = ProbePath::new(Path::new(&*text)) {
            assert!(
                !path.as_str().bytes().any(kernel_isspace),
                "{}",
                input.display()
            );
            assert!(
                !path.as_str().chars().any(char::is_control),
                "{}",
                input.display()
            );
        }
        assert!(started.elapsed() < BOUND, "{}", input.display());
    }
}
