//! The one gate in front of every route but the webhooks and the health checks: `/`, `/v1`,
//! `/api`, `/mcp`, `/metrics` and any path not listed (so an unknown path is refused before it
//! can be told apart from a known one).
//!
//! With `gateway.api_token_env` set, every request needs `Authorization: Bearer <token>`
//! (the scheme in any case), or `Basic` credentials whose password is the token (any user
//! name): a browser cannot add a bearer header to a page load or to an `EventSource`, but it
//! asks for Basic credentials once (the 401 offers both schemes) and sends them with every
//! request to the dashboard's origin. The token is compared as a SHA-256 digest, so neither the
//! comparison's time nor its early exit says how long the token is or how much of it matched.
//!
//! Without a token, the gateway serves only this machine, and checks that it really is this
//! machine asking: the peer is a loopback address (IPv4-mapped ones included, for a dual-stack
//! listener), the `Host` header is a loopback name (a web page whose name resolves to 127.0.0.1
//! by DNS rebinding still sends its own name), and no proxy forwarded the request (a reverse
//! proxy on the same host makes every client look local; the `Forwarded` family of headers
//! gives it away, and then the token is required).
//!
//! In both modes a browser request that changes state (POST, PUT, PATCH, DELETE) carrying an
//! `Origin` other than the gateway's own (the `Host` it was sent to) is refused: a web page must
//! not post into rooms or call tools on the user's behalf.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use baton_contract::Secret;
use sha2::{Digest, Sha256};

use crate::engine::Engine;

/// Headers a proxy adds; any of them means the peer address is not the client's.
const FORWARDING_HEADERS: [&str; 4] = [
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-real-ip",
];

/// The configured API token, kept only as its digest.
#[derive(Clone)]
pub(super) struct Token([u8; 32]);

impl Token {
    pub(super) fn new(secret: &Secret) -> Self {
        Self(Sha256::digest(secret.expose().as_bytes()).into())
    }

    /// Whether `presented` is the token. Both sides are 32-byte digests, compared without an
    /// early exit.
    fn matches(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digest
            .iter()
            .zip(&self.0)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// Why the gate refused a request. Each says what the client or operator should change.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum Refusal {
    /// A token is configured and the request lacks it or has another.
    #[error(
        "missing or wrong bearer token; send `Authorization: Bearer <token>` with the value of \
         the env var named by gateway.api_token_env"
    )]
    Token,
    /// No token is configured and the peer is not on this machine.
    #[error(
        "this gateway has no API token, so it only serves clients on this machine; set \
         gateway.api_token_env (and send `Authorization: Bearer <token>`) to serve others"
    )]
    NotLoopback,
    /// No token is configured and `Host` is not a loopback name.
    #[error(
        "without an API token only the Host names localhost, 127.x.x.x and [::1] are served \
         (another name may be a web page reaching the gateway by DNS rebinding); use one of \
         them, or set gateway.api_token_env to use this name"
    )]
    ForeignHost,
    /// No token is configured and a proxy forwarded the request.
    #[error(
        "this request came through a proxy (it carries `{0}`), and a gateway behind a proxy \
         needs an API token: set gateway.api_token_env and send `Authorization: Bearer <token>`"
    )]
    Forwarded(&'static str),
    /// A bearer token on `/mcp` that is no running turn's (any more), where no API token is set.
    #[error(
        "this MCP bearer token is unknown or its turn has ended; an agent's token \
         (`$BATON_MCP_TOKEN`) works only while the turn that got it runs"
    )]
    TurnToken,
    /// A state-changing request from a web page of another origin.
    #[error(
        "cross-origin request refused: a web page at another origin may not change anything \
         here; send the request without an `Origin` header (a script or CLI), or from the \
         gateway's own origin"
    )]
    CrossOrigin,
}

impl Refusal {
    fn status(&self) -> StatusCode {
        match self {
            Refusal::Token | Refusal::TurnToken => StatusCode::UNAUTHORIZED,
            _ => StatusCode::FORBIDDEN,
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut response = (status, self.to_string()).into_response();
        if status == StatusCode::UNAUTHORIZED {
            let headers = response.headers_mut();
            for challenge in ["Bearer", "Basic realm=\"baton\", charset=\"UTF-8\""] {
                let value = challenge.parse().expect("valid value");
                headers.append(header::WWW_AUTHENTICATE, value);
            }
        }
        response
    }
}

/// Paths that bypass the gate: platforms cannot send a token (each adapter verifies its
/// platform's signature instead), and health checks must answer any prober.
pub(super) fn is_open(path: &str) -> bool {
    path == "/healthz" || path == "/readyz" || path.starts_with("/hooks/")
}

/// Let the request through, or answer 401/403 saying what is needed.
pub(super) async fn require(
    State(engine): State<Engine>,
    State(token): State<Option<Token>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    if is_open(request.uri().path()) {
        return next.run(request).await;
    }
    // Agent cards are public once a token guards the rest (SPEC 14).
    if token.is_some()
        && request.method() == Method::GET
        && super::a2a::is_card(request.uri().path())
    {
        return next.run(request).await;
    }
    if request.uri().path().starts_with("/mcp")
        && let Some(presented) = presented(request.headers())
    {
        let running = engine.running();
        if let Some(caller) = running.caller_for_token(&presented) {
            request.extensions_mut().insert(AgentTurn(caller));
            return next.run(request).await;
        }
        // With an API token set, the gate below refuses any other token as it always does.
        if token.is_none() {
            return Refusal::TurnToken.into_response();
        }
    }
    match check(
        token.as_ref(),
        peer.ip(),
        request.method(),
        request.headers(),
    ) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

/// The gate's decision, from what the request shows.
pub(super) fn check(
    token: Option<&Token>,
    peer: IpAddr,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(), Refusal> {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    match token {
        Some(token) => {
            if !presented(headers).is_some_and(|p| token.matches(&p)) {
                return Err(Refusal::Token);
            }
        }
        None => {
            if let Some(name) = FORWARDING_HEADERS
                .iter()
                .find(|h| headers.contains_key(**h))
            {
                return Err(Refusal::Forwarded(name));
            }
            if !peer.to_canonical().is_loopback() {
                return Err(Refusal::NotLoopback);
            }
            if !host.is_some_and(is_loopback_host) {
                return Err(Refusal::ForeignHost);
            }
        }
    }
    let changes_state = matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    if changes_state && let Some(origin) = headers.get(header::ORIGIN) {
        let same = origin
            .to_str()
            .ok()
            .zip(host)
            .is_some_and(|(origin, host)| same_origin(origin, host));
        if !same {
            return Err(Refusal::CrossOrigin);
        }
    }
    Ok(())
}

/// The token a request presents: its bearer token or Basic password.
fn presented(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| bearer(v).map(str::to_owned).or_else(|| basic_password(v)))
}

/// An `/mcp` request made with a running turn's token: it acts as that turn's caller.
#[derive(Debug, Clone)]
pub(super) struct AgentTurn(pub(super) crate::engine::Caller);

/// The credentials of `Bearer <credentials>`, the scheme matched in any case.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credentials.trim())
}

/// The password of `Basic <base64(user:password)>`, the scheme matched in any case.
fn basic_password(value: &str) -> Option<String> {
    use base64::Engine as _;
    let (scheme, credentials) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(credentials.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (_user, password) = decoded.split_once(':')?;
    Some(password.to_owned())
}

/// `Host` (with or without a port) names this machine: `localhost`, 127.0.0.0/8, `[::1]` or
/// an IPv4-mapped loopback address.
fn is_loopback_host(host: &str) -> bool {
    let Some((name, _port)) = split_authority(host) else {
        return false;
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let ip = if let Some(v6) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        v6.parse::<Ipv6Addr>().map(IpAddr::V6)
    } else {
        name.parse::<IpAddr>()
    };
    ip.is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// `host[:port]` split; a bracketed IPv6 literal keeps its brackets. `None` when malformed.
fn split_authority(authority: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], Some(&authority[i + 1..])),
        _ => (authority, None),
    };
    if name.is_empty() || (name.contains(':') && !name.starts_with('[')) {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse().ok()?),
        None => None,
    };
    Some((name, port))
}

/// `Origin` (`scheme://host[:port]`) names the authority the request was sent to (`Host`).
/// A missing port is the scheme's default on either side.
fn same_origin(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false; // `null` (a sandboxed frame, a file) or garbage
    };
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return false,
    };
    match (split_authority(authority), split_authority(host)) {
        (Some((a, ap)), Some((b, bp))) => {
            a.eq_ignore_ascii_case(b) && ap.unwrap_or(default) == bp.unwrap_or(default)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        map
    }

    const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[test]
    fn loopback_hosts_with_any_port() {
        for host in [
            "localhost",
            "LOCALHOST:8642",
            "127.0.0.1",
            "127.3.4.5:1",
            "[::1]",
            "[::1]:8642",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8642",
            "localhost.evil.example",
            "10.0.0.1",
            "[::2]",
            "::1",
            "127.0.0.1:notaport",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn without_a_token_only_this_machine_is_served() {
        let get = Method::GET;
        let ok = headers(&[("host", "127.0.0.1:8642")]);
        assert_eq!(check(None, LOCAL, &get, &ok), Ok(()));
        let mapped = IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped());
        assert_eq!(check(None, mapped, &get, &ok), Ok(()));
        let remote = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        assert_eq!(check(None, remote, &get, &ok), Err(Refusal::NotLoopback));
        let foreign = headers(&[("host", "evil.example")]);
        assert_eq!(
            check(None, LOCAL, &get, &foreign),
            Err(Refusal::ForeignHost)
        );
        assert_eq!(
            check(None, LOCAL, &get, &HeaderMap::new()),
            Err(Refusal::ForeignHost)
        );
        let proxied = headers(&[("host", "localhost"), ("x-forwarded-for", "192.0.2.1")]);
        assert_eq!(
            check(None, LOCAL, &get, &proxied),
            Err(Refusal::Forwarded("x-forwarded-for"))
        );
    }

    #[test]
    fn the_token_is_checked_with_any_scheme_case() {
        let token = Token::new(&Secret::new("s3cret"));
        let get = Method::GET;
        let remote = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        for value in ["Bearer s3cret", "bearer s3cret", "BEARER  s3cret "] {
            let h = headers(&[("authorization", value), ("host", "baton.example")]);
            assert_eq!(check(Some(&token), remote, &get, &h), Ok(()), "{value}");
        }
        for value in [
            "Bearer s3cre",
            "Bearer s3cret2",
            "Basic s3cret",
            "s3cret",
            "Bearer",
        ] {
            let h = headers(&[("authorization", value)]);
            assert_eq!(
                check(Some(&token), LOCAL, &get, &h),
                Err(Refusal::Token),
                "{value}"
            );
        }
        assert_eq!(
            check(Some(&token), LOCAL, &get, &HeaderMap::new()),
            Err(Refusal::Token)
        );
    }

    #[test]
    fn a_browser_may_give_the_token_as_the_basic_password() {
        let token = Token::new(&Secret::new("s3cret"));
        let get = Method::GET;
        // base64("anyone:s3cret"), base64(":s3cret"), base64("anyone:wrong")
        for (value, ok) in [
            ("Basic YW55b25lOnMzY3JldA==", true),
            ("basic OnMzY3JldA==", true),
            ("Basic YW55b25lOndyb25n", false),
            ("Basic !!!", false),
        ] {
            let h = headers(&[("authorization", value)]);
            let expected = if ok { Ok(()) } else { Err(Refusal::Token) };
            assert_eq!(check(Some(&token), LOCAL, &get, &h), expected, "{value}");
        }
    }

    #[test]
    fn state_changes_from_other_origins_are_refused() {
        let post = Method::POST;
        let own = headers(&[
            ("host", "127.0.0.1:8642"),
            ("origin", "http://127.0.0.1:8642"),
        ]);
        assert_eq!(check(None, LOCAL, &post, &own), Ok(()));
        for origin in [
            "http://evil.example",
            "http://localhost:8642",
            "null",
            "http://127.0.0.1:9",
        ] {
            let h = headers(&[("host", "127.0.0.1:8642"), ("origin", origin)]);
            assert_eq!(
                check(None, LOCAL, &post, &h),
                Err(Refusal::CrossOrigin),
                "{origin}"
            );
            // Reading is not changing: browsers keep the answer from the page (no CORS).
            assert_eq!(check(None, LOCAL, &Method::GET, &h), Ok(()), "{origin}");
        }
        let default_port = headers(&[
            ("host", "baton.example"),
            ("origin", "https://baton.example"),
        ]);
        assert!(same_origin("https://baton.example", "baton.example:443"));
        let token = Token::new(&Secret::new("t"));
        let mut with_token = default_port.clone();
        with_token.insert(header::AUTHORIZATION, "Bearer t".parse().unwrap());
        assert_eq!(check(Some(&token), LOCAL, &post, &with_token), Ok(()));
    }

    #[test]
    fn open_paths() {
        assert!(is_open("/healthz") && is_open("/readyz") && is_open("/hooks/slack/a"));
        for path in [
            "/",
            "/v1/models",
            "/api/sessions",
            "/mcp",
            "/metrics",
            "/hooks",
            "/healthz/x",
        ] {
            assert!(!is_open(path), "{path}");
        }
    }
}
