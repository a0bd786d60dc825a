//! The client's errors as [`StoreError`]s whose text says what failed and why: the server's own
//! message for a refused statement (`duplicate key value violates unique constraint …`, with its
//! SQLSTATE), the cause chain for a broken connection, and for a connection that could not be
//! opened the server's address ("connection refused to 127.0.0.1:5432", "password
//! authentication failed for user \"ethan\"").

use super::StoreError;
use std::error::Error;

/// `e` and every cause under it, `: `-separated, without repeating a cause whose text its
/// parent already shows.
pub fn chain(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(cause) = cur {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = cause.source();
    }
    out
}

/// The text of a client error: the server's message (with its detail, hint and SQLSTATE) when
/// the server refused something, else the cause chain.
pub fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut out = format!("{} (SQLSTATE {})", db.message(), db.code().code());
        if let Some(detail) = db.detail() {
            out.push_str("; ");
            out.push_str(detail);
        }
        if let Some(hint) = db.hint() {
            out.push_str("; hint: ");
            out.push_str(hint);
        }
        return out;
    }
    chain(e)
}

/// A failed statement of operation `op`.
pub fn pg_error(op: &'static str, e: &tokio_postgres::Error) -> StoreError {
    StoreError::Backend {
        op,
        message: describe(e),
    }
}

/// A connection that could not be had from the pool for operation `op`; `location` is the
/// server's `host:port/dbname`.
pub fn connect_error(
    op: &'static str,
    location: &str,
    e: deadpool_postgres::PoolError,
) -> StoreError {
    use deadpool_postgres::PoolError;
    let message = match &e {
        PoolError::Backend(pg) => connect_failure(location, pg),
        PoolError::Timeout(_) => format!(
            "no connection to {location} became free in time (all {} of the pool's are busy, \
             or the server does not answer)",
            super::POOL_SIZE
        ),
        other => format!("cannot connect to {location}: {}", chain(other)),
    };
    StoreError::Backend { op, message }
}

/// Why opening a connection to `location` failed.
fn connect_failure(location: &str, e: &tokio_postgres::Error) -> String {
    let mut cur: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(cause) = cur {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if let Some(why) = tls_refusal(io) {
                return format!("cannot connect to {location} over TLS: {why}");
            }
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return format!(
                    "connection refused to {location} (is PostgreSQL running and listening \
                     there?)"
                );
            }
        }
        cur = cause.source();
    }
    let text = describe(e);
    if text.contains("server does not support TLS") {
        return format!(
            "cannot connect to {location}: the server does not offer TLS, and store.url's \
             sslmode asks for it (a plain-text connection is never used instead; set \
             ssl = on on the server, or sslmode=disable to connect in plain text)"
        );
    }
    format!("cannot connect to {location}: {text}")
}

/// What a certificate the TLS handshake refused means for the user, from rustls's error.
fn tls_refusal(io: &std::io::Error) -> Option<String> {
    use rustls::CertificateError as C;
    let rustls::Error::InvalidCertificate(cert) = io.get_ref()?.downcast_ref::<rustls::Error>()?
    else {
        return None;
    };
    let why = match cert {
        C::UnknownIssuer | C::BadSignature => {
            "the server's certificate is not signed by a CA of sslrootcert (without \
             sslrootcert: by a public CA)"
        }
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            "the server's certificate does not name the host of store.url (sslmode=verify-full \
             checks the name; connect by the name in the certificate)"
        }
        C::Expired | C::ExpiredContext { .. } => "the server's certificate has expired",
        C::NotValidYet | C::NotValidYetContext { .. } => {
            "the server's certificate is not valid yet (is this machine's clock right?)"
        }
        _ => "the server's certificate was refused",
    };
    Some(format!("{why} ({cert:?})"))
}
