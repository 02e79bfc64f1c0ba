//! `netprobe completions SHELL` (clap_complete) and `netprobe man` (clap_mangen): both generated
//! from the same clap definition as the parser, so they cannot drift from it.

use crate::cli::Cli;
use clap::CommandFactory;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Writes the completion script for `shell` to stdout.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "netprobe", &mut buf);
    let mut out = std::io::stdout().lock();
    out.write_all(&buf)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the man page (roff) to stdout, or with `dir` netprobe.1 and one page per subcommand
/// (netprobe-trace.1, ...) into that directory.
pub fn man(dir: Option<&Path>) -> anyhow::Result<ExitCode> {
    let cmd = Cli::command();
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                anyhow::anyhow!(
                    "cannot create {}: {e}: give a writable directory",
                    dir.display()
                )
            })?;
            write_pages(cmd, dir).map_err(|e| {
                anyhow::anyhow!("cannot write man pages into {}: {e}", dir.display())
            })?;
        }
        None => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut buf)?;
            let mut out = std::io::stdout().lock();
            out.write_all(&buf)?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The pages `clap_mangen::generate_to` writes (one per visible command, named by
/// `Man::get_filename`), each through [`crate::output_file::replace_file`]: `generate_to` opens
/// them with `File::create`, which follows a symlink another user placed in `dir`.
fn write_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<()> {
    fn write(cmd: clap::Command, dir: &Path) -> std::io::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            write(sub, dir)?;
        }
        let page = clap_mangen::Man::new(cmd);
        let path = dir.join(page.get_filename());
        crate::output_file::replace_file(&path, |w| page.render(w))
    }
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    write(cmd, dir)
}
