//! The knowledge base: notes as Markdown files, found by keyword (English and Chinese, short
//! queries included) and by meaning.
//!
//! Library-level tests drive `ethan::knowledge::Knowledge` over a real SQLite file and a real
//! folder; semantic search talks to a fake OpenAI-compatible embeddings server (axum on
//! 127.0.0.1:0) whose vectors are deterministic bag-of-words hashes with a small synonym table,
//! so a paraphrase lands near the note it paraphrases. The last tests run the real binary: a
//! scripted model calls the tools through `ethan chat -m`, a note edited by hand in between is
//! found by its new words in the next run, and `ethan doctor` reports the search mode.

use crate::support::{run_cli, ScriptedModel, Step, TestHome};
use axum::{extract::State, http::HeaderMap, routing::post, Json, Router};
use ethan::knowledge::embed::Embedder;
use ethan::knowledge::{EditMode, Knowledge, KnowledgeError, SearchMode};
use ethan::store::Store;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};

fn open(home: &Path, embedder: Option<Embedder>) -> Knowledge {
    let store = Store::open(&home.join("ethan.db")).unwrap();
    let k = Knowledge::open(home.join("knowledge"), store, embedder).unwrap();
    k.sync().unwrap();
    k
}

fn sources(hits: &[ethan::knowledge::Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.source.as_str()).collect()
}

// ----- keyword search ------------------------------------------------------------------------

#[tokio::test]
async fn added_notes_are_found_in_english_and_chinese() {
    let home = tempfile::tempdir().unwrap();
    let k = open(home.path(), None);
    let en = k
        .add(
            "Build the release binary, copy it to the host and restart the systemd unit.",
            Some("Deploying the server"),
            &["ops".into(), "deploy".into()],
        )
        .await
        .unwrap();
    assert_eq!(en.note.source, "ops/deploying-the-server.md");
    let zh = k
        .add(
            "先安装依赖，然后用 systemd 启动服务。注意检查防火墙。",
            Some("部署服务器的步骤"),
            &["运维".into()],
        )
        .await
        .unwrap();
    assert_eq!(zh.note.source, "运维/部署服务器的步骤.md");
    k.add(
        "Flour, water, salt. Let the dough rise overnight.",
        Some("Sourdough bread"),
        &[],
    )
    .await
    .unwrap();

    let file =
        std::fs::read_to_string(home.path().join("knowledge/ops/deploying-the-server.md")).unwrap();
    assert!(
        file.starts_with("---\ntitle: Deploying the server\ntags: [ops, deploy]\ncreated: "),
        "{file}"
    );

    // English: a word, a word inside a longer one, a title word, several words.
    for q in ["release", "deploy", "DEPLOYING", "restart unit"] {
        let hits = k.keyword_search(q, 5).unwrap();
        assert_eq!(
            sources(&hits).first(),
            Some(&"ops/deploying-the-server.md"),
            "{q}"
        );
    }
    let hits = k.keyword_search("release", 5).unwrap();
    assert!(hits[0].snippet.contains("release binary"), "{:?}", hits[0]);
    assert_eq!(hits[0].tags, ["ops", "deploy"]);
    assert!(hits[0].score > 0.0);
    // Chinese: three characters and more (trigram index), a whole sentence, and two-character
    // words (the fallback) from the title, the body and the tags.
    for q in ["服务器", "防火墙", "如何部署服务器", "部署", "依赖", "运维"] {
        let hits = k.keyword_search(q, 5).unwrap();
        assert_eq!(sources(&hits), ["运维/部署服务器的步骤.md"], "{q}");
    }
    let hits = k.keyword_search("依赖", 5).unwrap();
    assert!(hits[0].snippet.contains("先安装依赖"), "{:?}", hits[0]);
    // Both notes mention systemd; mixed-script queries work.
    assert_eq!(k.keyword_search("systemd", 5).unwrap().len(), 2);
    assert_eq!(
        sources(&k.keyword_search("systemd 防火墙", 5).unwrap())[0],
        "运维/部署服务器的步骤.md"
    );
    // Untagged notes go to untagged/; nothing matches nonsense; limits hold.
    assert_eq!(
        sources(&k.keyword_search("dough", 5).unwrap()),
        ["untagged/sourdough-bread.md"]
    );
    assert!(k.keyword_search("zebra crossing", 5).unwrap().is_empty());
    assert!(k.keyword_search("", 5).unwrap().is_empty());
    assert_eq!(k.keyword_search("systemd", 1).unwrap().len(), 1);
    let outcome = k.search("部署", 5).await.unwrap();
    assert_eq!(outcome.mode, SearchMode::Keyword);
    assert_eq!(outcome.hits.len(), 1);

    // The same title again gets its own file.
    let again = k
        .add(
            "Second version.",
            Some("Deploying the server"),
            &["ops".into()],
        )
        .await
        .unwrap();
    assert_eq!(again.note.source, "ops/deploying-the-server-2.md");
}

#[tokio::test]
async fn hand_edits_are_indexed_at_the_next_start() {
    let home = tempfile::tempdir().unwrap();
    let source = {
        let k = open(home.path(), None);
        let s = k
            .add(
                "The wifi password is on the fridge.",
                Some("Home wifi"),
                &["home".into()],
            )
            .await
            .unwrap();
        s.note.source
    };
    let root = home.path().join("knowledge");
    // A person edits the note, adds one by hand (no front matter) and deletes nothing yet.
    let path = root.join(&source);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("fridge", "bookshelf next to the aquarium"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("recipes")).unwrap();
    std::fs::write(
        root.join("recipes/pancakes.md"),
        "# Pancakes\n\nButtermilk and 两个鸡蛋.",
    )
    .unwrap();

    // "Restart": a new store connection and a new Knowledge over the same files.
    let k = open(home.path(), None);
    assert_eq!(
        sources(&k.keyword_search("aquarium", 5).unwrap()),
        [source.as_str()]
    );
    assert!(k.keyword_search("fridge", 5).unwrap().is_empty());
    let hits = k.keyword_search("buttermilk", 5).unwrap();
    assert_eq!(sources(&hits), ["recipes/pancakes.md"]);
    assert_eq!(hits[0].title, "Pancakes");
    assert_eq!(hits[0].tags, ["recipes"]);
    assert_eq!(
        sources(&k.keyword_search("鸡蛋", 5).unwrap()),
        ["recipes/pancakes.md"]
    );

    // An unchanged start re-reads nothing; a deleted file leaves the index.
    let report = k.sync().unwrap();
    assert_eq!((report.files, report.indexed, report.removed), (2, 0, 0));
    std::fs::remove_file(root.join("recipes/pancakes.md")).unwrap();
    let k = open(home.path(), None);
    assert!(k.keyword_search("buttermilk", 5).unwrap().is_empty());
    // Reading a note sees a hand edit at once (the file is the source of truth).
    std::fs::write(
        &path,
        "---\ntitle: Home wifi\n---\nNow it is taped under the router.",
    )
    .unwrap();
    assert!(k.read(&source).await.unwrap().body.contains("router"));
    assert_eq!(
        sources(&k.keyword_search("router", 5).unwrap()),
        [source.as_str()]
    );
}

#[tokio::test]
async fn append_and_replace() {
    let home = tempfile::tempdir().unwrap();
    let k = open(home.path(), None);
    let s = k
        .add(
            "Backups run at 02:00.",
            Some("Backups"),
            &["ops".into(), "storage".into()],
        )
        .await
        .unwrap()
        .note
        .source;
    let created = k.read(&s).await.unwrap().created;

    let saved = k
        .edit(
            &s,
            "They are kept for 30 days.",
            EditMode::Append,
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        saved.note.body,
        "Backups run at 02:00.\n\nThey are kept for 30 days."
    );
    let n = k.read(&s).await.unwrap();
    assert_eq!(
        (n.title.as_str(), n.tags.clone()),
        ("Backups", vec!["ops".to_string(), "storage".to_string()])
    );
    assert_eq!(n.created, created);
    assert_eq!(
        sources(&k.keyword_search("kept for 30 days", 5).unwrap()),
        [s.as_str()]
    );
    let e = k
        .edit(&s, "x", EditMode::Append, Some("New title"), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("replace"), "{e}");

    // Replace keeps title and tags unless given; the source stays.
    k.edit(
        &s,
        "Snapshots every hour, kept a week.",
        EditMode::Replace,
        None,
        None,
    )
    .await
    .unwrap();
    let n = k.read(&s).await.unwrap();
    assert_eq!(n.body, "Snapshots every hour, kept a week.");
    assert_eq!(n.title, "Backups");
    assert_eq!(n.tags, ["ops", "storage"]);
    assert!(k.keyword_search("02:00", 5).unwrap().is_empty());
    assert_eq!(
        sources(&k.keyword_search("snapshots", 5).unwrap()),
        [s.as_str()]
    );
    let saved = k
        .edit(
            &s,
            "Hourly snapshots.",
            EditMode::Replace,
            Some("Snapshot policy"),
            Some(&["备份".into()]),
        )
        .await
        .unwrap();
    assert_eq!(saved.note.source, s);
    let n = k.read(&s).await.unwrap();
    assert_eq!(
        (n.title.as_str(), n.tags.clone()),
        ("Snapshot policy", vec!["备份".to_string()])
    );
    assert_eq!(sources(&k.keyword_search("备份", 5).unwrap()), [s.as_str()]);
    assert_eq!(
        sources(&k.keyword_search("snapshot policy", 5).unwrap()),
        [s.as_str()]
    );

    // A missing note says what to do.
    let e = k
        .edit("ops/nope.md", "x", EditMode::Append, None, None)
        .await
        .unwrap_err();
    assert!(matches!(e, KnowledgeError::NotFound(_)));
    assert!(e.to_string().contains("knowledge_search"), "{e}");
    assert!(k.add("   ", None, &[]).await.is_err());
}

#[tokio::test]
async fn paths_outside_the_knowledge_folder_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let k = open(home.path(), None);
    std::fs::write(home.path().join("secret.md"), "top secret").unwrap();
    std::fs::write(home.path().join("config.yaml"), "model: {}").unwrap();
    for source in [
        "../secret.md",
        "ops/../../secret.md",
        "../config.yaml",
        "/etc/passwd",
        &home.path().join("secret.md").display().to_string(),
        "~/.ssh/id_rsa.md",
        "..",
    ] {
        let e = k.read(source).await.unwrap_err();
        assert!(
            matches!(e, KnowledgeError::BadSource { .. }),
            "{source}: {e:?}"
        );
        let e = k
            .edit(source, "pwned", EditMode::Replace, None, None)
            .await
            .unwrap_err();
        assert!(
            matches!(e, KnowledgeError::BadSource { .. }),
            "{source}: {e:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(home.path().join("secret.md")).unwrap(),
        "top secret"
    );

    // Symbolic links inside the folder are neither followed by tools nor indexed.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("leak.md"), "leaked words").unwrap();
    let root = home.path().join("knowledge");
    std::os::unix::fs::symlink(outside.path(), root.join("linked")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("leak.md"), root.join("leak.md")).unwrap();
    for source in ["linked/leak.md", "leak.md"] {
        assert!(
            matches!(k.read(source).await, Err(KnowledgeError::Symlink(_))),
            "{source}"
        );
        assert!(matches!(
            k.edit(source, "x", EditMode::Append, None, None).await,
            Err(KnowledgeError::Symlink(_))
        ));
    }
    let report = k.sync().unwrap();
    assert_eq!(report.files, 0);
    assert_eq!(report.skipped.len(), 2, "{:?}", report.skipped);
    assert!(k.keyword_search("leaked", 5).unwrap().is_empty());
    // A tag cannot steer a new note out of the folder either.
    let s = k
        .add("x", Some("../../t"), &["../../etc".into()])
        .await
        .unwrap();
    assert_eq!(s.note.source, "etc/t.md");
    assert!(root.join("etc/t.md").is_file());
    // Nor through a symlinked tag folder.
    std::os::unix::fs::symlink(outside.path(), root.join("evil")).unwrap();
    assert!(matches!(
        k.add("x", Some("y"), &["evil".into()]).await,
        Err(KnowledgeError::Symlink(_))
    ));
    assert!(!outside.path().join("y.md").exists());
}

// ----- semantic search -------------------------------------------------------------------------

/// Words mapped to one meaning before hashing.
const SYNONYMS: &[(&str, &str)] = &[
    ("automobile", "car"),
    ("vehicle", "car"),
    ("mend", "fix"),
    ("repair", "fix"),
    ("fixing", "fix"),
    ("start", "start"),
    ("starting", "start"),
    ("ignition", "start"),
];
const STOP: &[&str] = &[
    "a", "an", "the", "my", "i", "do", "how", "that", "will", "not", "of", "and", "to", "it",
    "won't",
];
const DIMS: usize = 256;

/// A deterministic embedding: canonical words hashed (FNV-1a) into buckets, normalised.
fn fake_vector(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIMS];
    for w in text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty() && !STOP.contains(w))
    {
        let w = SYNONYMS.iter().find(|(a, _)| *a == w).map_or(w, |(_, b)| b);
        let h = w.bytes().fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100000001b3)
        });
        v[(h % DIMS as u64) as usize] += 1.0;
    }
    v[DIMS - 1] += 0.01;
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

#[derive(Default)]
struct FakeEmbeddings {
    inputs: Mutex<Vec<String>>,
    auth: Mutex<Vec<Option<String>>>,
}

async fn embeddings(
    State(s): State<Arc<FakeEmbeddings>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    s.auth.lock().unwrap().push(
        headers
            .get("authorization")
            .and_then(|h| h.to_str().ok())
            .map(str::to_string),
    );
    let inputs: Vec<String> = body["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    s.inputs.lock().unwrap().extend(inputs.iter().cloned());
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": fake_vector(t)}))
        .collect();
    Json(json!({"object": "list", "data": data, "model": body["model"]}))
}

/// Serves `POST /v1/embeddings` on 127.0.0.1:0; returns the base URL and the recorder.
async fn fake_embeddings() -> (String, Arc<FakeEmbeddings>) {
    let state = Arc::new(FakeEmbeddings::default());
    let app = Router::new()
        .route("/v1/embeddings", post(embeddings))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/v1"), state)
}

#[tokio::test]
async fn semantic_search_ranks_a_paraphrase_above_an_unrelated_note() {
    let (url, fake) = fake_embeddings().await;
    let home = tempfile::tempdir().unwrap();
    let k = open(
        home.path(),
        Some(Embedder::new(&url, "sk-embed", "fake-embed")),
    );
    let car = k
        .add(
            "Check the battery and the starter motor before calling a mechanic.",
            Some("Fixing a car that will not start"),
            &["garage".into()],
        )
        .await
        .unwrap();
    assert!(car.warning.is_none(), "{:?}", car.warning);
    let bread = k
        .add(
            "Mix flour, water and salt; let the dough rise overnight and bake it hot.",
            Some("Sourdough bread"),
            &["kitchen".into()],
        )
        .await
        .unwrap();
    assert_eq!(k.counts().await.unwrap(), (2, 2), "both notes have vectors");

    let query = "how do I mend my automobile";
    // No shared words: keyword search alone finds nothing.
    assert!(k.keyword_search(query, 5).unwrap().is_empty());
    let outcome = k.search(query, 5).await.unwrap();
    assert_eq!(outcome.mode, SearchMode::Hybrid);
    assert!(outcome.warning.is_none());
    let order = sources(&outcome.hits);
    assert_eq!(
        order,
        [car.note.source.as_str(), bread.note.source.as_str()]
    );
    let (first, second) = (&outcome.hits[0], &outcome.hits[1]);
    assert!(first.similarity.unwrap() > second.similarity.unwrap());
    assert!(first.score > second.score);
    // Keyword and semantic agree on a keyword query.
    let outcome = k.search("sourdough", 5).await.unwrap();
    assert_eq!(outcome.hits[0].source, bread.note.source);

    assert!(fake
        .auth
        .lock()
        .unwrap()
        .iter()
        .all(|a| a.as_deref() == Some("Bearer sk-embed")));
    assert!(fake.inputs.lock().unwrap().iter().any(|i| i == query));

    // Vectors live in SQLite: a restart re-embeds nothing; a hand edit re-embeds that note only.
    let before = fake.inputs.lock().unwrap().len();
    let k = open(
        home.path(),
        Some(Embedder::new(&url, "sk-embed", "fake-embed")),
    );
    assert_eq!(k.embed_missing().await.unwrap(), 0);
    let path = k.root().join(&bread.note.source);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}\nAlso good for pizza.\n")).unwrap();
    let k = open(
        home.path(),
        Some(Embedder::new(&url, "sk-embed", "fake-embed")),
    );
    assert_eq!(k.embed_missing().await.unwrap(), 1);
    assert_eq!(fake.inputs.lock().unwrap().len(), before + 1);
}

#[tokio::test]
async fn a_failing_embeddings_endpoint_degrades_to_keyword_search() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let home = tempfile::tempdir().unwrap();
    let k = open(
        home.path(),
        Some(Embedder::new(
            &format!("http://127.0.0.1:{port}/v1"),
            "",
            "m",
        )),
    );
    let saved = k
        .add(
            "Rotate the API keys every quarter.",
            Some("Key rotation"),
            &[],
        )
        .await
        .unwrap();
    assert!(saved.warning.unwrap().contains("embedding failed"));
    let outcome = k.search("rotate", 5).await.unwrap();
    assert_eq!(outcome.mode, SearchMode::Keyword);
    assert!(outcome.warning.unwrap().contains("keyword results only"));
    assert_eq!(sources(&outcome.hits), [saved.note.source.as_str()]);
}

// ----- through the binary ------------------------------------------------------------------------

fn tool_results(req: &Value) -> Vec<String> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tools_through_ethan_chat_and_a_hand_edit_between_runs() {
    let home = TestHome::new();
    let add = json!({
        "content": "Use `cargo build --release` and copy the binary to /usr/local/bin.",
        "title": "部署 Ethan",
        "tags": ["ops"]
    });
    let model = ScriptedModel::start(vec![
        // Run 1: add (consented with "y" on stdin), then search in Chinese and read it back.
        Step::tool_call("a1", "knowledge_add", &add.to_string()),
        Step::tool_calls(&[
            ("s1", "knowledge_search", r#"{"query": "部署"}"#),
            ("r1", "knowledge_read", r#"{"source": "ops/部署-ethan.md"}"#),
            ("r2", "knowledge_read", r#"{"source": "../ethan.db"}"#),
            ("r3", "knowledge_read", r#"{"source": "ops/missing.md"}"#),
        ]),
        Step::text("saved"),
        // Run 2, after a hand edit: search for the new words, then append.
        Step::tool_call("s2", "knowledge_search", r#"{"query": "rollback plan", "limit": 3}"#),
        Step::tool_call(
            "e1",
            "knowledge_edit",
            r#"{"source": "ops/部署-ethan.md", "content": "Tested on 2026-05-01.", "mode": "append"}"#,
        ),
        Step::text("done"),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-knowledge-test\n  name: test-model\n",
        model.base_url()
    ));

    let (out, home) = tokio::task::spawn_blocking(move || {
        (
            run_cli(&home, &["chat", "-m", "remember this"], Some("y\n")),
            home,
        )
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let reqs = model.requests();
    let added = &tool_results(&reqs[1])[0];
    assert!(added.contains("source ops/部署-ethan.md"), "{added}");
    let note = home.path().join("knowledge/ops/部署-ethan.md");
    assert!(note.is_file());
    let r = tool_results(&reqs[2]);
    assert!(
        r[1].contains("ops/部署-ethan.md") && r[1].contains("1 note(s)"),
        "{}",
        r[1]
    );
    assert!(
        r[2].starts_with("# 部署 Ethan") && r[2].contains("cargo build --release"),
        "{}",
        r[2]
    );
    assert!(
        r[3].starts_with("Error (validation)") && r[3].contains("`..`"),
        "{}",
        r[3]
    );
    assert!(
        r[4].starts_with("Error (validation)") && r[4].contains("knowledge_search"),
        "{}",
        r[4]
    );

    // A person adds a section by hand while the daemon is not running.
    let text = std::fs::read_to_string(&note).unwrap();
    std::fs::write(
        &note,
        format!("{text}\n## Rollback plan\n\nKeep the previous binary.\n"),
    )
    .unwrap();

    let (out, home) = tokio::task::spawn_blocking(move || {
        (
            run_cli(
                &home,
                &["chat", "-m", "what is the rollback plan?"],
                Some("y\n"),
            ),
            home,
        )
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done");
    let reqs = model.requests();
    let found = &tool_results(&reqs[4])[0];
    assert!(
        found.contains("ops/部署-ethan.md") && found.contains("Rollback plan"),
        "{found}"
    );
    let edited = &tool_results(&reqs[5])[1];
    assert!(edited.starts_with("Appended to"), "{edited}");
    let text = std::fs::read_to_string(&note).unwrap();
    assert!(
        text.contains("Keep the previous binary.\n\nTested on 2026-05-01.\n"),
        "{text}"
    );
    model.assert_protocol_ok();

    let doctor = run_cli(&home, &["doctor"], None);
    let stdout = String::from_utf8_lossy(&doctor.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("knowledge:"))
        .unwrap_or_default();
    assert!(
        line.contains("1 indexed note(s)") && line.contains("keyword search only"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_reports_semantic_search_when_embeddings_answer() {
    let (url, _fake) = fake_embeddings().await;
    let home = TestHome::new();
    home.write_config(&format!(
        "knowledge:\n  embeddings: {{ base_url: \"{url}\", api_key: sk-e, model: fake-embed }}\n"
    ));
    let (out, _home) =
        tokio::task::spawn_blocking(move || (run_cli(&home, &["doctor"], None), home))
            .await
            .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("ignored: the knowledge base"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.contains("knowledge:"))
        .unwrap_or_default();
    assert!(
        line.starts_with("ok")
            && line.contains("semantic + keyword search (fake-embed")
            && line.contains(&format!("{DIMS} dimensions")),
        "{stdout}"
    );
}
