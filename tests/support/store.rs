//! The state a daemon left in its store, whichever backend the test runs on: the SQLite file
//! `<home>/ethan.db`, or the PostgreSQL database of the home's `store.url`
//! (`ETHAN_TEST_STORE=postgres`, see [`super::daemon::suite_on_postgres`]).
//!
//! SQL is written once, with `?1`-style placeholders; on PostgreSQL each placeholder becomes the
//! quoted literal of its value (test values only, never input from outside). Values come back
//! as text, NULL as `None`, booleans as `1`/`0` on both (SQLite stores them as integers).
//! [`is_sqlite`] tells a test whose subject is the SQLite file itself (a locked or read-only
//! database, an old schema) that it does not apply.

#![allow(dead_code)]

use super::daemon::TestHome;

/// A row, its columns as text (`None` for NULL).
pub type Row = Vec<Option<String>>;

/// Whether this home's store is the SQLite file (the suite is not on PostgreSQL).
pub fn is_sqlite(home: &TestHome) -> bool {
    home.pg_url().is_none()
}

/// For a test whose subject is the SQLite file itself: on PostgreSQL it says why it does not
/// apply (on stderr) and returns true, and the test returns.
pub fn skip_unless_sqlite(home: &TestHome, why: &str) -> bool {
    if is_sqlite(home) {
        return false;
    }
    eprintln!("not run on PostgreSQL: {why}");
    true
}

/// Every row of `sql` (`?1`, `?2`… bound to `params`).
pub fn rows(home: &TestHome, sql: &str, params: &[&str]) -> Vec<Row> {
    match home.pg_url() {
        None => sqlite_rows(home, sql, params),
        Some(url) => pg(url, inline(sql, params), true),
    }
}

/// The first row of `sql`, if any.
pub fn row(home: &TestHome, sql: &str, params: &[&str]) -> Option<Row> {
    rows(home, sql, params).into_iter().next()
}

/// The first column of the first row (`None` when there is no row or it is NULL).
pub fn value(home: &TestHome, sql: &str, params: &[&str]) -> Option<String> {
    row(home, sql, params).and_then(|r| r.into_iter().next().flatten())
}

/// The first column of the first row as a number (0 when absent).
pub fn count(home: &TestHome, sql: &str, params: &[&str]) -> i64 {
    value(home, sql, params)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Run a statement that changes the store (a test setting up old or broken state).
pub fn execute(home: &TestHome, sql: &str, params: &[&str]) {
    match home.pg_url() {
        None => {
            let db = rusqlite::Connection::open(home.path().join("ethan.db"))
                .expect("open the SQLite store");
            db.execute(sql, rusqlite::params_from_iter(params.iter()))
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        Some(url) => {
            pg(url, inline(sql, params), false);
        }
    }
}

fn sqlite_rows(home: &TestHome, sql: &str, params: &[&str]) -> Vec<Row> {
    use rusqlite::types::ValueRef;
    let db =
        rusqlite::Connection::open(home.path().join("ethan.db")).expect("open the SQLite store");
    let mut st = db.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let n = st.column_count();
    let mut out = Vec::new();
    let mut rows = st
        .query(rusqlite::params_from_iter(params.iter()))
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    while let Some(r) = rows.next().unwrap_or_else(|e| panic!("{sql}: {e}")) {
        out.push(
            (0..n)
                .map(|i| match r.get_ref(i).expect("a column") {
                    ValueRef::Null => None,
                    ValueRef::Integer(v) => Some(v.to_string()),
                    ValueRef::Real(v) => Some(v.to_string()),
                    ValueRef::Text(t) | ValueRef::Blob(t) => {
                        Some(String::from_utf8_lossy(t).into_owned())
                    }
                })
                .collect(),
        );
    }
    out
}

/// `sql` with `?N` replaced by the quoted literal of `params[N-1]` (highest numbers first, so
/// `?1` does not match the start of `?10`).
fn inline(sql: &str, params: &[&str]) -> String {
    let mut out = sql.to_string();
    for (i, p) in params.iter().enumerate().rev() {
        out = out.replace(
            &format!("?{}", i + 1),
            &format!("'{}'", p.replace('\'', "''")),
        );
    }
    out
}

/// Run `sql` on PostgreSQL (on a thread of its own with its own runtime, so it works from sync
/// and async tests alike); its rows when `read`.
fn pg(url: String, sql: String, read: bool) -> Vec<Row> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap_or_else(|e| panic!("connect to the test database: {e}"));
            tokio::spawn(conn);
            if !read {
                client
                    .batch_execute(&sql)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
                return Vec::new();
            }
            let rows = client
                .query(&sql, &[])
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            rows.iter().map(pg_row).collect()
        })
    })
    .join()
    .expect("the database thread")
}

fn pg_row(r: &tokio_postgres::Row) -> Row {
    use tokio_postgres::types::Type;
    (0..r.len())
        .map(|i| {
            let t = r.columns()[i].type_().clone();
            if t == Type::BOOL {
                r.get::<_, Option<bool>>(i)
                    .map(|b| if b { "1" } else { "0" }.to_string())
            } else if t == Type::INT8 {
                r.get::<_, Option<i64>>(i).map(|v| v.to_string())
            } else if t == Type::INT4 {
                r.get::<_, Option<i32>>(i).map(|v| v.to_string())
            } else if t == Type::FLOAT8 {
                r.get::<_, Option<f64>>(i).map(|v| v.to_string())
            } else if t == Type::NUMERIC {
                // COUNT/SUM results: read as text through a cast in the query instead.
                Some(format!("<numeric column {i}: cast it to BIGINT>"))
            } else {
                r.get::<_, Option<String>>(i)
            }
        })
        .collect()
}
