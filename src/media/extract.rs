//! The text of a document, to inline for the model: plain text files (UTF-8, or decoded with
//! the `encoding_rs` fallback windows-1252) and the text of PDFs (`lopdf`, page by page).
//! Anything else gives `None`: the model gets the saved path only. PDFs are parsed in a child
//! process ([`super::parse`]).

/// What kind of document `bytes` is, by its signature, type and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    Pdf,
    Text,
    Other,
}

pub fn kind_of(bytes: &[u8], mime: &str, name: &str) -> DocKind {
    let lower = name.to_ascii_lowercase();
    if bytes.starts_with(b"%PDF-") || mime == "application/pdf" || lower.ends_with(".pdf") {
        return DocKind::Pdf;
    }
    let head = &bytes[..bytes.len().min(8192)];
    if head.contains(&0) {
        return DocKind::Other;
    }
    let texty_mime = mime.starts_with("text/")
        || [
            "application/json",
            "application/xml",
            "application/yaml",
            "application/x-yaml",
            "application/toml",
            "application/x-sh",
            "application/javascript",
            "application/sql",
        ]
        .contains(&mime);
    if texty_mime || std::str::from_utf8(head).is_ok() || head.is_empty() {
        DocKind::Text
    } else {
        DocKind::Other
    }
}

/// The text of a text file as the model is shown it: UTF-8 (a BOM removed), else windows-1252,
/// cut to `limit` characters as tool output is (head and tail around a marker). Only what is
/// shown is decoded: whatever a stranger's file holds, the daemon keeps no copy of it larger
/// than `limit` characters (a whole-file decode would hold three times its size).
pub fn text_for_model(bytes: &[u8], limit: usize) -> (String, bool) {
    use crate::tools::engine::truncate::{kept_counts, marked, truncate_for_model};
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if let Ok(text) = std::str::from_utf8(bytes) {
        return truncate_for_model(text, limit);
    }
    // windows-1252: one character per byte.
    fn decode(b: &[u8]) -> std::borrow::Cow<'_, str> {
        encoding_rs::WINDOWS_1252.decode_without_bom_handling(b).0
    }
    if bytes.len() <= limit {
        return (decode(bytes).into_owned(), false);
    }
    let (head_n, tail_n) = kept_counts(limit);
    let utf8_len: [usize; 256] = std::array::from_fn(|b| decode(&[b as u8]).len());
    let utf8_total = bytes.iter().map(|b| utf8_len[*b as usize]).sum();
    let text = marked(
        &decode(&bytes[..head_n]),
        &decode(&bytes[bytes.len() - tail_n..]),
        bytes.len(),
        utf8_total,
    );
    (text, true)
}

/// The text of a PDF, read in a child process under `limits` once one of `slots` is free
/// ([`super::parse`]). The error is a short sentence for the model.
pub async fn pdf_text(
    bytes: std::sync::Arc<[u8]>,
    limits: super::parse::Limits,
    slots: &tokio::sync::Semaphore,
) -> Result<String, String> {
    super::parse::in_child(super::parse::Job::PdfText, bytes, limits, slots).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(kind_of(b"%PDF-1.4", "", "x"), DocKind::Pdf);
        assert_eq!(kind_of(b"hello", "", "notes.txt"), DocKind::Text);
        assert_eq!(
            kind_of(b"\x89PNG\r\n\x1a\n\0\0", "", "a.png"),
            DocKind::Other
        );
        assert_eq!(text_for_model(b"caf\xe9", 100), ("café".to_string(), false));
        assert_eq!(
            text_for_model(b"\xEF\xBB\xBFcaf\xC3\xA9", 100),
            ("café".to_string(), false)
        );
    }

    #[test]
    fn a_long_text_is_cut_as_tool_output_is_whatever_its_encoding() {
        use crate::tools::engine::truncate::truncate_for_model;
        let mut latin = vec![b'a'; 3000];
        latin.extend(std::iter::repeat_n(0xE9u8, 20_000));
        latin.extend(b"end");
        let (cut, was_cut) = text_for_model(&latin, 1000);
        let whole = encoding_rs::WINDOWS_1252.decode(&latin).0.into_owned();
        assert!(was_cut);
        assert_eq!(cut, truncate_for_model(&whole, 1000).0);
        let utf8 = "é".repeat(20_000);
        assert_eq!(
            text_for_model(utf8.as_bytes(), 1000),
            truncate_for_model(&utf8, 1000)
        );
    }
}
