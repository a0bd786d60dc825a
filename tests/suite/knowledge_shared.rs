//! The knowledge index in PostgreSQL, shared by replicas: two knowledge folders (two replicas'
//! `ETHAN_HOME`s) on one database see each other's notes at once — found by keyword in English
//! and Chinese, read in full, edited — without a scan of one removing or overwriting what the
//! other wrote; two `ethan chat` processes do the same through the tools; and `ethan store
//! migrate` copies a SQLite home's notes and embeddings, which the home's next start keeps as
//! its own.
//!
//! These run on the throwaway cluster of `ethan::store::pg::cluster` whatever
//! `ETHAN_TEST_STORE` says, and fail (never skip) when PostgreSQL cannot be started.

use crate::support::{run_cli, ScriptedModel, Step, TestHome};
use ethan::knowledge::{EditMode, Knowledge};
use ethan::store::knowledge::IndexChange;
use ethan::store::knowledge_index::{folder_origin, IndexHandle};
use ethan::store::knowledge_query::Query;
use ethan::store::pg::knowledge::PgKnowledge;
use ethan::store::pg::{cluster, PgStore};
use ethan::store::Store;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

async fn database() -> String {
    cluster::fresh_database()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A replica's knowledge base: the folder `home/knowledge` on the shared database.
async fn replica(home: &Path, url: &str) -> Arc<Knowledge> {
    let pg = PgStore::connect(url).await.unwrap();
    let root = home.join("knowledge");
    std::fs::create_dir_all(&root).unwrap();
    let index = PgKnowledge::new(pg, folder_origin(&root));
    let k = Knowledge::open(root, IndexHandle::new(Arc::new(index)), None).unwrap();
    Arc::new(k)
}

async fn sync(k: &Arc<Knowledge>) -> ethan::knowledge::index::SyncReport {
    k.clone().sync_shared().await.unwrap()
}

async fn sources(k: &Knowledge, q: &str) -> Vec<String> {
    let outcome = k.search(q, 5).await.unwrap();
    outcome.hits.into_iter().map(|h| h.source).collect()
}

/// One source, as [`sources`] gives it.
fn only(source: &str) -> Vec<String> {
    vec![source.to_string()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_note_added_through_one_replica_is_found_through_another_at_once() {
    let url = database().await;
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = replica(home_a.path(), &url).await;
    let b = replica(home_b.path(), &url).await;
    assert_eq!(sync(&a).await.files, 0);
    assert_eq!(sync(&b).await.files, 0);

    let en = a
        .add(
            "Build the release binary, copy it to the host and restart the systemd unit.",
            Some("Deploying the server"),
            &["ops".into()],
        )
        .await
        .unwrap();
    let zh = a
        .add(
            "先安装依赖，然后用 systemd 启动服务。注意检查防火墙。",
            Some("部署服务器的步骤"),
            &["运维".into()],
        )
        .await
        .unwrap();
    // Found through B at once, in English and Chinese (three characters and more, a sentence,
    // two-character words), though B's folder has no file of either.
    for q in ["release", "DEPLOYING", "restart unit"] {
        assert_eq!(sources(&b, q).await.first(), Some(&en.note.source), "{q}");
    }
    for q in ["服务器", "防火墙", "如何部署服务器", "部署", "依赖", "运维"] {
        assert_eq!(sources(&b, q).await, only(&zh.note.source), "{q}");
    }
    assert_eq!(sources(&b, "systemd").await.len(), 2);
    assert!(sources(&b, "zebra crossing").await.is_empty());
    let hit = &b.search("依赖", 5).await.unwrap().hits[0];
    assert!(hit.snippet.contains("先安装依赖"), "{hit:?}");
    assert!(!home_b
        .path()
        .join("knowledge")
        .join(&en.note.source)
        .exists());
    // B reads it in full from the shared index.
    let read = b.read(&en.note.source).await.unwrap();
    assert_eq!(read, en.note);
    // The same path checks hold on that path: nothing outside the knowledge folder.
    assert!(b.read("../ethan.db").await.is_err());
    assert!(b.read("ops/missing.md").await.is_err());

    // B's scan of its own (empty) folder removes nothing A wrote.
    let r = sync(&b).await;
    assert_eq!((r.files, r.removed), (0, 0));
    assert_eq!(b.counts().await.unwrap().0, 2);

    // A title B saves that A's folder already has gets its own name.
    let again = b
        .add(
            "Second version.",
            Some("Deploying the server"),
            &["ops".into()],
        )
        .await
        .unwrap();
    assert_eq!(again.note.source, "ops/deploying-the-server-2.md");

    // B edits A's note: B now holds the newer copy; A reads that copy, and A's scan keeps it
    // over A's older file.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    b.edit(
        &en.note.source,
        "Roll back with the previous binary.",
        EditMode::Append,
        None,
        None,
    )
    .await
    .unwrap();
    assert!(home_b
        .path()
        .join("knowledge")
        .join(&en.note.source)
        .is_file());
    let seen_by_a = a.read(&en.note.source).await.unwrap();
    assert!(seen_by_a
        .body
        .ends_with("Roll back with the previous binary."));
    let r = sync(&a).await;
    assert_eq!(
        (r.indexed, r.removed, r.newer_elsewhere),
        (0, 0, 1),
        "{r:?}"
    );
    assert_eq!(sources(&a, "previous binary").await, only(&en.note.source));

    // B edits a note in a folder B's disk does not have yet.
    let backup = a
        .add(
            "Copy the database nightly.",
            Some("Backups"),
            &["backup".into()],
        )
        .await
        .unwrap();
    b.edit(
        &backup.note.source,
        "Keep 7 days.",
        EditMode::Append,
        None,
        None,
    )
    .await
    .unwrap();
    let copy = home_b.path().join("knowledge").join(&backup.note.source);
    assert!(std::fs::read_to_string(copy)
        .unwrap()
        .contains("nightly.\n\nKeep 7 days."));

    // A note deleted by hand leaves the index when the folder that wrote it scans.
    std::fs::remove_file(home_a.path().join("knowledge").join(&zh.note.source)).unwrap();
    assert_eq!(sync(&b).await.removed, 0);
    assert_eq!(sources(&b, "防火墙").await.len(), 1);
    assert_eq!(sync(&a).await.removed, 1);
    assert!(sources(&b, "防火墙").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_no_longer_current_is_not_applied() {
    let url = database().await;
    let home = tempfile::tempdir().unwrap();
    let k = replica(home.path(), &url).await;
    let index = k.index().clone();
    // A change whose file moved since it was read is not applied (checked under the lock).
    let note = ethan::store::knowledge::IndexedNote {
        path: "a/x.md".into(),
        title: "T".into(),
        tags: vec!["a".into()],
        body: "stale words".into(),
        created: "c".into(),
        updated: "u".into(),
        mtime_ns: 1,
        size: 1,
        hash: "h".into(),
    };
    let found = tokio::task::spawn_blocking(move || {
        index
            .apply_if(&[IndexChange::Upsert(note)], Arc::new(|_| false))
            .unwrap();
        index.keyword(&Query::parse("stale"), 5).unwrap().len()
    })
    .await
    .unwrap();
    assert_eq!(found, 0);
}

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
async fn two_replicas_share_the_knowledge_base_through_the_tools() {
    let url = database().await;
    let add = json!({
        "content": "Use `cargo build --release`. 回滚时保留上一个版本。",
        "title": "部署 Ethan",
        "tags": ["ops"]
    });
    let model = ScriptedModel::start(vec![
        // Replica A: add (consented with "y" on stdin).
        Step::tool_call("a1", "knowledge_add", &add.to_string()),
        Step::text("saved"),
        // Replica B: search and read.
        Step::tool_calls(&[
            ("s1", "knowledge_search", r#"{"query": "回滚"}"#),
            ("r1", "knowledge_read", r#"{"source": "ops/部署-ethan.md"}"#),
        ]),
        Step::text("found"),
    ])
    .await;
    let config = format!(
        "model:\n  base_url: {}\n  api_key: sk-knowledge-test\n  name: test-model\n\
         store:\n  url: \"{url}\"\n",
        model.base_url()
    );
    let (a, b) = (TestHome::new(), TestHome::new());
    a.write_config(&config);
    b.write_config(&config);
    let run = |home: TestHome, msg: &'static str| {
        tokio::task::spawn_blocking(move || {
            (run_cli(&home, &["chat", "-m", msg], Some("y\n")), home)
        })
    };
    let (out, _a) = run(a, "remember this").await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (out, b) = run(b, "how do I roll back?").await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "found");
    let r = tool_results(&model.requests()[3]);
    assert!(
        r[0].contains("ops/部署-ethan.md") && r[0].contains("1 note(s)"),
        "{}",
        r[0]
    );
    assert!(
        r[1].starts_with("# 部署 Ethan") && r[1].contains("cargo build --release"),
        "{}",
        r[1]
    );
    assert!(!b.path().join("knowledge/ops/部署-ethan.md").exists());
    let doctor = run_cli(&b, &["doctor"], None);
    let stdout = String::from_utf8_lossy(&doctor.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("knowledge:"))
        .unwrap_or_default();
    assert!(
        line.contains("1 indexed note(s)") && line.contains("shared by the replicas (pg_trgm)"),
        "{stdout}"
    );
    model.assert_protocol_ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_migrate_copies_the_notes_and_their_index() {
    let url = database().await;
    let home = TestHome::new();
    home.write_config("model:\n  name: m\nstore:\n  url: \"\"\n");
    let root = home.path().join("knowledge");
    {
        let store = Store::open(&home.path().join("ethan.db")).unwrap();
        let k = Knowledge::open(&root, store.clone(), None).unwrap();
        k.add(
            "部署服务器 with the release binary.",
            Some("Deploy"),
            &["ops".into()],
        )
        .await
        .unwrap();
        k.add("Flour, water, salt.", Some("Bread"), &[])
            .await
            .unwrap();
        let index: IndexHandle = store.into();
        tokio::task::spawn_blocking(move || {
            let (id, hash, _) = index.unembedded("fake-embed", 1).unwrap().remove(0);
            let bytes: Vec<u8> = [0.6f32, 0.8].iter().flat_map(|x| x.to_le_bytes()).collect();
            index
                .put_vectors("fake-embed", &[(id, hash, bytes)])
                .unwrap();
        })
        .await
        .unwrap();
    }

    let args = ["store", "migrate", "--to", url.as_str()];
    let out = tokio::task::block_in_place(|| run_cli(&home, &args, None));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (table, n) in [("knowledge_notes", "2"), ("knowledge_vectors", "1")] {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == [table, n]),
            "{stdout}"
        );
    }

    // The copy answers searches and keeps the vector; the home's next start on PostgreSQL
    // finds every note already indexed as its own.
    let k = replica(home.path(), &url).await;
    assert_eq!(sources(&k, "服务器").await, ["ops/deploy.md"]);
    assert_eq!(sources(&k, "salt").await, ["untagged/bread.md"]);
    let index = k.index().clone();
    let vectors = tokio::task::spawn_blocking(move || index.vector_counts("fake-embed").unwrap())
        .await
        .unwrap();
    assert_eq!(vectors, (2, 1));
    let r = sync(&k).await;
    assert_eq!(
        (r.files, r.indexed, r.unchanged, r.removed),
        (2, 0, 0, 0),
        "{r:?}"
    );
    // New notes get ids past the copied ones.
    k.add("A third note.", Some("Third"), &[]).await.unwrap();
    assert_eq!(k.counts().await.unwrap().0, 3);
}
