//! Go: the `.gopclntab` function table and `.go.buildinfo` (issue 5).
