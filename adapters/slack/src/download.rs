//! Fetching a file posted in Slack: its `url_private_download` with `Authorization: Bearer <bot
//! token>` (the app needs the `files:read` scope), within the gateway's size cap.
//!
//! The URL comes from the event, so before the token goes with it the URL must be Slack's: the
//! host of `api_url` or one under it (`files.slack.com` under `slack.com`), over the same
//! scheme. A file URL anywhere else is not fetched, so a token never reaches another host.

use std::time::Duration;

use baton_contract::{DownloadError, Downloaded, FileRef, Secret, fetch};
use reqwest::Url;

/// One account's file fetcher.
pub(crate) struct Files {
    client: reqwest::Client,
    api: Option<Url>,
    token: Secret,
}

impl Files {
    /// Fetching with `token`, from hosts at or under `api_url`'s.
    pub(crate) fn new(api_url: &str, token: Secret) -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .expect("a reqwest client with only a timeout set always builds");
        Files {
            client,
            api: Url::parse(api_url).ok(),
            token,
        }
    }

    /// The file at `file` (a `url_private_download`), at most `limit` bytes.
    pub(crate) async fn download(
        &self,
        file: &FileRef,
        limit: u64,
    ) -> Result<Downloaded, DownloadError> {
        if file.0.is_empty() {
            return Err(DownloadError::NotAllowed(
                "Slack gave no download address (the file is deleted, hidden by the \
                 workspace's plan limit, or an external link)"
                    .into(),
            ));
        }
        let url = Url::parse(&file.0)
            .ok()
            .filter(|url| self.is_slack(url))
            .ok_or_else(|| {
                DownloadError::NotAllowed(
                    "the file's address is not on the account's Slack host; it was not fetched \
                     with the bot token"
                        .into(),
                )
            })?;
        let request = self.client.get(url).bearer_auth(self.token.expose());
        let file = fetch(request, limit).await?;
        // Without `files:read`, Slack answers 200 with its HTML sign-in page instead of the file.
        if file
            .media_type
            .as_deref()
            .is_some_and(|t| t.starts_with("text/html"))
        {
            return Err(DownloadError::NotAllowed(
                "Slack answered its sign-in page instead of the file; give the app the \
                 `files:read` scope and reinstall it"
                    .into(),
            ));
        }
        Ok(file)
    }

    /// Whether `url` is on the API's host or one under it, over the same scheme.
    fn is_slack(&self, url: &Url) -> bool {
        let Some(api) = &self.api else {
            return false;
        };
        let (Some(host), Some(api_host)) = (url.host_str(), api.host_str()) else {
            return false;
        };
        let same = host == api_host && url.port_or_known_default() == api.port_or_known_default();
        url.scheme() == api.scheme() && (same || host.ends_with(&format!(".{api_host}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_goes_only_to_slacks_hosts() {
        let files = Files::new("https://slack.com/api", Secret::new("xoxb-1"));
        let ok = |u: &str| files.is_slack(&Url::parse(u).unwrap());
        assert!(ok("https://files.slack.com/files-pri/T1-F1/download/a.png"));
        assert!(ok("https://slack.com/files-pri/T1-F1/a.png"));
        assert!(!ok("https://evil.example/files-pri/a.png"));
        assert!(!ok("https://notslack.com/a.png"));
        assert!(!ok("http://files.slack.com/a.png"));
        let local = Files::new("http://127.0.0.1:4000/api", Secret::new("xoxb-1"));
        assert!(local.is_slack(&Url::parse("http://127.0.0.1:4000/files/a").unwrap()));
        assert!(!local.is_slack(&Url::parse("http://127.0.0.1:4001/files/a").unwrap()));
    }
}
