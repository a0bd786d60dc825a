//! Untrusted files parsed where they cannot hurt: the text of a PDF, the check of a picture and
//! the text of a web page ([`super::page`]) run in a child process (the daemon's binary in its
//! helper mode, [`crate::sandbox::helper`]), never in the daemon. The child
//! - gets the file on standard input and gives the result on standard output;
//! - runs under `setrlimit` limits: private memory (`RLIMIT_DATA`), CPU seconds, no file
//!   writes, few descriptors; a parser that goes past them is killed by the kernel;
//! - reaches no file (a Landlock ruleset with no rule) and makes no connection (the seccomp
//!   filter of commands without approval: no sockets);
//! - is killed — not abandoned — at its wall-clock limit, and at most [`CONCURRENT`] run at once
//!   (the daemon's callers share one set of [`slots`]);
//! - stops at a total decompressed size per file: a PDF's streams (object streams while
//!   loading, page contents while reading) and a PNG's pixels count against it.
//!
//! A non-owner's file gets the smallest limits ([`Limits::for_sender`]). Whatever the file, the
//! daemon's own memory holds only the file's bytes and at most [`MAX_OUTPUT`] of result; a file
//! the child cannot read comes back as "could not read the file" with the reason.

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

/// Children parsing at once; more wait their turn.
pub const CONCURRENT: usize = 2;
/// The most result text the daemon reads from a child, in bytes.
pub const MAX_OUTPUT: usize = 1024 * 1024;
/// The most the child answers for a page, bytes (title and text; a longer text is cut).
pub const MAX_PAGE_TEXT: usize = 8 * 1024 * 1024;
/// PDFs: pages read at most.
pub const MAX_PDF_PAGES: u32 = 100;

/// What the child may use for one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Private memory of the child (`RLIMIT_DATA`), bytes.
    pub memory: u64,
    /// CPU time of the child (`RLIMIT_CPU`), seconds.
    pub cpu_secs: u64,
    /// Wall-clock time before the daemon kills the child, seconds.
    pub wall_secs: u64,
    /// Total decompressed size of the file's streams or pixels, bytes.
    pub inflated: usize,
}

impl Limits {
    /// The owner's files, and anyone else's (smaller).
    pub fn for_sender(is_owner: bool) -> Self {
        if is_owner {
            Limits {
                memory: 1024 * 1024 * 1024,
                cpu_secs: 20,
                wall_secs: 25,
                inflated: 64 * 1024 * 1024,
            }
        } else {
            Limits {
                memory: 256 * 1024 * 1024,
                cpu_secs: 5,
                wall_secs: 8,
                inflated: 8 * 1024 * 1024,
            }
        }
    }
}

/// What the child does with the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Job {
    /// The text of a PDF's first [`MAX_PDF_PAGES`] pages.
    PdfText,
    /// Decode a PNG within the limits (its size in pixels comes back).
    Png,
    /// The title and readable text of a web page ([`super::page`]): `URL\nHTML` in.
    Html,
}

impl Job {
    /// The most result text the daemon reads from the child, bytes: a page's text can be
    /// longer than a document's (the executor spills what the model does not see).
    fn max_output(self) -> usize {
        match self {
            Job::Html => MAX_PAGE_TEXT,
            Job::PdfText | Job::Png => MAX_OUTPUT,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    job: Job,
    limits: Limits,
}

/// Exit code of a child that read the file but found it unreadable (its reason on stdout).
const UNREADABLE: i32 = 3;

/// Reader slots: at most [`CONCURRENT`] children at once among the callers given the same
/// slots. The daemon's are made once by its wiring step (`Common.readers`) and shared by the
/// media service and the page reader, files and web pages together.
pub fn slots() -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(CONCURRENT))
}

/// Run `job` on `bytes` in a child process under `limits`, once one of `slots` ([`slots`]) is
/// free. The error is a short reason for the model ("it expands past 8 MB", "the reader ran out
/// of memory", …).
pub async fn in_child(
    job: Job,
    bytes: Arc<[u8]>,
    limits: Limits,
    slots: &tokio::sync::Semaphore,
) -> Result<String, String> {
    let _slot = slots
        .acquire()
        .await
        .map_err(|_| "the file reader is shutting down".to_string())?;
    let spec = serde_json::to_string(&Spec { job, limits }).map_err(|e| e.to_string())?;
    let program = crate::sandbox::helper::program().map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::new(program)
        .arg(crate::sandbox::helper::HELPER_ARG)
        .arg("parse")
        .arg(spec)
        .env_clear()
        .current_dir("/")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("the file reader could not start ({e})"))?;
    let mut stdin = child.stdin.take().ok_or("no pipe to the file reader")?;
    let mut stdout = child.stdout.take().ok_or("no pipe from the file reader")?;
    let feed = ethan_core::task::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let _ = stdin.write_all(&bytes).await;
    });
    let work = async {
        use tokio::io::AsyncReadExt;
        let mut out = Vec::new();
        let _ = (&mut stdout)
            .take(job.max_output() as u64)
            .read_to_end(&mut out)
            .await;
        (out, child.wait().await)
    };
    let result = tokio::time::timeout(Duration::from_secs(limits.wall_secs), work).await;
    feed.abort();
    let (out, status) = match result {
        Ok(r) => r,
        Err(_) => {
            let _ = child.kill().await;
            return Err(format!(
                "reading it took longer than {} s",
                limits.wall_secs
            ));
        }
    };
    let text = String::from_utf8_lossy(&out).into_owned();
    match status {
        Ok(s) if s.success() => Ok(text),
        Ok(s) if s.code() == Some(UNREADABLE) => Err(text.trim().to_string()),
        // A Rust panic in the parser (not an outside limit).
        Ok(s) if s.code() == Some(101) => Err("the reader failed on it".to_string()),
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            Err(match s.signal() {
                Some(libc::SIGXCPU) | Some(libc::SIGKILL) => {
                    format!("reading it needed more than {} s of CPU", limits.cpu_secs)
                }
                _ => format!(
                    "reading it needed more than {} MB of memory",
                    limits.memory / (1024 * 1024)
                ),
            })
        }
        Err(e) => Err(format!("the file reader failed ({e})")),
    }
}

/// The helper's `parse` mode: limits, sandbox, read stdin, work, answer. Returns the exit code.
pub fn child_main(spec: &str) -> i32 {
    let spec: Spec = match serde_json::from_str(spec) {
        Ok(s) => s,
        Err(e) => return answer(Err(format!("bad job ({e})"))),
    };
    if let Err(e) = confine(&spec.limits) {
        return answer(Err(format!("the file reader could not be confined ({e})")));
    }
    let mut bytes = Vec::new();
    let cap = crate::media::MAX_FILE_BYTES + 1;
    if let Err(e) = std::io::stdin().take(cap).read_to_end(&mut bytes) {
        return answer(Err(format!("the file could not be passed on ({e})")));
    }
    answer(match spec.job {
        Job::PdfText => pdf_text(&bytes, &spec.limits),
        Job::Png => png_check(&bytes, &spec.limits),
        Job::Html => page_text(&bytes),
    })
}

fn answer(r: Result<String, String>) -> i32 {
    let mut out = std::io::stdout().lock();
    let (text, code) = match r {
        Ok(t) => (t, 0),
        Err(e) => (e, UNREADABLE),
    };
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    code
}

/// Resource limits, no file access, no sockets.
fn confine(limits: &Limits) -> Result<(), String> {
    let set = |resource, value: u64| {
        let lim = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct we pass.
        if unsafe { libc::setrlimit(resource, &lim) } != 0 {
            return Err(format!("setrlimit: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    };
    set(libc::RLIMIT_DATA, limits.memory)?;
    set(libc::RLIMIT_CPU, limits.cpu_secs)?;
    set(libc::RLIMIT_FSIZE, 0)?;
    set(libc::RLIMIT_CORE, 0)?;
    set(libc::RLIMIT_NOFILE, 16)?;
    if let Ok(Some(r)) = crate::sandbox::landlock::prepare_nothing() {
        r.restrict_current_process().map_err(|e| e.to_string())?;
    }
    if crate::sandbox::seccomp::FILTER_AVAILABLE {
        crate::sandbox::seccomp::install(crate::sandbox::seccomp::Profile::Unapproved)?;
    }
    Ok(())
}

fn mb(bytes: usize) -> usize {
    bytes / (1024 * 1024)
}

/// The text of a PDF, its decompressed streams bounded by `limits.inflated` in all.
pub fn pdf_text(bytes: &[u8], limits: &Limits) -> Result<String, String> {
    let options = lopdf::LoadOptions {
        max_decompressed_size: Some(limits.inflated),
        ..lopdf::LoadOptions::default()
    };
    let doc = lopdf::Document::load_mem_with_options(bytes, options)
        .map_err(|e| format!("not a readable PDF ({e})"))?;
    if doc.is_encrypted() {
        return Err("the PDF is encrypted".into());
    }
    let pages: Vec<(u32, lopdf::ObjectId)> = doc
        .get_pages()
        .into_iter()
        .take(MAX_PDF_PAGES as usize)
        .collect();
    // The total first: every page's content streams, each decoded within what is left. A page
    // whose content is in a compression not built in (such as BrotliDecode) is left out
    // undecoded; damaged content stops the read, as a bomb does.
    let mut left = limits.inflated;
    let mut readable = Vec::new();
    for (p, id) in &pages {
        if page_fits(&doc, *id, &mut left, limits)? {
            readable.push(*p);
        }
    }
    let mut out = String::new();
    for p in &readable {
        if let Ok(t) = doc.extract_text_with_limit(&[*p], limits.inflated) {
            out.push_str(t.trim_end());
            out.push('\n');
        }
    }
    let out = out.trim();
    let unread = |n: usize| {
        format!("{n} of its pages are in a compression Ethan does not read (such as BrotliDecode)")
    };
    match pages.len() - readable.len() {
        0 => Ok(out.to_string()),
        n if out.is_empty() => Err(unread(n)),
        n => Ok(format!("{out}\n[{}: their text is left out]", unread(n))),
    }
}

/// The filters lopdf is built with here (vendor/lopdf/PATCHED.md: no BrotliDecode).
const FILTERS: [&[u8]; 5] = [
    b"FlateDecode",
    b"LZWDecode",
    b"ASCII85Decode",
    b"ASCIIHexDecode",
    b"RunLengthDecode",
];

/// Whether page `id`'s content streams are all in [`FILTERS`] (false: the page is left out,
/// nothing decoded), each decoded within `left`, which it lowers.
fn page_fits(
    doc: &lopdf::Document,
    id: lopdf::ObjectId,
    left: &mut usize,
    limits: &Limits,
) -> Result<bool, String> {
    let streams: Vec<&lopdf::Stream> = doc
        .get_page_contents(id)
        .into_iter()
        .filter_map(|sid| doc.get_object(sid).and_then(lopdf::Object::as_stream).ok())
        .collect();
    let built_in = |s: &&lopdf::Stream| {
        s.filters()
            .map_or(true, |f| f.iter().all(|f| FILTERS.contains(f)))
    };
    if !streams.iter().all(built_in) {
        return Ok(false);
    }
    for stream in streams {
        match stream.decompressed_content_with_limit(*left) {
            Ok(c) => *left = left.saturating_sub(c.len()),
            Err(lopdf::Error::Decompress(lopdf::DecompressError::MemoryLimitExceeded {
                ..
            })) => {
                return Err(format!(
                    "its content expands past {} MB",
                    mb(limits.inflated)
                ))
            }
            Err(e) => return Err(format!("its page content is damaged ({e})")),
        }
    }
    Ok(true)
}

/// Decode a PNG whose pixels fit `limits.inflated`; answers `WIDTHxHEIGHT`.
pub fn png_check(bytes: &[u8], limits: &Limits) -> Result<String, String> {
    let decoder = png::Decoder::new_with_limits(
        std::io::Cursor::new(bytes),
        png::Limits {
            bytes: limits.inflated,
        },
    );
    let too_big = || format!("its pixels expand past {} MB", mb(limits.inflated));
    let mut reader = decoder.read_info().map_err(|e| match e {
        png::DecodingError::LimitsExceeded => too_big(),
        e => format!("not a readable PNG ({e})"),
    })?;
    let size = reader.output_buffer_size().ok_or_else(too_big)?;
    if size > limits.inflated {
        return Err(too_big());
    }
    let mut buf = vec![0; size];
    let info = reader.next_frame(&mut buf).map_err(|e| match e {
        png::DecodingError::LimitsExceeded => too_big(),
        e => format!("not a readable PNG ({e})"),
    })?;
    Ok(format!("{}x{}", info.width, info.height))
}

/// The child's side: `URL\nHTML` in, `title\ntext` out (the title on one line).
pub fn page_text(input: &[u8]) -> Result<String, String> {
    let input = String::from_utf8_lossy(input);
    let (url, html) = input.split_once('\n').unwrap_or(("", &input));
    let (title, text) = ethan_tools::builtin::web::readable::readable(html, url);
    let mut out = format!("{}\n{text}", title.replace(['\n', '\r'], " "));
    cut_to(&mut out, MAX_PAGE_TEXT);
    Ok(out)
}

/// Cut `s` to at most `max` bytes, at a character boundary.
pub(super) fn cut_to(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_fixture_pdf_has_its_text_through_the_child() {
        let bytes = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/media/hello.pdf"
        ))
        .unwrap();
        let slots = slots();
        let text = in_child(
            Job::PdfText,
            bytes.into(),
            Limits::for_sender(false),
            &slots,
        )
        .await
        .unwrap();
        assert!(text.contains("Quarterly report"), "{text:?}");
        let bad = in_child(
            Job::PdfText,
            b"%PDF-1.4 garbage".to_vec().into(),
            Limits::for_sender(false),
            &slots,
        )
        .await;
        assert!(bad.unwrap_err().contains("not a readable PDF"));
    }

    /// A one-page PDF whose font /F1 has `encoding` and whose content is `content`, filtered
    /// by `filter` when given (the bytes are then taken as already encoded).
    fn one_page(encoding: lopdf::Object, content: &[u8], filter: Option<&str>) -> Vec<u8> {
        pages(encoding, &[(content, filter)])
    }

    /// [`one_page`] with a page for each `(content, filter)`.
    fn pages(encoding: lopdf::Object, contents: &[(&[u8], Option<&str>)]) -> Vec<u8> {
        use lopdf::{dictionary, Document, Object, Stream};
        let mut doc = Document::with_version("1.5");
        let pages_id = doc.new_object_id();
        let font_id = doc.add_object(dictionary! {
            "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
            "Encoding" => encoding,
        });
        let mut kids: Vec<Object> = Vec::new();
        for (content, filter) in contents {
            let mut dict = dictionary! {};
            if let Some(f) = filter {
                dict.set("Filter", Object::Name(f.as_bytes().to_vec()));
            }
            let content_id = doc.add_object(Stream::new(dict, content.to_vec()));
            let page_id = doc.add_object(dictionary! {
                "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
                "Resources" => dictionary! { "Font" => dictionary! { "F1" => font_id } },
                "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
            });
            kids.push(page_id.into());
        }
        let count = kids.len() as i64;
        doc.objects.insert(
            pages_id,
            Object::Dictionary(dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => count }),
        );
        let catalog_id = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages_id});
        doc.trailer.set("Root", catalog_id);
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap();
        out
    }

    #[test]
    fn glyph_names_in_a_fonts_differences_are_read() {
        use lopdf::{dictionary, Object};
        let name = |n: &str| Object::Name(n.as_bytes().to_vec());
        // `Adieresis` is early in the Adobe Glyph List and `afii10017` (Cyrillic A) deep in it.
        // `notaglyph` is no glyph name, so the font falls back to the standard encoding
        // (lopdf's rule) and D stays D.
        let differences = vec![
            65.into(),
            name("Adieresis"),
            name("afii10017"),
            name("eacute"),
        ];
        let enc = Object::Dictionary(dictionary! { "Differences" => differences });
        let pdf = one_page(enc, b"BT /F1 12 Tf (ABC) Tj ET", None);
        let text = pdf_text(&pdf, &Limits::for_sender(false)).unwrap();
        assert_eq!(text, "\u{c4}\u{410}\u{e9}");
        let unknown = vec![65.into(), name("notaglyph")];
        let enc = Object::Dictionary(dictionary! { "Differences" => unknown });
        let pdf = one_page(enc, b"BT /F1 12 Tf (AD) Tj ET", None);
        assert_eq!(pdf_text(&pdf, &Limits::for_sender(false)).unwrap(), "AD");
    }

    /// `pdf` encrypted with AES-256 (revision 6) and these passwords.
    fn aes256(pdf: &[u8], user_password: &str) -> Vec<u8> {
        use lopdf::encryption::crypt_filters::{Aes256CryptFilter, CryptFilter};
        use lopdf::{EncryptionState, EncryptionVersion, Permissions};
        let mut doc = lopdf::Document::load_mem(pdf).unwrap();
        let filter: std::sync::Arc<dyn CryptFilter> = std::sync::Arc::new(Aes256CryptFilter);
        let state = EncryptionState::try_from(EncryptionVersion::V5 {
            encrypt_metadata: true,
            crypt_filters: std::collections::BTreeMap::from([(b"StdCF".to_vec(), filter)]),
            file_encryption_key: &[7u8; 32],
            stream_filter: b"StdCF".to_vec(),
            string_filter: b"StdCF".to_vec(),
            owner_password: "owner-secret",
            user_password,
            permissions: Permissions::PRINTABLE,
        })
        .unwrap();
        doc.encrypt(&state).unwrap();
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap();
        out
    }

    #[test]
    fn an_encrypted_pdf_is_read_when_it_opens_without_a_password() {
        // lopdf is built without SASLprep (Cargo.toml, vendor/lopdf/PATCHED.md): the empty
        // password a permissions-only PDF opens with still decrypts it.
        let enc = lopdf::Object::Name(b"WinAnsiEncoding".to_vec());
        let plain = one_page(enc, b"BT /F1 12 Tf (Restricted but readable) Tj ET", None);
        let limits = Limits::for_sender(false);
        let open = aes256(&plain, "");
        assert_eq!(pdf_text(&open, &limits).unwrap(), "Restricted but readable");
        let locked = aes256(&plain, "user-secret");
        assert_eq!(
            pdf_text(&locked, &limits).unwrap_err(),
            "the PDF is encrypted"
        );
    }

    #[test]
    fn a_page_in_a_compression_not_built_in_is_left_out_and_named() {
        let enc = || lopdf::Object::Name(b"WinAnsiEncoding".to_vec());
        let limits = Limits::for_sender(false);
        let brotli: (&[u8], _) = (b"\x0b\x02\x80hello\x03", Some("BrotliDecode"));
        let pdf = pages(enc(), &[brotli]);
        assert_eq!(
            pdf_text(&pdf, &limits).unwrap_err(),
            "1 of its pages are in a compression Ethan does not read (such as BrotliDecode)"
        );
        let plain: (&[u8], _) = (b"BT /F1 12 Tf (Page two) Tj ET", None);
        let pdf = pages(enc(), &[brotli, plain]);
        assert_eq!(
            pdf_text(&pdf, &limits).unwrap(),
            "Page two\n[1 of its pages are in a compression Ethan does not read (such as \
             BrotliDecode): their text is left out]"
        );
        // Damaged data in a built-in filter is not taken for a bomb either.
        let pdf = pages(enc(), &[(b"4Q xx>", Some("ASCIIHexDecode"))]);
        let err = pdf_text(&pdf, &limits).unwrap_err();
        assert!(err.starts_with("its page content is damaged ("), "{err}");
    }
}
