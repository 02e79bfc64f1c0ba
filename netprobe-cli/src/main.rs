//! The `netprobe` binary: arguments in, exit code out; the work is in the library.

fn main() -> std::process::ExitCode {
    netprobe_cli::cli::main()
}
