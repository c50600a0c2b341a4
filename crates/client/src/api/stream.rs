//! The stream client: a task holding `GET /v1/sessions/{id}/stream` (docs/design.md, "Streaming") open,
//! yielding typed events, pinging, reconnecting with capped backoff; and [`send_streaming`],
//! which sends one message and follows its reply through a [`ReplyFollower`] (which drops
//! duplicate deltas), falling back to a plain POST against servers without the stream
//! endpoint (§4.3).
//!
//! ```no_run
//! # async fn demo(options: convo_client::api::ClientOptions) {
//! use convo_client::api::stream::{SessionStream, StreamUpdate};
//! let (_handle, mut updates) = SessionStream::connect(options, "session_abcdefgh12345678");
//! while let Some(update) = updates.recv().await {
//!     match update {
//!         StreamUpdate::Event(event) => println!("{event:?}"),
//!         StreamUpdate::Unsupported => break, // use plain POSTs
//!         other => println!("{other:?}"),
//!     }
//! }
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_tungstenite::tungstenite::{self, Message as WsMessage, client::IntoClientRequest};

use super::client::{Client, ClientOptions};
use super::error::ApiError;
use super::types::{ErrorEnvelope, Message, SendMessage, StreamEvent};
use crate::follow::{CONFIRM_AFTER, Change, Next, ReplyFailure, ReplyFollower, ReplyStatus};

/// What a session stream task tells its owner.
pub type StreamUpdate = Update<StreamEvent>;

/// What a stream task (a session's, or the account's: `super::account_stream`) tells its owner.
#[derive(Debug, Clone, PartialEq)]
pub enum Update<E> {
    /// An event, as the server sent it (on a session stream a [`ReplyFollower`] drops
    /// duplicates).
    Event(E),
    /// The stream is open (again). After a reconnect, a reply in flight arrives as a snapshot.
    Connected,
    /// The stream dropped. `retry_in: Some(d)`: reconnecting after `d`; `None`: given up
    /// (e.g. the session was deleted, or the key was refused) and the task has ended.
    Disconnected {
        error: ApiError,
        retry_in: Option<Duration>,
    },
    /// The server has no stream endpoint; the task has ended. Use plain POSTs.
    Unsupported,
}

/// Timings of the stream task. The defaults follow docs/design.md, "Streaming".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamTiming {
    pub ping_interval: Duration,
    /// Reconnect when nothing at all (not even a pong) was heard for this long.
    pub silence_timeout: Duration,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
}

impl Default for StreamTiming {
    fn default() -> Self {
        StreamTiming {
            ping_interval: Duration::from_secs(20),
            silence_timeout: Duration::from_secs(60),
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(30),
        }
    }
}

impl StreamTiming {
    /// The timings of [`send_streaming`]: someone waits at a prompt for one reply, so a
    /// server that went silent (no pong to pings every second) is noticed within 4 s and
    /// reconnects are tried quickly. A live server answers pings at once whatever its
    /// model is doing, so the short silence timeout does not cut a slow reply short.
    pub fn one_shot() -> Self {
        StreamTiming {
            ping_interval: Duration::from_secs(1),
            silence_timeout: Duration::from_secs(4),
            backoff_base: Duration::from_millis(250),
            backoff_cap: Duration::from_secs(2),
        }
    }
}

/// Handle of a session's stream task. Dropping it closes the stream.
#[derive(Debug)]
pub struct SessionStream {
    session_id: String,
    task: TaskHandle,
}

/// What the owner of a stream task holds: dropping it stops the task; [`TaskHandle::retry_now`]
/// cuts a reconnect's backoff short.
#[derive(Debug)]
pub(super) struct TaskHandle {
    _close: oneshot::Sender<()>,
    retry: Arc<Notify>,
}

impl TaskHandle {
    /// A stream waiting to reconnect tries again now (someone is at the keyboard: the server
    /// may be back), though not sooner than [`RETRY_GAP`] after its last attempt. A stream
    /// that is open, or already connecting, is not affected.
    pub(super) fn retry_now(&self) {
        self.retry.notify_waiters();
    }
}

/// The least time between two attempts of a stream that [`TaskHandle::retry_now`] hurries.
pub const RETRY_GAP: Duration = Duration::from_secs(1);

impl SessionStream {
    /// Open the stream of `session_id` in a background task with default timings.
    /// Must be called within a tokio runtime.
    pub fn connect(
        options: ClientOptions,
        session_id: &str,
    ) -> (SessionStream, mpsc::Receiver<StreamUpdate>) {
        Self::connect_with(options, session_id, StreamTiming::default())
    }

    pub fn connect_with(
        options: ClientOptions,
        session_id: &str,
        timing: StreamTiming,
    ) -> (SessionStream, mpsc::Receiver<StreamUpdate>) {
        let (task, rx) = spawn_task(
            options,
            vec![
                "v1".into(),
                "sessions".into(),
                session_id.to_string(),
                "stream".into(),
            ],
            timing,
        );
        (
            SessionStream {
                session_id: session_id.to_string(),
                task,
            },
            rx,
        )
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Waiting to reconnect, the stream tries again now ([`TaskHandle::retry_now`]).
    pub fn retry_now(&self) {
        self.task.retry_now();
    }
}

/// The outcome of one connection attempt or connection.
enum Ending {
    /// Owner gone or handle dropped: stop quietly.
    Closed,
    /// Try again after a backoff.
    Retry(ApiError),
    /// Give up with this error.
    Fatal(ApiError),
    Unsupported,
}

/// The events of a stream, as a stream task reads them from its text frames.
pub(super) trait Frame: Sized + Send + 'static {
    /// The event in `text`; `None` (after logging why) for a frame to skip.
    fn parse(text: &str) -> Option<Self>;
}

impl Frame for StreamEvent {
    fn parse(text: &str) -> Option<Self> {
        match serde_json::from_str(text) {
            Ok(e) => Some(e),
            Err(e) => {
                // Unknown event types from other servers are not an error.
                tracing::debug!(error = %e, "ignoring a stream frame");
                None
            }
        }
    }
}

/// Starts a task holding the WebSocket at `path` (segments under the base URL) open: the
/// handle that stops it when dropped, and its updates.
pub(super) fn spawn_task<E: Frame>(
    options: ClientOptions,
    path: Vec<String>,
    timing: StreamTiming,
) -> (TaskHandle, mpsc::Receiver<Update<E>>) {
    let (tx, rx) = mpsc::channel(256);
    let (close_tx, close_rx) = oneshot::channel();
    let retry = Arc::new(Notify::new());
    let task = StreamTask {
        options,
        path,
        timing,
        tx,
        retry: retry.clone(),
    };
    tokio::spawn(task.run(close_rx));
    (
        TaskHandle {
            _close: close_tx,
            retry,
        },
        rx,
    )
}

struct StreamTask<E> {
    options: ClientOptions,
    /// The segments of the stream's path.
    path: Vec<String>,
    timing: StreamTiming,
    tx: mpsc::Sender<Update<E>>,
    /// Cuts a reconnect's backoff short ([`TaskHandle::retry_now`]).
    retry: Arc<Notify>,
}

impl<E: Frame> StreamTask<E> {
    async fn run(mut self, mut close: oneshot::Receiver<()>) {
        let mut failures: u32 = 0;
        loop {
            let attempt = Instant::now();
            let ending = tokio::select! {
                _ = &mut close => Ending::Closed,
                e = self.connect_and_read(&mut failures) => e,
            };
            match ending {
                Ending::Closed => return,
                Ending::Unsupported => {
                    let _ = self.tx.send(Update::Unsupported).await;
                    return;
                }
                Ending::Fatal(error) => {
                    let _ = self
                        .tx
                        .send(Update::Disconnected {
                            error,
                            retry_in: None,
                        })
                        .await;
                    return;
                }
                Ending::Retry(error) => {
                    let wait = self.backoff(failures);
                    failures = failures.saturating_add(1);
                    tracing::debug!(path = %self.path.join("/"), %error, ?wait, "stream dropped");
                    if self
                        .tx
                        .send(Update::Disconnected {
                            error,
                            retry_in: Some(wait),
                        })
                        .await
                        .is_err()
                    {
                        return;
                    }
                    tokio::select! {
                        _ = &mut close => return,
                        _ = sleep(wait) => {}
                        _ = self.retry.notified() => {
                            tracing::debug!(path = %self.path.join("/"), "stream retried at once");
                            tokio::select! {
                                _ = &mut close => return,
                                _ = sleep_until(attempt + RETRY_GAP) => {}
                            }
                        }
                    }
                }
            }
        }
    }

    fn backoff(&self, failures: u32) -> Duration {
        let exp = self
            .timing
            .backoff_base
            .saturating_mul(2u32.saturating_pow(failures.min(16)));
        exp.min(self.timing.backoff_cap)
    }

    async fn connect_and_read(&mut self, failures: &mut u32) -> Ending {
        if let Err(e) = crate::config::check_transport(
            &self.options.base_url,
            self.options.api_key.is_some(),
            self.options.allow_insecure,
        ) {
            return Ending::Fatal(ApiError::Config(e.to_string()));
        }
        let segments: Vec<&str> = self.path.iter().map(String::as_str).collect();
        let mut url = self.options.endpoint(&segments);
        let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
        if url.set_scheme(scheme).is_err() {
            return Ending::Fatal(ApiError::Config(format!(
                "cannot derive a WebSocket address from {}",
                self.options.base_url
            )));
        }
        let mut request = match url.as_str().into_client_request() {
            Ok(r) => r,
            Err(e) => return Ending::Fatal(ApiError::Config(format!("bad stream address: {e}"))),
        };
        if let Some(key) = &self.options.api_key {
            match format!("Bearer {key}").parse() {
                Ok(v) => {
                    request.headers_mut().insert("Authorization", v);
                }
                Err(_) => {
                    return Ending::Fatal(ApiError::Config(
                        "the API key holds characters not allowed in a header".into(),
                    ));
                }
            }
        }
        let config = tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(self.options.max_body_bytes))
            .max_frame_size(Some(self.options.max_body_bytes));
        let connecting = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
        let ws = match timeout(self.options.timeouts.connect, connecting).await {
            Err(_) => {
                return Ending::Retry(ApiError::Network(format!(
                    "the stream at {} did not open in time",
                    url.origin().ascii_serialization()
                )));
            }
            Ok(Err(e)) => return classify_connect_error(e),
            Ok(Ok((ws, _response))) => ws,
        };
        if self.tx.send(Update::Connected).await.is_err() {
            return Ending::Closed;
        }
        let (mut sink, mut source) = ws.split();
        let mut ping = tokio::time::interval_at(
            Instant::now() + self.timing.ping_interval,
            self.timing.ping_interval,
        );
        let mut silent_until = Instant::now() + self.timing.silence_timeout;
        let owner = self.tx.clone();
        loop {
            tokio::select! {
                frame = source.next() => {
                    silent_until = Instant::now() + self.timing.silence_timeout;
                    // The backoff restarts only once the server has actually spoken, so
                    // that one accepting and at once closing is not hammered.
                    if matches!(frame, Some(Ok(_))) {
                        *failures = 0;
                    }
                    match frame {
                        None => return Ending::Retry(ApiError::Network("the stream closed".into())),
                        Some(Err(e)) => return Ending::Retry(ApiError::Network(format!("the stream failed: {e}"))),
                        Some(Ok(WsMessage::Text(text))) => {
                            if !self.forward(text.as_str()).await {
                                return Ending::Closed;
                            }
                        }
                        Some(Ok(WsMessage::Close(frame))) => {
                            let why = frame.map(|f| f.reason.to_string()).filter(|r| !r.is_empty());
                            return Ending::Retry(ApiError::Network(match why {
                                Some(r) => format!("the server closed the stream: {r}"),
                                None => "the server closed the stream".into(),
                            }));
                        }
                        // Pings are answered by tungstenite; pongs and binary frames only
                        // show the peer is alive.
                        Some(Ok(_)) => {}
                    }
                }
                _ = ping.tick() => {
                    if let Err(e) = sink.send(WsMessage::Ping(Vec::new().into())).await {
                        return Ending::Retry(ApiError::Network(format!("the stream failed: {e}")));
                    }
                }
                _ = sleep_until(silent_until) => {
                    return Ending::Retry(ApiError::Network(format!(
                        "nothing heard on the stream for {} s",
                        self.timing.silence_timeout.as_secs()
                    )));
                }
                _ = owner.closed() => {
                    let _ = sink.send(WsMessage::Close(None)).await;
                    return Ending::Closed;
                }
            }
        }
    }

    /// Parse one text frame and pass it on. False when the owner is gone.
    async fn forward(&mut self, text: &str) -> bool {
        let Some(event) = E::parse(text) else {
            return true;
        };
        self.tx.send(Update::Event(event)).await.is_ok()
    }
}

fn classify_connect_error(e: tungstenite::Error) -> Ending {
    match e {
        tungstenite::Error::Http(resp) => {
            let status = resp.status().as_u16();
            let envelope = resp
                .body()
                .as_deref()
                .and_then(|b| serde_json::from_slice::<ErrorEnvelope>(b).ok());
            match (status, envelope) {
                (_, Some(env))
                    if matches!(
                        env.error.code.as_str(),
                        "session_not_found" | "unauthorized" | "quota_exceeded"
                    ) =>
                {
                    Ending::Fatal(ApiError::from_body(status, env.error, None))
                }
                (401 | 403, _) => Ending::Fatal(ApiError::Unauthorized {
                    message: format!("the stream endpoint refused the key (HTTP {status})"),
                }),
                (500.., _) => Ending::Retry(ApiError::Network(format!(
                    "the stream endpoint answered HTTP {status}"
                ))),
                _ => Ending::Unsupported,
            }
        }
        // The connection ended before the handshake's answer was complete: a network
        // failure (a server going down), not a server without streams.
        tungstenite::Error::Protocol(tungstenite::error::ProtocolError::HandshakeIncomplete) => {
            Ending::Retry(ApiError::Network(
                "the stream's handshake was cut off".into(),
            ))
        }
        // Something that is not a WebSocket server answered.
        tungstenite::Error::Protocol(_) | tungstenite::Error::HttpFormat(_) => Ending::Unsupported,
        tungstenite::Error::Url(e) => {
            Ending::Fatal(ApiError::Config(format!("bad stream address: {e}")))
        }
        other => Ending::Retry(ApiError::Network(format!(
            "cannot open the stream: {other}"
        ))),
    }
}

/// How long [`send_streaming`] waits, after the stream reconnected, for a snapshot of its
/// reply when the server cannot say (no history endpoint) whether the reply is still coming.
const RECOVERY_GRACE: Duration = Duration::from_secs(15);

/// Least time [`send_streaming`] waits between two pieces of its reply, or for the stream
/// to come back to a server that is up, before it settles the reply from the stored history
/// or gives up (the request timeout is used when longer).
const STALL_GUARD_MIN: Duration = Duration::from_secs(120);

/// How long [`send_streaming`] keeps trying to reach a server whose stream dropped
/// mid-reply before it gives up on the reply: a killed server fails the send this soon.
const DOWN_GRACE: Duration = Duration::from_secs(4);

/// Pause between two attempts to reach the server while the stream is down.
const PROBE_RETRY: Duration = Duration::from_millis(500);

/// Longest wait for the stored history's answer: a server that accepts connections but
/// answers nothing (stopped, or a dead link) must not hold the caller for the request timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The session's stored history, as fetched to settle a reply the stream lost.
enum History {
    Messages(Vec<Message>),
    /// The server has no history endpoint.
    Unsupported,
    /// The history could not be fetched.
    Failed(ApiError),
    /// The server took the request and said nothing for [`PROBE_TIMEOUT`].
    NoAnswer,
}

fn no_answer() -> ApiError {
    ApiError::Network(format!(
        "no answer from the server in {} s",
        PROBE_TIMEOUT.as_secs()
    ))
}

/// `GET /v1/sessions/{id}/messages` (an extension of the local service); no answer within
/// [`PROBE_TIMEOUT`] is [`History::NoAnswer`].
async fn fetch_history(client: &Client, session_id: &str) -> History {
    match timeout(PROBE_TIMEOUT, client.session_messages(session_id)).await {
        Err(_) => History::NoAnswer,
        Ok(Ok(Some(messages))) => History::Messages(messages),
        Ok(Ok(None)) => History::Unsupported,
        Ok(Err(e)) => History::Failed(e),
    }
}

/// The error for a reply that the service did not keep after the stream lost it.
fn not_kept(received: usize, message_kept: bool) -> ApiError {
    let why = if message_kept {
        "it kept your message without a reply: the server restarted and the reply will not come"
    } else {
        "the turn was rolled back"
    };
    ApiError::StreamLost(format!(
        "the stream dropped mid-reply and the service did not keep the reply ({why}; {received} bytes had arrived): send the message again"
    ))
}

/// Prints what the follower's text adds to what was printed; a snapshot or the final reply
/// repeat what came before, and nothing is printed twice.
fn emit<F: FnMut(&str)>(printed: &mut String, full: &str, on_text: &mut F) {
    let rest = full
        .strip_prefix(printed.as_str())
        .unwrap_or_else(|| full.get(printed.len()..).unwrap_or_default());
    if !rest.is_empty() {
        on_text(rest);
    }
    *printed = full.to_string();
}

/// The end of the send if the follower has settled the reply.
fn outcome<F: FnMut(&str)>(
    follower: &ReplyFollower,
    printed: &mut String,
    on_text: &mut F,
) -> Option<Result<Message, ApiError>> {
    emit(printed, follower.text(), on_text);
    match follower.status() {
        ReplyStatus::Done(message) => Some(Ok(message.clone())),
        ReplyStatus::Failed(ReplyFailure::Error(body)) => {
            Some(Err(ApiError::from_body(0, body.clone(), None)))
        }
        ReplyStatus::Failed(ReplyFailure::NotKept { message_kept }) => {
            Some(Err(not_kept(printed.len(), *message_kept)))
        }
        ReplyStatus::Coming | ReplyStatus::Interrupted => None,
    }
}

/// Send one message and follow its reply as it streams, calling `on_text` with each new
/// piece of text in order; returns the final reply.
///
/// This is the I/O driver of a [`ReplyFollower`] (which decides what the reply is, drops
/// duplicate deltas and settles a lost reply against the stored history); the TUI drives
/// the same follower from its events.
///
/// Falls back to a plain POST when the server has no stream endpoint, and takes a complete
/// 200 reply to a `stream: true` POST as done. In both cases `on_text` gets the whole
/// content once.
///
/// The stream uses [`StreamTiming::one_shot`]: a connection that closes is noticed at once,
/// one that goes silent within seconds. When it drops mid-reply it reconnects (with backoff)
/// and picks the reply up from the server's snapshot; meanwhile it asks the session's stored
/// history what became of the reply, which settles a reply that finished (or was dropped)
/// while the stream was down. A server that cannot be reached for `DOWN_GRACE` ends the
/// send with [`ApiError::StreamLost`]. Against a server without that history it waits
/// `RECOVERY_GRACE` for a snapshot, then says that the end of the reply is unknown.
pub async fn send_streaming<F: FnMut(&str)>(
    client: &Client,
    session_id: &str,
    message: &SendMessage,
    idempotency_key: &str,
    mut on_text: F,
) -> Result<Message, ApiError> {
    let (handle, mut updates) = SessionStream::connect_with(
        client.options().clone(),
        session_id,
        StreamTiming::one_shot(),
    );
    let opened = timeout(
        client.options().timeouts.connect + Duration::from_secs(1),
        updates.recv(),
    )
    .await;
    let streaming = matches!(opened, Ok(Some(StreamUpdate::Connected)));
    if !streaming {
        tracing::debug!(?opened, "no stream; sending a plain POST");
        drop(handle);
        let mut plain = message.clone();
        plain.stream = None;
        let reply = client
            .send_message(session_id, &plain, idempotency_key)
            .await?;
        on_text(&reply.content);
        return Ok(reply);
    }

    let mut body = message.clone();
    body.stream = Some(true);
    let sent = client
        .post_message(session_id, &body, idempotency_key)
        .await?;
    let mut follower = ReplyFollower::new(
        message.role.unwrap_or(super::types::Role::User),
        message.content.clone(),
    )
    .sent_with_key(idempotency_key);
    let mut printed = String::new();
    // Events queued while the POST was answered are taken after it: the reply's id is known.
    follower.accepted(&sent.message, sent.complete);
    if let Some(end) = outcome(&follower, &mut printed, &mut on_text) {
        return end;
    }
    // While the stream is down, the history is asked without retries of its own: this
    // loop retries, and must see a dead server as soon as it stops answering.
    let prober = {
        let mut o = client.options().clone();
        o.max_retries = 0;
        Client::new(o).ok()
    };
    let prober = prober.as_ref().unwrap_or(client);
    // Reconnected after a drop, waiting for a snapshot the history could not promise.
    let mut recovering_since: Option<Instant> = None;
    // The stream is down (reconnecting) since then, and why it dropped.
    let mut down: Option<(Instant, ApiError)> = None;
    // While it is down: when to ask the stored history next.
    let mut next_probe: Option<Instant> = None;
    // The follower asked to look at the history again then (`Next::FetchHistoryLater`).
    let mut confirm_at: Option<Instant> = None;
    // A server that accepted the message but never streams it must not hang the caller;
    // generous, since a slow model may think for a while before its first token.
    let stall_guard = client.options().timeouts.request.max(STALL_GUARD_MIN);
    loop {
        let wait = match (recovering_since, &down) {
            (Some(since), _) => RECOVERY_GRACE.saturating_sub(since.elapsed()),
            (None, Some((since, _))) => stall_guard.saturating_sub(since.elapsed()),
            (None, None) => stall_guard,
        };
        let wait = [next_probe, confirm_at]
            .into_iter()
            .flatten()
            .fold(wait, |w, at| {
                w.min(at.saturating_duration_since(Instant::now()))
            });
        let next = match timeout(wait, updates.recv()).await {
            Ok(u) => u,
            Err(_) => {
                if let Some(at) = confirm_at
                    && Instant::now() >= at
                {
                    // A second look: the message kept without its reply, and no snapshot.
                    confirm_at = None;
                    if let History::Messages(messages) = fetch_history(prober, session_id).await
                        && follower.history(&messages).next == Next::FetchHistoryLater
                    {
                        confirm_at = Some(Instant::now() + CONFIRM_AFTER);
                    }
                    if let Some(end) = outcome(&follower, &mut printed, &mut on_text) {
                        return end;
                    }
                    continue;
                }
                if let (Some(at), Some((since, why))) = (next_probe, &down)
                    && Instant::now() >= at
                {
                    // The stream is down: is the server there, and what of the reply?
                    match fetch_history(prober, session_id).await {
                        History::Messages(messages) => {
                            follower.history(&messages);
                            if let Some(end) = outcome(&follower, &mut printed, &mut on_text) {
                                return end;
                            }
                            // Up and still writing it: the stream should come back.
                            next_probe = Some(Instant::now() + DOWN_GRACE);
                        }
                        History::Unsupported if since.elapsed() >= RECOVERY_GRACE => {
                            return Err(ApiError::StreamLost(format!(
                                "the stream dropped mid-reply ({}) and stayed down for {} s, and this server cannot list past messages: the end of the reply is unknown (it may be stored on the server)",
                                why.detail(),
                                RECOVERY_GRACE.as_secs()
                            )));
                        }
                        History::Unsupported => next_probe = Some(Instant::now() + DOWN_GRACE),
                        // Silent on top of a dropped stream: stopped, or the link is dead.
                        History::NoAnswer => {
                            return Err(ApiError::StreamLost(format!(
                                "the stream dropped mid-reply ({}) and the server does not answer ({}): the end of the reply is unknown (it may be stored on the server)",
                                why.detail(),
                                no_answer().detail()
                            )));
                        }
                        History::Failed(e) if since.elapsed() >= DOWN_GRACE => {
                            return Err(ApiError::StreamLost(format!(
                                "the stream dropped mid-reply ({}) and the server cannot be reached ({e}): the end of the reply is unknown (it may be stored on the server)",
                                why.detail()
                            )));
                        }
                        History::Failed(e) => {
                            tracing::debug!(error = %e, "the server is not answering yet");
                            next_probe = Some(Instant::now() + PROBE_RETRY);
                        }
                    }
                    continue;
                }
                // Nothing for too long: the stored history is the last word.
                let why = match (recovering_since, &down) {
                    (Some(_), _) => "the stream came back but the reply did not resume".to_string(),
                    (None, Some(_)) => {
                        format!("the stream has been down for {} s", stall_guard.as_secs())
                    }
                    (None, None) => format!(
                        "no part of the reply arrived for {} s",
                        stall_guard.as_secs()
                    ),
                };
                follower.stalled();
                return match fetch_history(client, session_id).await {
                    History::Messages(messages) => {
                        follower.history(&messages);
                        outcome(&follower, &mut printed, &mut on_text).unwrap_or_else(|| {
                            Err(ApiError::StreamLost(format!(
                                "{why}; the service is still generating it and will store it"
                            )))
                        })
                    }
                    History::Unsupported => Err(ApiError::StreamLost(format!(
                        "{why}, and this server cannot list past messages: the end of the reply is unknown (it may be stored on the server)"
                    ))),
                    History::Failed(e) => Err(ApiError::StreamLost(format!(
                        "{why}, and its stored history could not be read ({e}): the end of the reply is unknown"
                    ))),
                    History::NoAnswer => Err(ApiError::StreamLost(format!(
                        "{why}, and its stored history could not be read ({}): the end of the reply is unknown",
                        no_answer()
                    ))),
                };
            }
        };
        match next {
            None => return Err(ApiError::StreamLost("the stream task ended".into())),
            Some(StreamUpdate::Event(event)) => {
                if follower.event(&event).change != Change::None {
                    recovering_since = None;
                }
                if let Some(end) = outcome(&follower, &mut printed, &mut on_text) {
                    return end;
                }
            }
            Some(StreamUpdate::Connected) => {
                next_probe = None;
                let step = follower.stream_connected();
                if down.take().is_none() || step.next != Next::FetchHistory {
                    continue;
                }
                // Back after a drop: a reply still being generated comes as a snapshot; one
                // that ended meanwhile is only in the stored history.
                match fetch_history(client, session_id).await {
                    History::Messages(messages) => {
                        if follower.history(&messages).next == Next::FetchHistoryLater {
                            confirm_at = Some(Instant::now() + CONFIRM_AFTER);
                        }
                        if let Some(end) = outcome(&follower, &mut printed, &mut on_text) {
                            return end;
                        }
                        recovering_since = None;
                    }
                    History::Unsupported => {
                        recovering_since.get_or_insert_with(Instant::now);
                    }
                    History::Failed(_) | History::NoAnswer => {
                        tracing::debug!("cannot read the history after a reconnect");
                        recovering_since.get_or_insert_with(Instant::now);
                    }
                }
            }
            Some(StreamUpdate::Disconnected {
                error,
                retry_in: Some(_),
            }) => {
                follower.stream_lost();
                recovering_since = None;
                confirm_at = None;
                if down.is_none() {
                    // Ask the history at once: a dead server shows in the first answer.
                    down = Some((Instant::now(), error));
                    next_probe = Some(Instant::now());
                }
            }
            Some(StreamUpdate::Disconnected {
                error,
                retry_in: None,
            }) => return Err(error),
            Some(StreamUpdate::Unsupported) => {
                return Err(ApiError::Protocol(
                    "the stream endpoint went away while a reply was streaming".into(),
                ));
            }
        }
    }
}
