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

/// Print the schema, pretty.
pub(super) fn schema(args: &SchemaArgs) -> anyhow::Result<()> {
    let schema = match args.what {
        Schema::Turn => crate::turn::turn_schema(),
    };
    println!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(())
}
