//! What deleting a session means on PostgreSQL (docs/service.md, "Deletion on PostgreSQL"),
//! each claim checked on the server's own files, read through `pg_read_binary_file` after a
//! `CHECKPOINT` (the tests connect as a superuser):
//! - the rows are gone at once for every query: messages, remembered responses, and the
//!   `Idempotency-Key` values (in `idempotency_keys` and in `turns`);
//! - their bytes stay in the table files as dead tuples until a VACUUM removes them, which a
//!   transaction older than the deletion prevents;
//! - the service vacuums the affected tables after deletions (batched), `turns` and
//!   `sessions` (whose row, the session's tombstone, held its title) included;
//! - after `VACUUM FULL` (an operator's step) the table files no longer hold them;
//! - the WAL still holds them (as do archives, replicas and backups);
//! - a reply relayed to another replica stays in the files of `pg_notify` after the deletion;
//! - the session's row keeps neither its title nor its fork origin (also after migration 19).
//!
//! And on SQLite, that a deleted session's `Idempotency-Key` leaves the database files too.
//!
//! An undo leaves what a deletion leaves, on both stores: the undone messages and the old
//! answer of the send's record are dead tuples on PostgreSQL, vacuumed by the service as a
//! deletion's are, and leave SQLite's files at once.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use convo_service::{DbLocation, EngineConfig, ServiceConfig};

use super::backends::{Backend, TestDb};
use super::common::{GUARD, close, session, start_with, until_end};

/// A marker no other test writes.
fn new_marker(kind: &str) -> String {
    format!(
        "{kind}{}",
        convo_service::ids::random_alnum(20).to_ascii_lowercase()
    )
}

/// The content-holding tables whose files (heap, TOAST, indexes) contain `marker`.
async fn tables_holding(client: &tokio_postgres::Client, marker: &str) -> Vec<String> {
    client.batch_execute("CHECKPOINT").await.unwrap();
    let mut found = Vec::new();
    for table in [
        "messages",
        "idempotency_keys",
        "turns",
        "sessions",
        "message_log",
    ] {
        // Every file of the table: its heap, its TOAST table and its indexes (segments past
        // 1 GB do not occur in a test database).
        let rows = client
            .query(
                "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.relname = $1
                 UNION ALL
                 SELECT pg_relation_filepath(c.reltoastrelid) FROM pg_class c
                 WHERE c.relname = $1 AND c.reltoastrelid <> 0
                 UNION ALL
                 SELECT pg_relation_filepath(i.indexrelid) FROM pg_index i
                 JOIN pg_class c ON c.oid = i.indrelid WHERE c.relname = $1",
                &[&table],
            )
            .await
            .unwrap();
        for row in rows {
            let path: String = row.get(0);
            let holds: bool = client
                .query_one(
                    "SELECT position(convert_to($2, 'UTF8') in pg_read_binary_file($1)) > 0",
                    &[&path, &marker],
                )
                .await
                .unwrap()
                .get(0);
            if holds && !found.contains(&table.to_string()) {
                found.push(table.to_string());
            }
        }
    }
    found
}

async fn wal_holds(client: &tokio_postgres::Client, marker: &str) -> bool {
    client
        .query_one(
            "SELECT count(*) FROM pg_ls_waldir() w
             WHERE position(convert_to($1, 'UTF8') in pg_read_binary_file('pg_wal/' || w.name)) > 0",
            &[&marker],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
        > 0
}

/// How many times `messages`, `turns` and `sessions` were vacuumed (autovacuum not counted).
async fn vacuums(client: &tokio_postgres::Client) -> [i64; 3] {
    let row = client
        .query_one(
            "SELECT (SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'messages'),
                    (SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'turns'),
                    (SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'sessions')",
            &[],
        )
        .await
        .unwrap();
    [row.get(0), row.get(1), row.get(2)]
}

/// Waits until the service has vacuumed `messages`, `turns` and `sessions` since `before`.
async fn service_vacuumed(client: &tokio_postgres::Client, before: [i64; 3]) {
    let waited = async {
        loop {
            // The statistics reach `pg_stat_user_tables` a moment after the vacuum.
            client
                .batch_execute("SELECT pg_stat_clear_snapshot()")
                .await
                .unwrap();
            let now = vacuums(client).await;
            if now.iter().zip(before).all(|(now, before)| *now > before) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(GUARD, waited)
        .await
        .expect("the service vacuums after a deletion");
}

#[tokio::test]
async fn what_a_deletion_leaves_on_postgresql() {
    let backend = Backend::postgres().await;
    let Backend::Postgres(db) = &backend else {
        unreachable!()
    };
    let svc = start_with(backend.config()).await;
    let marker = new_marker("Marker");
    // The Idempotency-Key is a marker of its own: the key is in `idempotency_keys` and in the
    // turn's row, the content is not in `turns`.
    let key_marker = new_marker("KeyMarker");
    let sid = session();
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
        .bearer_auth(&svc.key)
        .header("idempotency-key", &key_marker)
        .json(&json!({"content": format!("please remember {marker}")}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    // The title a user gives a session is content too (the session's row holds it).
    let title_marker = new_marker("TitleMarker");
    svc.set_title(&sid, &title_marker).await;
    let files = db.client().await;
    // Stored first (so the checks below can fail): the message, and the remembered response
    // (the builtin reply quotes the message); the key in its record and, as the dead tuple of
    // the turn that ended, in `turns`; the title in `sessions`.
    assert_eq!(
        tables_holding(&files, &marker).await,
        ["messages", "idempotency_keys"]
    );
    assert_eq!(tables_holding(&files, &title_marker).await, ["sessions"]);
    assert_eq!(
        tables_holding(&files, &key_marker).await,
        ["idempotency_keys", "turns"]
    );

    // A transaction that began before the deletion keeps the dead tuples from any vacuum.
    let mut old = db.client().await;
    let snapshot = old
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .start()
        .await
        .unwrap();
    snapshot.query_one("SELECT 1", &[]).await.unwrap();

    let before = vacuums(&files).await;
    assert_eq!(svc.delete(&sid).await.0, StatusCode::OK);
    // Gone at once for every query.
    let rows: i64 = files
        .query_one(
            "SELECT (SELECT COUNT(*) FROM messages WHERE session_id = $1)
                  + (SELECT COUNT(*) FROM idempotency_keys WHERE session_id = $1)
                  + (SELECT COUNT(*) FROM turns WHERE session_id = $1)",
            &[&sid],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
    // The session's row stays as its tombstone, with nothing of what the user wrote.
    let tombstone = files
        .query_one(
            "SELECT title, forked_from_session, deleted_at FROM sessions WHERE id = $1",
            &[&sid],
        )
        .await
        .unwrap();
    assert_eq!(tombstone.get::<_, Option<String>>(0), None);
    assert_eq!(tombstone.get::<_, Option<String>>(1), None);
    assert!(tombstone.get::<_, Option<i64>>(2).is_some());
    // The service vacuumed, but the old snapshot still needs the rows: their bytes remain.
    service_vacuumed(&files, before).await;
    assert_eq!(
        tables_holding(&files, &marker).await,
        ["messages", "idempotency_keys"],
        "dead tuples stay while an older transaction is open"
    );
    // (The turn's row died before the snapshot began, so the vacuum may remove it: its bytes
    // may or may not remain in `turns` now.)
    assert!(
        tables_holding(&files, &key_marker)
            .await
            .contains(&"idempotency_keys".to_string())
    );
    assert_eq!(
        tables_holding(&files, &title_marker).await,
        ["sessions"],
        "the titled row's dead version stays while an older transaction is open"
    );
    snapshot.commit().await.unwrap();

    // VACUUM FULL of the tables the service vacuums rewrites them into new files: the table
    // files no longer hold the content nor the key.
    files
        .batch_execute(&format!(
            "VACUUM FULL {}",
            convo_service::storage::postgres::VACUUMED_TABLES
        ))
        .await
        .unwrap();
    assert_eq!(tables_holding(&files, &marker).await, Vec::<String>::new());
    assert_eq!(
        tables_holding(&files, &key_marker).await,
        Vec::<String>::new()
    );
    assert_eq!(
        tables_holding(&files, &title_marker).await,
        Vec::<String>::new()
    );
    // The WAL still does (and so would archives, replicas and backups).
    assert!(wal_holds(&files, &marker).await);
    assert!(wal_holds(&files, &key_marker).await);
    assert!(wal_holds(&files, &title_marker).await);
    svc.service.shutdown().await;
}

/// A session's id, title, and fork origin (session and message).
type SessionOrigin = (String, Option<String>, Option<String>, Option<String>);

/// A deleted session's row kept its title and origin before migration 19, which clears them
/// in the tombstones older builds made and leaves live sessions' titles alone.
#[tokio::test]
async fn migration_19_clears_what_older_tombstones_kept() {
    let backend = Backend::postgres().await;
    let Backend::Postgres(db) = &backend else {
        unreachable!()
    };
    let svc = start_with(backend.config()).await;
    let (gone, kept) = (session(), session());
    for (sid, title) in [(&gone, "Private plans"), (&kept, "Kept title")] {
        svc.send_text(sid, "hello").await;
        svc.set_title(sid, title).await;
    }
    svc.service.shutdown().await;
    // A deletion as a build before migration 19 made it, and that build's schema (no
    // trigger of migration 21 yet) and version.
    let client = db.client().await;
    client
        .batch_execute("DROP TRIGGER sessions_tombstone ON sessions")
        .await
        .unwrap();
    client
        .execute(
            "UPDATE sessions SET deleted_at = 5, forked_from_session = $2,
                                 forked_from_message = 'm1'
             WHERE id = $1",
            &[&gone, &kept],
        )
        .await
        .unwrap();
    client
        .execute("UPDATE schema_version SET version = 18", &[])
        .await
        .unwrap();

    let svc = start_with(backend.config()).await;
    let rows: Vec<SessionOrigin> = client
        .query(
            "SELECT id, title, forked_from_session, forked_from_message FROM sessions
             ORDER BY deleted_at NULLS LAST",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(
        rows,
        [
            (gone.clone(), None, None, None),
            (kept.clone(), Some("Kept title".to_string()), None, None),
        ]
    );
    svc.service.shutdown().await;
}

/// Whoever makes a tombstone, it keeps no title nor origin (migration 21's trigger): a replica
/// of a build before migration 19, which sets `deleted_at` alone, during an upgrade; an
/// operator's SQL, also a later update of the tombstone.
#[tokio::test]
async fn a_tombstone_made_by_an_older_replica_or_by_hand_keeps_no_title() {
    let backend = Backend::postgres().await;
    let Backend::Postgres(db) = &backend else {
        unreachable!()
    };
    let svc = start_with(backend.config()).await;
    let (old_build, by_hand) = (session(), session());
    for sid in [&old_build, &by_hand] {
        svc.send_text(sid, "hello").await;
        svc.set_title(sid, "Private plans").await;
    }
    let client = db.client().await;
    let title = |sid: String| {
        let client = &client;
        async move {
            client
                .query_one("SELECT title FROM sessions WHERE id = $1", &[&sid])
                .await
                .unwrap()
                .get::<_, Option<String>>(0)
        }
    };
    // The deletion of a build before migration 19.
    client
        .execute(
            "UPDATE sessions SET deleted_at = 5 WHERE id = $1",
            &[&old_build],
        )
        .await
        .unwrap();
    assert_eq!(title(old_build.clone()).await, None);
    // An operator's, and a title written into the tombstone afterwards.
    client
        .execute(
            "UPDATE sessions SET deleted_at = 6, title = 'Still here' WHERE id = $1",
            &[&by_hand],
        )
        .await
        .unwrap();
    client
        .execute(
            "UPDATE sessions SET title = 'Again' WHERE id = $1",
            &[&by_hand],
        )
        .await
        .unwrap();
    assert_eq!(title(by_hand.clone()).await, None);
    svc.service.shutdown().await;
}

/// What a reply relayed to a listener on another replica leaves: its text went through
/// PostgreSQL's notification queue (`NOTIFY`, relay.rs), which the whole cluster shares and
/// which spills to the files of `pg_notify` once more is queued than its memory holds (8 pages
/// of 8 kB). The deletion does not reach it there: it stays until the queue has moved past
/// its segment (256 kB, removed once every listener of the cluster has read it) or the server
/// restarts. A connection of the test that listens inside an open transaction holds the
/// queue's tail, so that no segment is removed before the files are read.
#[tokio::test]
async fn a_relayed_reply_stays_in_the_notification_queues_files_after_the_deletion() {
    let backend = Backend::Postgres(TestDb::create().await);
    let Backend::Postgres(db) = &backend else {
        unreachable!()
    };
    let mut holder = db.client().await;
    holder
        .batch_execute("LISTEN convo_test_hold")
        .await
        .unwrap();
    let hold = holder.transaction().await.unwrap();
    hold.query_one("SELECT 1", &[]).await.unwrap();

    let mut config = backend.config();
    config.engine = EngineConfig::Builtin { pace_ms: 1 };
    let (a, b) = tokio::join!(start_with(config.clone()), start_with(config));
    let marker = new_marker("RelayMarker");
    let sid = session();
    a.send_text(&sid, "the session exists").await;
    let mut listener = b.ws(&sid).await;
    let (status, accepted) = a
        .post(
            &sid,
            json!({"content": format!("please remember {marker}"), "stream": true}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let reply_id = accepted["messageId"].as_str().unwrap().to_string();
    let events = until_end(&mut listener, &reply_id).await;
    assert!(
        format!("{events:?}").contains(&marker),
        "the reply, relayed to the other replica, quotes the message: {events:?}"
    );
    close(listener).await;
    assert_eq!(a.delete(&sid).await.0, StatusCode::OK);

    // 120 kB more of notifications: the marker's page leaves the queue's memory for its file.
    let files = db.client().await;
    files
        .batch_execute(
            "SELECT pg_notify('convo_test_filler', g || repeat('x', 6000))
             FROM generate_series(1, 20) g",
        )
        .await
        .unwrap();
    let in_queue_files: i64 = files
        .query_one(
            "SELECT count(*) FROM pg_ls_dir('pg_notify') f
             WHERE position(convert_to($1, 'UTF8') in pg_read_binary_file('pg_notify/' || f)) > 0",
            &[&marker],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        in_queue_files > 0,
        "the relayed reply is in a file of pg_notify"
    );
    hold.commit().await.unwrap();
    a.service.shutdown().await;
    b.service.shutdown().await;
}

/// A plain VACUUM removes dead tuples but does not overwrite the space they held: a deleted
/// row that was the last written into its page keeps its bytes in the page's free space until
/// a later row overwrites it.
#[tokio::test]
async fn a_plain_vacuum_frees_but_does_not_overwrite() {
    let db = TestDb::create().await;
    let client = db.client().await;
    let marker = new_marker("Marker");
    client
        .batch_execute(&format!(
            "CREATE TABLE t (pk SERIAL PRIMARY KEY, content TEXT);
             INSERT INTO t (content) SELECT 'filler ' || g FROM generate_series(1, 20) g;
             INSERT INTO t (content) VALUES ('{marker}');
             DELETE FROM t WHERE content = '{marker}';"
        ))
        .await
        .unwrap();
    // (VACUUM cannot run in the implicit transaction of a multi-statement batch.) Another
    // test's transaction starting at that instant on the shared server can hold the removal
    // horizon back for a moment, so the vacuum is repeated until it could remove the tuple.
    let mut dead = -1i64;
    for _ in 0..50 {
        client.batch_execute("VACUUM t").await.unwrap();
        dead = client
            .query_one(
                "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 't'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if dead == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(dead, 0, "the vacuum removed the dead tuple");
    client.batch_execute("CHECKPOINT").await.unwrap();
    let holds: bool = client
        .query_one(
            "SELECT position(convert_to($1, 'UTF8') in pg_read_binary_file(pg_relation_filepath('t'))) > 0",
            &[&marker],
        )
        .await
        .unwrap()
        .get(0);
    assert!(holds, "its bytes are still in the page");
}

/// Occurrences of `needle` in a SQLite database and its WAL and shared-memory companions.
fn sqlite_occurrences(db: &std::path::Path, needle: &str) -> usize {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| std::fs::read(format!("{}{suffix}", db.display())).ok())
        .map(|bytes| {
            bytes
                .windows(needle.len())
                .filter(|w| *w == needle.as_bytes())
                .count()
        })
        .sum()
}

/// On SQLite a deleted session's `Idempotency-Key` values leave the files with its content
/// (`secure_delete` overwrites the record and its index entry, the WAL is checkpointed).
#[tokio::test]
async fn a_deleted_sessions_idempotency_keys_leave_the_sqlite_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("service.db");
    let mut config = ServiceConfig::ephemeral(0);
    config.db = DbLocation::File(db.clone());
    let svc = start_with(config).await;
    let key_marker = format!("KeyMarker{}", convo_service::ids::random_alnum(20));
    let sid = session();
    for n in 0..2 {
        let resp = svc
            .http
            .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
            .bearer_auth(&svc.key)
            .header("idempotency-key", format!("{key_marker}-{n}"))
            .json(&json!({"content": "hello"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
    }
    assert!(
        sqlite_occurrences(&db, &key_marker) > 0,
        "the keys are stored first"
    );
    assert_eq!(svc.delete(&sid).await.0, StatusCode::OK);
    assert_eq!(sqlite_occurrences(&db, &key_marker), 0);
    svc.service.shutdown().await;
    assert_eq!(sqlite_occurrences(&db, &key_marker), 0);
}

/// An exchange in a new session that stays, then one whose message holds `marker`, sent with
/// an `Idempotency-Key` (its record remembers the reply, which quotes the message).
async fn two_exchanges(svc: &super::common::Svc, marker: &str) -> String {
    let sid = session();
    svc.send_text(&sid, "Hello.").await;
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
        .bearer_auth(&svc.key)
        .header("idempotency-key", format!("undo-{}", session()))
        .json(&json!({"content": format!("please remember {marker}")}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    sid
}

/// `DELETE /v1/sessions/{sid}/messages/last`, which must succeed; the messages left.
async fn undo(svc: &super::common::Svc, sid: &str) -> usize {
    let (status, body) = svc.undo(sid).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["messages"].as_array().expect("messages").len()
}

#[tokio::test]
async fn what_an_undo_leaves_on_postgresql() {
    let backend = Backend::postgres().await;
    let Backend::Postgres(db) = &backend else {
        unreachable!()
    };
    let svc = start_with(backend.config()).await;
    let marker = new_marker("UndoMarker");
    let sid = two_exchanges(&svc, &marker).await;
    let files = db.client().await;
    assert_eq!(
        tables_holding(&files, &marker).await,
        ["messages", "idempotency_keys"]
    );
    let before = vacuums(&files).await;
    assert_eq!(undo(&svc, &sid).await, 2, "the first exchange stays");
    // Gone at once for every query: the record answers 409 `exchange_undone` now.
    let rows: i64 = files
        .query_one(
            "SELECT (SELECT COUNT(*) FROM messages WHERE strpos(content, $1) > 0)
                  + (SELECT COUNT(*) FROM idempotency_keys WHERE strpos(body, $1) > 0)",
            &[&marker],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
    // The service vacuums after an undo as after a deletion; what a plain vacuum frees stays
    // in the pages until overwritten (`a_plain_vacuum_frees_but_does_not_overwrite`), and
    // `VACUUM FULL` takes it out of the files.
    service_vacuumed(&files, before).await;
    files
        .batch_execute("VACUUM FULL messages, idempotency_keys")
        .await
        .unwrap();
    assert_eq!(tables_holding(&files, &marker).await, Vec::<String>::new());
    svc.service.shutdown().await;
}

/// On SQLite an undone exchange leaves the files at once, as a deleted session does: its
/// messages and the old answer of its send's record (`secure_delete`, the WAL checkpointed).
#[tokio::test]
async fn an_undone_exchange_leaves_the_sqlite_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("service.db");
    let mut config = ServiceConfig::ephemeral(0);
    config.db = DbLocation::File(db.clone());
    let svc = start_with(config).await;
    let marker = new_marker("UndoMarker");
    let sid = two_exchanges(&svc, &marker).await;
    assert!(sqlite_occurrences(&db, &marker) > 0, "stored first");
    assert_eq!(undo(&svc, &sid).await, 2, "the first exchange stays");
    assert_eq!(sqlite_occurrences(&db, &marker), 0);
    svc.service.shutdown().await;
    assert_eq!(sqlite_occurrences(&db, &marker), 0);
}
