//! A bot's name in a column: written as its text, read back parsed, so a row holding something
//! that is no bot's name is a conversion error naming the column instead of a bot nobody has.

use rusqlite::ToSql;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};

use super::sql::{Column, Value};
use crate::bot_id::BotId;

impl<'a> From<&'a BotId> for Value<'a> {
    fn from(bot: &'a BotId) -> Self {
        Value::Text(bot.as_str())
    }
}

impl Column for BotId {
    fn from_value(value: Value<'_>) -> Result<Self, String> {
        String::from_value(value)?
            .parse()
            .map_err(|e| format!("{e}"))
    }
}

impl ToSql for BotId {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for BotId {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|e| FromSqlError::Other(Box::new(e)))
    }
}
