//! TLS to PostgreSQL: the libpq parameters `sslmode` and `sslrootcert` of `store.url`, read
//! here (the client library knows only `disable`, `prefer` and `require`, and no CA file) and
//! turned into a rustls connector (ring provider).
//!
//! | `sslmode` | encrypted | server's certificate checked |
//! |---|---|---|
//! | `disable` (or `allow`), none | no | — |
//! | `require`, `prefer` | yes | no; with `sslrootcert`, its chain as `verify-ca` (libpq's rule) |
//! | `verify-ca` | yes | chain to the CA; not the host name |
//! | `verify-full` | yes | chain to the CA and the host name |
//!
//! `prefer` never falls back to plain text: a server without TLS is refused, as with
//! `require`. `sslrootcert` names a PEM file of CA certificates, or `system` for the public
//! (Mozilla) roots; without it `verify-full` uses the public roots. As libpq: `verify-ca` needs a
//! CA file (the public roots without the host name would vouch for any public certificate), and
//! `sslrootcert=system` goes only with `verify-full`. With `sslrootcert` and no `sslmode`, the
//! mode is `verify-full`. Both parameters are taken out
//! of the URL before the client library reads the rest.

use super::StoreError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;

/// How the connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain text.
    Disable,
    /// Encrypted; the certificate is not checked (unless a CA file is named).
    Require,
    /// Encrypted; the certificate's chain is checked, not its host name.
    VerifyCa,
    /// Encrypted; the chain and the host name are checked.
    VerifyFull,
}

/// The CAs a certificate is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of CA certificates.
    File(PathBuf),
    /// The public (Mozilla) roots.
    System,
}

/// The TLS settings of a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    pub mode: SslMode,
    /// The `sslmode` as written (`None` when the URL has none).
    pub written: Option<String>,
    pub root_cert: Option<RootCert>,
}

impl Tls {
    /// Whether the server's certificate chain is checked.
    pub fn verifies_chain(&self) -> bool {
        match self.mode {
            SslMode::Disable => false,
            SslMode::Require => matches!(self.root_cert, Some(RootCert::File(_))),
            SslMode::VerifyCa | SslMode::VerifyFull => true,
        }
    }

    /// What `ethan doctor` says of a connection with these settings: "encrypted, verified
    /// (sslmode=verify-full, CA /etc/ethan/pg-ca.pem)"; `protocol` is the TLS version the
    /// server reports, when it does.
    pub fn describe(&self, protocol: Option<&str>) -> String {
        let mode = match &self.written {
            Some(m) => format!("sslmode={m}"),
            None => "no sslmode in store.url".to_string(),
        };
        let ca = match &self.root_cert {
            Some(RootCert::File(p)) => format!(", CA {}", p.display()),
            _ => ", the public CAs".to_string(),
        };
        let enc = match protocol {
            Some(p) => format!("encrypted ({p})"),
            None => "encrypted".to_string(),
        };
        match self.mode {
            SslMode::Disable => format!("not encrypted ({mode})"),
            SslMode::VerifyFull => format!("{enc}, verified ({mode}{ca})"),
            _ if self.verifies_chain() => format!(
                "{enc}, certificate chain verified but not the host name ({mode}{ca}; \
                 sslmode=verify-full checks both)"
            ),
            _ => format!(
                "{enc}, not verified ({mode}: the server's certificate is not checked; \
                 sslmode=verify-full with sslrootcert checks it)"
            ),
        }
    }
}

/// Split `url` (the `postgres://` form or the `key=value` form) into the URL without
/// `sslmode` and `sslrootcert`, and the TLS settings they give.
///
/// Errors: an `sslmode` libpq does not know, an empty `sslrootcert`.
pub fn split(url: &str) -> Result<(String, Tls), StoreError> {
    let (rest, params) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        split_uri(url)
    } else {
        split_key_value(url)
    };
    let mut written = None;
    let mut root_cert = None;
    for (k, v) in params {
        if k == "sslmode" {
            written = Some(v);
        } else if v.trim().is_empty() {
            return Err(invalid(
                "sslrootcert is empty: name a PEM file of CA certificates",
            ));
        } else if v == "system" {
            root_cert = Some(RootCert::System);
        } else {
            root_cert = Some(RootCert::File(PathBuf::from(v)));
        }
    }
    let mode = match written.as_deref() {
        None if root_cert.is_some() => SslMode::VerifyFull,
        None | Some("disable" | "allow") => SslMode::Disable,
        Some("prefer" | "require") => SslMode::Require,
        Some("verify-ca") => SslMode::VerifyCa,
        Some("verify-full") => SslMode::VerifyFull,
        Some(other) => {
            return Err(invalid(&format!(
                "sslmode={other} is not one of disable, allow, prefer, require, verify-ca, \
                 verify-full"
            )))
        }
    };
    // libpq's rules: the public roots vouch for a server only together with its host name.
    match (mode, &root_cert) {
        (SslMode::VerifyCa, None | Some(RootCert::System)) => {
            return Err(invalid(
                "sslmode=verify-ca needs sslrootcert naming a PEM file of your CA: any publicly \
                 issued certificate would pass a chain check against the public roots without \
                 the host name (use sslmode=verify-full for a server with a public certificate)",
            ))
        }
        (SslMode::Disable | SslMode::Require, Some(RootCert::System)) => {
            return Err(invalid(
                "sslrootcert=system checks a certificate only with sslmode=verify-full (or no \
                 sslmode): a weaker sslmode would accept any certificate",
            ))
        }
        _ => {}
    }
    let tls = Tls {
        mode,
        written,
        root_cert,
    };
    Ok((rest, tls))
}

fn invalid(why: &str) -> StoreError {
    StoreError::Backend {
        op: "connect",
        message: format!("the PostgreSQL URL is not valid: {why}"),
    }
}

fn is_tls_key(k: &str) -> bool {
    k == "sslmode" || k == "sslrootcert"
}

/// `postgres://…?a=b&sslmode=…`: the query's TLS pairs taken out, the others kept as written.
fn split_uri(url: &str) -> (String, Vec<(String, String)>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), Vec::new());
    };
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(k);
        if is_tls_key(&key) {
            taken.push((key, decode(v)));
        } else {
            kept.push(pair);
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (rest, taken)
}

/// Percent-decoding of a URL query part (`+` stays itself, as libpq reads it).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `host=db sslmode=verify-full dbname='my db'`: the TLS pairs taken out (libpq quoting:
/// single quotes, backslash escapes), the others kept as written.
fn split_key_value(s: &str) -> (String, Vec<(String, String)>) {
    let b = s.as_bytes();
    let mut i = 0;
    let mut kept: Vec<&str> = Vec::new();
    let mut taken = Vec::new();
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= b.len() {
            break;
        }
        let start = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = &s[start..i];
        skip_ws(&mut i);
        if i >= b.len() || b[i] != b'=' {
            // Not a pair: left for the client library to report.
            kept.push(&s[start..]);
            break;
        }
        i += 1;
        skip_ws(&mut i);
        let mut value = Vec::new();
        if i < b.len() && b[i] == b'\'' {
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                value.push(b[i]);
                i += 1;
            }
            i = (i + 1).min(b.len());
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                value.push(b[i]);
                i += 1;
            }
        }
        if is_tls_key(key) {
            taken.push((
                key.to_string(),
                String::from_utf8_lossy(&value).into_owned(),
            ));
        } else {
            kept.push(&s[start..i]);
        }
    }
    (kept.join(" "), taken)
}

/// The rustls connector for `tls` (whose mode is not [`SslMode::Disable`]).
///
/// Errors: an `sslrootcert` file that cannot be read or holds no PEM certificate.
pub fn connector(tls: &Tls) -> Result<tokio_postgres_rustls::MakeRustlsConnect, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let setup = |e: &dyn std::fmt::Display| StoreError::Backend {
        op: "connect",
        message: format!("cannot set up TLS: {e}"),
    };
    let chain = || -> Result<Arc<WebPkiServerVerifier>, StoreError> {
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots(tls)?), provider.clone())
            .build()
            .map_err(|e| setup(&e))
    };
    let verifier: Arc<dyn ServerCertVerifier> = match tls.mode {
        SslMode::VerifyFull => chain()?,
        _ if tls.verifies_chain() => Arc::new(ChainOnly(chain()?)),
        _ => Arc::new(AnyCertificate(provider.clone())),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| setup(&e))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The roots of `tls`: the certificates of its `sslrootcert` file, else the public ones.
fn roots(tls: &Tls) -> Result<rustls::RootCertStore, StoreError> {
    use rustls::pki_types::pem::PemObject;
    let Some(RootCert::File(path)) = &tls.root_cert else {
        return Ok(rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        });
    };
    let fail = |why: String| StoreError::Backend {
        op: "connect",
        message: format!("sslrootcert {}: {why}", path.display()),
    };
    let pem = std::fs::read(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
    let mut store = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| fail(format!("not a PEM file of certificates: {e}")))?;
        store
            .add(cert)
            .map_err(|e| fail(format!("a certificate in it is not usable as a CA: {e}")))?;
    }
    if store.is_empty() {
        return Err(fail("it holds no PEM certificate".into()));
    }
    Ok(store)
}

/// `verify-ca`: the chain is checked; a certificate that does not name the host is accepted.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the chain before the name: a name error means the chain is good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `require` without a CA: any certificate (encryption against a passive listener only); the
/// handshake's signatures are still checked.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(url: &str) -> SslMode {
        split(url).unwrap().1.mode
    }

    #[test]
    fn every_libpq_sslmode_is_read_and_prefer_is_never_plain_text() {
        let u = "postgres://u:p@db.internal:5432/e?sslmode=";
        assert_eq!(mode(&format!("{u}disable")), SslMode::Disable);
        assert_eq!(mode(&format!("{u}allow")), SslMode::Disable);
        assert_eq!(mode(&format!("{u}prefer")), SslMode::Require);
        assert_eq!(mode(&format!("{u}require")), SslMode::Require);
        assert_eq!(
            mode(&format!("{u}verify-ca&sslrootcert=/ca.pem")),
            SslMode::VerifyCa
        );
        assert_eq!(mode(&format!("{u}verify-full")), SslMode::VerifyFull);
        assert_eq!(mode("postgres://u@h/e"), SslMode::Disable);
        let err = split(&format!("{u}verify_full")).unwrap_err().to_string();
        assert!(err.contains("sslmode=verify_full is not one of"), "{err}");
    }

    #[test]
    fn the_tls_parameters_are_taken_out_and_the_rest_kept_as_written() {
        let (rest, tls) = split(
            "postgres://u:p%40ss@h:1/e?application_name=a%20b&sslmode=verify-full\
             &sslrootcert=%2Fetc%2Fca%20dir%2Fca.pem&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://u:p%40ss@h:1/e?application_name=a%20b&connect_timeout=3"
        );
        assert_eq!(
            tls.root_cert,
            Some(RootCert::File("/etc/ca dir/ca.pem".into()))
        );
        let (rest, tls) =
            split("host=db sslmode = 'verify-ca' sslrootcert='/a b\\'c.pem' dbname=e").unwrap();
        assert_eq!(rest, "host=db dbname=e");
        assert_eq!(tls.mode, SslMode::VerifyCa);
        assert_eq!(tls.root_cert, Some(RootCert::File("/a b'c.pem".into())));
        let (_, tls) = split("postgres://h/e?sslrootcert=system").unwrap();
        assert_eq!(
            (tls.mode, tls.root_cert),
            (SslMode::VerifyFull, Some(RootCert::System))
        );
    }

    #[test]
    fn the_public_roots_vouch_only_with_the_host_name() {
        for url in [
            "postgres://h/e?sslmode=verify-ca",
            "postgres://h/e?sslmode=verify-ca&sslrootcert=system",
            "postgres://h/e?sslmode=require&sslrootcert=system",
            "postgres://h/e?sslmode=prefer&sslrootcert=system",
            "postgres://h/e?sslmode=disable&sslrootcert=system",
        ] {
            let e = split(url).unwrap_err().to_string();
            assert!(e.contains("sslrootcert"), "{url}: {e}");
        }
        assert!(split("postgres://h/e?sslmode=verify-ca&sslrootcert=/ca.pem").is_ok());
        assert!(split("postgres://h/e?sslmode=verify-full&sslrootcert=system").is_ok());
        assert!(split("postgres://h/e?sslmode=verify-full").is_ok());
    }

    #[test]
    fn require_checks_the_chain_only_when_a_ca_file_is_named() {
        let (_, plain) = split("postgres://h/e?sslmode=require").unwrap();
        assert!(!plain.verifies_chain());
        assert!(plain.describe(None).contains("not verified"));
        let (_, ca) = split("postgres://h/e?sslmode=require&sslrootcert=/ca.pem").unwrap();
        assert!(ca.verifies_chain());
        let (_, full) = split("postgres://h/e?sslmode=verify-full&sslrootcert=/ca.pem").unwrap();
        assert!(full
            .describe(Some("TLSv1.3"))
            .starts_with("encrypted (TLSv1.3), verified (sslmode=verify-full, CA /ca.pem)"));
    }

    #[test]
    fn an_unreadable_or_empty_ca_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        for (file, why) in [
            (dir.path().join("missing.pem"), "cannot read it"),
            (empty, "holds no PEM certificate"),
        ] {
            let url = format!(
                "postgres://h/e?sslmode=verify-full&sslrootcert={}",
                file.display()
            );
            let err = match connector(&split(&url).unwrap().1) {
                Ok(_) => panic!("{url} was accepted"),
                Err(e) => e.to_string(),
            };
            assert!(
                err.contains(&file.display().to_string()) && err.contains(why),
                "{err}"
            );
        }
    }
}
