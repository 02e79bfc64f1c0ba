//! THE table of netprobe's own end-to-end checks that the kernel matrix runs in every kernel
//! (and on the host), and how their outputs are read. To add a check, add a row to
//! [`KERNEL_CHECKS`]; the Docker checks are in [`crate::docker_checks::DOCKER_CHECKS`].
//!
//! Every row runs the real `netprobe` binary: netprobe itself resolves the function and places the
//! probes; nothing here writes `uprobe_events`. A check whose subcommand the binary does not have
//! yet fails with that reason (it never disappears from the table and never passes).
//!
//! - `arm64`: the table an arm64 guest runs ([`ARM64_CHECKS`]).
//! - `target`: the programs the checks trace, built on the host.
//! - `table`: the table itself ([`KERNEL_CHECKS`]) and the shape of a row.
//! - `run`: running one check with a time limit, its target in the background.
//! - `judge`: a run's output judged against the row's expectations, offsets against binutils.

mod arm64;
mod judge;
mod run;
mod table;
mod target;

pub use arm64::ARM64_CHECKS;
pub use judge::{
    arg_value, evaluate, evaluate_offsets, expected_values, json_count, json_hits, json_returns,
    CheckResult, Expected,
};
pub use run::{run_check, run_with_timeout, RunOutput};
pub use table::{checks_for, targets, KernelCheck, Reading, KERNEL_CHECKS};
pub use target::{Target, CROSS_GO};
