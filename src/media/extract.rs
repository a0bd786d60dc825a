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

/// The text of a text file: UTF-8 (a BOM removed), else windows-1252.
pub fn text_of(bytes: &[u8]) -> String {
    let (text, _, _) = encoding_rs::UTF_8.decode(bytes);
    if !text.contains('\u{FFFD}') {
        return text.into_owned();
    }
    encoding_rs::WINDOWS_1252.decode(bytes).0.into_owned()
}

/// The text of a PDF, read in a child process under `limits` ([`super::parse`]). The error is
/// a short sentence for the model.
pub async fn pdf_text(
    bytes: std::sync::Arc<[u8]>,
    limits: super::parse::Limits,
) -> Result<String, String> {
    super::parse::in_child(super::parse::Job::PdfText, bytes, limits).await
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
        assert_eq!(text_of(b"caf\xe9"), "café");
    }
}
