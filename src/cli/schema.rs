//! `baton schema turn`: print the JSON Schema of what an agent gets each turn, for an agent's
//! author to validate against or generate types from.

use clap::{Args, ValueEnum};

/// `baton schema`.
#[derive(Debug, Args)]
pub(super) struct SchemaArgs {
    /// Which schema: `turn`, the JSON a `command` agent reads on stdin and an `http` agent gets
    /// as the request body.
    what: Schema,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Schema {
    /// The turn (SPEC 6.1).
    Turn,
}

/// Print the schema, pretty. A reader that stops early (`| head`) is no error.
pub(super) fn schema(args: &SchemaArgs) -> anyhow::Result<()> {
    use std::io::Write as _;
    let schema = match args.what {
        Schema::Turn => crate::backend::turn_schema(),
    };
    let text = serde_json::to_string_pretty(&schema)?;
    match writeln!(std::io::stdout().lock(), "{text}") {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(err.into()),
        _ => Ok(()),
    }
}
