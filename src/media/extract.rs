//! The text of a document, to inline for the model: plain text files (UTF-8, or decoded with
//! the `encoding_rs` fallback windows-1252) and the text of PDFs (`lopdf`, page by page).
//! Anything else gives `None`: the model gets the saved path only.

use std::time::Duration;

/// PDFs: pages read at most.
pub const MAX_PDF_PAGES: u32 = 100;
/// PDFs: the most one page's content may inflate to (a compressed-stream bomb stops here).
pub const MAX_PAGE_BYTES: usize = 16 * 1024 * 1024;
/// PDFs: time allowed for the extraction.
pub const PDF_TIMEOUT: Duration = Duration::from_secs(20);

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

/// The text of a PDF's first [`MAX_PDF_PAGES`] pages, in a blocking thread, within
/// [`PDF_TIMEOUT`]. The error is a short sentence for the model.
pub async fn pdf_text(bytes: std::sync::Arc<[u8]>) -> Result<String, String> {
    let job = tokio::task::spawn_blocking(move || pdf_text_blocking(&bytes));
    match tokio::time::timeout(PDF_TIMEOUT, job).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Err("the PDF reader failed".into()),
        Err(_) => Err(format!(
            "reading the PDF took longer than {} s",
            PDF_TIMEOUT.as_secs()
        )),
    }
}

fn pdf_text_blocking(bytes: &[u8]) -> Result<String, String> {
    let doc = lopdf::Document::load_mem(bytes).map_err(|e| format!("not a readable PDF ({e})"))?;
    if doc.is_encrypted() {
        return Err("the PDF is encrypted".into());
    }
    let pages: Vec<u32> = doc
        .get_pages()
        .keys()
        .copied()
        .take(MAX_PDF_PAGES as usize)
        .collect();
    let mut out = String::new();
    for p in pages {
        match doc.extract_text_with_limit(&[p], MAX_PAGE_BYTES) {
            Ok(t) => {
                out.push_str(t.trim_end());
                out.push('\n');
            }
            Err(e) => tracing::debug!("PDF page {p}: no text ({e})"),
        }
    }
    Ok(out.trim().to_string())
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

    #[tokio::test]
    async fn the_fixture_pdf_has_its_text() {
        let bytes = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/media/hello.pdf"
        ))
        .unwrap();
        let text = pdf_text(bytes.into()).await.unwrap();
        assert!(text.contains("Quarterly report"), "{text:?}");
        assert!(text.contains("Revenue grew 42 percent"), "{text:?}");
        assert!(pdf_text(b"%PDF-1.4 garbage".to_vec().into()).await.is_err());
    }
}
