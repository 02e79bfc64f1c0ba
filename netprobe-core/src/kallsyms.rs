//! The running kernel's function symbols, as `/proc/kallsyms` lists them (`ADDRESS TYPE NAME
//! [MODULE]`, one per line; Documentation/admin-guide/sysctl/kernel.rst, `kptr_restrict`), to
//! name the kernel frames of a callchain: where a thread blocked (`do_nanosleep`,
//! `futex_wait`, `pipe_read`, the `__x64_sys_*` entry of its system call).
//!
//! Only text symbols (`t`/`T`, and `w`/`W` weak ones) are kept. A reader without the
//! privilege to see addresses (`kptr_restrict`, CAP_SYSLOG) gets every address as zero: the
//! table is then empty and says so ([`KernelSymbols::is_empty`]), rather than naming every
//! frame after the first symbol. Parsing is bounded by the input and never panics on a
//! malformed line (it is skipped).

/// Kernel text symbols sorted by address.
#[derive(Clone, Debug, Default)]
pub struct KernelSymbols {
    /// (start address, name), ascending.
    symbols: Vec<(u64, String)>,
}

/// Where the kernel lists its symbols.
pub const KALLSYMS: &str = "/proc/kallsyms";

impl KernelSymbols {
    /// The running kernel's symbols ([`KALLSYMS`]); empty when it cannot be read or hides the
    /// addresses.
    pub fn load() -> KernelSymbols {
        std::fs::read_to_string(KALLSYMS)
            .map(|t| KernelSymbols::parse(&t))
            .unwrap_or_default()
    }

    /// The text symbols of a kallsyms listing.
    pub fn parse(text: &str) -> KernelSymbols {
        let mut symbols: Vec<(u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut parts = line.split_ascii_whitespace();
                let addr = u64::from_str_radix(parts.next()?, 16).ok()?;
                let kind = parts.next()?;
                let name = parts.next()?;
                (addr != 0 && matches!(kind, "t" | "T" | "w" | "W"))
                    .then(|| (addr, name.to_string()))
            })
            .collect();
        symbols.sort_unstable();
        KernelSymbols { symbols }
    }

    /// No symbol with an address (unreadable, or addresses hidden).
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The function `addr` falls in: the last symbol at or below it. A kernel listing has no
    /// sizes, so an address past the last function of a region still gets that function's
    /// name, as `perf` names kernel frames from kallsyms alone.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let i = self.symbols.partition_point(|(a, _)| *a <= addr);
        Some(self.symbols.get(i.checked_sub(1)?)?.1.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LISTING: &str = "\
ffffffff81000000 T _stext
ffffffff81100000 t do_nanosleep
ffffffff81100200 T hrtimer_nanosleep
ffffffff81200000 d some_data
ffffffffc0000000 t nf_hook [nf_tables]
garbage line
";

    #[test]
    fn names_an_address_by_the_function_below_it() {
        let k = KernelSymbols::parse(LISTING);
        assert_eq!(k.name(0xffffffff81100010), Some("do_nanosleep"));
        assert_eq!(k.name(0xffffffff81100200), Some("hrtimer_nanosleep"));
        assert_eq!(k.name(0xffffffffc0000004), Some("nf_hook"));
        assert_eq!(k.name(0x1000), None);
        // Data symbols are not functions.
        assert_eq!(k.name(0xffffffff81200004), Some("hrtimer_nanosleep"));
    }

    #[test]
    fn hidden_addresses_make_an_empty_table() {
        let hidden = "0000000000000000 T _stext\n0000000000000000 t do_nanosleep\n";
        assert!(KernelSymbols::parse(hidden).is_empty());
    }

    #[test]
    fn the_running_kernel_names_its_scheduler() {
        let k = KernelSymbols::load();
        if k.is_empty() {
            eprintln!("SKIPPED: /proc/kallsyms hides addresses to this user");
            return;
        }
        let text = std::fs::read_to_string(KALLSYMS).unwrap();
        let line = text
            .lines()
            .find(|l| l.ends_with(" schedule"))
            .expect("schedule listed");
        let addr = u64::from_str_radix(line.split(' ').next().unwrap(), 16).unwrap();
        assert_eq!(k.name(addr + 1), Some("schedule"));
    }

    proptest! {
        #[test]
        fn any_listing_parses_without_panic(text in "\\PC{0,400}", addr in any::<u64>()) {
            let _ = KernelSymbols::parse(&text).name(addr);
        }
    }
}
