//! TLS to PostgreSQL through `store.url`'s `sslmode` and `sslrootcert`: a server with a
//! certificate from a test CA made here with `openssl`, and the suite's own server without TLS.
//! `ethan doctor` is the user's view: it connects as the daemon does and says how.
//!
//! These run on throwaway clusters of `ethan::store::pg::cluster` whatever `ETHAN_TEST_STORE`
//! says, and fail (never skip) when PostgreSQL or `openssl` is missing.

use crate::support::daemon::{fresh_pg_database, run_cli};
use crate::support::TestHome;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The test CA, a second CA that signed nothing the server has, and the TLS server's database.
struct TlsServer {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    other_ca: PathBuf,
    port: u16,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run openssl (Debian package openssl): {e}"));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA `name`.pem / `name`.key.
fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=Ethan test {name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
        ],
    );
}

/// The one TLS server of this process: a certificate for 127.0.0.1 signed by the test CA.
fn tls_server() -> &'static TlsServer {
    static SERVER: OnceLock<TlsServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        make_ca(d, "ca");
        make_ca(d, "other-ca");
        openssl(
            d,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        );
        std::fs::write(
            d.join("server.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "server.ext",
                "-out",
                "server.pem",
            ],
        );
        let cluster = ethan::store::pg::cluster::start_tls(
            "tls",
            &d.join("server.pem"),
            &d.join("server.key"),
        )
        .unwrap_or_else(|e| panic!("cannot start the TLS PostgreSQL: {e}"));
        TlsServer {
            ca: d.join("ca.pem"),
            other_ca: d.join("other-ca.pem"),
            port: cluster.port(),
            _dir: dir,
        }
    })
}

/// `ethan doctor`'s store line for `url`, and whether the line is `ok`.
fn doctor_store_line(url: &str) -> (bool, String) {
    let home = TestHome::new();
    home.write_config(&format!(
        "model:\n  base_url: http://127.0.0.1:9/v1\n  api_key: sk-x\nstore:\n  url: \"{url}\"\n"
    ));
    let out = run_cli(&home, &["doctor"], None);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let line = stdout
        .lines()
        .find(|l| l.contains("store: "))
        .unwrap_or_else(|| panic!("no store line:\n{stdout}"))
        .to_string();
    (line.trim_start().starts_with("ok"), line)
}

#[test]
fn verify_full_with_the_test_ca_connects_and_doctor_says_encrypted_verified() {
    let s = tls_server();
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres?sslmode=verify-full&sslrootcert={}",
        s.port,
        s.ca.display()
    );
    let (ok, line) = doctor_store_line(&url);
    assert!(ok, "{line}");
    assert!(line.contains("connection encrypted (TLSv1."), "{line}");
    assert!(
        line.contains("verified (sslmode=verify-full, CA "),
        "{line}"
    );
    // verify-ca connects too, and says the host name was not checked.
    let (ok, line) = doctor_store_line(&url.replace("verify-full", "verify-ca"));
    assert!(
        ok && line.contains("chain verified but not the host name"),
        "{line}"
    );
}

#[test]
fn a_certificate_from_another_ca_is_refused_saying_so() {
    let s = tls_server();
    for mode in ["verify-full", "verify-ca", "require"] {
        let url = format!(
            "postgres://postgres@127.0.0.1:{}/postgres?sslmode={mode}&sslrootcert={}",
            s.port,
            s.other_ca.display()
        );
        let (ok, line) = doctor_store_line(&url);
        assert!(!ok, "{mode}: {line}");
        assert!(
            line.contains(
                "over TLS: the server's certificate is not signed by a CA of sslrootcert"
            ),
            "{mode}: {line}"
        );
    }
}

#[test]
fn require_without_a_ca_encrypts_and_says_it_did_not_verify() {
    let s = tls_server();
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres?sslmode=require",
        s.port
    );
    let (ok, line) = doctor_store_line(&url);
    assert!(ok, "{line}");
    assert!(line.contains("connection encrypted (TLSv1."), "{line}");
    assert!(line.contains("not verified (sslmode=require"), "{line}");
}

#[test]
fn require_or_prefer_against_a_server_without_tls_is_refused_never_plain_text() {
    let url = fresh_pg_database();
    for mode in ["require", "prefer"] {
        let (ok, line) = doctor_store_line(&format!("{url}?sslmode={mode}"));
        assert!(!ok, "{mode}: {line}");
        assert!(
            line.contains("the server does not offer TLS, and store.url's sslmode asks for it"),
            "{mode}: {line}"
        );
    }
    let (ok, line) = doctor_store_line(&format!("{url}?sslmode=disable"));
    assert!(
        ok && line.contains("connection not encrypted (sslmode=disable)"),
        "{line}"
    );
}

/// `sslrootcert=system` names the public CAs, which vouch for a server only together with its
/// host name: with `require` or `prefer` it would accept any certificate (the test server's is
/// from a private CA), so the URL is refused, as libpq refuses it.
#[test]
fn sslrootcert_system_with_a_weaker_sslmode_is_refused() {
    let s = tls_server();
    for mode in ["require", "prefer", "verify-ca"] {
        let url = format!(
            "postgres://postgres@127.0.0.1:{}/postgres?sslmode={mode}&sslrootcert=system",
            s.port
        );
        let (ok, line) = doctor_store_line(&url);
        assert!(
            !ok && line.contains("sslrootcert"),
            "sslmode={mode}: {line}"
        );
    }
}
