use clap::Parser;

/// Dynamic tracing of .NET and Go programs with uprobes.
#[derive(Parser, Debug)]
#[command(name = "netprobe", version, about)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
