//! [`Value`]: one query parameter, bound the same way on either engine.
//!
//! Text and blobs are borrowed, so binding a parameter on SQLite copies nothing. PostgreSQL
//! types its parameters from the query, so a [`Value`] is converted to the type the server
//! asked for: an integer binds to `BIGINT`, `INTEGER`, `SMALLINT` or `BOOLEAN` alike (SQLite
//! has no booleans; the store passes them as 0 and 1).

use std::error::Error;

use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use rusqlite::types::{ToSqlOutput, ValueRef};

/// A query parameter, or a column's value as read (`row.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    /// SQL NULL.
    Null,
    /// An integer (booleans are 0 and 1).
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// Text.
    Text(&'a str),
    /// Bytes.
    Blob(&'a [u8]),
}

impl Value<'_> {
    /// What kind of value it is, for error messages (never the value: it may be a secret).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "an integer",
            Value::Real(_) => "a number",
            Value::Text(_) => "text",
            Value::Blob(_) => "bytes",
        }
    }
}

/// A [`Value`] that owns its text or bytes: the parameters of a PostgreSQL statement sent
/// without waiting for its answer (`postgres.rs`), which outlive the job's borrowed ones.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OwnedValue {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl OwnedValue {
    /// The value, borrowed again.
    fn as_value(&self) -> Value<'_> {
        match self {
            OwnedValue::Null => Value::Null,
            OwnedValue::Int(v) => Value::Int(*v),
            OwnedValue::Real(v) => Value::Real(*v),
            OwnedValue::Text(v) => Value::Text(v),
            OwnedValue::Blob(v) => Value::Blob(v),
        }
    }
}

impl From<&Value<'_>> for OwnedValue {
    fn from(value: &Value<'_>) -> Self {
        match *value {
            Value::Null => OwnedValue::Null,
            Value::Int(v) => OwnedValue::Int(v),
            Value::Real(v) => OwnedValue::Real(v),
            Value::Text(v) => OwnedValue::Text(v.to_owned()),
            Value::Blob(v) => OwnedValue::Blob(v.to_owned()),
        }
    }
}

impl From<i64> for Value<'_> {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<u32> for Value<'_> {
    fn from(v: u32) -> Self {
        Value::Int(i64::from(v))
    }
}

impl From<bool> for Value<'_> {
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}

impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(v)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(v: &'a String) -> Self {
        Value::Text(v)
    }
}

impl<'a> From<&'a [u8]> for Value<'a> {
    fn from(v: &'a [u8]) -> Self {
        Value::Blob(v)
    }
}

impl<'a, T> From<Option<T>> for Value<'a>
where
    T: Into<Value<'a>>,
{
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

impl<'a> From<&'a Option<String>> for Value<'a> {
    fn from(v: &'a Option<String>) -> Self {
        v.as_deref().into()
    }
}

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Value::Null => ValueRef::Null,
            Value::Int(v) => ValueRef::Integer(v),
            Value::Real(v) => ValueRef::Real(v),
            Value::Text(v) => ValueRef::Text(v.as_bytes()),
            Value::Blob(v) => ValueRef::Blob(v),
        }))
    }
}

impl ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match *self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) => match *ty {
                Type::INT8 => v.to_sql(ty, out),
                Type::INT4 => i32::try_from(v)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(v)?.to_sql(ty, out),
                Type::BOOL => (v != 0).to_sql(ty, out),
                // Lossless for every id and millisecond timestamp the store keeps.
                Type::FLOAT8 => (v as f64).to_sql(ty, out),
                _ => Err(mismatch(self, ty)),
            },
            Value::Real(v) if <f64 as ToSql>::accepts(ty) => v.to_sql(ty, out),
            Value::Text(v) if <&str as ToSql>::accepts(ty) => v.to_sql(ty, out),
            Value::Blob(v) if <&[u8] as ToSql>::accepts(ty) => v.to_sql(ty, out),
            _ => Err(mismatch(self, ty)),
        }
    }

    /// Any type: the value decides in `to_sql`, which refuses a pair it cannot convert.
    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

impl ToSql for OwnedValue {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.as_value().to_sql(ty, out)
    }

    /// Any type, as [`Value`].
    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn mismatch(value: &Value<'_>, ty: &Type) -> Box<dyn Error + Sync + Send> {
    format!("cannot bind {} to a parameter of type {ty}", value.kind()).into()
}
