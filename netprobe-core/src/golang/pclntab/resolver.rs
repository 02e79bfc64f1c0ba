//! Lookups over a parsed [`Pclntab`]: by address (binary search over the sorted function table)
//! and by exact name (an index built once, sorted by name).

use super::parser::Pclntab;
use super::types::GoFunction;
use crate::addr::VirtAddr;

/// Name and address lookups over one table. Building it decodes every name once.
#[derive(Clone, Debug)]
pub struct PclntabResolver<'a> {
    table: Pclntab<'a>,
    /// (name, function index), sorted by name; a name can repeat (the linker does not forbid it).
    by_name: Vec<(std::borrow::Cow<'a, str>, u64)>,
}

impl<'a> PclntabResolver<'a> {
    /// Indexes every function of `table` by name.
    pub fn new(table: Pclntab<'a>) -> PclntabResolver<'a> {
        let mut by_name: Vec<_> = (0..table.len())
            .filter_map(|i| table.function(i).map(|f| (f.name, i)))
            .collect();
        by_name.sort_unstable();
        PclntabResolver { table, by_name }
    }

    /// The table this resolver reads.
    pub fn table(&self) -> &Pclntab<'a> {
        &self.table
    }

    /// Every function named exactly `name` (usually one; empty when none is).
    pub fn by_name(&self, name: &str) -> Vec<GoFunction<'a>> {
        let start = self.by_name.partition_point(|(n, _)| n.as_ref() < name);
        self.by_name[start..]
            .iter()
            .take_while(|(n, _)| n.as_ref() == name)
            .filter_map(|&(_, i)| self.table.function(i))
            .collect()
    }

    /// The function whose `[entry, end)` holds `addr`; `None` outside every function.
    pub fn at(&self, addr: VirtAddr) -> Option<GoFunction<'a>> {
        self.table
            .find_index(addr)
            .and_then(|i| self.table.function(i))
    }

    /// All names, sorted (for "did you mean" suggestions and glob matching).
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.by_name.iter().map(|(n, _)| n.as_ref())
    }
}
