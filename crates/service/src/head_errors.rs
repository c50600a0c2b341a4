//! The envelope on the answers hyper gives by itself.
//!
//! A request whose head hyper cannot parse never reaches axum: a URI over hyper's fixed
//! 65,534-byte limit (414), a head with more than 100 headers or over ~400 KB (431), a
//! malformed request line or header (400). Hyper then writes a bare
//! `HTTP/1.1 NNN …\r\nconnection: close\r\ncontent-length: 0\r\n…` and closes. The URI limit
//! is a constant inside hyper, so no builder setting moves it. `EnvelopedStream` wraps each
//! accepted connection and replaces exactly such a response (a 4xx head with `content-length:
//! 0` and `connection: close`, which the service's own handlers never produce: every error
//! they answer has a JSON body) with the same status carrying the `invalid_request` envelope
//! of docs/design.md, "HTTP". Everything else passes through untouched.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::connections::ConnectionSlot;

/// A connection whose bare parse-error answers from hyper are given the envelope. It holds its
/// place in the connection caps until it is dropped (after a WebSocket upgrade too).
pub struct EnvelopedStream {
    inner: TcpStream,
    /// A replacement answer still being written: bytes and how many are written, and the
    /// length of hyper's answer to report once it is all out.
    replacement: Option<(Vec<u8>, usize, usize)>,
    _slot: ConnectionSlot,
}

impl EnvelopedStream {
    pub fn new(inner: TcpStream, slot: ConnectionSlot) -> Self {
        EnvelopedStream {
            inner,
            replacement: None,
            _slot: slot,
        }
    }

    /// Writes the rest of the replacement; `Ready(Ok(n))` with hyper's length once done.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        while let Some((bytes, written, reported)) = &mut self.replacement {
            if *written == bytes.len() {
                let n = *reported;
                self.replacement = None;
                return Poll::Ready(Ok(n));
            }
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(0))
    }
}

/// The envelope answer replacing `head` when it is one of hyper's bare error answers.
pub fn replacement_for(head: &[u8]) -> Option<Vec<u8>> {
    let rest = head.strip_prefix(b"HTTP/1.1 4")?;
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")?;
    let lower = head[..end + 2].to_ascii_lowercase();
    let contains = |needle: &[u8]| lower.windows(needle.len()).any(|w| w == needle);
    if !contains(b"\r\ncontent-length: 0\r\n") || !contains(b"\r\nconnection: close\r\n") {
        return None;
    }
    let status: u16 = std::str::from_utf8(rest.get(..2)?).ok()?.parse().ok()?;
    let status = 400 + status;
    let message = match status {
        414 => {
            "the request URI is too long: the limit is 65,534 bytes (and 2 KiB for a query string)"
        }
        431 => "the request head is too large: at most 100 headers and about 400 KB are accepted",
        _ => "the request is not valid HTTP/1.1",
    };
    let reason = axum::http::StatusCode::from_u16(status)
        .ok()?
        .canonical_reason()
        .unwrap_or("Client Error");
    let body = serde_json::to_string(&convo_wire::ErrorEnvelope {
        error: convo_wire::ErrorBody::new("invalid_request", message),
    })
    .ok()?;
    Some(
        format!(
            "HTTP/1.1 {status} {reason}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl AsyncRead for EnvelopedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for EnvelopedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.replacement.is_none()
            && let Some(bytes) = replacement_for(buf)
        {
            this.replacement = Some((bytes, 0, buf.len()));
        }
        if this.replacement.is_some() {
            return this.poll_replacement(cx);
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.replacement.is_none()
            && let Some(first) = bufs.iter().find(|b| !b.is_empty())
            && let Some(bytes) = replacement_for(first)
        {
            // Hyper's bare answer is a head alone: report that slice as written.
            this.replacement = Some((bytes, 0, first.len()));
        }
        if this.replacement.is_some() {
            return this.poll_replacement(cx);
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.replacement.is_some() {
            ready!(self.poll_replacement(cx))?;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.replacement.is_some() {
            ready!(self.poll_replacement(cx))?;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::replacement_for;

    fn body_of(answer: &[u8]) -> serde_json::Value {
        let text = String::from_utf8(answer.to_vec()).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(length, body.len());
        serde_json::from_str(body).unwrap()
    }

    #[test]
    fn hyper_bare_errors_get_the_envelope_with_their_status() {
        for (status, bare) in [
            (
                "414 URI Too Long",
                "HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\ndate: Sun, 22 Nov 2026 03:54:18 GMT\r\n\r\n",
            ),
            (
                "431 Request Header Fields Too Large",
                "HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Sun, 22 Nov 2026 03:54:18 GMT\r\n\r\n",
            ),
            (
                "400 Bad Request",
                "HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: Sun, 22 Nov 2026 03:54:18 GMT\r\n\r\n",
            ),
        ] {
            let answer = replacement_for(bare.as_bytes()).expect("replaced");
            assert!(
                answer.starts_with(format!("HTTP/1.1 {status}\r\n").as_bytes()),
                "{}",
                String::from_utf8_lossy(&answer)
            );
            assert_eq!(body_of(&answer)["error"]["code"], "invalid_request");
        }
    }

    #[test]
    fn the_service_own_answers_pass_untouched() {
        for head in [
            // An envelope error of a handler: it has a body.
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 60\r\n\r\n",
            // A success, an empty keep-alive answer, a 5xx, a body chunk.
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 500 Internal Server Error\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
            "{\"error\":{\"code\":\"x\"}}",
            "HTTP/1.1 414",
        ] {
            assert_eq!(replacement_for(head.as_bytes()), None, "{head}");
        }
    }
}
