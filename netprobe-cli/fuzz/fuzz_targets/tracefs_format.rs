//! tracefs `events/GROUP/EVENT/format` and `events/header_page` text
//! (Documentation/trace/events.rst in the kernel tree, "Event formats").
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_cli::backend::tracefs::format::{EventFormat, PageLayout};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(f) = EventFormat::parse(&text) {
        let _ = f.field("common_pid");
    }
    let _ = PageLayout::parse(&text, None);
    let _ = PageLayout::parse(&text, Some(4096));
});
