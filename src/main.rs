//! The `baton` command line.
fn main() {}
