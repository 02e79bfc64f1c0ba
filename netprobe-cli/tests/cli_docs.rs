//! `netprobe completions SHELL` and `netprobe man`: generated from the parser's own definition;
//! checked with the tools that consume them (`bash -n`, man-db's `man -l`).

use assert_cmd::Command;
use std::process::Stdio;

/// The visible subcommands, as `netprobe help` lists them (hidden ones and `help` left out).
fn subcommands() -> Vec<String> {
    let out = Command::cargo_bin("netprobe")
        .unwrap()
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let names: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|n| n != "help")
        .collect();
    for expected in ["symbols", "trace", "ps", "completions", "man", "probe"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    names
}

/// What `netprobe ARGS...` prints on stdout; the test fails when it does not exit 0.
fn netprobe_stdout(args: &[&str]) -> String {
    let out = Command::cargo_bin("netprobe")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn completions(shell: &str) -> String {
    netprobe_stdout(&["completions", shell])
}

#[test]
fn bash_completion_names_every_subcommand_and_parses() {
    let script = completions("bash");
    for name in subcommands() {
        assert!(script.contains(&name), "bash completion lacks {name}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("netprobe.bash");
    std::fs::write(&file, &script).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        check.status.success() && check.stderr.is_empty(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    // Sourced into a shell, it registers the completion function for `netprobe`.
    let registered = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p netprobe", file.display()))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&registered.stdout).contains("netprobe"),
        "{}",
        String::from_utf8_lossy(&registered.stderr)
    );
}

#[test]
fn zsh_and_fish_completions_name_every_subcommand() {
    let names = subcommands();
    for shell in ["zsh", "fish"] {
        let script = completions(shell);
        assert!(!script.trim().is_empty(), "{shell}: empty");
        for name in &names {
            assert!(
                script.contains(name.as_str()),
                "{shell} completion lacks {name}"
            );
        }
    }
    assert!(completions("zsh").starts_with("#compdef netprobe"));
}

#[test]
fn unknown_shell_is_a_usage_error() {
    let out = Command::cargo_bin("netprobe")
        .unwrap()
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bash") && err.contains("zsh") && err.contains("fish"),
        "{err}"
    );
}

/// Renders a roff page with man-db's `man -l`, warnings on (`--warnings` passes `-w` to groff);
/// returns the text and asserts nothing went to stderr.
fn render(page: &std::path::Path) -> String {
    let out = std::process::Command::new("man")
        .arg("--warnings")
        .arg("-l")
        .arg(page)
        .env("MANWIDTH", "100")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .stdin(Stdio::null())
        .output()
        .expect("man (man-db) is needed: scripts/install-prereqs.sh installs it");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.trim().is_empty(),
        "man -l {}: {err}",
        page.display()
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn man_page_renders_without_warnings_and_lists_every_subcommand() {
    let out = Command::cargo_bin("netprobe")
        .unwrap()
        .arg("man")
        .output()
        .unwrap();
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("netprobe.1");
    std::fs::write(&page, &out.stdout).unwrap();
    let text = render(&page);
    assert!(
        text.contains("NAME") && text.contains("SUBCOMMANDS"),
        "{text}"
    );
    for name in subcommands() {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("netprobe-{name}("))),
            "man page lacks {name}:\n{text}"
        );
    }
}

#[test]
fn man_dir_writes_one_page_per_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    Command::cargo_bin("netprobe")
        .unwrap()
        .args(["man", "--dir"])
        .arg(dir.path())
        .assert()
        .success();
    for name in subcommands() {
        let page = dir.path().join(format!("netprobe-{name}.1"));
        assert!(page.exists(), "{} missing", page.display());
        let text = render(&page);
        assert!(text.contains(&format!("netprobe-{name}")), "{text}");
    }
    assert!(dir.path().join("netprobe.1").exists());
}

/// `man --dir D` as root into a folder another user can write: a symlink they left at a page's
/// name is replaced by the page, and the file it pointed to is not written.
#[test]
fn man_dir_replaces_a_planted_symlink_instead_of_writing_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(outside.path(), "root:*:19000:0:99999:7:::\n").unwrap();
    let pages = dir.path().join("pages");
    std::fs::create_dir(&pages).unwrap();
    let planted = pages.join("netprobe-trace.1");
    std::os::unix::fs::symlink(outside.path(), &planted).unwrap();
    let out = Command::cargo_bin("netprobe")
        .unwrap()
        .args(["man", "--dir"])
        .arg(&pages)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(outside.path()).unwrap(),
        "root:*:19000:0:99999:7:::\n",
        "the symlink's target was written"
    );
    let meta = std::fs::symlink_metadata(&planted).unwrap();
    assert!(meta.file_type().is_file(), "{planted:?} is still a symlink");
    assert!(std::fs::read_to_string(&planted).unwrap().contains(".TH"));
    let left: Vec<String> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// Lines of the probe-spec and the filter grammar (`cli::SPEC_AND_FILTER_GRAMMAR`), as `--help`
/// prints them and as `man` renders them (grammar lines are kept as lines of their own).
const GRAMMAR_LINES: [&str; 4] = [
    "SPEC     := [p: | r:] LOCATION { ARG }",
    "LOCATION := IMAGE:PATTERN | IMAGE:0xOFFSET | PATTERN",
    "UNARY   := ! UNARY | ( EXPR ) | CMP",
    "OPERAND := NAME | $tid | $comm | INTEGER | STRING",
];

/// Whoever reads `--help` or a man page of a command that takes probe specs finds both grammars.
#[test]
fn spec_and_filter_grammars_are_in_help_and_man_pages() {
    for command in [&["trace"][..], &["count"], &["latency"], &["probe", "add"]] {
        let help = netprobe_stdout(&[command, &["--help"]].concat());
        for line in GRAMMAR_LINES {
            assert!(
                help.contains(line),
                "{command:?} --help lacks {line:?}:\n{help}"
            );
        }
    }
    // `netprobe man` (the main page) and the pages `man --dir` writes for those commands.
    let dir = tempfile::tempdir().unwrap();
    let main_page = dir.path().join("netprobe.1");
    std::fs::write(&main_page, netprobe_stdout(&["man"])).unwrap();
    let pages = dir.path().join("pages");
    Command::cargo_bin("netprobe")
        .unwrap()
        .args(["man", "--dir"])
        .arg(&pages)
        .assert()
        .success();
    let command_pages = ["trace", "count", "latency", "probe-add"]
        .map(|name| pages.join(format!("netprobe-{name}.1")));
    for page in std::iter::once(main_page).chain(command_pages) {
        let text = render(&page);
        for line in GRAMMAR_LINES {
            assert!(
                text.contains(line),
                "{} lacks {line:?}:\n{text}",
                page.display()
            );
        }
    }
}
