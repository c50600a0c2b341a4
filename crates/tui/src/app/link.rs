//! What the last answers say about the service: whether it is reachable and takes the key
//! (the status bar's dot), and a plan limit that a `quota_exceeded` says is reached (the
//! usage gauges, which a poll refused by that same limit could not otherwise update).

use chrono::{DateTime, Utc};

use convo_client::api::{ApiError, Usage};

use super::{App, Command, Connection, StreamState};
use crate::event::{Endpoint, EngineStatus, describe_failure};

/// Whether the service answered the last request or stream made to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Link {
    /// It answered (an error code is an answer).
    #[default]
    Up,
    /// It could not be reached; the stream and the usage poll keep trying.
    Down(String),
    /// It refused the credentials.
    Refused(String),
}

/// How the connection label reads: good (connected and answering), pending (connecting,
/// reconnecting, a model loading) or bad (refused, failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Pending,
    Bad,
}

/// A plan limit the service said is reached, with when it resets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitReached {
    /// `requests`, `tokens` or `sessions`.
    pub limit: String,
    pub reset_at: Option<DateTime<Utc>>,
}

impl App {
    /// The status bar's connection label, as the connection stands: connecting, connected
    /// (with what answers), unreachable since, refused, or failed to start. Ends in a space.
    pub fn connection_label(&self) -> (Tone, String) {
        let name = |endpoint: &Endpoint| match endpoint {
            Endpoint::Embedded { .. } => "the local service".to_string(),
            Endpoint::Remote { base_url } => base_url.clone(),
        };
        match (&self.connection, &self.link) {
            (Connection::Connected(e), Link::Down(_)) => {
                (Tone::Pending, format!("◌ reconnecting to {} ", name(e)))
            }
            (Connection::Connected(e), Link::Refused(_)) => {
                (Tone::Bad, format!("✗ key refused by {} ", name(e)))
            }
            (Connection::Connecting, _) => (Tone::Pending, "◌ connecting… ".to_string()),
            (Connection::Connected(Endpoint::Embedded { addr }), _) => match &self.engine {
                None => (Tone::Good, format!("● local service {addr} ")),
                Some(engine) => engine_label(engine),
            },
            (Connection::Connected(Endpoint::Remote { base_url }), _) => {
                (Tone::Good, format!("● {base_url} "))
            }
            (Connection::Failed(_), _) => (Tone::Bad, "✗ not connected ".to_string()),
        }
    }

    /// Rows the status bar takes at `width`: one, or as many as its message needs
    /// word-wrapped after the connection label, at most `max`.
    pub fn status_rows(&self, width: u16, max: u16) -> u16 {
        match self.status_message() {
            None => 1,
            Some((_, text)) => {
                let (_, rows) = self.status_label(&text, width, max);
                rows.clamp(1, max.max(1))
            }
        }
    }

    /// The connection label that starts the status bar while it shows `message`, and the
    /// rows the message then takes: the whole label, or only its first word (the dot) when the
    /// whole one would push the message past `max` rows, so that advice is not cut off for a
    /// label (a local model's name makes it half the width at 80 columns).
    pub fn status_label(&self, message: &str, width: u16, max: u16) -> ((Tone, String), u16) {
        let rows = |label: &str| {
            let first = (width as usize).saturating_sub(crate::render::wrap::str_width(label));
            crate::render::wrap::count_wrapped(message, first, width as usize) as u16
        };
        let (tone, label) = self.connection_label();
        let whole = rows(&label);
        if whole <= max {
            return ((tone, label), whole);
        }
        let dot = label
            .split_whitespace()
            .next()
            .map(|d| format!("{d} "))
            .unwrap_or_default();
        let short = rows(&dot);
        ((tone, dot), short)
    }

    /// Follows the link state from the outcome of a request or of the stream.
    pub(super) fn note_answer(&mut self, outcome: Result<(), &ApiError>) {
        self.link = match outcome {
            Ok(()) => Link::Up,
            Err(ApiError::Network(e)) => Link::Down(e.clone()),
            Err(ApiError::Unauthorized { message }) => Link::Refused(message.clone()),
            Err(_) => Link::Up,
        };
        if let Err(ApiError::QuotaExceeded {
            limit: Some(limit),
            reset_at,
            ..
        }) = outcome
            && matches!(limit.as_str(), "requests" | "tokens" | "sessions")
        {
            if limit == "requests" {
                self.metrics.requests_left = Some(0);
            }
            self.usage.reached = Some(LimitReached {
                limit: limit.clone(),
                reset_at: reset_at.as_deref().and_then(|t| {
                    DateTime::parse_from_rfc3339(t)
                        .ok()
                        .map(|t| t.with_timezone(&Utc))
                }),
            });
        }
    }

    /// A usage poll answered: the limits are as it says.
    pub(super) fn on_usage(&mut self, usage: Usage, out: &mut Vec<Command>) {
        self.note_answer(Ok(()));
        // A reached limit stays shown until the numbers say it is no longer reached.
        if let Some(r) = &self.usage.reached {
            let still = match r.limit.as_str() {
                "requests" => usage.requests.used >= usage.requests.limit,
                "tokens" => usage.tokens.used >= usage.tokens.limit,
                _ => usage.sessions.active >= usage.sessions.limit,
            };
            if !still {
                // The requests limit also refused the open session's stream, which then
                // ended for good: open it again now that requests are taken.
                if r.limit == "requests"
                    && let Some(open) = self.transcript.session()
                    && matches!(open.stream, StreamState::Down(_))
                {
                    out.push(Command::OpenStream {
                        session_id: open.id.clone(),
                    });
                }
                self.usage.reached = None;
            }
        }
        // What a metrics load may cost is weighed against this (F2 asks before a big one).
        self.metrics.requests_left = Some(
            if self
                .usage
                .reached
                .as_ref()
                .is_some_and(|r| r.limit == "requests")
            {
                0
            } else {
                usage.requests.limit.saturating_sub(usage.requests.used)
            },
        );
        // The service's context window, when it says it (`convo serve` does): the gauge of
        // every session uses it from now on, before any send is refused.
        if let Some(window) = usage.context.filter(|c| c.max_tokens > 0) {
            self.settings.max_context_tokens = window.max_tokens;
            if let Some(open) = self.transcript.session_mut() {
                open.context_max = window.max_tokens;
            }
        }
        self.usage.usage = Some(usage);
        self.usage.fetched_at = Some(self.now);
        self.usage.error = None;
    }

    /// A usage poll failed. Refused by a reached limit, the gauges show that limit as
    /// reached rather than stale numbers.
    pub(super) fn on_usage_failed(&mut self, failure: ApiError) {
        self.note_answer(Err(&failure));
        if matches!(failure, ApiError::QuotaExceeded { .. }) && self.usage.reached.is_some() {
            self.usage.error = None;
        } else {
            self.usage.error = Some(describe_failure(&failure, self.now));
        }
    }
}

/// What answers in the embedded service: the model loading (with its progress), ready, or
/// failed to load.
fn engine_label(engine: &EngineStatus) -> (Tone, String) {
    use convo_wire::engine::LoadState;
    match &engine.state {
        LoadState::Loading { fraction } => (
            Tone::Pending,
            format!(
                "◌ loading {} {:.0}% ",
                engine.label,
                (fraction * 100.0).clamp(0.0, 100.0)
            ),
        ),
        LoadState::Ready => (Tone::Good, format!("● {} ", engine.label)),
        LoadState::Failed(_) => (Tone::Bad, format!("✗ {} ", engine.label)),
    }
}
