//! [`Row`]: a result row of either engine, read column by column into [`Column`] types.
//!
//! Both engines' cells are first seen as a [`Value`] (borrowed, no copy), and each Rust type
//! converts from that once: so an `i64` reads SQLite's INTEGER and PostgreSQL's `SMALLINT`,
//! `INTEGER` and `BIGINT` alike, and a `bool` reads SQLite's 0/1 and PostgreSQL's `BOOLEAN`.

use postgres::types::{FromSql, Type};
use rusqlite::types::ValueRef;

use super::{DbError, Value};

/// One row of a query's result.
pub(crate) enum Row<'r> {
    /// From SQLite.
    Sqlite(&'r rusqlite::Row<'r>),
    /// From PostgreSQL.
    Postgres(&'r postgres::Row),
}

/// So column helpers shared with modules still written against rusqlite take their rows too.
impl<'r, 's: 'r> From<&'r rusqlite::Row<'s>> for Row<'r> {
    fn from(row: &'r rusqlite::Row<'s>) -> Self {
        Row::Sqlite(row)
    }
}

impl<'r, 'o: 'r> From<&'r Row<'o>> for Row<'r> {
    fn from(row: &'r Row<'o>) -> Self {
        match row {
            Row::Sqlite(row) => Row::Sqlite(row),
            Row::Postgres(row) => Row::Postgres(row),
        }
    }
}

impl Row<'_> {
    /// Column `idx` (from 0) as a `T`; a cell that does not convert is a [`DbError::Column`]
    /// naming the column.
    pub(crate) fn get<T: Column>(&self, idx: usize) -> Result<T, DbError> {
        let value = self.value(idx)?;
        T::from_value(value).map_err(|why| self.column_error(idx, why))
    }

    /// Column `idx` as text borrowed from the row, for a cell that is parsed rather than kept
    /// (no `String` per cell: a turn's context reads hundreds of rows, BENCHMARKS.md).
    pub(crate) fn text(&self, idx: usize) -> Result<&str, DbError> {
        match self.value(idx)? {
            Value::Text(text) => Ok(text),
            other => Err(self.column_error(idx, wrong(other, "text"))),
        }
    }

    /// An error about column `idx` of this row: `why`, after the column's name.
    pub(crate) fn column_error(&self, idx: usize, why: String) -> DbError {
        DbError::Column {
            idx,
            why: format!("column `{}`: {why}", self.column_name(idx)),
        }
    }

    /// The name of column `idx`, `?` if there is none.
    pub(crate) fn column_name(&self, idx: usize) -> &str {
        match self {
            Row::Sqlite(row) => row.as_ref().column_name(idx).unwrap_or("?"),
            Row::Postgres(row) => row.columns().get(idx).map_or("?", |c| c.name()),
        }
    }

    fn value(&self, idx: usize) -> Result<Value<'_>, DbError> {
        match self {
            Row::Sqlite(row) => Ok(match row.get_ref(idx)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(v) => Value::Int(v),
                ValueRef::Real(v) => Value::Real(v),
                ValueRef::Text(v) => Value::Text(
                    std::str::from_utf8(v)
                        .map_err(|e| self.column_error(idx, format!("not UTF-8: {e}")))?,
                ),
                ValueRef::Blob(v) => Value::Blob(v),
            }),
            Row::Postgres(row) => {
                let Some(column) = row.columns().get(idx) else {
                    return Err(self.column_error(idx, "no such column".into()));
                };
                let Raw(raw) = row.try_get(idx)?;
                let Some(raw) = raw else {
                    return Ok(Value::Null);
                };
                pg_value(column.type_(), raw).map_err(|why| self.column_error(idx, why))
            }
        }
    }
}

/// A PostgreSQL cell's bytes, undecoded (`None` for NULL).
struct Raw<'a>(Option<&'a [u8]>);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(Some(raw)))
    }

    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(None))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// Decodes a non-NULL PostgreSQL cell of type `ty` (binary format).
fn pg_value<'a>(ty: &Type, raw: &'a [u8]) -> Result<Value<'a>, String> {
    let decoded = match *ty {
        Type::INT8 => i64::from_sql(ty, raw).map(Value::Int),
        Type::INT4 => i32::from_sql(ty, raw).map(|v| Value::Int(v.into())),
        Type::INT2 => i16::from_sql(ty, raw).map(|v| Value::Int(v.into())),
        Type::BOOL => bool::from_sql(ty, raw).map(|v| Value::Int(v.into())),
        Type::FLOAT8 => f64::from_sql(ty, raw).map(Value::Real),
        Type::FLOAT4 => f32::from_sql(ty, raw).map(|v| Value::Real(v.into())),
        Type::BYTEA => Ok(Value::Blob(raw)),
        _ if <&str as FromSql>::accepts(ty) => <&str>::from_sql(ty, raw).map(Value::Text),
        _ => return Err(format!("the store reads no column of type {ty}")),
    };
    decoded.map_err(|e| e.to_string())
}

/// A Rust type a column is read into.
pub(crate) trait Column: Sized {
    /// Converts a cell; the error says why it does not fit (never what the cell holds).
    fn from_value(value: Value<'_>) -> Result<Self, String>;
}

fn wrong(value: Value<'_>, wanted: &str) -> String {
    format!("expected {wanted}, found {}", value.kind())
}

impl Column for i64 {
    fn from_value(value: Value<'_>) -> Result<Self, String> {
        match value {
            Value::Int(v) => Ok(v),
            other => Err(wrong(other, "an integer")),
        }
    }
}

impl Column for u32 {
    fn from_value(value: Value<'_>) -> Result<Self, String> {
        let v = i64::from_value(value)?;
        u32::try_from(v).map_err(|_| format!("{v} is out of range for a count"))
    }
}

impl Column for bool {
    fn from_value(value: Value<'_>) -> Result<Self, String> {
        Ok(i64::from_value(value)? != 0)
    }
}

impl Column for f64 {
    fn from_value(value: Value<'_>) -> Result<Self, String> {
        match value {
            Value::Real(v) => Ok(v),
            Value::Int(v) => Ok(v as f64),
            other => Err(wrong(other, "a number")),
        }
    }
}

impl Column for String {
    fn from_value(value: Value<'_>) -> Result<Self, String> {
        match value {
            Value::Text(v) => Ok(v.to_owned()),
            other => Err(wrong(other, "text")),
        }
    }
}

impl Column for Vec<u8> {
    fn from_value(value: Value<'_>) -> Result<Self, String> {
        match value {
            Value::Blob(v) => Ok(v.to_vec()),
            other => Err(wrong(other, "bytes")),
        }
    }
}

impl<T: Column> Column for Option<T> {
    fn from_value(value: Value<'_>) -> Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}
