//! The messages of pprof's `profile.proto` (package `perftools.profiles`), declared by hand for
//! prost's derive: the same field numbers and types as
//! <https://github.com/google/pprof/blob/main/proto/profile.proto>, the file the Go toolchain
//! vendors (`cmd/vendor/github.com/google/pprof/profile/encode.go` decodes it). No `protoc` and
//! no build script: the schema is small and stable, and a field added upstream later is simply
//! one these structs do not write.
//!
//! Every string of the messages is an index into [`Profile::string_table`], whose entry 0 is "".
//! Ids (`Mapping::id`, `Location::id`, `Function::id`) are nonzero; 0 means "none".

/// The whole profile (`message Profile`).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Profile {
    /// What each `Sample::value` is (`[["samples","count"], ["cpu","nanoseconds"]]`).
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// The images; `mapping[0]` is taken for the main binary.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// `string_table[0]` must be "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// When the collection started, nanoseconds since the Unix epoch (UTC).
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// The kind of events between sampled occurrences (`cpu`/`nanoseconds`).
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// Events between sampled occurrences.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free text, string table indices.
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (a string table index); 0: the last one.
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// A value's meaning and unit (`message ValueType`).
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// One stack and its values (`message Sample`); the leaf is `location_id[0]`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A sample's key and string or number (`message Label`).
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// An image mapped into the targets (`message Mapping`).
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// The locations are symbolized already: pprof must not look the addresses up again.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// A program location: its lines, innermost (inlined) first, the caller they were inlined into
/// last (`message Location`).
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// A function and a line in it (`message Line`).
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// A function (`message Function`).
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}
