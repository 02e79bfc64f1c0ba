//! ReadyToRun: the precompiled native code of a .NET assembly and the tables that find it.

pub mod native_format;
pub mod parser;
pub mod resolver;
pub mod types;
pub mod versions;

pub use resolver::SiblingAssemblies;
