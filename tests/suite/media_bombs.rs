//! A stranger's files cannot exhaust the daemon, through the real daemon and the fake Bot API:
//! in a group, a non-owner sends a PDF whose one compressed page stream inflates to 40 MB of
//! drawing operators (41 KB on the wire) and a PNG declaring 30000×30000 pixels; both are made
//! here. The files are read in a child process under the non-owner's limits: the model is told
//! "Could not read the file" for each, the owner's DM sent meanwhile is answered, and the
//! daemon's peak resident memory (`VmHWM`) stays under 150 MiB. A 20 MB text file that is not
//! UTF-8 keeps it there too: only what the model is shown is decoded.

use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

const OWNER: i64 = 218485655;
const STRANGER: i64 = 4242;
const GROUP: i64 = -100555;
const WAIT: Duration = Duration::from_secs(60);

/// A one-page PDF whose content stream inflates to `inflated` bytes of operators.
fn pdf_bomb(inflated: usize) -> Vec<u8> {
    use lopdf::{dictionary, Document, Object, Stream};
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let ops = b"1 0 0 1 0 0 cm\n";
    let content: Vec<u8> = ops.iter().copied().cycle().take(inflated).collect();
    let mut stream = Stream::new(dictionary! {}, content);
    stream.compress().expect("compress");
    let content_id = doc.add_object(stream);
    let page_id = doc.add_object(dictionary! {
        "Type" => "Page",
        "Parent" => pages_id,
        "Contents" => content_id,
        "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
    });
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Kids" => vec![page_id.into()],
            "Count" => 1,
        }),
    );
    let catalog_id = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages_id});
    doc.trailer.set("Root", catalog_id);
    let mut out = Vec::new();
    doc.save_to(&mut out).expect("save");
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let mut body = kind.to_vec();
    body.extend_from_slice(data);
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc32(&body).to_be_bytes());
}

/// A PNG declaring `side`×`side` RGBA pixels, with the start of a zero-filled image stream.
fn png_bomb(side: u32) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    let mut stream = Vec::new();
    stream.extend(lopdf_free_deflate(&vec![0u8; 64 * 1024]));
    chunk(&mut out, b"IDAT", &stream);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// zlib data of `raw` in stored (uncompressed) blocks.
fn lopdf_free_deflate(raw: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65535).collect();
    for (i, b) in blocks.iter().enumerate() {
        out.push(u8::from(i + 1 == blocks.len()));
        out.extend_from_slice(&(b.len() as u16).to_le_bytes());
        out.extend_from_slice(&(!(b.len() as u16)).to_le_bytes());
        out.extend_from_slice(b);
    }
    let (mut a, mut s) = (1u32, 0u32);
    for &x in raw {
        a = (a + u32::from(x)) % 65521;
        s = (s + a) % 65521;
    }
    out.extend_from_slice(&((s << 16) | a).to_be_bytes());
    out
}

fn group_document(update: i64, file_id: &str, name: &str, mime: &str, size: usize) -> Value {
    json!({
        "update_id": update,
        "message": {
            "message_id": update, "date": crate::support::unix_now(),
            "chat": {"id": GROUP, "type": "supergroup", "title": "team"},
            "from": {"id": STRANGER, "is_bot": false, "first_name": "Eve"},
            "caption": "@ethan_test_bot summarise this",
            "caption_entities": [{"type": "mention", "offset": 0, "length": 15}],
            "document": {"file_name": name, "mime_type": mime, "file_id": file_id,
                         "file_unique_id": format!("u-{file_id}"), "file_size": size}
        }
    })
}

fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// Answers what the last user message says about the file, or greets.
fn answer() -> Step {
    Step::custom(|req| {
        let text = req["messages"]
            .as_array()
            .and_then(|m| m.iter().rfind(|m| m["role"] == "user"))
            .map(|m| m["content"].to_string())
            .unwrap_or_default();
        let reply = if text.contains("Could not read the file") {
            "could not read the file"
        } else if text.contains("hello") {
            "hello owner"
        } else {
            "something else"
        };
        (200, crate::support::model::text_completion(req, reply))
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_strangers_bombs_cannot_exhaust_the_daemon() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let pdf = pdf_bomb(40 * 1024 * 1024);
    assert!(
        pdf.len() < 200 * 1024,
        "the PDF bomb is {} bytes",
        pdf.len()
    );
    let png = png_bomb(30_000);
    let (pdf_len, png_len) = (pdf.len(), png.len());
    tg.add_file("pdf-bomb", "u-pdf-bomb", "documents/bomb.pdf", pdf);
    tg.add_file("png-bomb", "u-png-bomb", "documents/bomb.png", png);
    let model = ScriptedModel::start(vec![answer(), answer(), answer()]).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n  vision: true\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    let mut daemon = Daemon::start(&home);
    tg.push_update(group_document(
        1,
        "pdf-bomb",
        "report.pdf",
        "application/pdf",
        pdf_len,
    ));
    tg.push_update(group_document(
        2,
        "png-bomb",
        "photo.png",
        "image/png",
        png_len,
    ));
    tg.push_update(json!({
        "update_id": 3,
        "message": {
            "message_id": 3, "date": crate::support::unix_now(),
            "chat": {"id": OWNER, "type": "private"},
            "from": {"id": OWNER, "is_bot": false, "first_name": "O"},
            "text": "hello"
        }
    }));
    let sent = tg.wait_for_sent(3, WAIT).await;
    let to = |chat: i64| -> Vec<String> {
        sent.iter()
            .filter(|m| m["chat_id"] == json!(chat))
            .map(|m| m["text"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(to(OWNER), ["hello owner"], "{sent:?}");
    assert_eq!(
        to(GROUP),
        ["could not read the file", "could not read the file"],
        "{sent:?}"
    );
    let notes: Vec<String> = model
        .requests()
        .iter()
        .map(|r| r["messages"].to_string())
        .filter(|m| m.contains("Could not read the file"))
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("expands past 8 MB")),
        "{notes:?}"
    );
    let peak = peak_rss_kib(daemon.pid());
    assert!(peak < 150 * 1024, "the daemon's peak RSS was {peak} KiB");
    eprintln!("daemon peak RSS: {} KiB", peak);
    daemon.stop();
}

/// A stranger's 20 MB "text" file of bytes that are not UTF-8 (8 KB of ASCII, then 0xFF): the
/// daemon decodes only what the model is shown (a whole-file decode held three times its
/// size), and the model still gets the file's head and tail, cut to fit.
#[tokio::test(flavor = "multi_thread")]
async fn a_strangers_text_file_keeps_the_daemon_under_150_mib() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let mut bytes = vec![b'a'; 8192];
    bytes.resize(20_000_000, 0xFF);
    let len = bytes.len();
    tg.add_file("txt", "u-txt", "documents/notes.txt", bytes);
    let model = ScriptedModel::start(vec![Step::text("read it")]).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    let mut daemon = Daemon::start(&home);
    tg.push_update(group_document(1, "txt", "notes.txt", "text/plain", len));
    let sent = tg.wait_for_sent(1, Duration::from_secs(300)).await;
    let peak = peak_rss_kib(daemon.pid());
    daemon.stop();
    assert!(
        peak < 150 * 1024,
        "the daemon's peak RSS was {peak} KiB after {sent:?}"
    );
    eprintln!("daemon peak RSS: {peak} KiB");
    let shown = model.requests()[0]["messages"].to_string();
    assert!(
        shown.contains("Its text (cut to fit) follows")
            && shown.contains("output truncated: 20000000 characters")
            && shown.contains("aaaa"),
        "{}",
        &shown[..shown.len().min(2000)]
    );
}
