//! The page's files, built into the binary from `web/` (plain HTML, CSS and ES modules; no
//! build step): `GET /` is `index.html`, `GET /assets/{name}` the others.

use super::PageState;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// `(name, content type, bytes)` of every file under `/assets/`.
pub const FILES: &[(&str, &str, &[u8])] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../web/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("../../../web/style.css"),
    ),
    (
        "icon.svg",
        "image/svg+xml",
        include_bytes!("../../../web/icon.svg"),
    ),
];

/// The page.
pub const INDEX: &str = include_str!("../../../web/index.html");

fn misdirected() -> Response {
    (
        StatusCode::MISDIRECTED_REQUEST,
        "This page is served only at an address (http://127.0.0.1:8900/), localhost or \
         gateway.public_url.\n",
    )
        .into_response()
}

fn host_ok(s: &PageState, h: &HeaderMap) -> bool {
    crate::gateway::guard::host(h)
        .is_some_and(|host| crate::gateway::guard::host_allowed(&host, s.public.as_ref()))
}

pub async fn index(State(s): State<Arc<PageState>>, h: HeaderMap) -> Response {
    if !host_ok(&s, &h) {
        return misdirected();
    }
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        INDEX,
    )
        .into_response()
}

pub async fn asset(
    State(s): State<Arc<PageState>>,
    Path(name): Path<String>,
    h: HeaderMap,
) -> Response {
    if !host_ok(&s, &h) {
        return misdirected();
    }
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, ty, bytes)) => (
            [
                (header::CONTENT_TYPE, *ty),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such file\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_adds_at_most_150_kb() {
        let total = INDEX.len() + FILES.iter().map(|(_, _, b)| b.len()).sum::<usize>();
        assert!(total <= 150 * 1024, "{total} bytes");
    }

    #[test]
    fn no_inline_script_or_style() {
        assert!(
            !INDEX.contains("<script>") && !INDEX.contains("<style") && !INDEX.contains(" style=")
        );
        assert!(!INDEX.contains(" on"), "no inline event handler");
    }
}
