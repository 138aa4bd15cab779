//! [`stored_name!`]: fieldless enums kept in the database by name (entry kinds, origins,
//! delivery states), written once from one list so the Rust names and the stored names cannot
//! drift apart.

use std::str::FromStr;

use super::sql::{DbError, Row};

/// A fieldless enum stored in the database by its snake_case name: the enum, `ALL`, `as_str`,
/// `Display` and `FromStr`, written once from one list so the names cannot drift apart.
macro_rules! stored_name {
    (
        $(#[$doc:meta])* $name:ident, $what:literal {
            $($(#[$vdoc:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The snake_case name stored in the database and printed in transcripts.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            /// The stored name; honours width and alignment (`{:<10}`) for tables.
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| format!(concat!("unknown stored ", $what, " '{}'"), s))
            }
        }
    };
}

/// Reads a text column into a type parsed by `FromStr` (a corrupt value is a conversion error).
pub(super) fn parse_column<'r, T: FromStr<Err = String>>(
    row: impl Into<Row<'r>>,
    idx: usize,
) -> Result<T, DbError> {
    let row = row.into();
    row.text(idx)?
        .parse()
        .map_err(|e: String| row.column_error(idx, e))
}

/// [`parse_column`] for a column that may be NULL.
pub(super) fn parse_optional_column<'r, T: FromStr<Err = String>>(
    row: impl Into<Row<'r>>,
    idx: usize,
) -> Result<Option<T>, DbError> {
    let row = row.into();
    let text: Option<String> = row.get(idx)?;
    text.map(|text| text.parse().map_err(|e: String| row.column_error(idx, e)))
        .transpose()
}
