//! The `--filter` grammar (netprobe-cli/src/filter/): any text either parses or is refused with
//! a message, and what parses prints back to text that parses to the same expression.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_cli::filter::{Expr, MAX_FILTER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(e) = Expr::parse(text) {
        let printed = e.to_string();
        // The printer spaces operators out, so a filter near the length limit prints longer.
        if printed.len() > MAX_FILTER_LEN {
            return;
        }
        let again = Expr::parse(&printed).expect("a printed filter parses");
        assert_eq!(again, e, "{printed}");
        let _ = e.names();
    }
});
