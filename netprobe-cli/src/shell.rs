//! Quoting for POSIX shell command lines that netprobe prints (`--dry-run`, `profile --dry-run`):
//! a word that came from a file or a process (a path, a symbol name, a program text) must reach
//! the command as one argument, byte for byte, however it is spelled.

use std::borrow::Cow;

/// Bytes that stand for themselves in an unquoted word of sh, bash and zsh: no expansion,
/// globbing, brace expansion (bash), history (`!`, interactive bash), tilde, comment, redirection
/// or word splitting (POSIX.1-2017 XCU 2.2 "Quoting" lists the characters that need quoting).
fn stands_for_itself(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b'-' | b':' | b'@' | b'+' | b',')
}

/// `word` as one shell word: unchanged when every byte stands for itself, else in single quotes,
/// inside which every byte but `'` is literal (XCU 2.2.2); a `'` is written `'\''` (close, an
/// escaped quote, reopen).
pub fn quote(word: &str) -> Cow<'_, str> {
    if !word.is_empty() && word.bytes().all(stands_for_itself) {
        return Cow::Borrowed(word);
    }
    let mut q = String::with_capacity(word.len() + 2);
    q.push('\'');
    q.push_str(&word.replace('\'', r"'\''"));
    q.push('\'');
    Cow::Owned(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What `sh` gives a command for `word` as its first argument.
    fn through_sh(word: &str) -> String {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote(word)))
            .output()
            .unwrap();
        assert!(out.status.success(), "{word:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn odd_words_reach_the_command_whole() {
        for w in [
            "",
            "'$(touch x)'",
            "`touch x`",
            "a;b",
            "a\nb",
            "{a,b}",
            "~root",
            "#x",
            "a b\tc",
            "\\",
            "'",
            "''",
            "-",
            "%",
        ] {
            assert_eq!(through_sh(w), w);
        }
        assert_eq!(quote("/usr/lib/libc.so.6"), "/usr/lib/libc.so.6");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any text (NUL aside: no argument can hold one) comes back from `sh` unchanged.
        #[test]
        fn quoted_text_round_trips_through_sh(w in "[^\u{0}]{0,40}") {
            prop_assert_eq!(through_sh(&w), w);
        }

        /// The same through shell-words' parser of POSIX words.
        #[test]
        fn quoted_text_round_trips_through_shell_words(w in any::<String>()) {
            prop_assert_eq!(shell_words::split(&quote(&w)).unwrap(), vec![w]);
        }
    }
}
