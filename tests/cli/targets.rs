//! The local store is a cache per target (server and key): the commands see only the
//! configured server's sessions, `--all-targets` shows every one with whose it is, a session
//! is sent to only where it lives, and a server that lists sessions (`convo serve`) is the
//! source of truth, also for a second device. Against two local services started in-process
//! and the seed-only fake.

use convo_service::{RunningService, ServiceConfig};
use serde_json::Value;

use super::fake::{self, KEY};
use super::support::{Run, Sandbox};

async fn start() -> RunningService {
    convo_service::start(ServiceConfig::ephemeral(1), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("service starts")
}

async fn on(s: &Sandbox, base: &str, key: &str, args: &[&str]) -> Run {
    s.run_env(args, &[("CONVO_BASE_URL", base), ("CONVO_API_KEY", key)])
        .await
}

async fn run(s: &Sandbox, svc: &RunningService, args: &[&str]) -> Run {
    on(s, &svc.base_url(), &svc.api_key, args).await
}

fn new_id(sent: &Run) -> String {
    sent.stderr
        .trim()
        .strip_prefix("new session: ")
        .unwrap_or_else(|| panic!("{}", sent.stderr))
        .to_string()
}

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect()
}

const UNKNOWN: &str = "session_UNKNOWN000000000";

/// `service` stops and a service on a new, empty database with the same key takes its place
/// behind `proxy` (the same address, as a server restarted on a removed database file).
async fn on_a_new_database(
    service: RunningService,
    proxy: &crate::proxy::FaultProxy,
) -> RunningService {
    let key = service.api_key.clone();
    service.shutdown().await;
    let mut config = ServiceConfig::ephemeral(1);
    config.api_keys = vec![(key, convo_service::Tier::Pro)];
    let next = convo_service::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("service starts");
    proxy.set_upstream(Some(next.addr));
    next
}

#[tokio::test]
async fn each_server_sees_its_own_sessions_and_all_targets_shows_whose() {
    let (a, b) = (start().await, start().await);
    let s = Sandbox::new();
    let id_a = new_id(&run(&s, &a, &["send", "hello from A"]).await.expect(0));
    let id_b = new_id(&run(&s, &b, &["send", "hello from B"]).await.expect(0));

    let on_a = run(&s, &a, &["sessions", "--json"]).await.expect(0).json();
    assert_eq!(ids(&on_a), [id_a.as_str()]);
    let on_b = run(&s, &b, &["sessions", "--json"]).await.expect(0).json();
    assert_eq!(ids(&on_b), [id_b.as_str()]);
    // Search and title see only the configured server's sessions; export, which reads the
    // store only, writes another server's session named by its id, saying whose it is.
    let hits = run(&s, &b, &["search", "--json", "hello"])
        .await
        .expect(0)
        .json();
    let found = ids(&hits);
    assert!(
        !found.is_empty() && found.iter().all(|id| *id == id_b),
        "{found:?}"
    );
    let foreign = run(&s, &b, &["export", &id_a]).await.expect(0);
    assert!(
        foreign.stdout.contains("hello from A"),
        "{}",
        foreign.stdout
    );
    assert!(
        foreign.stderr.contains(&format!(
            "is a session of {} #",
            a.base_url().trim_end_matches('/')
        )) && foreign.stderr.contains("not of the configured server"),
        "{}",
        foreign.stderr
    );

    // Every target's, with whose it is; no server asked.
    let all = s
        .run(&["sessions", "--all-targets", "--json"])
        .await
        .expect(0)
        .json();
    let mut listed: Vec<(String, String)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["sessionId"].as_str().unwrap().to_string(),
                s["target"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    listed.sort();
    let mut want = vec![
        (id_a.clone(), a.base_url().trim_end_matches('/').to_string()),
        (id_b.clone(), b.base_url().trim_end_matches('/').to_string()),
    ];
    want.sort();
    for ((id, target), (want_id, url)) in listed.iter().zip(&want) {
        assert_eq!(id, want_id);
        assert!(target.starts_with(&format!("{url} #")), "{target}");
    }
    let table = s.run(&["sessions", "--all-targets"]).await.expect(0);
    assert!(
        table.stdout.contains("target") && table.stdout.contains(&id_a),
        "{}",
        table.stdout
    );

    // Search over every target's sessions: each hit says whose it is.
    let hits = run(&s, &b, &["search", "--all-targets", "--json", "hello"])
        .await
        .expect(0)
        .json();
    let mut whose: Vec<(String, String)> = hits
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["role"] == "user")
        .map(|h| {
            (
                h["sessionId"].as_str().unwrap().to_string(),
                h["target"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    whose.sort();
    assert_eq!(whose.len(), 2, "{hits}");
    for ((id, target), (want_id, url)) in whose.iter().zip(&want) {
        assert_eq!(id, want_id);
        assert!(target.starts_with(&format!("{url} #")), "{target}");
    }
    let text = run(&s, &b, &["search", "--all-targets", "hello"])
        .await
        .expect(0);
    assert!(
        text.stdout
            .contains(&format!("on {} #", a.base_url().trim_end_matches('/'))),
        "{}",
        text.stdout
    );
}

#[tokio::test]
async fn send_session_goes_only_where_the_session_lives() {
    let (a, b) = (start().await, start().await);
    let s = Sandbox::new();
    let id_a = new_id(&run(&s, &a, &["send", "hello from A"]).await.expect(0));

    // A's session is not sent to B (which would have made a new session of it there).
    let elsewhere = run(&s, &b, &["send", "--session", &id_a, "hi"])
        .await
        .expect(1);
    assert!(
        elsewhere.stderr.contains("belongs to another server"),
        "{}",
        elsewhere.stderr
    );
    // An id nobody knows: exit 1, saying how to start one on purpose.
    let unknown = run(&s, &a, &["send", "--session", UNKNOWN, "hi"])
        .await
        .expect(1);
    assert!(
        unknown
            .stderr
            .starts_with(&format!("convo: session {UNKNOWN} is not on this server"))
            && unknown.stderr.contains("--new"),
        "{}",
        unknown.stderr
    );
    let started = run(&s, &a, &["send", "--new", "--session", UNKNOWN, "hi"])
        .await
        .expect(0);
    assert!(!started.stdout.is_empty());
    run(&s, &a, &["send", "--session", UNKNOWN, "again"])
        .await
        .expect(0);

    // Another device (another data dir) sends to A's session: the server has it.
    let laptop = Sandbox::new();
    run(
        &laptop,
        &a,
        &["send", "--session", &id_a, "from the laptop"],
    )
    .await
    .expect(0);
    let listed = run(&laptop, &a, &["sessions", "--json"])
        .await
        .expect(0)
        .json();
    let mut got = ids(&listed);
    got.sort();
    let mut want = vec![id_a.as_str(), UNKNOWN];
    want.sort();
    assert_eq!(got, want, "the server's list, on a device that sent none");
}

#[tokio::test]
async fn titles_reach_every_device_and_delete_takes_a_prefix() {
    let a = start().await;
    let s = Sandbox::new();
    let id = new_id(&run(&s, &a, &["send", "plan the trip"]).await.expect(0));
    run(&s, &a, &["title", &id, "Lisbon", "in", "May"])
        .await
        .expect(0);
    let laptop = Sandbox::new();
    let listed = run(&laptop, &a, &["sessions", "--json"])
        .await
        .expect(0)
        .json();
    assert_eq!(listed[0]["sessionId"], id.as_str());
    assert_eq!(listed[0]["title"], "Lisbon in May");
    // A word of the title is not a name; the error shows the titles holding it.
    let near = run(&laptop, &a, &["delete", "lisbon"]).await.expect(1);
    assert!(
        near.stderr.contains(&format!(
            "titles holding it: “Lisbon in May” ({}…)",
            &id[..12]
        )),
        "{}",
        near.stderr
    );

    // The session deleted from the laptop by the start of its id…
    let prefix = &id["session_".len().."session_".len() + 6];
    let deleted = run(&laptop, &a, &["delete", prefix]).await.expect(0);
    assert_eq!(deleted.stdout, format!("deleted {id}\n"));
    // …goes from the first device's list too, the server saying so.
    let listed = run(&s, &a, &["sessions", "--json"]).await.expect(0).json();
    assert_eq!(listed, serde_json::json!([]));
    let again = run(&s, &a, &["send", "--session", &id, "still there?"])
        .await
        .expect(1);
    assert!(again.stderr.contains("was deleted"), "{}", again.stderr);
}

#[tokio::test]
async fn against_a_seed_only_server_the_store_stays_the_list() {
    let base = fake::start().await;
    let s = Sandbox::new();
    let sent = on(&s, &base, KEY, &["send", "hello"]).await.expect(0);
    let id = new_id(&sent);
    let listed = on(&s, &base, KEY, &["sessions", "--json"]).await.expect(0);
    assert_eq!(ids(&listed.json()), [id.as_str()]);
    assert!(listed.stderr.is_empty(), "{}", listed.stderr);
    // A title stays local where the server has none; no warning.
    let titled = on(&s, &base, KEY, &["title", &id, "Mine"]).await.expect(0);
    assert!(titled.stderr.is_empty(), "{}", titled.stderr);
    // Unknown ids are refused before anything is sent.
    let unknown = on(&s, &base, KEY, &["send", "--session", UNKNOWN, "hi"])
        .await
        .expect(1);
    assert!(
        unknown
            .stderr
            .contains("is not in the local store for this server"),
        "{}",
        unknown.stderr
    );
    // A prefix that matches nothing, or a word that is no id: exit 1, nothing sent.
    let nothing = on(&s, &base, KEY, &["delete", "zzzz"]).await.expect(1);
    assert!(
        nothing.stderr.contains("no session `zzzz`"),
        "{}",
        nothing.stderr
    );
    let prefix = &id[..14];
    let deleted = on(&s, &base, KEY, &["delete", prefix]).await.expect(0);
    assert_eq!(deleted.stdout, format!("deleted {id}\n"));
}

/// A server that cannot be asked for its list (the key refused, plain HTTP to another host)
/// leaves the store's list with a warning saying why, and an empty one is not "no sessions
/// yet": the store holds none of that server's.
#[tokio::test]
async fn a_list_the_server_did_not_give_says_so() {
    let svc = start().await;
    let s = Sandbox::new();
    let base = svc.base_url();
    let refused = on(&s, &base, "service_live_notAKeyOfThisOne1", &["sessions"])
        .await
        .expect(0);
    assert!(
        refused
            .stderr
            .contains("the server's list of sessions is not shown (unauthorized: "),
        "{}",
        refused.stderr
    );
    assert!(
        refused
            .stderr
            .contains("no sessions of this server in the local store"),
        "{}",
        refused.stderr
    );
    let insecure = on(&s, "http://192.0.2.1:8787", KEY, &["sessions"])
        .await
        .expect(0);
    assert!(
        insecure
            .stderr
            .contains("the server's list of sessions is not shown (")
            && insecure.stderr.contains("--allow-insecure"),
        "{}",
        insecure.stderr
    );
    // A server that answers with no sessions: none yet.
    let fresh = run(&s, &svc, &["sessions"]).await.expect(0);
    assert!(fresh.stderr.contains("no sessions yet"), "{}", fresh.stderr);
}

/// A server that starts over on a new database at the same address, with the same key (its
/// database file removed, its key file kept), lists none of the sessions this device kept
/// from it. They were not deleted: they move aside, whole, and say so.
#[tokio::test]
async fn the_sessions_of_a_servers_earlier_database_are_kept_aside_not_deleted() {
    let first = start().await;
    let key = first.api_key.clone();
    let proxy = crate::proxy::FaultProxy::start(Some(first.addr)).await;
    let base = proxy.url().to_string();
    let s = Sandbox::new();
    let id = new_id(
        &on(&s, &base, &key, &["send", "remember the milk"])
            .await
            .expect(0),
    );
    let listed = on(&s, &base, &key, &["sessions", "--json"]).await.expect(0);
    assert_eq!(ids(&listed.json()), [id.as_str()]);
    // Another device that only ever sends learns the database from the answers.
    let phone = Sandbox::new();
    let sent = on(&phone, &base, &key, &["send", "from the phone"]).await;
    let phones = new_id(&sent.expect(0));

    let second = on_a_new_database(first, &proxy).await;

    let listed = on(&s, &base, &key, &["sessions", "--json"]).await.expect(0);
    assert_eq!(ids(&listed.json()), Vec::<&str>::new());
    assert!(
        listed
            .stderr
            .contains("the server's database is new: the 1 session kept from its earlier one"),
        "{}",
        listed.stderr
    );
    // Listed again: nothing more moves, nothing is said.
    let again = on(&s, &base, &key, &["sessions"]).await.expect(0);
    assert!(
        !again.stderr.contains("database is new"),
        "{}",
        again.stderr
    );
    let all = s
        .run(&["sessions", "--all-targets", "--json"])
        .await
        .expect(0)
        .json();
    let kept = all
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == id.as_str())
        .expect("still in the store");
    assert!(
        kept["target"]
            .as_str()
            .unwrap()
            .contains("(earlier database, until "),
        "{kept}"
    );
    let export = on(&s, &base, &key, &["export", &id]).await.expect(0);
    assert!(
        export.stdout.contains("remember the milk"),
        "{}",
        export.stdout
    );
    assert!(
        export.stdout.contains(" · 2 messages · "),
        "{}",
        export.stdout
    );

    // The phone's first send to the new database moves its copy aside, not the new session.
    let sent = on(&phone, &base, &key, &["send", "after the reset"]).await;
    assert!(
        sent.stderr
            .contains("the server's database is new: the 1 session kept"),
        "{}",
        sent.stderr
    );
    let after = sent
        .stderr
        .lines()
        .next()
        .unwrap()
        .replace("new session: ", "");
    let listed = on(&phone, &base, &key, &["sessions", "--json"])
        .await
        .expect(0);
    assert_eq!(ids(&listed.json()), [after.as_str()]);
    let export = on(&phone, &base, &key, &["export", &phones])
        .await
        .expect(0);
    assert!(
        export.stdout.contains("from the phone"),
        "{}",
        export.stdout
    );
    second.shutdown().await;
}

#[tokio::test]
async fn a_session_id_sent_to_again_after_the_database_changed_keeps_the_two_databases_apart() {
    let first = start().await;
    let key = first.api_key.clone();
    let proxy = crate::proxy::FaultProxy::start(Some(first.addr)).await;
    let base = proxy.url().to_string();
    let s = Sandbox::new();
    let send = |id: &'static str, text: &'static str| {
        let (s, base, key) = (&s, base.clone(), key.clone());
        async move { on(s, &base, &key, &["send", "--session", id, text]).await }
    };
    const SCRIPTED: &str = "session_SCRIPTEDSCRIPTED";
    const LEFT: &str = "session_LEFTBEHINDLEFTBE";
    for (id, text) in [(SCRIPTED, "before the reset"), (LEFT, "only before")] {
        on(&s, &base, &key, &["send", "--new", "--session", id, text])
            .await
            .expect(0);
    }
    let second = on_a_new_database(first, &proxy).await;

    // A script sending to its session again: the new database creates it, the copy of the
    // earlier one is kept apart, and neither holds the other's messages.
    let sent = send(SCRIPTED, "after the reset").await.expect(0);
    assert!(
        sent.stderr
            .contains("the server's database is new: the 2 sessions kept"),
        "{}",
        sent.stderr
    );
    send(SCRIPTED, "and once more").await.expect(0);
    let listed = on(&s, &base, &key, &["sessions", "--json"]).await.expect(0);
    assert_eq!(ids(&listed.json()), [SCRIPTED]);
    let export = on(&s, &base, &key, &["export", SCRIPTED]).await.expect(0);
    assert!(
        export.stdout.contains("after the reset")
            && export.stdout.contains("and once more")
            && !export.stdout.contains("before the reset"),
        "{}",
        export.stdout
    );
    let all = s
        .run(&["sessions", "--all-targets", "--json"])
        .await
        .expect(0)
        .json();
    let kept: Vec<&str> = ids(&all)
        .into_iter()
        .filter(|id| id.starts_with(&format!("{SCRIPTED}@db_")))
        .collect();
    assert_eq!(kept.len(), 1, "{all}");
    let export = on(&s, &base, &key, &["export", kept[0]]).await.expect(0);
    assert!(
        export.stdout.contains("before the reset") && !export.stdout.contains("after the reset"),
        "{}",
        export.stdout
    );

    // A session the new database does not have is said to be the earlier one's, and a
    // delete the server refuses leaves the kept copy whole.
    let refused = send(LEFT, "again").await.expect(1);
    assert!(
        refused.stderr.contains("is not on this server")
            && refused.stderr.contains("earlier database"),
        "{}",
        refused.stderr
    );
    on(&s, &base, &key, &["delete", "--yes", LEFT])
        .await
        .expect(1);
    let export = on(&s, &base, &key, &["export", LEFT]).await.expect(0);
    assert!(export.stdout.contains("only before"), "{}", export.stdout);
    second.shutdown().await;
}

#[tokio::test]
async fn a_session_the_server_lost_to_an_older_backup_is_kept_not_erased() {
    let dir = tempfile::tempdir().unwrap();
    let backup = tempfile::tempdir().unwrap();
    let start_on_dir = || async {
        convo_service::start(
            ServiceConfig::persistent(dir.path(), 1).unwrap(),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .expect("service starts")
    };
    let first = start_on_dir().await;
    let key = first.api_key.clone();
    let proxy = crate::proxy::FaultProxy::start(Some(first.addr)).await;
    let base = proxy.url().to_string();
    let (s, phone) = (Sandbox::new(), Sandbox::new());
    let sent = |text: &'static str| {
        let (s, base, key) = (&s, base.clone(), key.clone());
        async move { new_id(&on(s, &base, &key, &["send", text]).await.expect(0)) }
    };
    let kept = sent("before the backup").await;
    let deleted = sent("deleted on the phone").await;

    // The backup: the database's files while the server is stopped.
    first.shutdown().await;
    // (The store's last connection may still be closing, folding the WAL into the database
    // and removing it: a file that goes while it is copied means another pass.)
    let files = |from: &std::path::Path, to: &std::path::Path| {
        let copy_all = || -> std::io::Result<()> {
            for entry in std::fs::read_dir(from)? {
                let path = entry?.path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if name.starts_with("service.db") {
                    std::fs::copy(&path, to.join(&name))?;
                }
            }
            Ok(())
        };
        for _ in 0..50 {
            match copy_all() {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    for entry in std::fs::read_dir(to).unwrap() {
                        let path = entry.unwrap().path();
                        if path
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with("service.db"))
                        {
                            std::fs::remove_file(path).unwrap();
                        }
                    }
                }
                other => return other.unwrap(),
            }
        }
        panic!("the database's files kept changing while copied");
    };
    files(dir.path(), backup.path());
    let second = start_on_dir().await;
    proxy.set_upstream(Some(second.addr));
    let lost = sent("after the backup").await;
    on(&phone, &base, &key, &["delete", "--yes", &deleted])
        .await
        .expect(0);
    // A session deleted on another device goes here too: the list names it deleted.
    let listed = on(&s, &base, &key, &["sessions", "--json"]).await.expect(0);
    let mut now = ids(&listed.json())
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    now.sort();
    let mut want = vec![kept.clone(), lost.clone()];
    want.sort();
    assert_eq!(now, want);
    on(&s, &base, &key, &["export", &deleted]).await.expect(1);

    // The server comes back on the backup: the same database, without the last session.
    second.shutdown().await;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("service.db")
        {
            // (Gone already: the WAL the closing connection folded in.)
            match std::fs::remove_file(path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                other => other.unwrap(),
            }
        }
    }
    files(backup.path(), dir.path());
    let third = start_on_dir().await;
    proxy.set_upstream(Some(third.addr));

    let listed = on(&s, &base, &key, &["sessions", "--json"]).await.expect(0);
    assert!(
        listed
            .stderr
            .contains("1 session kept here is no longer on the server, which did not delete it"),
        "{}",
        listed.stderr
    );
    assert!(!ids(&listed.json()).contains(&lost.as_str()));
    let all = s
        .run(&["sessions", "--all-targets", "--json"])
        .await
        .expect(0)
        .json();
    let aside = all
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["sessionId"] == lost.as_str())
        .unwrap_or_else(|| panic!("kept: {all}"));
    assert!(
        aside["target"]
            .as_str()
            .unwrap()
            .contains("(missing from the server since "),
        "{aside}"
    );
    let export = on(&s, &base, &key, &["export", &lost]).await.expect(0);
    assert!(
        export.stdout.contains("after the backup"),
        "{}",
        export.stdout
    );
    // Listed again: nothing more moves, nothing is said.
    let again = on(&s, &base, &key, &["sessions"]).await.expect(0);
    assert!(
        !again.stderr.contains("no longer on the server"),
        "{}",
        again.stderr
    );
    third.shutdown().await;
}

/// One server at a second address (here a proxy in front of it; in use, another replica of the
/// deployment, its new name, TLS put in front): with the same key, the sessions sent through the
/// first are listed, read and sent to through the second, and follow back, since its database
/// says it is the same server. (Another key or another database takes nothing:
/// `another_key_or_another_database_takes_nothing`, crates/client/src/local_store/targets.rs.)
#[tokio::test]
async fn one_server_at_a_second_address_lists_the_sessions_sent_through_the_first() {
    let service = start().await;
    let first = service.base_url();
    let proxy = crate::proxy::FaultProxy::start(Some(service.addr)).await;
    let second = proxy.url().to_string();
    let key = service.api_key.clone();
    let s = Sandbox::new();
    let id = new_id(
        &on(&s, &first, &key, &["send", "remember the milk"])
            .await
            .expect(0),
    );

    let listed = on(&s, &second, &key, &["sessions", "--json"])
        .await
        .expect(0);
    assert_eq!(ids(&listed.json()), [id.as_str()], "{}", listed.stderr);
    // Sent to and read through the second address, by id.
    on(
        &s,
        &second,
        &key,
        &["send", "--session", &id, "and the bread"],
    )
    .await
    .expect(0);
    let read = on(&s, &second, &key, &["export", &id]).await.expect(0);
    assert!(
        read.stdout.contains("remember the milk") && read.stdout.contains("and the bread"),
        "{}",
        read.stdout
    );
    assert!(
        !read.stderr.contains("not of the configured server"),
        "{}",
        read.stderr
    );

    // Back on the first address, the session follows.
    let back = on(&s, &first, &key, &["sessions", "--json"])
        .await
        .expect(0);
    assert_eq!(ids(&back.json()), [id.as_str()]);
    let all = s
        .run(&["sessions", "--all-targets", "--json"])
        .await
        .expect(0)
        .json();
    assert_eq!(ids(&all), [id.as_str()], "one session, under one target");
    service.shutdown().await;
}
