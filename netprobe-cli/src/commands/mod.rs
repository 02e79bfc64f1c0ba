//! One module per subcommand.

pub mod docs;
pub mod live;
pub mod offsets;
pub mod profile;
pub mod ps;
pub mod symbols;
