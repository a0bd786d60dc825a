//! Opt-in measurement: what one replica costs PostgreSQL per plain turn (a Telegram message, a
//! model answer, no tool), counted by the server with `pg_stat_statements`, for BENCHMARKS.md.
//!
//! ```text
//! cargo test --test all replicas_figures:: -- --ignored --nocapture
//! ```
//!
//! One `ethan run` on the throwaway cluster (which loads `pg_stat_statements` where the server
//! has it), a fast model, `FIGURES_TURNS` (default 100) messages in `FIGURES_CHATS` (default 10)
//! chats, each sent once the previous one in its chat is answered. The replica's background
//! work (the sweep, lease renewals, the Telegram poller) is measured alone first, for as long
//! as the turns took, and taken off. Printed: statements per turn (all, and per statement),
//! rows, time in the server, and the turns' lock waits (`pg_locks` sampled every 20 ms: sessions
//! of this database waiting for a lock), and how the figure compares with the budget of
//! [`BUDGET_PER_TURN`] statements. Every turn must be answered; the budget is reported, not
//! enforced (BENCHMARKS.md says where the figure stands).

use crate::support::daemon::fresh_pg_database;
use crate::support::model::echo_user;
use crate::support::telegram::FakeTelegram;
use crate::support::{wait_until, Daemon, ScriptedModel, TestHome};
use std::time::{Duration, Instant};

/// The budget of statements for one plain turn.
const BUDGET_PER_TURN: f64 = 12.0;
const WAIT: Duration = Duration::from_secs(120);

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The database's statement counts so far, per statement text: (calls, rows, ms).
async fn statements(db: &tokio_postgres::Client) -> Vec<(String, i64, i64, f64)> {
    db.query(
        "SELECT query, calls, rows, total_exec_time FROM pg_stat_statements
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND userid = (SELECT oid FROM pg_roles WHERE rolname = 'postgres')
           AND query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_locks%'",
        &[],
    )
    .await
    .expect("read pg_stat_statements")
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    .collect()
}

async fn reset(db: &tokio_postgres::Client) {
    db.execute("SELECT pg_stat_statements_reset()", &[])
        .await
        .expect("reset pg_stat_statements");
}

/// Sample `pg_locks` until `stop`: (samples with a session of this database waiting, samples).
async fn lock_waits(url: String, stop: tokio_util::sync::CancellationToken) -> (u64, u64) {
    let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect for pg_locks");
    tokio::spawn(conn);
    let (mut waiting, mut samples) = (0, 0);
    while !stop.is_cancelled() {
        let n: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                 WHERE NOT l.granted AND d.datname = current_database()",
                &[],
            )
            .await
            .map(|r| r.get(0))
            .unwrap_or(0);
        samples += 1;
        waiting += u64::from(n > 0);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (waiting, samples)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement for BENCHMARKS.md: cargo test --test all replicas_figures:: -- --ignored --nocapture"]
async fn statements_per_plain_turn_of_one_replica() {
    let turns = knob("FIGURES_TURNS", 100);
    let chats = knob("FIGURES_CHATS", 10).max(1);
    let url = fresh_pg_database();
    let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect to the database");
    tokio::spawn(conn);
    db.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await
        .expect("pg_stat_statements (the Debian package postgresql-contrib, preloaded by the test cluster)");
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(echo_user(turns)).await;
    let home = TestHome::new();
    let owner = 7100;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{owner}\"]\ngateway:\n  listen: 127.0.0.1:0\n\
         store:\n  url: \"{url}\"\n  lease_secs: 30\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    let mut daemon = Daemon::start(&home);
    wait_until("the replica polls", WAIT, || {
        home.log().contains("polls Telegram now")
    })
    .await;
    // The chats exist before the count: a first message in each.
    for c in 0..chats {
        tg.push_text(owner + c as i64, owner, "hello");
    }
    tg.wait_for_sent(chats, WAIT).await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The turns.
    reset(&db).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = tokio::spawn(lock_waits(url.clone(), stop.clone()));
    let started = Instant::now();
    let mut sent = chats;
    let mut asked = 0;
    while asked < turns {
        let round = (turns - asked).min(chats);
        for c in 0..round {
            tg.push_text(owner + c as i64, owner, &format!("question {asked}-{c}"));
        }
        asked += round;
        sent += round;
        tg.wait_for_sent(sent, WAIT).await;
    }
    let took = started.elapsed();
    stop.cancel();
    let (waiting, samples) = sampler.await.unwrap();
    let busy = statements(&db).await;

    // The same time idle: the background work alone.
    reset(&db).await;
    tokio::time::sleep(took).await;
    let idle = statements(&db).await;
    daemon.stop();

    let total = |s: &[(String, i64, i64, f64)]| {
        s.iter().fold((0i64, 0i64, 0f64), |(c, r, t), x| {
            (c + x.1, r + x.2, t + x.3)
        })
    };
    let (bc, br, bt) = total(&busy);
    let (ic, ir, it) = total(&idle);
    let n = turns as f64;
    let per_turn = (bc - ic) as f64 / n;
    println!("figures: {turns} plain turns in {chats} chats, {took:.1?}");
    println!(
        "figures: statements per turn {per_turn:.1} (all {bc}, background alone {ic} in the \
         same time); rows per turn {:.1}; server time per turn {:.2} ms",
        (br - ir) as f64 / n,
        (bt - it) / n
    );
    println!(
        "figures: lock waits: {waiting} of {samples} samples (every 20 ms) saw a session of \
         this database waiting for a lock"
    );
    let mut by_calls = busy.clone();
    by_calls.sort_by_key(|s| -s.1);
    for (q, calls, _, ms) in by_calls.iter().take(25) {
        let idle_calls = idle.iter().find(|i| &i.0 == q).map_or(0, |i| i.1);
        let q: String = q.split_whitespace().collect::<Vec<_>>().join(" ");
        println!(
            "figures: {:>6.2}/turn {calls:>6} calls (idle {idle_calls:>5}) {ms:>8.1} ms  {}",
            (calls - idle_calls) as f64 / n,
            q.chars().take(110).collect::<String>()
        );
    }
    println!(
        "figures: budget {BUDGET_PER_TURN} statements per plain turn: {}",
        if per_turn <= BUDGET_PER_TURN {
            "met"
        } else {
            "NOT met"
        }
    );
    assert!(
        per_turn > 0.0,
        "no statement counted: is pg_stat_statements tracking?"
    );
}
