//! `[telemetry]`: a collector URL the OTLP exporter can post to.

use super::super::Config;
use super::Checker;

impl Checker<'_> {
    pub(super) fn telemetry(&mut self, config: &Config) {
        let Some(endpoint) = &config.telemetry.otlp_endpoint else {
            return;
        };
        let url = endpoint.trim();
        let scheme = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        if scheme.is_none_or(|rest| rest.is_empty() || rest.contains(char::is_whitespace)) {
            self.report(
                "telemetry.otlp_endpoint",
                "must be the collector's http:// or https:// base URL, e.g. \
                 \"http://otel-collector:4318\" (traces go to <it>/v1/traces); or remove the key"
                    .to_owned(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn problems(endpoint: &str) -> Vec<String> {
        let text = format!("[telemetry]\notlp_endpoint = \"{endpoint}\"\n");
        match Config::from_toml(&text, std::path::Path::new("."), &|_| None) {
            Ok(_) => Vec::new(),
            Err(problems) => problems
                .iter()
                .map(|p| format!("{p:?}"))
                .filter(|p| p.contains("telemetry"))
                .collect(),
        }
    }

    #[test]
    fn an_endpoint_is_an_http_url() {
        assert!(problems("http://otel-collector:4318").is_empty());
        assert!(problems("https://api.honeycomb.io").is_empty());
        for bad in ["otel-collector:4318", "grpc://x:4317", "http://"] {
            assert!(!problems(bad).is_empty(), "{bad} is refused");
        }
    }
}
