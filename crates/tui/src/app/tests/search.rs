//! Search: the transcript's search bar (Ctrl-f) and the hits list of `/search`.

use super::*;

/// `app()` with A's transcript holding `messages` (user, assistant, … in turn).
fn app_with_transcript(messages: &[&str]) -> App {
    let messages = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            stored_msg(
                if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                m,
            )
        })
        .collect();
    app_loaded(messages)
}

#[test]
fn the_search_bar_finds_moves_and_closes_without_touching_the_draft() {
    let filler = "a line of filler text\n\n".repeat(8);
    let mut messages = vec![];
    for i in 0..12 {
        messages.push(if i % 4 == 1 {
            format!("{filler}the **Fox** jumps")
        } else {
            filler.clone()
        });
    }
    let messages: Vec<&str> = messages.iter().map(String::as_str).collect();
    let mut app = app_with_transcript(&messages);
    type_text(&mut app, "my draft");
    app.update(ctrl('f'));
    assert!(app.transcript_pane().search().is_some_and(|s| s.editing));
    assert_eq!(status(&app), None);
    // Typed characters, `n` and `q` included, go to the query, never to the composer.
    type_text(&mut app, "fox jumps");
    assert_eq!(
        app.transcript_pane().search().unwrap().query.text(),
        "fox jumps"
    );
    assert_eq!(status(&app).as_deref(), Some("match 1/3"));
    let open = app.session().unwrap();
    assert!(!open.follow, "the transcript went to the match");
    let (w, h) = app.transcript_viewport();
    let m = app
        .transcript_pane()
        .search()
        .unwrap()
        .current_match()
        .unwrap();
    let line = match_line(&open.transcript, w, &m);
    let top = open.effective_top(w, h);
    assert!(
        line >= top && line < top + h as usize,
        "{line} in view from {top}"
    );
    // Enter goes to the next match and leaves typing: then n and N move.
    app.update(key(KeyCode::Enter));
    assert_eq!(status(&app).as_deref(), Some("match 2/3"));
    type_text(&mut app, "n");
    assert_eq!(status(&app).as_deref(), Some("match 3/3"));
    type_text(&mut app, "n");
    assert_eq!(status(&app).as_deref(), Some("match 1/3"), "wraps");
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Char('N'),
        KeyModifiers::SHIFT,
    )));
    assert_eq!(status(&app).as_deref(), Some("match 3/3"));
    // Ctrl-f types again, from the current match on; Backspace edits.
    app.update(ctrl('f'));
    type_text(&mut app, "x");
    assert_eq!(status(&app).as_deref(), Some("no match"));
    app.update(key(KeyCode::Backspace));
    assert_eq!(status(&app).as_deref(), Some("match 3/3"));
    // Esc closes; the transcript stays at the match, and the draft is as it was.
    let top = app.session().unwrap().effective_top(w, h);
    app.update(key(KeyCode::Esc));
    assert!(app.transcript_pane().search().is_none());
    assert_eq!(app.session().unwrap().effective_top(w, h), top);
    assert_eq!(app.composer_text(), "my draft");
    assert_eq!(app.focus, Focus::Composer);
}

#[test]
fn after_the_search_bar_opened_from_the_transcript_typing_goes_to_the_composer() {
    let mut app = app_with_transcript(&["the knight moves", "another line"]);
    app.update(key(KeyCode::BackTab));
    assert_eq!(app.focus, Focus::Transcript);
    app.update(ctrl('f'));
    type_text(&mut app, "knight");
    app.update(key(KeyCode::Esc));
    assert!(app.transcript_pane().search().is_none());
    type_text(&mut app, "/search knight");
    assert_eq!(app.composer_text(), "/search knight");
    assert_eq!(app.focus, Focus::Composer);
}

#[test]
fn pasting_into_the_search_bar_fills_the_query_not_the_composer() {
    let mut app = app_with_transcript(&["hello world", "another world"]);
    app.update(ctrl('f'));
    app.update(AppEvent::Paste("wor\nld".into()));
    assert_eq!(
        app.transcript_pane().search().unwrap().query.text(),
        "wor ld"
    );
    assert_eq!(app.composer_text(), "");
    app.update(ctrl('u'));
    assert_eq!(app.transcript_pane().search().unwrap().query.text(), "");
    app.update(AppEvent::Paste("world".into()));
    assert_eq!(
        app.transcript_pane().search().unwrap().query.text(),
        "world"
    );
    assert_eq!(status(&app).as_deref(), Some("match 1/2"));
    // Not typing (after Enter), a paste goes nowhere.
    app.update(key(KeyCode::Enter));
    app.update(AppEvent::Paste("zzz".into()));
    assert_eq!(
        app.transcript_pane().search().unwrap().query.text(),
        "world"
    );
    assert_eq!(app.composer_text(), "");
}

#[test]
fn the_search_bar_counts_a_reply_as_it_streams_in() {
    let mut app = app_with_transcript(&["say cat"]);
    type_text(&mut app, "go");
    let cmds = app.update(key(KeyCode::Enter));
    let (_, send_id, _) = sent(&cmds).unwrap();
    app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply("msg_1", "", 0),
        prompt_tokens: 1,
    });
    app.update(delta("msg_1", 0, "a cat"));
    app.update(ctrl('f'));
    type_text(&mut app, "cat");
    assert_eq!(status(&app).as_deref(), Some("match 1/2"));
    app.update(delta("msg_1", 1, " and a cat"));
    assert_eq!(status(&app).as_deref(), Some("match 1/3"));
}

#[test]
fn the_search_bar_closes_when_another_session_opens() {
    let mut app = app_with_transcript(&["hello"]);
    app.update(ctrl('f'));
    type_text(&mut app, "hel");
    assert_eq!(status(&app).as_deref(), Some("match 1/1"));
    // The open session is deleted elsewhere: the next one opens, and the bar goes.
    app.update(AppEvent::Deleted {
        session_id: A.into(),
    });
    assert_ne!(app.open_id(), Some(A));
    assert!(app.transcript_pane().search().is_none());
}

fn hit(session: &str, position: usize, snippet: &str) -> convo_client::local_store::SearchHit {
    convo_client::local_store::SearchHit {
        session_id: session.into(),
        session_title: Some("second".into()),
        position,
        message_id: None,
        role: Role::Assistant,
        created_at: t0(),
        snippet: vec![convo_client::local_store::SnippetPart {
            text: snippet.into(),
            matched: true,
        }],
    }
}

#[test]
fn slash_search_lists_hits_and_enter_opens_the_message() {
    let mut app = app();
    type_text(&mut app, "/search Otters");
    let cmds = app.update(key(KeyCode::Enter));
    let (seq, text) = asked(&cmds).expect("a search of the store");
    assert_eq!(text, "Otters");
    assert_eq!(app.composer_text(), "", "the command is done with");
    assert!(app.transcript_pane().hits().is_some());
    // Typing refines it; the answer to the earlier search is dropped.
    let cmds = type_text(&mut app, " x");
    let (seq2, text2) = asked(&cmds).unwrap();
    assert_eq!(text2, "Otters x");
    app.update(AppEvent::SessionHits {
        seq,
        result: Ok((vec![hit(C, 0, "old")], Vec::new())),
    });
    assert!(app.transcript_pane().hits().unwrap().hits.is_empty());
    app.update(key(KeyCode::Backspace));
    app.update(key(KeyCode::Backspace));
    let last = app.transcript_pane().hits().unwrap().asked;
    assert!(last > seq2);
    app.update(AppEvent::SessionHits {
        seq: last,
        result: Ok((vec![hit(C, 0, "first"), hit(B, 2, "otters")], Vec::new())),
    });
    app.update(key(KeyCode::Down));
    let cmds = app.update(key(KeyCode::Enter));
    assert!(app.transcript_pane().hits().is_none());
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::LoadTranscript { session_id, .. } if session_id == B))
    );
    app.update(AppEvent::TranscriptLoaded {
        session_id: B.into(),
        messages: vec![
            stored_msg(Role::User, "hello"),
            stored_msg(Role::Assistant, "no"),
            stored_msg(Role::User, "sea **otters** float"),
        ],
        draft: None,
        rendered: None,
    });
    let search = app
        .transcript_pane()
        .search()
        .expect("the bar shows the match");
    assert!(!search.editing);
    let item = app.session().unwrap().items[2].entry;
    assert_eq!(search.current_match().unwrap().entry, item);
    assert_eq!(status(&app).as_deref(), Some("match 1/1"));
    // Closed, typing goes to the composer (in the transcript `q` would quit).
    app.update(key(KeyCode::Esc));
    assert!(app.transcript_pane().search().is_none());
    assert_eq!(app.focus, Focus::Composer);
    type_text(&mut app, "q");
    assert_eq!(app.composer_text(), "q");
}

#[test]
fn a_hit_whose_words_are_not_on_screen_selects_its_message() {
    // A link reference definition is not drawn: its words are in the store, not on screen.
    let mut app = app_with_transcript(&["hello", "see this\n\n[x]: https://zzhidden.org"]);
    app.update(key(KeyCode::Tab));
    assert_eq!(app.focus, Focus::Sessions);
    let cmds = type_text(&mut app, "s");
    assert!(asked(&cmds).is_none(), "nothing to search for yet");
    assert!(app.transcript_pane().hits().is_some());
    let cmds = type_text(&mut app, "zzhidden");
    let (seq, _) = asked(&cmds).unwrap();
    assert_eq!(seq, app.transcript_pane().hits().unwrap().asked);
    app.update(AppEvent::SessionHits {
        seq,
        result: Ok((vec![hit(A, 1, "zzhidden")], Vec::new())),
    });
    // A is open already: nothing to load, the message is selected at once.
    let cmds = app.update(key(KeyCode::Enter));
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, Command::LoadTranscript { .. }))
    );
    assert!(app.transcript_pane().hits().is_none());
    assert!(app.transcript_pane().search().is_none());
    assert_eq!(app.session().unwrap().selected, Some(1));
    assert_eq!(app.focus, Focus::Transcript);
}

#[test]
fn a_failed_store_search_says_why_and_esc_closes() {
    let mut app = app();
    type_text(&mut app, "/search a");
    let cmds = app.update(key(KeyCode::Enter));
    let (seq, _) = asked(&cmds).unwrap();
    app.update(AppEvent::SessionHits {
        seq,
        result: Err("disk on fire".into()),
    });
    assert_eq!(
        app.transcript_pane().hits().unwrap().state,
        crate::search::HitsState::Failed("disk on fire".into())
    );
    type_text(&mut app, "/search");
    assert_eq!(app.composer_text(), "", "typing went to the list's query");
    app.update(key(KeyCode::Esc));
    assert!(app.transcript_pane().hits().is_none());
    type_text(&mut app, "/search");
    app.update(key(KeyCode::Enter));
    assert!(app.transcript_pane().hits().is_none());
    assert!(
        app.notice
            .as_ref()
            .unwrap()
            .text
            .contains("usage: /search TEXT")
    );
}

#[test]
fn a_hit_a_place_off_finds_its_words_in_the_message_next_to_it() {
    // A send that failed in this run is stored but not shown: the stored place of a later
    // message is one more than its place on screen.
    let mut app = app_with_transcript(&["hello", "the otters", "nothing", "more otters"]);
    type_text(&mut app, "/search otters");
    let cmds = app.update(key(KeyCode::Enter));
    let (seq, _) = asked(&cmds).unwrap();
    app.update(AppEvent::SessionHits {
        seq,
        result: Ok((vec![hit(A, 2, "otters")], Vec::new())),
    });
    app.update(key(KeyCode::Enter));
    let search = app
        .transcript_pane()
        .search()
        .expect("the bar shows a match");
    let open = app.session().unwrap();
    let at = search.current_match().unwrap().entry;
    let idx = open.items.iter().position(|i| i.entry == at).unwrap();
    assert!(idx == 1 || idx == 3, "a neighbour of place 2: {idx}");
    assert_eq!(status(&app).as_deref().map(|s| &s[..7]), Some("match 1"));
}

#[test]
fn tab_reads_the_sessions_written_elsewhere_and_searches_again_over_them() {
    let mut app = app();
    type_text(&mut app, "/search otters");
    let (seq, _) = asked(&app.update(key(KeyCode::Enter))).unwrap();
    // No hit; three sessions listed here have no message (A is the open one).
    app.update(AppEvent::SessionHits {
        seq,
        result: Ok((Vec::new(), vec![A.into(), B.into(), C.into()])),
    });
    let cmds = app.update(key(KeyCode::Tab));
    assert!(
        cmds.contains(&Command::ReadUnsearched {
            session_ids: vec![B.into(), C.into()]
        }),
        "{cmds:?}"
    );
    assert_eq!(app.transcript_pane().hits().unwrap().reading, 2);
    // Again while reading: nothing more asked.
    assert!(
        !app.update(key(KeyCode::Tab))
            .iter()
            .any(|c| matches!(c, Command::ReadUnsearched { .. }))
    );
    let history = vec![Message {
        message_id: "msg_b1".into(),
        session_id: B.into(),
        role: Role::User,
        content: "otters hold hands".into(),
        tokens: 4,
        created_at: "2026-11-26T00:00:00Z".into(),
        finish_reason: None,
    }];
    let cmds = app.update(AppEvent::ReadForSearch {
        session_id: B.into(),
        fetch: HistoryFetch::Messages(history.clone()),
    });
    assert!(cmds.contains(&Command::Persist(StoreOp::CatchUp {
        session_id: B.into(),
        history,
    })));
    assert_eq!(asked(&cmds), None, "not before the last answer");
    // The last answer, a failure: said, and the search asked again (after the store's write).
    let cmds = app.update(AppEvent::ReadForSearch {
        session_id: C.into(),
        fetch: HistoryFetch::Failed("connection refused".into()),
    });
    assert_eq!(
        asked(&cmds).map(|(_, text)| text).as_deref(),
        Some("otters")
    );
    let notice = app.notice.as_ref().unwrap();
    assert_eq!(notice.level, Level::Warn);
    assert!(
        notice.text.contains("connection refused"),
        "{}",
        notice.text
    );
    assert_eq!(app.transcript_pane().hits().unwrap().reading, 0);
}

#[test]
fn a_slip_in_the_search_bar_is_mended_where_it_is() {
    let mut app = app_with_transcript(&["hello world", "another world"]);
    app.update(ctrl('f'));
    type_text(&mut app, "wrld");
    assert_eq!(status(&app).as_deref(), Some("no match"));
    for _ in 0..3 {
        app.update(key(KeyCode::Left));
    }
    type_text(&mut app, "o");
    let search = app.transcript_pane().search().unwrap();
    assert_eq!((search.query.text(), search.query.cursor()), ("world", 2));
    assert_eq!(search.matches.len(), 2);
    // Ctrl-w takes the word back, Ctrl-z brings it again.
    app.update(key(KeyCode::End));
    app.update(ctrl('w'));
    assert_eq!(app.transcript_pane().search().unwrap().query.text(), "");
    app.update(ctrl('z'));
    assert_eq!(
        app.transcript_pane().search().unwrap().query.text(),
        "world"
    );
    assert_eq!(app.composer_text(), "");
}

#[test]
fn a_slip_in_the_search_across_sessions_is_mended_where_it_is() {
    let mut app = app_with_transcript(&["hello world"]);
    type_text(&mut app, "/search wrld");
    let cmds = app.update(key(KeyCode::Enter));
    assert_eq!(asked(&cmds).unwrap().1, "wrld");
    app.update(key(KeyCode::Home));
    app.update(key(KeyCode::Right));
    let cmds = type_text(&mut app, "o");
    assert_eq!(asked(&cmds).unwrap().1, "world");
    // Moving asks nothing.
    let cmds = app.update(key(KeyCode::Left));
    assert_eq!(asked(&cmds), None);
}
