//! `convo send`: send one message and print the reply.
use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;

use chrono::Utc;

use super::waiting::Waiting;
use super::{
    check_session_id, codes, fail, fail_api, out, print_json, record, sanitize, session_server,
    warn,
};
use convo_client::api::{
    ApiError, Role, SendMessage, new_idempotency_key, new_session_id, send_streaming,
};
use convo_client::local_store::{MessageStatus, StoredMessage};
use convo_wire::exit;

use convo_wire::limits::MAX_CONTENT_CHARS;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputRole {
    User,
    System,
}

impl From<InputRole> for Role {
    fn from(r: InputRole) -> Role {
        match r {
            InputRole::User => Role::User,
            InputRole::System => Role::System,
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  convo send \"hi\"\n  echo \"summarise this\" | convo send --session session_abcdefgh12345678\n  convo send --json \"hi\" | jq -r .content"
)]
pub struct SendArgs {
    /// The message; read from stdin when absent
    pub text: Option<String>,
    /// Session to send to, one the configured server has (default: a new session, whose id
    /// is printed on stderr once the service has taken the message)
    #[arg(long, short = 's', value_name = "SESSION_ID")]
    pub session: Option<String>,
    /// With --session: start a new session with that id (without it, an id the server does
    /// not know is refused)
    #[arg(long, requires = "session")]
    pub new: bool,
    /// Role of the message
    #[arg(long, value_enum, default_value = "user")]
    pub role: InputRole,
    /// JSON object attached to the message
    #[arg(long, value_name = "JSON")]
    pub metadata: Option<String>,
    /// Print the reply as it is generated
    #[arg(long)]
    pub stream: bool,
    /// Print the reply as a JSON Message object
    #[arg(long)]
    pub json: bool,
}

fn read_content(args: &SendArgs) -> Result<String, ExitCode> {
    let content = match &args.text {
        Some(t) => t.clone(),
        None => {
            let mut stdin = std::io::stdin();
            if stdin.is_terminal() {
                return Err(fail(
                    exit::USAGE_ERROR,
                    codes::INVALID_ARGUMENT,
                    "no message: give it as an argument or on stdin (convo send \"hi\")",
                ));
            }
            let mut buf = String::new();
            stdin.read_to_string(&mut buf).map_err(|e| {
                fail(
                    exit::USAGE_ERROR,
                    codes::IO,
                    format_args!("cannot read stdin: {e}"),
                )
            })?;
            buf.trim_end_matches(['\n', '\r']).to_string()
        }
    };
    if content.trim().is_empty() {
        return Err(fail(
            exit::USAGE_ERROR,
            codes::INVALID_ARGUMENT,
            "the message is empty",
        ));
    }
    let chars = content.chars().count();
    if chars > MAX_CONTENT_CHARS {
        return Err(fail(
            exit::USAGE_ERROR,
            codes::INVALID_ARGUMENT,
            format_args!("the message has {chars} characters; the service accepts at most 10,000"),
        ));
    }
    Ok(content)
}

fn parse_metadata(raw: Option<&str>) -> Result<Option<serde_json::Value>, ExitCode> {
    let Some(raw) = raw else { return Ok(None) };
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v @ serde_json::Value::Object(_)) => Ok(Some(v)),
        Ok(_) => Err(fail(
            exit::USAGE_ERROR,
            codes::INVALID_ARGUMENT,
            "--metadata must be a JSON object, e.g. '{\"tag\":\"x\"}'",
        )),
        Err(e) => Err(fail(
            exit::USAGE_ERROR,
            codes::INVALID_ARGUMENT,
            format_args!("--metadata is not valid JSON: {e}"),
        )),
    }
}

pub async fn run(args: SendArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let content = match read_content(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let metadata = match parse_metadata(args.metadata.as_deref()) {
        Ok(m) => m,
        Err(code) => return code,
    };
    if let Some(id) = &args.session
        && let Err(code) = check_session_id(id)
    {
        return code;
    }
    let (client, store) = match session_server(&global).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(id) = &args.session
        && let Err(code) = check_known(&client, &store, id, args.new).await
    {
        return code;
    }
    // A new session exists once the service took its first message: its id is printed then.
    let new_session = args.session.is_none();
    let session_id = match &args.session {
        Some(id) => id.clone(),
        None => new_session_id(),
    };
    let role: Role = args.role.into();
    let body = SendMessage {
        content: content.clone(),
        role: Some(role),
        stream: None,
        metadata,
    };
    let sent = StoredMessage::user(role, &content);
    let key = new_idempotency_key();

    let result = if args.stream && !args.json {
        let mut stdout = std::io::stdout();
        let mut printed_any = false;
        let r = send_streaming(&client, &session_id, &body, &key, |piece| {
            printed_any = true;
            let _ = write!(stdout, "{}", sanitize(piece));
            let _ = stdout.flush();
        })
        .await;
        if printed_any {
            out("\n");
        }
        r
    } else if args.stream {
        send_streaming(&client, &session_id, &body, &key, |_| {}).await
    } else {
        let waiting = Waiting::start(!args.json && std::io::stderr().is_terminal());
        let r = client.send_message(&session_id, &body, &key).await;
        waiting.finish().await;
        r
    };

    match result {
        Ok(reply) => {
            // With --json the reply's sessionId says it, and stderr stays JSON.
            if new_session && !args.json {
                eprintln!("new session: {session_id}");
            }
            // Before the exchange is stored: a server on a new database moves the sessions of
            // its earlier one aside, not this one.
            if let Some(database) = client.database_id() {
                record(store.clone(), "the server's database id", move |s| {
                    if let Some(archived) = s.database_said(&database)? {
                        warn(archived);
                    }
                    Ok(())
                })
                .await;
            }
            let stored_reply = StoredMessage::from_reply(&reply);
            let id = session_id.clone();
            record(store, "the messages", move |s| {
                s.append_message(&id, &sent)?;
                s.append_message(&id, &stored_reply)?;
                Ok(())
            })
            .await;
            if args.json {
                print_json(&reply)
            } else {
                if !args.stream {
                    out(format!("{}\n", sanitize(&reply.content)));
                }
                if let Some(note) = reply.finish_reason.and_then(finish_note) {
                    eprintln!("{note}");
                }
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            record_failure(store, &session_id, sent, &e).await;
            fail_api(&e)
        }
    }
}

/// `--session ID` without `--new`: the configured server must have the session. The store
/// knowing it on this target is enough; else the server is asked (`GET
/// /v1/sessions/{id}/messages`, where it has that extension) and, holding it, the session is
/// filed on this target. Otherwise exit 1 (`session_not_found`), saying how to start it.
/// With `--new` (`new`) only an id the store files on another server is refused. An id the
/// store keeps aside from this server is asked for like an unknown one (and with `--new`
/// taken): the kept copy then gives the id up (`Store::claim_session`).
async fn check_known(
    client: &convo_client::api::Client,
    store: &convo_client::local_store::Store,
    id: &str,
    new: bool,
) -> Result<(), ExitCode> {
    use convo_client::api::History;
    use convo_client::local_store::SessionLookup;
    let (s, q) = (store.clone(), id.to_string());
    let lookup = tokio::task::spawn_blocking(move || s.find_session(&q))
        .await
        .map_err(|e| fail(exit::USAGE_ERROR, codes::STORE, e))?
        .map_err(|e| fail(exit::USAGE_ERROR, codes::STORE, e))?;
    let not_known = |why: &str| {
        fail(
            exit::SERVICE_ERROR,
            codes::SESSION_NOT_FOUND,
            format_args!(
                "session {id} {why}: `convo sessions` lists this server's sessions; add --new to start a session with this id"
            ),
        )
    };
    // A session kept aside (the server's earlier database's, or missing from its list) names
    // nothing the server is known to have: the server is asked, as for an id the store does
    // not know (it may hold one of that id now).
    let kept_aside = match lookup {
        SessionLookup::Elsewhere {
            target,
            kept_aside: false,
            ..
        } => {
            return Err(not_known(&format!(
                "belongs to another server ({}), not the one configured",
                sanitize(&target)
            )));
        }
        _ if new => return Ok(()),
        SessionLookup::Elsewhere { target, .. } => Some(target),
        SessionLookup::Found(r) if r.id == id => return Ok(()),
        SessionLookup::Deleted(_) => return Err(not_known("was deleted")),
        _ => None,
    };
    match client.history(id).await {
        Ok(History::Messages(_)) => {
            let (s, i) = (store.clone(), id.to_string());
            record(s, "the session", move |s| s.claim_session(&i).map(|_| ())).await;
            Ok(())
        }
        Ok(History::NotFound) => Err(not_known(&match kept_aside {
            Some(target) => format!(
                "is not on this server (the local store keeps its copy as “{}”)",
                sanitize(&target)
            ),
            None => "is not on this server".to_string(),
        })),
        Ok(History::Unsupported) => Err(not_known(
            "is not in the local store for this server (and the server cannot list its sessions)",
        )),
        Err(e) => Err(fail_api(&e)),
    }
}

/// Keep an undelivered message in the transcript of a session the store already knows
/// (a failed first message does not create a session that the service never saw).
async fn record_failure(
    store: convo_client::local_store::Store,
    session_id: &str,
    sent: StoredMessage,
    e: &ApiError,
) {
    let id = session_id.to_string();
    let gone = matches!(e, ApiError::SessionNotFound { .. });
    record(store, "the failed message", move |s| {
        if gone {
            return s.mark_deleted(&id);
        }
        if s.session(&id)?.is_some_and(|r| !r.deleted) {
            s.append_message(&id, &sent.with_status(MessageStatus::Failed))?;
            s.upsert_session(&id, Utc::now())?;
        }
        Ok(())
    })
    .await;
}

/// What `convo send` says on stderr about a reply that did not end by itself (the reason is
/// in `--json`'s `finishReason` too).
fn finish_note(reason: convo_wire::FinishReason) -> Option<&'static str> {
    match reason {
        convo_wire::FinishReason::Stop => None,
        convo_wire::FinishReason::Length => {
            Some("finish reason: length (the reply was cut by the reply or context limit)")
        }
        convo_wire::FinishReason::Stopped => {
            Some("finish reason: stopped (the reply was cancelled; its text so far was kept)")
        }
    }
}
