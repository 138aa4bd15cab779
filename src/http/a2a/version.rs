//! The protocol version a request asks for in its `A2A-Version` header. This agent speaks A2A
//! 1.0 (its cards say so). A request that names another version (a 0.3 client, whose calls
//! have other names and shapes) is refused as `VersionNotSupported` before anything of it is
//! read, rather than misread. A request without the header is taken as 1.0: the protocol reads
//! a missing header as 0.3, but a hand-written `curl` or a script that leaves it out would then
//! be refused for nothing, and a 0.3 call is told apart by its method names anyway (an unknown
//! method says which ones this agent serves).

use axum::http::HeaderMap;

use super::error::{A2aError, ErrorKind};

/// The protocol version cards declare and requests may ask for.
pub(super) const PROTOCOL_VERSION: &str = "1.0";

/// The header a caller names its protocol version in.
const HEADER: &str = "A2A-Version";

/// What a request asked for: nothing, or the header's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Asked(Option<String>);

impl Asked {
    pub(super) fn of(headers: &HeaderMap) -> Asked {
        let value = headers.get(HEADER).map(|v| {
            v.to_str().map_or_else(
                |_| String::from_utf8_lossy(v.as_bytes()).into_owned(),
                str::to_owned,
            )
        });
        Asked(value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()))
    }

    /// Whether this agent speaks what was asked: the same major and minor version (a patch
    /// number is ignored, as the protocol says).
    pub(super) fn supported(&self) -> Result<(), A2aError> {
        let Some(asked) = &self.0 else {
            return Ok(());
        };
        if major_minor(asked) == major_minor(PROTOCOL_VERSION) {
            return Ok(());
        }
        Err(A2aError::new(
            ErrorKind::VersionNotSupported,
            format!(
                "this agent speaks A2A {PROTOCOL_VERSION}, not `{asked}`; send \
                 `{HEADER}: {PROTOCOL_VERSION}` with a client of that version"
            ),
        ))
    }
}

/// `1.0` of `1.0.2`; the whole text when it is not a version at all (so it matches nothing).
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut numbers = version.split('.').map(str::parse::<u32>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => Some((major, minor)),
        (Some(Ok(major)), None) => Some((major, 0)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(value: Option<&str>) -> Asked {
        let mut headers = HeaderMap::new();
        if let Some(value) = value {
            headers.insert(HEADER, value.parse().unwrap());
        }
        Asked::of(&headers)
    }

    #[test]
    fn one_point_zero_in_any_patch_or_no_header_is_spoken() {
        for value in [
            None,
            Some("1.0"),
            Some("1.0.3"),
            Some("1"),
            Some(" 1.0 "),
            Some(""),
        ] {
            assert_eq!(
                asked(value).supported().map_err(|e| e.kind),
                Ok(()),
                "{value:?}"
            );
        }
    }

    #[test]
    fn another_version_or_no_version_at_all_is_refused_saying_which_is_spoken() {
        for value in ["0.3", "0.3.0", "2.0", "1.1", "latest"] {
            let err = asked(Some(value)).supported().unwrap_err();
            assert_eq!(err.kind, ErrorKind::VersionNotSupported, "{value}");
            assert!(err.message.contains(value), "{}", err.message);
            assert!(err.message.contains("A2A-Version: 1.0"), "{}", err.message);
        }
    }
}
