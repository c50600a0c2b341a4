//! The store thread: the local store's API blocks and its jobs must stay in order, so one
//! thread owns it and takes jobs from a channel. Draft edits are written once typing pauses.

use crate::kept_view::{KeptEvent, KeptRequest, KeptSession};
use crate::render::transcript::Rendered;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::oneshot;

use super::super::command::StoreOp;
use super::super::event::{AppEvent, EventSender, Exported, ServiceChange, SessionSummary};
use convo_client::local_store::{self, ServiceSessions, SessionRecord, Store};
use convo_client::target::TargetId;

pub(super) enum StoreJob {
    Op(StoreOp),
    /// A session's transcript and draft, laid out for a pane of this width and height.
    Load(String, u16, u16),
    /// The complete metrics buckets kept for this account.
    KnownBuckets(String),
    /// `/export [PATH]`: the session as Markdown into a file (`Command::Export`).
    Export {
        session_id: String,
        path: Option<String>,
    },
    /// Search the messages of every session; answered with `AppEvent::SessionHits`.
    Search {
        seq: u64,
        text: String,
        limit: usize,
    },
    /// The kept view's work: the sessions kept aside, or one's messages.
    Kept(crate::kept_view::KeptRequest),
    /// Writes the drafts still waiting, then closes the database, so that SQLite folds its WAL
    /// into the file and removes it; answers after that. Jobs sent later are not run.
    Close(oneshot::Sender<()>),
}

/// The store lives on its own thread: its API blocks, and jobs must stay in order
/// (a reply is written after its message; a transcript is read after its writes). It lists,
/// finds and files sessions of `target` only (`local_store::Store::for_target`).
pub(super) fn spawn_store(
    path: PathBuf,
    target: TargetId,
    events: EventSender,
) -> std::sync::mpsc::Sender<StoreJob> {
    let (tx, rx) = std::sync::mpsc::channel::<StoreJob>();
    let spawned = std::thread::Builder::new()
        .name("convo-store".into())
        .spawn(move || {
            let store = match Store::open(&path).and_then(|s| s.for_target(&target)) {
                Ok(s) => s,
                Err(e) => {
                    events.send(AppEvent::WorkerError(format!(
                        "local store unavailable: {e}"
                    )));
                    events.send(AppEvent::StoreLoaded {
                        sessions: Vec::new(),
                        last_open: None,
                    });
                    // Keep answering so that quitting does not wait.
                    for job in rx {
                        match job {
                            StoreJob::Close(done) => {
                                let _ = done.send(());
                            }
                            StoreJob::Search { seq, .. } => {
                                events.send(AppEvent::SessionHits {
                                    seq,
                                    result: Err(format!("local store unavailable: {e}")),
                                });
                            }
                            StoreJob::Export { session_id, .. } => {
                                events.send(AppEvent::Exported {
                                    session_id,
                                    result: Err(format!("local store unavailable: {e}")),
                                });
                            }
                            StoreJob::Kept(request) => {
                                events.send(AppEvent::Kept(kept_failed(
                                    request,
                                    format!("local store unavailable: {e}"),
                                )));
                            }
                            StoreJob::Op(_) | StoreJob::Load(..) | StoreJob::KnownBuckets(_) => {}
                        }
                    }
                    return;
                }
            };
            let loaded = store
                .list_sessions()
                .and_then(|list| Ok((list, store.last_open_session()?)));
            match loaded {
                Ok((list, last_open)) => {
                    let sessions = summaries(list);
                    events.send(AppEvent::StoreLoaded {
                        sessions,
                        last_open,
                    });
                }
                Err(e) => {
                    events.send(AppEvent::WorkerError(format!(
                        "cannot read the local store: {e}"
                    )));
                    events.send(AppEvent::StoreLoaded {
                        sessions: Vec::new(),
                        last_open: None,
                    });
                }
            }
            let mut drafts = PendingDrafts::default();
            loop {
                let job = match drafts.deadline {
                    None => match rx.recv() {
                        Ok(job) => job,
                        Err(_) => break,
                    },
                    Some(deadline) => {
                        let wait = deadline.saturating_duration_since(std::time::Instant::now());
                        match rx.recv_timeout(wait) {
                            Ok(job) => job,
                            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                                drafts.write_all(&store, &events);
                                continue;
                            }
                            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                        }
                    }
                };
                let result = match job {
                    StoreJob::Close(done) => {
                        drafts.write_all(&store, &events);
                        drop(store);
                        let _ = done.send(());
                        return;
                    }
                    StoreJob::Search { seq, text, limit } => {
                        let result = store
                            .search(&text, limit)
                            .and_then(|hits| Ok((hits, store.unsearched_sessions()?)))
                            .map_err(|e| e.to_string());
                        events.send(AppEvent::SessionHits { seq, result });
                        Ok(())
                    }
                    StoreJob::Op(StoreOp::DraftEdited { session_id, text }) => {
                        drafts.edited(session_id, text);
                        Ok(())
                    }
                    StoreJob::Op(StoreOp::SetTitle { session_id, title }) => {
                        set_title(&store, session_id, title, &events)
                    }
                    StoreJob::Op(StoreOp::MergeService(change)) => {
                        merge_service(&store, &change, &events)
                    }
                    StoreJob::Op(StoreOp::RemoveLastExchange { session_id }) => {
                        remove_last_exchange(&store, session_id, None, &events)
                    }
                    StoreJob::Op(StoreOp::MarkUnsent {
                        session_id,
                        message,
                    }) => mark_unsent(&store, session_id, &message, &events),
                    StoreJob::Op(StoreOp::UndoneElsewhere {
                        session_id,
                        messages,
                    }) => remove_last_exchange(&store, session_id, Some(messages), &events),
                    StoreJob::Export { session_id, path } => {
                        let result = export(&store, &session_id, path.as_deref());
                        events.send(AppEvent::Exported { session_id, result });
                        Ok(())
                    }
                    StoreJob::Kept(request) => {
                        events.send(AppEvent::Kept(kept(&store, request)));
                        Ok(())
                    }
                    StoreJob::Load(session_id, width, rows) => {
                        drafts.write_one(&store, &session_id, &events);
                        match store
                            .transcript(&session_id)
                            .and_then(|t| Ok((t, store.draft(&session_id)?)))
                        {
                            Ok((messages, draft)) => {
                                // The parsing and the heights at the pane's width are
                                // done here: the UI task only adopts the result.
                                let started = std::time::Instant::now();
                                let transcript = crate::app::render_stored(&messages);
                                // Drawing the tail once builds the lines of what the first
                                // frame shows (and loads the highlighter) here as well.
                                let area = ratatui::layout::Rect::new(0, 0, width, rows);
                                let mut scratch = ratatui::buffer::Buffer::empty(area);
                                let top = transcript.tail_top(width, rows);
                                transcript.render(area, &mut scratch, top, None);
                                tracing::debug!(
                                    messages = messages.len(),
                                    micros = started.elapsed().as_micros() as u64,
                                    "transcript rendered on the store thread"
                                );
                                let rendered = Some(crate::event::Rendered::new(transcript));
                                events.send(AppEvent::TranscriptLoaded {
                                    session_id,
                                    messages,
                                    draft,
                                    rendered,
                                });
                                Ok(())
                            }
                            Err(e) => {
                                events.send(AppEvent::TranscriptLoaded {
                                    session_id,
                                    messages: Vec::new(),
                                    draft: None,
                                    rendered: None,
                                });
                                Err(e)
                            }
                        }
                    }
                    StoreJob::KnownBuckets(account) => {
                        store.known_buckets(&account).map(|buckets| {
                            events.send(AppEvent::Metrics(crate::metrics::MetricsEvent::Known {
                                account,
                                buckets,
                            }));
                        })
                    }
                    StoreJob::Op(op) => {
                        // A save now or a delete supersedes the session's edit still waiting.
                        if let StoreOp::SaveDraft { session_id, .. }
                        | StoreOp::DeleteSession(session_id) = &op
                        {
                            drafts.forget(session_id);
                        }
                        apply(&store, op)
                    }
                };
                if let Err(e) = result {
                    tracing::error!(error = %e, "store write failed");
                    events.send(AppEvent::WorkerError(format!("local store: {e}")));
                }
            }
            // The app is gone: what was typed last still reaches the disk.
            drafts.write_all(&store, &events);
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the store thread");
    }
    tx
}

/// How long the composer must stay unchanged before its draft is written: typing does not
/// write on every key, and a crash loses at most this much of it.
pub const DRAFT_SAVE_DELAY: Duration = Duration::from_millis(500);

/// Drafts edited but not yet written, per session, and when to write them.
#[derive(Default)]
struct PendingDrafts {
    texts: std::collections::HashMap<String, String>,
    deadline: Option<std::time::Instant>,
}

impl PendingDrafts {
    fn edited(&mut self, session_id: String, text: String) {
        self.texts.insert(session_id, text);
        self.deadline = Some(std::time::Instant::now() + DRAFT_SAVE_DELAY);
    }

    /// Drops the waiting edit of a session.
    fn forget(&mut self, session_id: &str) {
        self.texts.remove(session_id);
        if self.texts.is_empty() {
            self.deadline = None;
        }
    }

    fn write_one(&mut self, store: &Store, session_id: &str, events: &EventSender) {
        if let Some(text) = self.texts.remove(session_id) {
            report(store.save_draft(session_id, &text), events);
        }
        if self.texts.is_empty() {
            self.deadline = None;
        }
    }

    fn write_all(&mut self, store: &Store, events: &EventSender) {
        for (session_id, text) in self.texts.drain() {
            report(store.save_draft(&session_id, &text), events);
        }
        self.deadline = None;
    }
}

fn report(result: Result<(), local_store::StoreError>, events: &EventSender) {
    if let Err(e) = result {
        tracing::error!(error = %e, "store write failed");
        events.send(AppEvent::WorkerError(format!("local store: {e}")));
    }
}

/// Sessions as the pane shows them.
fn summaries(list: Vec<SessionRecord>) -> Vec<SessionSummary> {
    list.into_iter()
        .map(|r| SessionSummary {
            id: r.id,
            title: r
                .title
                .unwrap_or_else(|| crate::app::NEW_SESSION_TITLE.to_string()),
            title_set: r.title_set,
            last_activity: r.last_activity,
            tokens: r.tokens,
            forked_from: r.forked_from,
        })
        .collect()
}

/// The store's view of a [`ServiceChange`].
fn said(change: &ServiceChange) -> ServiceSessions<'_> {
    match change {
        ServiceChange::All {
            sessions,
            asked_at,
            database_id,
            deleted,
        } => ServiceSessions::All {
            sessions,
            asked_at: *asked_at,
            database_id: database_id.as_deref(),
            deleted: deleted.as_deref(),
        },
        ServiceChange::Upsert(s) => ServiceSessions::One(s),
        ServiceChange::Deleted(id) => ServiceSessions::Deleted(id),
    }
}

/// Merges what the service said (`Store::merge_service`) and tells the app the target's
/// sessions as they are now.
fn merge_service(
    store: &Store,
    change: &ServiceChange,
    events: &EventSender,
) -> Result<(), local_store::StoreError> {
    let merged = store.merge_service(said(change))?;
    let sessions = summaries(store.list_sessions()?);
    events.send(AppEvent::SessionsMerged {
        sessions,
        deleted: merged.deleted,
        titles_to_send: merged.titles_to_send,
        archived: merged.archived,
    });
    Ok(())
}

/// Removes the session's last exchange (an undo) and tells the app the session's tokens as the
/// store counts them now: a list merged before the removal, answered after the app took the
/// exchange's tokens off, would otherwise leave the pane with the old total.
/// With `Some(messages)` the undo was another device's: the exchange goes only if the store
/// holds more than the service's `messages`.
fn remove_last_exchange(
    store: &Store,
    session_id: String,
    elsewhere: Option<u64>,
    events: &EventSender,
) -> Result<(), local_store::StoreError> {
    match elsewhere {
        None => store.remove_last_exchange(&session_id)?,
        Some(messages) => store.undone_elsewhere(&session_id, messages)?,
    };
    tell_tokens(store, session_id, events)
}

/// A message stored as sent that the service did not keep: marked failed, and the session's
/// tokens told (they no longer count it).
fn mark_unsent(
    store: &Store,
    session_id: String,
    message: &local_store::StoredMessage,
    events: &EventSender,
) -> Result<(), local_store::StoreError> {
    store.mark_failed(&session_id, message)?;
    tell_tokens(store, session_id, events)
}

/// Tells the app the session's tokens as the store counts them now, after a change to its
/// messages (an exchange removed, a message marked not sent): the list shows the store's
/// count, whatever answer of the store's the app had before.
fn tell_tokens(
    store: &Store,
    session_id: String,
    events: &EventSender,
) -> Result<(), local_store::StoreError> {
    if let Some(record) = store.session(&session_id)? {
        events.send(AppEvent::SessionTokens {
            session_id,
            tokens: record.tokens,
        });
    }
    Ok(())
}

/// Sets or clears a session's title and tells the app what the title is now.
fn set_title(
    store: &Store,
    session_id: String,
    title: Option<String>,
    events: &EventSender,
) -> Result<(), local_store::StoreError> {
    match store.set_title(&session_id, title.as_deref())? {
        Some(record) => {
            events.send(AppEvent::TitleChanged {
                session_id,
                title: record.title,
                title_set: record.title_set,
            });
        }
        None => {
            events.send(AppEvent::WorkerError(
                "no title: this session is not in the local store".into(),
            ));
        }
    }
    Ok(())
}

/// Writes the session's transcript as Markdown where `/export` asks ([`convo_client::export::target`])
/// and says where, as the user reads it; or why not.
/// The kept view's answer to `request`.
fn kept(store: &Store, request: KeptRequest) -> KeptEvent {
    match request {
        KeptRequest::List => KeptEvent::Listed(
            store
                .kept_aside_sessions()
                .map(|list| {
                    list.into_iter()
                        .map(|(record, label)| KeptSession::of(record, label))
                        .collect()
                })
                .map_err(|e| e.to_string()),
        ),
        KeptRequest::Read(session_id) => {
            // Laid out here, as a session opened in the chat is, off the UI task.
            let result = store
                .transcript(&session_id)
                .map(|messages| Rendered::new(crate::app::render_stored(&messages)))
                .map_err(|e| e.to_string());
            KeptEvent::Read { session_id, result }
        }
        KeptRequest::Erase(session_id) => {
            let result = store.erase_kept(&session_id).map_err(|e| e.to_string());
            KeptEvent::Erased { session_id, result }
        }
    }
}

/// The kept view's answer to `request` when the store cannot be read.
fn kept_failed(request: KeptRequest, why: String) -> KeptEvent {
    match request {
        KeptRequest::List => KeptEvent::Listed(Err(why)),
        KeptRequest::Read(session_id) => KeptEvent::Read {
            session_id,
            result: Err(why),
        },
        KeptRequest::Erase(session_id) => KeptEvent::Erased {
            session_id,
            result: Err(why),
        },
    }
}

fn export(store: &Store, session_id: &str, path: Option<&str>) -> Result<Exported, String> {
    use convo_client::export;
    let session = match store.session(session_id) {
        Ok(Some(s)) if !s.deleted => s,
        Ok(_) => return Err("nothing to export: this session is not in the local store".into()),
        Err(e) => return Err(format!("local store: {e}")),
    };
    let transcript = export::load(store, session).map_err(|e| format!("local store: {e}"))?;
    if transcript.messages.is_empty() {
        return Err("nothing to export yet: this session has no messages".into());
    }
    let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let target = export::target(path, &cwd, home.as_deref());
    let name = export::file_name(transcript.session.title.as_deref(), session_id);
    let markdown = export::markdown(&transcript);
    match export::write_new(&target, &name, markdown.as_bytes()) {
        Ok(written) => Ok(Exported {
            path: export::shown(&written, &cwd),
            messages: transcript.messages.len(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let shown = match &target {
                export::Target::File(p) => export::shown(p, &cwd),
                export::Target::Dir(d) => export::shown(d, &cwd),
            };
            Err(format!(
                "{shown} already exists and was left as it is: give another name"
            ))
        }
        Err(e) => {
            let shown = match &target {
                export::Target::File(p) => export::shown(p, &cwd),
                export::Target::Dir(d) => export::shown(&d.join(&name), &cwd),
            };
            Err(format!("cannot write {shown}: {e}"))
        }
    }
}

fn apply(store: &Store, op: StoreOp) -> Result<(), local_store::StoreError> {
    match op {
        StoreOp::UpsertSession(s) => store.upsert_session(&s.id, s.last_activity),
        StoreOp::AppendMessage {
            session_id,
            message,
        } => store.append_message(&session_id, &message).map(|_| ()),
        StoreOp::SaveDraft { session_id, text } | StoreOp::DraftEdited { session_id, text } => {
            store.save_draft(&session_id, &text)
        }
        StoreOp::SetLastOpen(id) => store.set_last_open_session(&id),
        StoreOp::DeleteSession(id) => store.mark_deleted(&id),
        // Answered with the session's tokens: `mark_unsent`, above.
        StoreOp::MarkUnsent {
            session_id,
            message,
        } => store.mark_failed(&session_id, &message),
        StoreOp::KeepBuckets { account, buckets } => store.keep_buckets(&account, &buckets),
        StoreOp::SetTitle { session_id, title } => {
            store.set_title(&session_id, title.as_deref()).map(|_| ())
        }
        // The loop answers it (`merge_service`); not reached from there.
        StoreOp::MergeService(change) => store.merge_service(said(&change)).map(|_| ()),
        StoreOp::TitleSent { session_id, title } => store.title_sent(&session_id, &title),
        StoreOp::SetForkedFrom {
            session_id,
            source,
            message_id,
        } => store.set_forked_from(&session_id, &source, &message_id),
        // Answered with the session's tokens: `tell_tokens`, above.
        StoreOp::RemoveLastExchange { session_id } => {
            store.remove_last_exchange(&session_id).map(|_| ())
        }
        StoreOp::UndoneElsewhere {
            session_id,
            messages,
        } => store.undone_elsewhere(&session_id, messages).map(|_| ()),
        StoreOp::CatchUp {
            session_id,
            history,
        } => store.catch_up(&session_id, &history).map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use convo_client::api::Role;
    use convo_client::local_store::StoredMessage;

    #[test]
    fn an_undo_s_removal_answers_with_the_tokens_the_store_counts_now() {
        let store = Store::in_memory().unwrap();
        let id = "session_AAAAAAAAAAAAAAAA";
        store.upsert_session(id, chrono::Utc::now()).unwrap();
        for text in ["first question", "second question"] {
            store
                .append_message(id, &StoredMessage::user(Role::User, text))
                .unwrap();
        }
        let before = store.session(id).unwrap().unwrap().tokens;
        let (events, mut rx) = EventSender::new();
        remove_last_exchange(&store, id.to_string(), None, &events).unwrap();
        let after = store.session(id).unwrap().unwrap().tokens;
        assert!(after < before, "{after} < {before}");
        match rx.try_recv() {
            Ok(AppEvent::SessionTokens { session_id, tokens }) => {
                assert_eq!((session_id.as_str(), tokens), (id, after));
            }
            other => panic!("expected the session's tokens, got {other:?}"),
        }
    }

    #[test]
    fn a_message_marked_not_sent_answers_with_the_tokens_the_store_counts_now() {
        let store = Store::in_memory().unwrap();
        let id = "session_AAAAAAAAAAAAAAAA";
        store.upsert_session(id, chrono::Utc::now()).unwrap();
        let (kept, lost) = (
            StoredMessage::user(Role::User, "first question"),
            StoredMessage::user(Role::User, "the one the service lost"),
        );
        store.append_message(id, &kept).unwrap();
        store.append_message(id, &lost).unwrap();
        let (events, mut rx) = EventSender::new();
        mark_unsent(&store, id.to_string(), &lost, &events).unwrap();
        match rx.try_recv() {
            Ok(AppEvent::SessionTokens { session_id, tokens }) => {
                assert_eq!((session_id.as_str(), tokens), (id, kept.tokens));
            }
            other => panic!("expected the session's tokens, got {other:?}"),
        }
    }

    #[test]
    fn export_writes_markdown_and_never_over_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::in_memory().unwrap();
        let id = "session_AAAAAAAAAAAAAAAA";
        store.upsert_session(id, chrono::Utc::now()).unwrap();
        let dir_arg = format!("{}/", dir.path().display());
        let e = export(&store, id, Some(&dir_arg)).unwrap_err();
        assert!(e.contains("no messages"), "{e}");
        store
            .append_message(id, &StoredMessage::user(Role::User, "Plan a trip"))
            .unwrap();
        let first = export(&store, id, Some(&dir_arg)).unwrap();
        let second = export(&store, id, Some(&dir_arg)).unwrap();
        assert_eq!(first.messages, 1);
        assert!(first.path.ends_with("/plan-a-trip.md"), "{first:?}");
        assert!(second.path.ends_with("/plan-a-trip-2.md"), "{second:?}");
        let text = std::fs::read_to_string(dir.path().join("plan-a-trip.md")).unwrap();
        assert!(text.starts_with("# Plan a trip\n"), "{text}");
        let named = dir.path().join("plan-a-trip.md").display().to_string();
        let e = export(&store, id, Some(&named)).unwrap_err();
        assert!(e.contains("already exists"), "{e}");
        let e = export(&store, "session_BBBBBBBBBBBBBBBB", None).unwrap_err();
        assert!(e.contains("not in the local store"), "{e}");
    }
}
