//! The `netprobe` binary: arguments in, exit code out; the work is in the library.

fn main() -> std::process::ExitCode {
    netprobe_cli::cli::main()
}

/// mimalloc instead of glibc's malloc: its segments are 2 MiB-aligned and advised for transparent
/// huge pages, so the ~12 MB of names a whole listing builds cost ~200 page faults instead of
/// ~3,600 (`symbols` of .NET 8 CoreLib: 3,605 -> 214 faults, 12.7 -> 5.3 ms of system time,
/// ~50 -> ~39 ms wall; peak RSS 20 -> 34 MB). glibc does the same only when started with
/// `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, which a program cannot set for itself.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
