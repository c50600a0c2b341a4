//! The one-shot client subcommands, one file each, and what they share: loading the
//! configuration, building the client, opening the store, printing errors and tables.
//!
//! Exit codes (`convo_wire::exit`): 0 ok, 1 service error, 2 usage or configuration error,
//! 3 network error. Data goes to stdout, errors to stderr as `convo: <code>: <message>`;
//! with `--json`, as one JSON object, `{"error": {"code", "message", …}}` (see [`fail`]).

mod account_reader;
pub mod accounts;
pub mod cancel;
pub mod completions;
pub mod config_cmd;
pub mod delete;
pub mod export;
pub mod fork;
pub mod man;
pub mod metrics;
pub mod model;
pub mod search;
pub mod send;
/// The metrics series and wallet sections, built like the TUI's views.
pub mod series;
pub mod sessions;
pub mod title;
pub mod undo;
pub mod usage;
mod waiting;
pub mod wallet;

use std::borrow::Cow;
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use comfy_table::{CellAlignment, ContentArrangement, Table, presets};
use serde_json::Map;

use convo_client::api::{ApiError, Client, ClientOptions};
use convo_client::config::{Config, GlobalArgs};
use convo_client::local_store::Store;
use convo_client::target::TargetId;
use convo_wire::exit;

/// What to say when a one-shot command has no server to talk to.
pub const NO_BASE_URL: &str = "no base URL configured: start `convo serve` and set CONVO_BASE_URL, or use the TUI which embeds the service";

/// `convo cancel` with no base URL and no TUI running on the data dir ([`running_server`]).
pub const NO_RUNNING_SERVICE: &str = "no base URL configured, and no convo TUI runs on the data dir: a reply of the embedded service is stopped with Ctrl-C in the TUI, or in the `convo send` waiting for it";

/// The error codes of failures on this side (docs/client.md, "Errors as JSON"); errors
/// from the service keep its `error.code`, and [`ApiError::code`] names the client's own
/// (`network`, `stream_lost`, `protocol`, `config`).
pub(crate) mod codes {
    /// An argument (or the message on stdin) is not acceptable.
    pub const INVALID_ARGUMENT: &str = "invalid_argument";
    /// The configuration is unusable: the config file, no base URL, insecure transport.
    pub const CONFIG: &str = "config";
    /// The local store cannot be opened or read (or, for `convo usage` with no base URL, the
    /// embedded service's data).
    pub const STORE: &str = "store";
    /// Reading input or writing output failed (stdin, files, encoding the JSON).
    pub const IO: &str = "io";
    /// The server could not be reached.
    pub const NETWORK: &str = "network";
    /// Something answered that is not what was asked for.
    pub const PROTOCOL: &str = "protocol";
    /// The local store has no such session (`export`, `title`): the service's code for the
    /// same thing.
    pub const SESSION_NOT_FOUND: &str = "session_not_found";
    /// `export -o FILE`: FILE exists and `--force` was not given.
    pub const FILE_EXISTS: &str = "file_exists";
}

/// Errors and warnings on stderr as JSON (`--json`), instead of `convo: …` lines.
static JSON_STDERR: AtomicBool = AtomicBool::new(false);
/// With `--json`: the warnings not printed yet. They go into the error object when the
/// command fails, so that stderr holds exactly one JSON object, and out one JSON object a
/// line (`{"warning": {"message"}}`) when it succeeds.
static HELD_WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Report errors and warnings as JSON on stderr from now on (the command has `--json`).
pub fn set_json_stderr(on: bool) {
    JSON_STDERR.store(on, Ordering::Relaxed);
}

pub(crate) fn json_stderr() -> bool {
    JSON_STDERR.load(Ordering::Relaxed)
}

fn held_warnings() -> Vec<String> {
    std::mem::take(&mut *HELD_WARNINGS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// A warning on stderr: `convo: warning: …`, or with `--json` held for the end.
pub(crate) fn warn(message: impl std::fmt::Display) {
    let message = one_line(&message.to_string());
    if json_stderr() {
        HELD_WARNINGS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(message);
    } else {
        eprintln!("convo: warning: {message}");
    }
}

/// Print the warnings still held (`--json`), one JSON object a line; called once the command
/// has ended.
pub fn flush_warnings() {
    for message in held_warnings() {
        eprintln!("{}", serde_json::json!({"warning": {"message": message}}));
    }
}

/// Print an error on stderr and turn it into an exit code: `convo: <message>`, or with
/// `--json` the object `{"error": {"code": code, "message": message}}` on one line.
pub(crate) fn fail(exit_code: u8, code: &str, message: impl std::fmt::Display) -> ExitCode {
    fail_with(exit_code, code, &message.to_string(), Map::new())
}

/// [`fail`] with more fields in the JSON error object.
fn fail_with(
    exit_code: u8,
    code: &str,
    message: &str,
    extra: Map<String, serde_json::Value>,
) -> ExitCode {
    if json_stderr() {
        let mut error = Map::new();
        error.insert("code".into(), code.into());
        error.insert("message".into(), one_line(message).into());
        error.extend(extra);
        let warnings = held_warnings();
        if !warnings.is_empty() {
            error.insert("warnings".into(), warnings.into());
        }
        eprintln!("{}", serde_json::json!({ "error": error }));
    } else {
        eprintln!("convo: {}", one_line(message));
    }
    ExitCode::from(exit_code)
}

/// The JSON error object of an error from the client: code, message (without the code)
/// and the figures the service sent with it.
fn api_error_fields(e: &ApiError) -> Map<String, serde_json::Value> {
    let mut m = Map::new();
    match e {
        ApiError::ContextOverflow { current, max, .. } => {
            m.insert("currentTokens".into(), (*current).into());
            m.insert("maxTokens".into(), (*max).into());
        }
        ApiError::QuotaExceeded {
            limit,
            reset_at,
            retry_after,
            ..
        } => {
            if let Some(l) = limit {
                m.insert("limit".into(), sanitize(l).into_owned().into());
            }
            if let Some(r) = reset_at {
                m.insert("resetAt".into(), sanitize(r).into_owned().into());
            }
            if let Some(d) = retry_after {
                m.insert("retryAfter".into(), d.as_secs().into());
            }
        }
        ApiError::Service { status, .. } if *status != 0 => {
            m.insert("status".into(), (*status).into());
        }
        _ => {}
    }
    m
}

/// Print a client error (`convo: <code>: <message>`) and return its exit code.
pub(crate) fn fail_api(e: &ApiError) -> ExitCode {
    fail_with_credential(e, Credential::ApiKey)
}

/// Which credential a command sends, so that a refusal names the right one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Credential {
    /// `CONVO_API_KEY` / `--api-key`: sessions, messages, analytics.
    ApiKey,
    /// `CONVO_WALLET_TOKEN` / `--token`: the wallet endpoint's JWT.
    WalletToken,
}

/// [`fail_api`] for a command that sends `credential`.
pub(crate) fn fail_with_credential(e: &ApiError, credential: Credential) -> ExitCode {
    let hint = match (e, credential) {
        (ApiError::Unauthorized { .. }, Credential::ApiKey) => " (check CONVO_API_KEY / --api-key)",
        (ApiError::Unauthorized { .. }, Credential::WalletToken) => {
            " (check the wallet token: CONVO_WALLET_TOKEN / --token, a JWT from `convo token`)"
        }
        // Sessions count those that exist: a deletion frees a place at once.
        (ApiError::QuotaExceeded { limit, .. }, _) if limit.as_deref() == Some("sessions") => {
            " (or delete a session, `convo delete SESSION_ID`, to start one now)"
        }
        _ => "",
    };
    if json_stderr() {
        let message = format!("{}{hint}", e.detail());
        fail_with(e.exit_code(), e.code(), &message, api_error_fields(e))
    } else {
        fail(e.exit_code(), e.code(), format_args!("{e}{hint}"))
    }
}

/// [`fail`] for a failure of one bucket among `total` (`convo metrics --series`): the code of
/// the first failure, with how many failed.
pub(crate) fn fail_buckets(failed: usize, total: usize, first: &ApiError) -> ExitCode {
    let message = if json_stderr() {
        format!(
            "{failed} of {total} buckets failed; the first: {}",
            first.detail()
        )
    } else {
        format!("{failed} of {total} buckets failed; the first: {first}")
    };
    let mut extra = api_error_fields(first);
    extra.insert("failedBuckets".into(), failed.into());
    extra.insert("buckets".into(), total.into());
    fail_with(first.exit_code(), first.code(), &message, extra)
}

fn one_line(s: &str) -> String {
    sanitize(s).replace(['\n', '\r'], " ")
}

/// The effective configuration, with its warnings printed; on error, the exit code.
pub(crate) fn load_config(global: &GlobalArgs) -> Result<Config, ExitCode> {
    let config = Config::load(global).map_err(|e| fail(exit::USAGE_ERROR, codes::CONFIG, e))?;
    for w in &config.warnings {
        warn(w);
    }
    Ok(config)
}

/// The configuration and a client for it. Needs a base URL: the commands that start the
/// embedded service without one go through [`session_server`] (`send`, `fork`, `undo`,
/// `delete`) or `AccountReader` (`usage`, `metrics`).
pub(crate) fn connect(global: &GlobalArgs) -> Result<(Config, Client), ExitCode> {
    let config = load_config(global)?;
    let client = client_for(&config)?;
    Ok((config, client))
}

/// Why the configuration makes no client ([`make_client`]).
enum NoClient {
    NoBaseUrl,
    /// Plain `http://` to another host without `--allow-insecure`.
    Transport(convo_client::config::ConfigError),
    /// A bad option.
    Options(ApiError),
}

/// The one way a command builds its client from the configuration.
fn make_client(config: &Config) -> Result<Client, NoClient> {
    if config.connection.base_url.is_none() {
        return Err(NoClient::NoBaseUrl);
    }
    config.check_transport().map_err(NoClient::Transport)?;
    ClientOptions::from_config(config)
        .and_then(Client::new)
        .map_err(NoClient::Options)
}

/// A client for the configured server; on error, the exit code (no base URL, insecure
/// transport, a bad option).
pub(crate) fn client_for(config: &Config) -> Result<Client, ExitCode> {
    make_client(config).map_err(|e| match e {
        NoClient::NoBaseUrl => fail(exit::USAGE_ERROR, codes::CONFIG, NO_BASE_URL),
        NoClient::Transport(e) => fail(exit::USAGE_ERROR, codes::CONFIG, e),
        NoClient::Options(e) => fail_api(&e),
    })
}

/// A client for the configured server, for a command that also works from the local store
/// alone (`sessions`, `title`, `export`): `None` with no base URL configured; the error, as
/// text, when the configuration cannot make one (plain `http://` to another host without
/// `--allow-insecure`, a bad option), for the command to warn with.
pub(crate) fn store_command_client(config: &Config) -> Option<Result<Client, String>> {
    match make_client(config) {
        Ok(client) => Some(Ok(client)),
        Err(NoClient::NoBaseUrl) => None,
        Err(NoClient::Transport(e)) => Some(Err(e.to_string())),
        Err(NoClient::Options(e)) => Some(Err(e.to_string())),
    }
}

/// The embedded service [`session_server`] started for this command, stopped by
/// [`stop_embedded`] when the command ends.
static EMBEDDED: std::sync::Mutex<Option<convo_tui::embedded::RunningService>> =
    std::sync::Mutex::new(None);

/// A client and the local store of its target, for the commands that change a session on
/// the server (`send`, `delete`, `fork`, `undo`): the configured server's, or with no base URL
/// the embedded service's: the one a TUI running on the data dir has, else one started for
/// the command as the TUI starts it (its database and local account in the data dir, the
/// engine of `[engine]`) and stopped when the command ends ([`stop_embedded`]). An engine
/// that cannot be had (`kind = "local"` without the model) is `config`, exit 2; a data dir
/// whose service cannot start is `store`, exit 2.
pub(crate) async fn session_server(global: &GlobalArgs) -> Result<(Client, Store), ExitCode> {
    let config = load_config(global)?;
    let client = match config.connection.base_url {
        Some(_) => client_for(&config)?,
        None => start_embedded(&config).await?,
    };
    let store = open_store(&config)?;
    Ok((client, store))
}

/// A client and the local store of its target, for `convo cancel`: the configured server's,
/// or with no base URL the embedded service of a TUI running on the data dir, where the
/// replies it and the commands beside it asked for are generated. With neither, no reply
/// can be running that a command could reach (a `convo send` that started its own service
/// stops its reply with Ctrl-C): `config`, exit 2, saying so.
pub(crate) async fn running_server(global: &GlobalArgs) -> Result<(Client, Store), ExitCode> {
    let config = load_config(global)?;
    let client = match config.connection.base_url {
        Some(_) => client_for(&config)?,
        None => match convo_tui::embedded::running(&config.paths.data_dir).await {
            Some(client) => client,
            None => return Err(fail(exit::USAGE_ERROR, codes::CONFIG, NO_RUNNING_SERVICE)),
        },
    };
    let store = open_store(&config)?;
    Ok((client, store))
}

async fn start_embedded(config: &Config) -> Result<Client, ExitCode> {
    let data_dir = &config.paths.data_dir;
    // A TUI running on the data dir: its service, so that it shows what the command does as
    // it happens, and one service takes the session's turns in order.
    if let Some(client) = convo_tui::embedded::running(data_dir).await {
        return Ok(client);
    }
    let (engine, hint) = convo_tui::embedded::engine_config(&config.engine, data_dir, 0)
        .map_err(|e| fail(exit::USAGE_ERROR, codes::CONFIG, e))?;
    if let Some(hint) = hint {
        warn(hint);
    }
    let (service, client) = convo_tui::embedded::start_for_command(data_dir, engine)
        .await
        .map_err(|e| {
            fail(
                exit::USAGE_ERROR,
                codes::STORE,
                format_args!(
                    "no base URL configured, and the embedded service on {} cannot start: {e}",
                    data_dir.display()
                ),
            )
        })?;
    *EMBEDDED.lock().unwrap_or_else(|p| p.into_inner()) = Some(service);
    Ok(client)
}

/// Stops the embedded service a command started, if it did: after the command, before the
/// process ends, within `convo_tui::embedded::STOP_WITHIN`.
pub async fn stop_embedded() {
    let service = EMBEDDED.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(service) = service
        && tokio::time::timeout(convo_tui::embedded::STOP_WITHIN, service.shutdown())
            .await
            .is_err()
    {
        warn(format_args!(
            "the embedded service did not stop within {} s; leaving it",
            convo_tui::embedded::STOP_WITHIN.as_secs()
        ));
    }
}

/// Open the local store in the data dir, for the configuration's target
/// ([`TargetId::of_config`]): the configured server and key, else the embedded service.
pub(crate) fn open_store(config: &Config) -> Result<Store, ExitCode> {
    let target = TargetId::of_config(config).map_err(|e| fail_api(&e))?;
    Store::open(&config.paths.store_file())
        .and_then(|s| s.for_target(&target))
        .map_err(|e| fail(exit::USAGE_ERROR, codes::STORE, e))
}

/// `f` on the store off the async runtime; a failure is printed (`store`, exit 2).
pub(crate) async fn in_store<T, F>(store: Store, f: F) -> Result<T, ExitCode>
where
    F: FnOnce(&Store) -> Result<T, convo_client::local_store::StoreError> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(move || f(&store)).await {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(fail(exit::USAGE_ERROR, codes::STORE, e)),
        Err(e) => Err(fail(exit::USAGE_ERROR, codes::STORE, e)),
    }
}

/// The session a command line names (its id, the start of its id, or its title) in the
/// local store, or the error printed: `session_not_found` (exit 1) when the store has none or
/// it was deleted, `invalid_argument` (exit 2) when several match.
pub(crate) async fn find_session(
    store: &Store,
    query: &str,
) -> Result<convo_client::local_store::SessionRecord, ExitCode> {
    use convo_client::local_store::SessionLookup;
    let (s, q) = (store.clone(), query.to_string());
    let lookup = tokio::task::spawn_blocking(move || s.find_session(&q)).await;
    let query = sanitize(query);
    match lookup {
        Ok(Ok(SessionLookup::Found(r))) => Ok(r),
        Ok(Ok(SessionLookup::Elsewhere {
            id,
            target,
            kept_aside,
        })) => Err(elsewhere(&id, &target, kept_aside)),
        Ok(Ok(SessionLookup::Deleted(id))) => Err(fail(
            exit::SERVICE_ERROR,
            codes::SESSION_NOT_FOUND,
            format_args!("session {id} was deleted: nothing of it is left in the local store"),
        )),
        Ok(Ok(SessionLookup::Ambiguous(ids))) => {
            let shown: Vec<&str> = ids.iter().take(5).map(String::as_str).collect();
            let more = if ids.len() > 5 { ", …" } else { "" };
            Err(fail(
                exit::USAGE_ERROR,
                codes::INVALID_ARGUMENT,
                format_args!(
                    "`{query}` matches {} sessions ({}{more}): give more of the id",
                    ids.len(),
                    shown.join(", ")
                ),
            ))
        }
        Ok(Ok(SessionLookup::NotFound)) => {
            let near = titled_like(store, &query).await;
            Err(fail(
                exit::SERVICE_ERROR,
                codes::SESSION_NOT_FOUND,
                format_args!(
                    "no session `{query}` in the local store (by id, start of id or whole title; `convo sessions` lists them){near}"
                ),
            ))
        }
        Ok(Err(e)) => Err(fail(exit::USAGE_ERROR, codes::STORE, e)),
        Err(e) => Err(fail(exit::USAGE_ERROR, codes::STORE, e)),
    }
}

/// The sessions whose title holds `query` (ignoring case), for a lookup that found none:
/// `; titles holding it: “Trip to Lisbon” (session_Ab12…), …` (at most three), else nothing.
async fn titled_like(store: &Store, query: &str) -> String {
    let (s, wanted) = (store.clone(), query.to_lowercase());
    let listed = tokio::task::spawn_blocking(move || s.list_sessions()).await;
    let Ok(Ok(sessions)) = listed else {
        return String::new();
    };
    let near: Vec<String> = sessions
        .iter()
        .filter_map(|r| Some((r.title.as_deref()?, &r.id)))
        .filter(|(title, _)| title.to_lowercase().contains(&wanted))
        .take(3)
        .map(|(title, id)| {
            let short: String = id.chars().take(12).collect();
            format!("“{}” ({short}…)", sanitize(title))
        })
        .collect();
    if near.is_empty() || wanted.is_empty() {
        return String::new();
    }
    format!("; titles holding it: {}", near.join(", "))
}

/// Like [`find_session`], but a session of another target named by its whole id is found
/// too, with that target's label: another server's, or one kept from a server's earlier
/// database (`convo sessions --all-targets` lists them). For commands that read the store
/// only.
pub(crate) async fn find_stored_session(
    store: &Store,
    query: &str,
) -> Result<(convo_client::local_store::SessionRecord, Option<String>), ExitCode> {
    use convo_client::local_store::SessionLookup;
    let (s, q) = (store.clone(), query.to_string());
    let elsewhere = tokio::task::spawn_blocking(
        move || -> Result<_, convo_client::local_store::StoreError> {
            match s.find_session(&q)? {
                SessionLookup::Elsewhere { id, target, .. } => {
                    Ok(s.session(&id)?.map(|record| (record, target)))
                }
                _ => Ok(None),
            }
        },
    )
    .await;
    match elsewhere {
        Ok(Ok(Some((record, target)))) => Ok((record, Some(target))),
        Ok(Ok(None)) => find_session(store, query).await.map(|r| (r, None)),
        Ok(Err(e)) => Err(fail(exit::USAGE_ERROR, codes::STORE, e)),
        Err(e) => Err(fail(exit::USAGE_ERROR, codes::STORE, e)),
    }
}

/// A session of another target was named: `session_not_found` (exit 1), saying whose it is
/// (`kept_aside`: kept aside from the configured server: its earlier database, or missing from it).
fn elsewhere(id: &str, target: &str, kept_aside: bool) -> ExitCode {
    let target = sanitize(target);
    if kept_aside {
        return fail(
            exit::SERVICE_ERROR,
            codes::SESSION_NOT_FOUND,
            format_args!(
                "session {id} is no longer on the server; the local store keeps it as “{target}”: `convo export {id}` writes it"
            ),
        );
    }
    fail(
        exit::SERVICE_ERROR,
        codes::SESSION_NOT_FOUND,
        format_args!(
            "session {id} belongs to another server ({target}), not the one configured: point convo at it (--base-url, CONVO_BASE_URL) or see `convo sessions --all-targets`"
        ),
    )
}

/// The id of the session a command that asks the server names (`delete`, `send --session`,
/// `cancel`, `fork`, `undo`):
/// the store's session of this target with that id, start of id or title
/// ([`find_session`]); a whole id the store does not know passes as it is (the server may
/// hold it: `None` in the second place says the store did not know it). A session of
/// another target, or an ambiguous or unknown start, is an error printed here.
pub(crate) async fn resolve_session_id(
    store: &Store,
    query: &str,
) -> Result<(String, Option<convo_client::local_store::SessionRecord>), ExitCode> {
    use convo_client::local_store::SessionLookup;
    let (s, q) = (store.clone(), query.to_string());
    let lookup = tokio::task::spawn_blocking(move || s.find_session(&q)).await;
    match lookup {
        Ok(Ok(SessionLookup::Found(r))) => Ok((r.id.clone(), Some(r))),
        Ok(Ok(SessionLookup::Deleted(id))) => Ok((id, None)),
        Ok(Ok(SessionLookup::NotFound)) if convo_client::api::is_valid_session_id(query) => {
            Ok((query.to_string(), None))
        }
        // The server's new database may have a session of that id: it is asked.
        Ok(Ok(SessionLookup::Elsewhere {
            id,
            kept_aside: true,
            ..
        })) => Ok((id, None)),
        Ok(Ok(SessionLookup::Elsewhere { id, target, .. })) => Err(elsewhere(&id, &target, false)),
        _ => find_session(store, query)
            .await
            .map(|r| (r.id.clone(), Some(r))),
    }
}

/// Run a blocking store operation off the async runtime; a failure is a warning only,
/// since the service already did what was asked.
pub(crate) async fn record<F>(store: Store, what: &'static str, f: F)
where
    F: FnOnce(&Store) -> Result<(), convo_client::local_store::StoreError> + Send + 'static,
{
    let outcome = tokio::task::spawn_blocking(move || f(&store)).await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn(format_args!(
            "could not record {what} in the local store: {e}"
        )),
        Err(e) => warn(format_args!(
            "could not record {what} in the local store: {e}"
        )),
    }
}

/// Reads `session_id`'s history from the server and appends to the store the messages it
/// lacks (`Store::catch_up`, the rule the TUI completes an opened session by): a session
/// listed here but written on another device holds none of its messages here until then. A
/// session the server does not have, or a server without the history extension, leaves the
/// store as it is; a failure to ask is the error, for the caller to warn with.
pub(crate) async fn catch_up(
    client: &Client,
    store: &Store,
    session_id: &str,
) -> Result<(), ApiError> {
    let history = match client.history(session_id).await? {
        convo_client::api::History::Messages(m) => m,
        convo_client::api::History::NotFound | convo_client::api::History::Unsupported => {
            return Ok(());
        }
    };
    let id = session_id.to_string();
    record(
        store.clone(),
        "the session's messages from the server",
        move |s| s.catch_up(&id, &history).map(|_| ()),
    )
    .await;
    Ok(())
}

/// Write to stdout. A reader that went away (`convo … | head`) is not worth a panic or an
/// error message: the rest of the output is simply dropped.
pub(crate) fn out(text: impl AsRef<str>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_ref().as_bytes());
    let _ = stdout.flush();
}

/// Print a value as pretty JSON on stdout (for `--json`).
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> ExitCode {
    match serde_json::to_string_pretty(value) {
        Ok(s) => {
            out(format!("{s}\n"));
            ExitCode::SUCCESS
        }
        Err(e) => fail(
            exit::SERVICE_ERROR,
            codes::IO,
            format_args!("cannot encode JSON: {e}"),
        ),
    }
}

/// A table in the house style; columns listed in `right` are right-aligned (numbers).
pub(crate) fn table(header: &[&str], right: &[usize]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    // Snapshot tests must not depend on the width of the terminal running them.
    #[cfg(test)]
    t.force_no_tty();
    for &i in right {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// Text from the server made safe for a terminal: no escape sequences, no control
/// characters (newlines and tabs kept), no bidi overrides.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    convo_client::sanitize::strip_controls(text)
}

/// Check a session id given on the command line.
pub(crate) fn check_session_id(id: &str) -> Result<(), ExitCode> {
    if convo_client::api::is_valid_session_id(id) {
        Ok(())
    } else {
        Err(fail(
            exit::USAGE_ERROR,
            codes::INVALID_ARGUMENT,
            format_args!(
                "`{}` is not a session id (expected session_ followed by 16 letters or digits)",
                sanitize(id)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_strips_escapes_and_bidi() {
        assert_eq!(sanitize("a\x1b[31mb\tc\nd\u{202E}e"), "a[31mb\tc\nde");
        assert!(matches!(sanitize("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn reports_render_as_tables() {
        use convo_client::api::{Metrics, Usage, Wallet};
        let usage: Usage = serde_json::from_value(serde_json::json!({
            "billingPeriod": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
            "requests": {"used": 41234, "limit": 50000, "percentage": 82.468},
            "tokens": {"used": 99, "limit": 10000000, "percentage": 0.00099},
            "sessions": {"active": 2, "limit": 500, "percentage": 0.4},
            "tier": "pro"
        }))
        .unwrap();
        insta::assert_snapshot!("usage", usage::render(&usage));

        let metrics: Metrics = serde_json::from_value(serde_json::json!({
            "period": {"start": "2026-11-01T00:00:00Z", "end": "2026-11-08T00:00:00Z", "granularity": "day"},
            "sessions": {"total": 3, "active": 2, "averageDuration": 42.5},
            "messages": {"total": 8, "averagePerSession": 2.6667, "userMessages": 4, "assistantMessages": 4},
            "tokens": {"total": 1200, "prompt": 400, "completion": 800, "averagePerMessage": 150.0}
        }))
        .unwrap();
        insta::assert_snapshot!("metrics", metrics::render(&metrics));

        let wallet: Wallet = serde_json::from_value(serde_json::json!({
            "walletId": "treasury", "address": "MASi45ub7Qe4ZE36UT5G6cU4ud8Fhhe4deS4F3cw9KTA",
            "alias": "Team \u{1b}[31mtreasury", "balance": 1842.317,
            "tokenAccounts": [{"mint": "EPjF", "symbol": "USDC", "balance": 250000.0, "usdValue": 250000.0},
                              {"mint": "mSoL", "symbol": "mSOL", "balance": 310.2, "usdValue": 65886.48}],
            "nfts": [{"mint": "NfT1", "name": "Mad Lad #1", "collection": "Mad Lads", "floorPrice": 80.5}],
            "riskScore": 8, "riskFactors": [], "tags": ["treasury", "multisig"]
        }))
        .unwrap();
        insta::assert_snapshot!("wallet", wallet::render(&wallet));

        use chrono::TimeZone;
        let at = chrono::Utc
            .with_ymd_and_hms(2026, 11, 22, 0, 40, 0)
            .unwrap();
        let sessions = vec![
            convo_client::local_store::SessionRecord {
                id: "session_k1zbxTbfvBIJHLxy".into(),
                title: Some("hi".into()),
                title_set: false,
                created_at: at,
                last_activity: at,
                tokens: 1385,
                deleted: false,
                target: "embedded".into(),
                forked_from: None,
            },
            convo_client::local_store::SessionRecord {
                id: "session_AAAAAAAAAAAAAAAA".into(),
                title: None,
                title_set: false,
                created_at: at,
                last_activity: at - chrono::Duration::days(2),
                tokens: 0,
                deleted: false,
                target: "embedded".into(),
                forked_from: None,
            },
        ];
        insta::assert_snapshot!("sessions", sessions::render(&sessions));
        // A fork says where it came from (it keeps its source's title).
        let mut fork = sessions[0].clone();
        fork.id = "session_F0rkF0rkF0rkF0rk".into();
        fork.forked_from = Some("session_k1zbxTbfvBIJHLxy".into());
        let with_fork = [fork, sessions[0].clone()];
        insta::assert_snapshot!("sessions_with_a_fork", sessions::render(&with_fork));
    }
}
