//! The tracefs text netprobe reads back or validates before writing: `uprobe_events` listings
//! and `error_log` entries (Documentation/trace/uprobetracer.rst, "Error log" in
//! Documentation/trace/ftrace.rst), session group names, and the probe path / event name rules
//! that keep a hostile name from becoming a wrong `uprobe_events` line.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_cli::backend::tracefs::cleanup::session_owner;
use netprobe_cli::backend::tracefs::probe::{
    kernel_isspace, parse_error_log, parse_listing, EventName, GroupName, ProbePath,
};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
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
        // What goes into `PATH:OFFSET` never splits the line: no byte the kernel splits words on
        // (its `isspace()`, lib/ctype.c: a Unicode space such as U+3000 is none of those bytes,
        // and passes), no control character.
        assert!(!path.as_str().bytes().any(kernel_isspace));
        assert!(!path.as_str().chars().any(char::is_control));
    }
});
