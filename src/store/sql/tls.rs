//! TLS to PostgreSQL over rustls: the URL's `sslmode` and `sslrootcert`, read the way libpq reads
//! them, and the connector the driver runs its handshake through.
//!
//! The driver itself knows only `disable`, `prefer` and `require`, and no `sslrootcert`, so
//! [`SslSettings::take_from`] takes both out of the URL before the driver parses the rest; the
//! certificate checks `verify-ca` and `verify-full` need are made here, by the verifier the
//! connector is built with:
//!
//! - `disable`: no TLS.
//! - `prefer` (the default): TLS when the server offers it, its certificate not checked.
//! - `require`: TLS or no connection; with `sslrootcert` it checks like `verify-ca` (as libpq).
//! - `verify-ca`: the certificate must chain to a CA of `sslrootcert`.
//! - `verify-full`: that, and it must name the host connected to.
//!
//! `sslrootcert` is a PEM file of CA certificates, or `system` for the well-known public CAs
//! (built in, so the same on every machine; libpq's `system` also implies `verify-full`). A
//! refused certificate is reported in words (unknown issuer, name mismatch), never as a bare
//! handshake failure. No channel binding is offered, so SCRAM runs without `-PLUS`.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use postgres::Socket;
use postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How much TLS a connection insists on (the URL's `sslmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain TCP.
    Disable,
    /// TLS when the server offers it, unchecked.
    Prefer,
    /// TLS or nothing, unchecked (checked like `verify-ca` when `sslrootcert` is given).
    Require,
    /// TLS with a certificate chaining to a trusted CA.
    VerifyCa,
    /// TLS with a trusted certificate for the host name connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "has sslmode `{other}`; write one of disable, prefer, require, verify-ca, \
                     verify-full"
                ));
            }
        })
    }

    /// The URL's spelling, for messages.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// Which CAs a server's certificate is checked against (the URL's `sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum RootCert {
    /// A PEM file of CA certificates.
    File(PathBuf),
    /// The well-known public CAs (`sslrootcert=system`).
    System,
}

/// The TLS part of a PostgreSQL URL, and the connector built from it.
#[derive(Clone)]
pub(crate) struct SslSettings {
    mode: SslMode,
    connector: RustlsConnect,
}

impl SslSettings {
    /// Takes `sslmode` and `sslrootcert` out of `url` (either URL or `key=value` form), returning
    /// the settings and the rest of the URL for the driver. Reads the CA file now, so a missing
    /// or unreadable one is refused at start. Errors never repeat the URL (it may hold a
    /// password).
    pub(crate) fn take_from(url: &str) -> Result<(SslSettings, String), String> {
        let (rest, params) = take_params(url, &["sslmode", "sslrootcert"]);
        let mut mode = None;
        let mut root = None;
        for (key, value) in params {
            match key {
                "sslmode" => mode = Some(SslMode::parse(&value)?),
                _ if value == "system" => root = Some(RootCert::System),
                _ => root = Some(RootCert::File(PathBuf::from(value))),
            }
        }
        let mode = match (mode, &root) {
            (None, Some(RootCert::System)) => SslMode::VerifyFull,
            (Some(SslMode::Require), Some(_)) => SslMode::VerifyCa,
            (mode, _) => mode.unwrap_or(SslMode::Prefer),
        };
        let verifier = match (mode, root) {
            (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
                return Err(format!(
                    "has sslmode `{}` but no sslrootcert; add sslrootcert=PATH (the PEM file of \
                     the CA that signed the server's certificate) or sslrootcert=system",
                    mode.as_str()
                ));
            }
            (SslMode::VerifyCa, Some(root)) => Verifier::Trusted {
                roots: roots(&root)?,
                check_name: false,
            },
            (SslMode::VerifyFull, Some(root)) => Verifier::Trusted {
                roots: roots(&root)?,
                check_name: true,
            },
            _ => Verifier::Unchecked,
        };
        let connector = RustlsConnect {
            config: verifier.client_config()?,
        };
        Ok((SslSettings { mode, connector }, rest))
    }

    /// The mode, for messages.
    pub(crate) fn mode(&self) -> SslMode {
        self.mode
    }

    /// The mode as the driver knows it: the checks beyond `require` are the connector's.
    pub(crate) fn driver_mode(&self) -> postgres::config::SslMode {
        match self.mode {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                postgres::config::SslMode::Require
            }
        }
    }

    /// The connector to hand the driver.
    pub(crate) fn connector(&self) -> RustlsConnect {
        self.connector.clone()
    }
}

/// `url` without the parameters named in `keys`, and those parameters (in order). In URL form
/// they are in the query (`?sslmode=require&...`, percent-decoded); in `key=value` form they are
/// words of their own (values possibly single-quoted).
fn take_params<'k>(url: &str, keys: &[&'k str]) -> (String, Vec<(&'k str, String)>) {
    let ours = |key: &str| keys.iter().copied().find(|k| *k == key);
    let mut taken = Vec::new();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return (url.to_owned(), taken);
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match ours(key) {
                Some(key) => taken.push((key, percent_decode(value))),
                None => kept.push(pair),
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return (rest, taken);
    }
    let mut rest = String::with_capacity(url.len());
    for word in words(url) {
        let (key, value) = word.split_once('=').unwrap_or((word, ""));
        match ours(key.trim()) {
            Some(key) => taken.push((key, unquote(value.trim()))),
            None => {
                rest.push_str(word);
                rest.push(' ');
            }
        }
    }
    (rest.trim_end().to_owned(), taken)
}

/// The `key=value` words of a libpq connection string: split on spaces outside single quotes
/// (a backslash escapes the next character).
fn words(settings: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = None;
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in settings.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '\'' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if let Some(s) = start.take() {
                    words.push(&settings[s..i]);
                }
                continue;
            }
            _ => {}
        }
        start.get_or_insert(i);
    }
    if let Some(s) = start {
        words.push(&settings[s..]);
    }
    words
}

fn unquote(value: &str) -> String {
    let inner = value
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .unwrap_or(value);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        out.push(if c == '\\' {
            chars.next().unwrap_or(c)
        } else {
            c
        });
    }
    out
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The CAs of `root`.
fn roots(root: &RootCert) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match root {
        RootCert::System => store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        RootCert::File(path) => {
            let unreadable = |e: &dyn std::fmt::Display| {
                format!(
                    "has sslrootcert `{}`, which cannot be read as PEM certificates ({e}); point \
                     it at the CA's certificate file",
                    path.display()
                )
            };
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| unreadable(&e))? {
                let cert = cert.map_err(|e| unreadable(&e))?;
                store.add(cert).map_err(|e| unreadable(&e))?;
            }
            if store.is_empty() {
                return Err(unreadable(&"no certificate in it"));
            }
        }
    }
    Ok(store)
}

/// How a server's certificate is checked.
enum Verifier {
    /// Not at all (`prefer`, `require`): the link is encrypted, the peer not authenticated.
    Unchecked,
    /// Against `roots`, and the host name too when `check_name`.
    Trusted {
        roots: RootCertStore,
        check_name: bool,
    },
}

impl Verifier {
    fn client_config(self) -> Result<Arc<ClientConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?;
        let verifier: Arc<dyn ServerCertVerifier> = match self {
            Verifier::Unchecked => Arc::new(Unchecked {
                algorithms: provider.signature_verification_algorithms,
            }),
            Verifier::Trusted { roots, check_name } => {
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| format!("cannot use the CAs of sslrootcert: {e}"))?;
                Arc::new(Trusted { webpki, check_name })
            }
        };
        Ok(Arc::new(
            builder
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth(),
        ))
    }
}

/// Accepts any certificate, but still checks the handshake's signatures with it.
#[derive(Debug)]
struct Unchecked {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The usual web PKI checks against the configured CAs; `verify-ca` forgives a name mismatch.
#[derive(Debug)]
struct Trusted {
    webpki: Arc<WebPkiServerVerifier>,
    check_name: bool,
}

impl ServerCertVerifier for Trusted {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        match verified {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// The driver's TLS connector over rustls.
#[derive(Clone)]
pub(crate) struct RustlsConnect {
    config: Arc<ClientConfig>,
}

impl MakeTlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type TlsConnect = Handshake;
    type Error = io::Error;

    /// `host` is empty for a Unix socket, where the server never offers TLS.
    fn make_tls_connect(&mut self, host: &str) -> Result<Handshake, io::Error> {
        Ok(Handshake {
            config: self.config.clone(),
            host: host.to_owned(),
        })
    }
}

/// One handshake with the server at `host`.
pub(crate) struct Handshake {
    config: Arc<ClientConfig>,
    host: String,
}

impl TlsConnect<Socket> for Handshake {
    type Stream = RustlsStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<RustlsStream, io::Error>> + Send>>;

    fn connect(self, socket: Socket) -> Self::Future {
        Box::pin(async move {
            let name = ServerName::try_from(self.host.clone()).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("`{}` is not a host name TLS can check", self.host),
                )
            })?;
            let stream = tokio_rustls::TlsConnector::from(self.config)
                .connect(name, socket)
                .await
                .map_err(|e| refusal(e, &self.host))?;
            Ok(RustlsStream(Box::new(stream)))
        })
    }
}

/// A handshake error in words: which certificate check failed, and what to do.
fn refusal(error: io::Error, host: &str) -> io::Error {
    let why = match error
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)) => {
            "the server's certificate is not signed by a CA of sslrootcert (unknown issuer); \
             point sslrootcert at the CA that signed it"
                .to_owned()
        }
        Some(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) => format!(
            "the server's certificate is not valid for the host `{host}` (name mismatch); \
             connect by a name the certificate lists, or use sslmode=verify-ca"
        ),
        Some(rustls::Error::InvalidCertificate(other)) => {
            format!("the server's certificate was refused ({other:?})")
        }
        _ => return error,
    };
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// A TLS connection to the server.
pub(crate) struct RustlsStream(Box<tokio_rustls::client::TlsStream<Socket>>);

impl TlsStream for RustlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for RustlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::tls_cluster;
    use crate::store::{PgUrl, Store, StoreError};

    /// The URL of the TLS test cluster's `postgres` database at `host`, with `params`.
    fn url(host: &str, params: &str) -> PgUrl {
        let port = tls_cluster().tls_port();
        PgUrl::parse(&format!(
            "postgres://postgres:pw-s3cret@{host}:{port}/postgres?{params}"
        ))
        .expect("a valid URL")
    }

    /// Whether the connection `url` makes is encrypted, as the server sees it.
    fn encrypted(url: &PgUrl) -> Result<bool, StoreError> {
        let mut client = url.client()?;
        let row = client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .expect("pg_stat_ssl");
        Ok(row.get(0))
    }

    #[test]
    fn each_sslmode_connects_as_it_says() {
        let ca = tls_cluster().ca();
        let ca = ca.display();
        let cases = [
            ("localhost", "sslmode=disable".to_owned(), false),
            ("localhost", "sslmode=prefer".to_owned(), true),
            ("127.0.0.1", "sslmode=require".to_owned(), true),
            (
                "127.0.0.1",
                format!("sslmode=verify-ca&sslrootcert={ca}"),
                true,
            ),
            (
                "localhost",
                format!("sslmode=verify-full&sslrootcert={ca}"),
                true,
            ),
        ];
        for (host, params, tls) in cases {
            let on = encrypted(&url(host, &params)).unwrap_or_else(|e| panic!("{params}: {e}"));
            assert_eq!(on, tls, "{params}");
        }
    }

    #[test]
    fn verify_full_refuses_a_wrong_host_or_an_unknown_ca_saying_why() {
        let cluster = tls_cluster();
        let (ca, other) = (cluster.ca(), cluster.other_ca());
        let wrong_host = url(
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={}", ca.display()),
        );
        let unknown_ca = url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={}", other.display()),
        );
        for (url, why) in [
            (wrong_host, "name mismatch"),
            (unknown_ca, "unknown issuer"),
        ] {
            let refused = encrypted(&url).expect_err("refused").to_string();
            assert!(refused.contains(why), "{refused}");
            assert!(refused.contains("sslmode=verify-full"), "{refused}");
            assert!(!refused.contains("pw-s3cret"), "{refused}");
        }
    }

    #[tokio::test]
    async fn a_store_on_verify_full_opens_and_an_unreachable_one_is_named_without_its_password() {
        let ca = tls_cluster().ca();
        let store = Store::open_postgres(url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={}", ca.display()),
        ))
        .await
        .expect("a store over verified TLS");
        store.probe(1).await.expect("it commits over TLS");
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let gone = PgUrl::parse(&format!(
            "postgres://baton:pw-s3cret@127.0.0.1:{port}/baton?sslmode=require"
        ))
        .unwrap();
        let refused = Store::open_postgres(gone)
            .await
            .expect_err("nothing listens there")
            .to_string();
        assert!(
            refused.contains(&format!("127.0.0.1:{port}/baton?sslmode=require")),
            "{refused}"
        );
        assert!(!refused.contains("pw-s3cret"), "{refused}");
    }

    #[test]
    fn ssl_parameters_are_taken_out_of_either_url_form() {
        let (rest, taken) = take_params(
            "postgres://u:p@db:5432/b?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca.pem",
            &["sslmode", "sslrootcert"],
        );
        assert_eq!(rest, "postgres://u:p@db:5432/b?application_name=x");
        assert_eq!(
            taken,
            vec![
                ("sslmode", "verify-full".to_owned()),
                ("sslrootcert", "/etc/ca.pem".to_owned())
            ]
        );
        let (rest, taken) = take_params(
            "host=db password='a b\\'c' sslrootcert='/etc/my ca.pem' sslmode=require",
            &["sslmode", "sslrootcert"],
        );
        assert_eq!(rest, "host=db password='a b\\'c'");
        assert_eq!(
            taken,
            vec![
                ("sslrootcert", "/etc/my ca.pem".to_owned()),
                ("sslmode", "require".to_owned())
            ]
        );
    }

    #[test]
    fn modes_follow_libpq() {
        let mode = |url: &str| SslSettings::take_from(url).map(|(s, _)| s.mode());
        assert_eq!(mode("postgres://db/b"), Ok(SslMode::Prefer));
        assert_eq!(
            mode("postgres://db/b?sslmode=disable"),
            Ok(SslMode::Disable)
        );
        assert_eq!(
            mode("postgres://db/b?sslmode=require"),
            Ok(SslMode::Require)
        );
        assert_eq!(
            mode("postgres://db/b?sslrootcert=system"),
            Ok(SslMode::VerifyFull)
        );
        let missing = mode("postgres://db/b?sslmode=verify-full").unwrap_err();
        assert!(missing.contains("add sslrootcert=PATH"), "{missing}");
        let bad = mode("postgres://db/b?sslmode=always").unwrap_err();
        assert!(bad.contains("verify-full"), "{bad}");
        let unreadable = mode("sslmode=verify-ca sslrootcert=/nonexistent/ca.pem").unwrap_err();
        assert!(unreadable.contains("/nonexistent/ca.pem"), "{unreadable}");
    }
}
