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
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return format!(
                    "connection refused to {location} (is PostgreSQL running and listening \
                     there?)"
                );
            }
        }
        cur = cause.source();
    }
    format!("cannot connect to {location}: {}", describe(e))
}
