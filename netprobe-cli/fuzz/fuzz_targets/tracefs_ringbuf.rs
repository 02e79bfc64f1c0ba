//! Ring-buffer pages as read from `per_cpu/cpuN/trace_pipe_raw` (record headers, time
//! extends, padding; kernel/trace/ring_buffer.c, include/linux/ring_buffer.h), with the page
//! layout of this kernel's `events/header_page`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netprobe_cli::backend::tracefs::format::PageLayout;
use netprobe_cli::backend::tracefs::ringbuf::parse_page;

/// `events/header_page` of Linux 6.x on x86_64 (the kernel prints it from
/// kernel/trace/ring_buffer.c, ring_buffer_print_page_header).
const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";

fuzz_target!(|data: &[u8]| {
    let layout = PageLayout::parse(HEADER_PAGE, Some(data.len())).expect("header_page parses");
    let mut bytes = 0usize;
    let _ = parse_page(&layout, data, |r| bytes += r.data.len());
});
