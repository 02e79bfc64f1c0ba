//! Text from files and processes made safe to print on a terminal: every control character is
//! written as a visible escape, so a symbol, path, command name or string argument chosen by
//! whoever built a binary or runs a process can neither move the cursor, retitle the window, recolor
//! the terminal (ESC sequences, ECMA-48 section 5: C0 and C1 control functions) nor start a line
//! of its own (a newline in a name would forge an output line).
//!
//! Escaped: C0 (U+0000..U+001F, tab and newline included: inside a name they are data, not
//! layout) as `\xNN`, DEL (U+007F) as `\x7f`, and C1 (U+0080..U+009F; 0x9B alone is CSI on
//! terminals that take 8-bit controls) as `\u{NN}`. Everything else prints as it is. JSON output
//! does not go through here: serde_json escapes control characters itself (RFC 8259, section 7).

use std::borrow::Cow;
use std::fmt;

/// Whether `c` is written as an escape (C0, DEL or C1).
fn is_escaped(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// `text` with every control character escaped (see the module comment); borrowed unchanged
/// when it has none, which is nearly always.
pub fn printable(text: &str) -> Cow<'_, str> {
    // In UTF-8 a C0 character or DEL is one byte below 0x20 or 0x7f, and a C1 character is 0xC2
    // followed by 0x80..=0x9F (RFC 3629, section 3): one pass over the bytes finds them.
    let bytes = text.as_bytes();
    let clean = !bytes.iter().enumerate().any(|(i, &b)| {
        b < 0x20 || b == 0x7f || (b == 0xc2 && matches!(bytes.get(i + 1), Some(0x80..=0x9f)))
    });
    if clean {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\u{0}'..='\u{1f}' | '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_escaped(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`printable`] as a `Display` value, for `format!`/`write!` (width and alignment apply to the
/// escaped text).
#[derive(Clone, Copy, Debug)]
pub struct Printable<'a>(pub &'a str);

impl fmt::Display for Printable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&printable(self.0))
    }
}

/// Writes `line` and a newline to standard error, escaped by [`printable`]: the notes, warnings
/// and errors netprobe prints there quote names and paths too.
pub fn eprint_line(line: &str) {
    eprintln!("{}", printable(line));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn terminal_controls_are_escaped_visibly() {
        insta::assert_snapshot!(
            printable("np_e\u{1b}]0;title\u{7}\u{1b}[31m\tx\ny\r\u{7f}\u{9b}2J\u{85}é→"),
            @r"np_e\x1b]0;title\x07\x1b[31m\x09x\x0ay\x0d\x7f\u{9b}2J\u{85}é→"
        );
    }

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(
            printable("System.Threading.Thread::Sleep(int) é ü 中"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn display_pads_the_escaped_text() {
        assert_eq!(format!("[{:<8}]", Printable("a\u{7}")), "[a\\x07   ]");
    }

    proptest! {
        /// Nothing a terminal reads as a control function survives, and text without one is
        /// unchanged.
        #[test]
        fn no_control_character_survives(s in any::<String>()) {
            let p = printable(&s);
            prop_assert!(!p.chars().any(is_escaped), "{:?}", p);
            if !s.chars().any(is_escaped) {
                prop_assert_eq!(p.as_ref(), s.as_str());
            }
        }
    }
}
