//! The `openai` engine: any OpenAI-compatible `/v1/chat/completions` server (llama.cpp, Ollama,
//! vLLM), with the session history sent as the conversation and the reply read as SSE.

use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{EngineError, EngineEvent, Finish, ReplyEngine, ReplyRequest};

/// Longest silence accepted from the upstream (before its first byte and between chunks); a
/// local model may take long to load, but a hung upstream must not hold the session forever.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

pub struct OpenAiEngine {
    client: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<String>,
}

/// `http://host:port` → `http://host:port/v1/chat/completions`; a URL ending in `/v1` gets
/// `/chat/completions`; a full `…/chat/completions` URL is kept.
pub fn completions_endpoint(base: &str) -> Result<String, String> {
    let parsed = url::Url::parse(base).map_err(|e| format!("--engine-url `{base}`: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "--engine-url `{base}`: only http and https are supported"
        ));
    }
    let trimmed = base.trim_end_matches('/');
    Ok(if trimmed.ends_with("/chat/completions") {
        trimmed.to_string()
    } else if trimmed.ends_with("/v1") {
        format!("{trimmed}/chat/completions")
    } else {
        format!("{trimmed}/v1/chat/completions")
    })
}

impl OpenAiEngine {
    pub fn new(base_url: &str, model: &str, api_key: Option<String>) -> Result<Self, String> {
        // reqwest is built without a default TLS provider; the CLI installs ring, and so do we
        // for embedders (a second install is a harmless no-op).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(OpenAiEngine {
            client,
            endpoint: completions_endpoint(base_url)?,
            model: model.to_string(),
            api_key,
        })
    }

    async fn run(
        &self,
        request: ReplyRequest,
        out: mpsc::Sender<EngineEvent>,
    ) -> Result<Finish, EngineError> {
        let messages: Vec<Value> = request
            .history
            .iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
            .collect();
        let body = json!({"model": self.model, "messages": messages, "stream": true});
        let mut req = self.client.post(&self.endpoint).json(&body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = tokio::time::timeout(IDLE_TIMEOUT, req.send())
            .await
            .map_err(|_| EngineError(format!("the engine at {} did not answer", self.endpoint)))?
            .map_err(|e| {
                EngineError(format!(
                    "the engine at {} is unreachable: {e}",
                    self.endpoint
                ))
            })?;
        let status = resp.status();
        if !status.is_success() {
            let text = tokio::time::timeout(Duration::from_secs(10), resp.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            let snippet: String = text.chars().take(200).collect();
            return Err(EngineError(format!(
                "the engine answered {status}: {snippet}"
            )));
        }
        let mut bytes = resp.bytes_stream();
        let mut buffer: Vec<u8> = Vec::new();
        let mut finished = None;
        while let Some(chunk) = bytes.next().await {
            let chunk =
                chunk.map_err(|e| EngineError(format!("the engine's stream broke: {e}")))?;
            buffer.extend_from_slice(&chunk);
            while let Some(pos) = buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=pos).collect();
                let line = String::from_utf8_lossy(&line);
                match parse_sse_line(line.trim_end_matches(['\r', '\n']))? {
                    SseLine::Content(piece, finish) => {
                        if out.send(EngineEvent::Text(piece)).await.is_err() {
                            return Ok(Finish::Complete);
                        }
                        finished = finished.or(finish);
                    }
                    SseLine::Finished(finish) => finished = Some(finish),
                    SseLine::Done => return Ok(finished.unwrap_or(Finish::Complete)),
                    SseLine::Other => {}
                }
            }
        }
        if let Some(finish) = finished {
            Ok(finish)
        } else {
            Err(EngineError(
                "the engine closed the stream before the reply was complete".into(),
            ))
        }
    }
}

/// One line of the SSE stream, interpreted.
#[derive(Debug, PartialEq, Eq)]
pub enum SseLine {
    /// A piece of the reply, and the chunk's `finish_reason` when it carries one too.
    Content(String, Option<Finish>),
    /// A chunk carrying a `finish_reason` (`length` is a cut; any other, the model's end).
    Finished(Finish),
    /// `data: [DONE]`.
    Done,
    /// Comments, empty lines, other fields, role-only chunks.
    Other,
}

pub fn parse_sse_line(line: &str) -> Result<SseLine, EngineError> {
    let Some(data) = line.strip_prefix("data:") else {
        return Ok(SseLine::Other);
    };
    let data = data.trim();
    if data == "[DONE]" {
        return Ok(SseLine::Done);
    }
    let value: Value = serde_json::from_str(data)
        .map_err(|e| EngineError(format!("the engine sent a malformed event: {e}")))?;
    if let Some(err) = value.get("error") {
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| err.to_string());
        return Err(EngineError(format!(
            "the engine reported an error: {message}"
        )));
    }
    let choice = value.get("choices").and_then(|c| c.get(0));
    let finish = choice
        .and_then(|c| c.get("finish_reason"))
        .filter(|r| !r.is_null())
        .map(|r| match r.as_str() {
            Some("length") => Finish::Length {
                tokens: value
                    .pointer("/usage/completion_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            },
            _ => Finish::Complete,
        });
    if let Some(content) = choice
        .and_then(|c| c.get("delta"))
        .and_then(|d| d.get("content"))
        .and_then(Value::as_str)
        && !content.is_empty()
    {
        return Ok(SseLine::Content(content.to_string(), finish));
    }
    Ok(finish.map_or(SseLine::Other, SseLine::Finished))
}

impl ReplyEngine for OpenAiEngine {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn reply<'a>(
        &'a self,
        request: ReplyRequest,
        out: mpsc::Sender<EngineEvent>,
    ) -> BoxFuture<'a, Result<Finish, EngineError>> {
        self.run(request, out).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_derived_from_the_base_url() {
        assert_eq!(
            completions_endpoint("http://127.0.0.1:11434").unwrap(),
            "http://127.0.0.1:11434/v1/chat/completions"
        );
        assert_eq!(
            completions_endpoint("http://h/v1/").unwrap(),
            "http://h/v1/chat/completions"
        );
        assert_eq!(
            completions_endpoint("http://h/v1/chat/completions").unwrap(),
            "http://h/v1/chat/completions"
        );
        assert!(completions_endpoint("ftp://h").is_err());
        assert!(completions_endpoint("not a url").is_err());
    }

    #[test]
    fn sse_lines_are_interpreted() {
        assert_eq!(
            parse_sse_line(r#"data: {"choices":[{"delta":{"content":"Hi"}}]}"#).unwrap(),
            SseLine::Content("Hi".into(), None)
        );
        assert_eq!(
            parse_sse_line(r#"data: {"choices":[{"delta":{},"finish_reason":"stop"}]}"#).unwrap(),
            SseLine::Finished(Finish::Complete)
        );
        assert_eq!(
            parse_sse_line(
                r#"data: {"choices":[{"delta":{},"finish_reason":"length"}],"usage":{"completion_tokens":7}}"#
            )
            .unwrap(),
            SseLine::Finished(Finish::Length { tokens: 7 })
        );
        assert_eq!(
            parse_sse_line(
                r#"data: {"choices":[{"delta":{"content":"end"},"finish_reason":"length"}]}"#
            )
            .unwrap(),
            SseLine::Content("end".into(), Some(Finish::Length { tokens: 0 }))
        );
        assert_eq!(parse_sse_line("data: [DONE]").unwrap(), SseLine::Done);
        assert_eq!(parse_sse_line(": keep-alive").unwrap(), SseLine::Other);
        assert!(parse_sse_line("data: {oops").is_err());
        assert!(parse_sse_line(r#"data: {"error":{"message":"model not found"}}"#).is_err());
    }
}
