//! Media types of artifacts: guessed from a file name when a bot gives none, and whether a
//! content reads as text (given inline to a model) or is binary (base64, or by reference).

/// The media type a file name suggests; `fallback` when its extension says nothing.
///
/// ```
/// assert_eq!(baton::media_type::guess("competitors.json", "text/plain"), "application/json");
/// assert_eq!(baton::media_type::guess("blob", "application/octet-stream"), "application/octet-stream");
/// ```
pub fn guess<'a>(name: &str, fallback: &'a str) -> &'a str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "json" => "application/json",
        "jsonl" | "ndjson" => "application/x-ndjson",
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "rs" | "py" | "js" | "ts" | "go" | "java" | "c" | "h" | "cpp" | "sh" | "sql" => {
            "text/plain"
        }
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        _ => fallback,
    }
}

/// The media type `content` announces by its first bytes, for the formats a platform may serve
/// without saying (a Feishu image): PNG, JPEG, GIF, WebP, PDF.
///
/// ```
/// assert_eq!(baton::media_type::sniff(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
/// assert_eq!(baton::media_type::sniff(b"hello"), None);
/// ```
pub fn sniff(content: &[u8]) -> Option<&'static str> {
    const SIGNATURES: [(&[u8], &str); 5] = [
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF8", "image/gif"),
        (b"%PDF-", "application/pdf"),
        (b"RIFF", "image/webp"),
    ];
    SIGNATURES
        .iter()
        .find(|(magic, kind)| {
            content.starts_with(magic)
                && (*kind != "image/webp" || content.get(8..12) == Some(b"WEBP"))
        })
        .map(|(_, kind)| *kind)
}

/// Whether content of `media_type` is text a model can read as is.
pub fn is_text(media_type: &str) -> bool {
    let essence = media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/x-ndjson"
                | "application/xml"
                | "application/yaml"
                | "application/toml"
                | "image/svg+xml"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_types_are_told_from_binary_ones() {
        assert!(is_text("application/json"));
        assert!(is_text("text/csv; charset=utf-8"));
        assert!(is_text("application/vnd.api+json"));
        assert!(!is_text("image/png"));
        assert!(!is_text("application/octet-stream"));
        assert_eq!(guess("Report.MD", "x"), "text/markdown");
        assert_eq!(guess("noext", "x"), "x");
    }
}
