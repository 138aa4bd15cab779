//! Message resources: the files an `image`, `file`, `audio`, `media` or `post` message carries,
//! and fetching one with `GET /open-apis/im/v1/messages/{message_id}/resources/{key}?type=...`
//! and the tenant token (the app needs `im:resource`, besides `im:message` to read messages).
//!
//! A resource is only reachable through the message that carries it, so its
//! [`FileRef`](baton_contract::FileRef) is that path's tail: `<message_id>/<key>?type=<kind>`.

use baton_contract::{DownloadError, Downloaded, FileRef, InboundFile, fetch};
use serde_json::Value;

use crate::api::{Api, path_segment};

/// The files `content` (a message's parsed `content`) of `message_type` carries.
pub(crate) fn files_of(message_type: &str, content: &Value, message_id: &str) -> Vec<InboundFile> {
    let str_of = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let file = |name: String, key: String, kind: &str| InboundFile {
        name,
        media_type: None,
        size: None,
        source: FileRef(format!("{message_id}/{key}?type={kind}")),
    };
    match message_type {
        "image" => str_of(content, "image_key")
            .map(|key| file("image".into(), key, "image"))
            .into_iter()
            .collect(),
        "file" | "audio" | "media" => str_of(content, "file_key")
            .map(|key| {
                let name = str_of(content, "file_name").unwrap_or_else(|| message_type.into());
                file(name, key, "file")
            })
            .into_iter()
            .collect(),
        "post" => post_body(content)
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|element| match element.get("tag").and_then(Value::as_str) {
                Some("img") => {
                    str_of(element, "image_key").map(|key| file("image".into(), key, "image"))
                }
                Some("media") => str_of(element, "file_key").map(|key| {
                    let name = str_of(element, "file_name").unwrap_or_else(|| "video".into());
                    file(name, key, "file")
                }),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The words standing for a message that is only a file, for transcripts and the history
/// buffer (`[image]`, `[file report.pdf]`); `None` for kinds that are not files.
pub(crate) fn placeholder(message_type: &str, content: &Value) -> Option<String> {
    let name = content
        .get("file_name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    let kind = match message_type {
        "image" => return Some("[image]".into()),
        "file" => "file",
        "audio" => "audio",
        "media" => "video",
        _ => return None,
    };
    Some(match name {
        Some(name) => format!("[{kind} {name}]"),
        None => format!("[{kind}]"),
    })
}

/// A `post` body as received (`{title, content}`) or as sent (keyed by language).
pub(crate) fn post_body(content: &Value) -> &Value {
    if content.get("content").is_some() {
        return content;
    }
    content
        .as_object()
        .and_then(|langs| langs.values().find(|v| v.get("content").is_some()))
        .unwrap_or(content)
}

/// Fetch the resource `file` names, at most `limit` bytes.
pub(crate) async fn download(
    api: &Api,
    file: &FileRef,
    limit: u64,
) -> Result<Downloaded, DownloadError> {
    let parts = file.0.split_once('/').and_then(|(message, rest)| {
        let (key, kind) = rest.split_once("?type=")?;
        let known = matches!(kind, "image" | "file");
        (known && !message.is_empty() && !key.is_empty()).then_some((message, key, kind))
    });
    let Some((message, key, kind)) = parts else {
        return Err(DownloadError::NotAllowed(format!(
            "`{}` is not a Feishu message resource",
            file.0
        )));
    };
    let token = api
        .tenant_token()
        .await
        .map_err(|e| DownloadError::Transport(e.to_string()))?;
    let url = format!(
        "{}/open-apis/im/v1/messages/{}/resources/{}?type={kind}",
        api.base(),
        path_segment(message),
        path_segment(key)
    );
    let request = api.http().get(url).bearer_auth(token.expose());
    fetch(request, limit).await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn images_files_and_post_images_are_resources_of_their_message() {
        let image = files_of("image", &json!({"image_key": "img_v2_1"}), "om_1");
        assert_eq!(image.len(), 1);
        assert_eq!(image[0].source.0, "om_1/img_v2_1?type=image");
        assert_eq!(image[0].name, "image");
        let file = files_of(
            "file",
            &json!({"file_key": "file_v2_1", "file_name": "report.pdf"}),
            "om_2",
        );
        assert_eq!(
            (file[0].name.as_str(), file[0].source.0.as_str()),
            ("report.pdf", "om_2/file_v2_1?type=file")
        );
        let post = json!({"title": "t", "content": [[{"tag": "text", "text": "see"},
            {"tag": "img", "image_key": "img_v2_2"}]]});
        let in_post = files_of("post", &post, "om_3");
        assert_eq!(in_post[0].source.0, "om_3/img_v2_2?type=image");
        assert!(files_of("text", &json!({"text": "hi"}), "om_4").is_empty());
        assert_eq!(
            placeholder("file", &json!({"file_name": "a.csv"})).unwrap(),
            "[file a.csv]"
        );
        assert_eq!(placeholder("sticker", &json!({})), None);
    }
}
