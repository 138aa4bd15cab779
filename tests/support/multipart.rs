//! A `multipart/form-data` reader for the fakes (Discord and Feishu uploads): small, because a
//! fake only needs each part's name, file name, type and bytes.

use axum::http::HeaderMap;

/// One part of a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Its field name (`files[0]`, `payload_json`, `image`).
    pub name: String,
    /// The file name, for a file part.
    pub filename: Option<String>,
    /// Its `Content-Type`, if given.
    pub content_type: Option<String>,
    /// The bytes.
    pub data: Vec<u8>,
}

impl Part {
    /// The bytes as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }
}

/// The parts of `body`, if `headers` say it is `multipart/form-data` (with a boundary).
pub fn parts(headers: &HeaderMap, body: &[u8]) -> Option<Vec<Part>> {
    let content_type = headers.get("content-type")?.to_str().ok()?;
    if !content_type.starts_with("multipart/form-data") {
        return None;
    }
    let boundary = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))?
        .trim_matches('"');
    let delimiter = format!("--{boundary}").into_bytes();
    let mut parts = Vec::new();
    let mut rest = &body[find(body, &delimiter)? + delimiter.len()..];
    loop {
        if rest.starts_with(b"--") {
            return Some(parts);
        }
        rest = rest.strip_prefix(b"\r\n")?;
        let head_end = find(rest, b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&rest[..head_end]).into_owned();
        rest = &rest[head_end + 4..];
        let mut end_marker = b"\r\n".to_vec();
        end_marker.extend_from_slice(&delimiter);
        let end = find(rest, &end_marker)?;
        let data = rest[..end].to_vec();
        rest = &rest[end + end_marker.len()..];
        let mut part = Part {
            name: String::new(),
            filename: None,
            content_type: None,
            data,
        };
        for line in head.lines() {
            let (key, value) = line.split_once(':')?;
            match key.trim().to_ascii_lowercase().as_str() {
                "content-disposition" => {
                    part.name = param(value, "name").unwrap_or_default();
                    part.filename = param(value, "filename");
                }
                "content-type" => part.content_type = Some(value.trim().to_owned()),
                _ => {}
            }
        }
        parts.push(part);
    }
}

/// `key="value"` in a header value.
fn param(value: &str, key: &str) -> Option<String> {
    value.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        (k == key).then(|| v.trim_matches('"').to_owned())
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
