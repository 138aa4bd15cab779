//! `ListTasks` paging (A2A 1.0, SPEC 14): how many tasks a page holds, and the opaque page
//! token that carries the keyset cursor (`store::TaskCursor`) from one page to the next.
//!
//! The token is the cursor of the last task of a page, encoded so callers treat it as opaque
//! and pass it back unchanged. It is a position in the listing's order (newest first), not an
//! offset, so tasks created between two calls change no page already read.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use crate::store::TaskCursor;

/// The page size when a call names none.
pub(super) const DEFAULT_PAGE_SIZE: usize = 50;
/// The largest page: a larger `pageSize` is clamped to it.
pub(super) const MAX_PAGE_SIZE: usize = 100;

/// A `ListTasks` paging parameter that is not one.
#[derive(Debug, thiserror::Error)]
pub(super) enum PageError {
    #[error(
        "pageSize must be a whole number from 1 to {MAX_PAGE_SIZE}; leave it out for {DEFAULT_PAGE_SIZE}"
    )]
    Size,
    #[error(
        "pageToken `{0}` is not one this agent gave: pass back the nextPageToken of the \
         previous page unchanged, or leave pageToken out to start from the newest task"
    )]
    Token(String),
}

/// The page size `params.pageSize` asks for: the default when absent or 0 (the protocol's
/// unset value), clamped to [`MAX_PAGE_SIZE`]. A number, or its digits as a string (as in a
/// query string, and as protobuf JSON allows).
pub(super) fn page_size(params: &Value) -> Result<usize, PageError> {
    let Some(size) = params.get("pageSize").filter(|v| !v.is_null()) else {
        return Ok(DEFAULT_PAGE_SIZE);
    };
    let number = match size {
        Value::String(digits) => digits.parse::<u64>().ok(),
        other => other.as_u64(),
    };
    match number {
        Some(0) => Ok(DEFAULT_PAGE_SIZE),
        Some(n) => Ok(usize::try_from(n).map_or(MAX_PAGE_SIZE, |n| n.min(MAX_PAGE_SIZE))),
        None => Err(PageError::Size),
    }
}

/// Where `params.pageToken` says the page starts; from the newest task when absent or empty.
pub(super) fn page_start(params: &Value) -> Result<Option<TaskCursor>, PageError> {
    match params.get("pageToken") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(token)) if token.is_empty() => Ok(None),
        Some(Value::String(token)) => decode(token)
            .ok_or_else(|| PageError::Token(token.clone()))
            .map(Some),
        Some(other) => Err(PageError::Token(other.to_string())),
    }
}

/// The token of the page after `cursor`; empty on the last page.
pub(super) fn next_page_token(cursor: Option<&TaskCursor>) -> String {
    cursor.map_or_else(String::new, |c| {
        URL_SAFE_NO_PAD.encode(format!("{}:{}", c.created_ms, c.run_id))
    })
}

fn decode(token: &str) -> Option<TaskCursor> {
    let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(token).ok()?).ok()?;
    let (created_ms, run_id) = raw.split_once(':')?;
    (!run_id.is_empty()).then_some(())?;
    Some(TaskCursor {
        created_ms: created_ms.parse().ok()?,
        run_id: run_id.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_token_carries_the_cursor_and_anything_else_is_refused_saying_what_to_do() {
        let cursor = TaskCursor {
            created_ms: 1_700_000_000_123,
            run_id: "run_abc".into(),
        };
        let token = next_page_token(Some(&cursor));
        assert_eq!(
            page_start(&json!({"pageToken": token})).unwrap(),
            Some(cursor)
        );
        assert_eq!(next_page_token(None), "");
        assert_eq!(page_start(&json!({"pageToken": ""})).unwrap(), None);
        for bad in [json!("10"), json!("not base64!"), json!(7)] {
            let err = page_start(&json!({ "pageToken": bad }))
                .unwrap_err()
                .to_string();
            assert!(err.contains("leave pageToken out"), "{err}");
        }
    }

    #[test]
    fn the_page_size_defaults_and_is_clamped() {
        assert_eq!(page_size(&json!({})).unwrap(), DEFAULT_PAGE_SIZE);
        assert_eq!(
            page_size(&json!({"pageSize": 0})).unwrap(),
            DEFAULT_PAGE_SIZE
        );
        assert_eq!(page_size(&json!({"pageSize": 3})).unwrap(), 3);
        assert_eq!(page_size(&json!({"pageSize": "3"})).unwrap(), 3);
        assert_eq!(
            page_size(&json!({"pageSize": 5000})).unwrap(),
            MAX_PAGE_SIZE
        );
        assert!(page_size(&json!({"pageSize": -1})).is_err());
        assert!(page_size(&json!({"pageSize": "ten"})).is_err());
    }
}
