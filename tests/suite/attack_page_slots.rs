//! Many slow pages at once, from the attacker's side (real daemon, fake Bot API, fake model):
//! the attacker's page makes the model fetch it several times in one step (read-only calls run
//! in parallel). Each copy is refused at the child's limits, but the children that read pages
//! are the same few that read everyone's PDFs and pictures ([`ethan::media::parse::CONCURRENT`]
//! of them): before the fix, six copies of the page held both for about 30 s, and another
//! owner's PDF, sent meanwhile, waited behind them (measured: 29.5 s,
//! debug build; after the fix 0.05 s).
//!
//! The guarantee: pages take at most one child at a time (`ethan::media::page`), so a file
//! from another chat always finds the other one free, and a page that cannot start within the
//! page's wall-clock limit is refused as busy instead of waiting.

use crate::support::model::{last_user_text, text_completion, tool_calls_completion};
use crate::support::model::{FnAnswer, FnModel};
use crate::support::{Daemon, FakeTelegram, TestHome};
use axum::extract::State;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OWNER: i64 = 218485656;
/// Another owner, whose PDF arrives while the pages are read.
const OTHER: i64 = 318485656;
/// Copies of the page the model fetches in one step.
const COPIES: usize = 6;

type Seen = Arc<Mutex<Vec<Instant>>>;

async fn attacker(page: Arc<String>) -> (String, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    async fn handler(
        State((page, seen)): State<(Arc<String>, Seen)>,
    ) -> ([(axum::http::HeaderName, &'static str); 1], String) {
        seen.lock().unwrap().push(Instant::now());
        (
            [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")],
            page.as_str().to_string(),
        )
    }
    let app = axum::Router::new()
        .fallback(handler)
        .with_state((page, seen.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/slow"), seen)
}

/// A URL in the last message: `COPIES` parallel fetches of it (`?n=i`); tool results: a
/// summary of how each went; a file: `file read`; anything else: `pong`.
fn model_answer(req: &Value) -> FnAnswer {
    let messages = req["messages"].as_array().cloned().unwrap_or_default();
    if messages.last().is_some_and(|m| m["role"] == "tool") {
        let tools: Vec<String> = messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect();
        return FnAnswer::Json(
            200,
            text_completion(req, &format!("pages done: {}", tools.join(" | "))),
        );
    }
    let user = last_user_text(req);
    if user.contains("report.pdf") || user.contains("[file") || user.contains("PDF") {
        return FnAnswer::Json(200, text_completion(req, "file read"));
    }
    match user.split_whitespace().find(|w| w.starts_with("http://")) {
        Some(url) => {
            let calls: Vec<(String, String, String)> = (0..COPIES)
                .map(|i| {
                    (
                        format!("f{i}"),
                        "web_fetch".to_string(),
                        json!({ "url": format!("{url}?n={i}") }).to_string(),
                    )
                })
                .collect();
            FnAnswer::Json(200, tool_calls_completion(req, &calls))
        }
        None => FnAnswer::Json(200, text_completion(req, "pong")),
    }
}

fn small_pdf() -> Vec<u8> {
    use lopdf::{dictionary, Document, Object, Stream};
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let content_id = doc.add_object(Stream::new(dictionary! {}, b"1 0 0 1 0 0 cm\n".to_vec()));
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

fn reply_in(tg: &FakeTelegram, chat: i64, needle: &str) -> Option<String> {
    tg.sent_messages()
        .iter()
        .filter(|m| m["chat_id"].as_i64() == Some(chat))
        .filter_map(|m| m["text"].as_str().map(str::to_string))
        .find(|t| t.contains(needle))
}

async fn wait_reply(tg: &FakeTelegram, chat: i64, needle: &str, limit: Duration) -> String {
    let start = Instant::now();
    loop {
        if let Some(t) = reply_in(tg, chat, needle) {
            return t;
        }
        assert!(
            start.elapsed() < limit,
            "no reply with {needle:?} in chat {chat} within {limit:?}; sent: {:#?}",
            tg.sent_texts()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn many_slow_pages_at_once_leave_a_child_for_another_chats_file() {
    // The page of attack_page_parse: 100,000 self-closed `<div/>`s, refused at 10 s of CPU.
    let mut page = String::from("<!doctype html><html><head><title>t</title></head><body>");
    page.push_str(&"<div/>".repeat(100_000));
    let (url, seen) = attacker(Arc::new(page)).await;
    let tg = FakeTelegram::start().await;
    let pdf = small_pdf();
    let pdf_len = pdf.len();
    tg.add_file("doc1", "u-doc1", "documents/report.pdf", pdf);
    let model = FnModel::start(model_answer).await;
    let home = TestHome::new();
    home.write_config(&format!(
        "model:\n  base_url: {}\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\", \"telegram:{OTHER}\"]\n\
         tools:\n  web_fetch:\n    allow_private: [\"127.0.0.1\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    let _daemon = Daemon::start(&home);
    tg.push_text(OWNER, OWNER, &format!("what does {url} say?"));

    // All copies are fetched; their parses start (or queue). The loopback page is a private
    // address to the daemon, so the copies after the first ones ask the owner, who approves.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut approved = std::collections::HashSet::new();
    while seen.lock().unwrap().len() < COPIES {
        assert!(Instant::now() < deadline, "the pages were not all fetched");
        for text in tg.sent_texts() {
            if let Some(id) = text
                .split("Reply /approve ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
            {
                if approved.insert(id.to_string()) {
                    tg.push_text(OWNER, OWNER, &format!("/approve {id}"));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Another owner's PDF, meanwhile.
    let sent_at = Instant::now();
    let update = tg.next_update_id();
    tg.push_update(json!({
        "update_id": update,
        "message": {
            "message_id": update, "date": crate::support::unix_now(),
            "chat": {"id": OTHER, "type": "private"},
            "from": {"id": OTHER, "is_bot": false, "first_name": "O"},
            "caption": "what is in this PDF?",
            "document": {"file_name": "report.pdf", "mime_type": "application/pdf",
                         "file_id": "doc1", "file_unique_id": "u-doc1", "file_size": pdf_len}
        }
    }));
    wait_reply(&tg, OTHER, "file read", Duration::from_secs(60)).await;
    let pdf_took = sent_at.elapsed();
    let pages = wait_reply(&tg, OWNER, "pages done", Duration::from_secs(90)).await;
    eprintln!(
        "{COPIES} slow pages at once: another chat's PDF answered after {pdf_took:?}; pages: {}",
        &pages[..pages.len().min(600)]
    );
    assert!(
        pages.contains("could not read the page"),
        "the pages were refused: {pages}"
    );
    // One child's wall-clock limit (15 s) would be one page ahead of it; the PDF must not wait
    // for the attacker's pages at all: a few seconds for the turn around it.
    assert!(
        pdf_took < Duration::from_secs(8),
        "another chat's PDF waited {pdf_took:?} behind the attacker's pages"
    );
    home.assert_no_panic();
}
