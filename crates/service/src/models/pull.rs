//! `convo model pull`: one GGUF file from a Hugging Face repository, over the project's own
//! reqwest client (docs/models.md says why not the `hf-hub` crate).
//!
//! The protocol: `HEAD {endpoint}/{owner}/{repo}/resolve/{revision}/{file}` without following
//! redirects. For a file stored in LFS the hub answers 302 to its CDN with `x-linked-etag`
//! (the SHA-256 of the content, quoted) and `x-linked-size`; a mirror may answer 200 with the
//! same value in `etag`. The content is then fetched from the redirect target into
//! `<models dir>/.<name>.gguf.part`, continued with `Range: bytes=N-` when a partial file is
//! there, its SHA-256 compared with the hub's, its GGUF header checked, and it is renamed into
//! place.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap};
use sha2::{Digest, Sha256};
use url::Url;

use super::{InstalledModel, ModelError, install_part, name_for, part_path, verify_gguf};

/// The hub when `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// A file in a Hugging Face model repository: `OWNER/REPO/FILE.gguf` (FILE may have folders).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HfFile {
    /// `owner/repo`.
    pub repo: String,
    /// The file's path inside the repository.
    pub file: String,
}

impl HfFile {
    pub fn parse(spec: &str) -> Result<HfFile, ModelError> {
        let bad = || ModelError::BadSpec {
            spec: spec.to_string(),
        };
        let parts: Vec<&str> = spec.split('/').collect();
        if parts.len() < 3
            || parts
                .iter()
                .any(|p| p.is_empty() || *p == "." || *p == ".." || p.chars().any(char::is_control))
            || !spec.ends_with(".gguf")
        {
            return Err(bad());
        }
        Ok(HfFile {
            repo: format!("{}/{}", parts[0], parts[1]),
            file: parts[2..].join("/"),
        })
    }

    /// The file's name without folders.
    pub fn file_name(&self) -> &str {
        self.file.rsplit('/').next().unwrap_or(&self.file)
    }

    /// `{endpoint}/{owner}/{repo}/resolve/{revision}/{file}`, each segment escaped (a
    /// revision such as `refs/pr/1` is one segment).
    pub fn resolve_url(&self, endpoint: &Url, revision: &str) -> Result<Url, ModelError> {
        let mut url = endpoint.clone();
        {
            let mut segments = url.path_segments_mut().map_err(|()| ModelError::BadSpec {
                spec: endpoint.to_string(),
            })?;
            segments.pop_if_empty();
            segments.extend(self.repo.split('/'));
            segments.push("resolve");
            segments.push(revision);
            segments.extend(self.file.split('/'));
        }
        Ok(url)
    }
}

/// Where and how to pull from.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// The hub: `HF_ENDPOINT`, else `https://huggingface.co`.
    pub endpoint: Url,
    /// A Hugging Face access token (`HF_TOKEN`), for gated and private repositories.
    pub token: Option<String>,
    /// A branch, tag or commit; `main` by default.
    pub revision: String,
    /// The name to install under; the file's stem by default.
    pub name: Option<String>,
    /// The SHA-256 the file must have (the catalogue's); the hub's must agree. Without one,
    /// the hub's is the one checked.
    pub sha256: Option<String>,
}

impl PullOptions {
    /// Options from `HF_ENDPOINT` and `HF_TOKEN`, on `main`.
    pub fn from_env() -> Result<PullOptions, ModelError> {
        let endpoint = std::env::var("HF_ENDPOINT")
            .ok()
            .filter(|e| !e.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let endpoint = Url::parse(endpoint.trim()).map_err(|e| ModelError::BadSpec {
            spec: format!("HF_ENDPOINT={endpoint} ({e})"),
        })?;
        let token = std::env::var("HF_TOKEN")
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        Ok(PullOptions {
            endpoint,
            token,
            revision: "main".to_string(),
            name: None,
            sha256: None,
        })
    }
}

/// How far a pull is, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes in the partial file so far.
    pub done: u64,
    /// The file's size, when the hub says it.
    pub total: Option<u64>,
    /// Bytes that were already there from an earlier, interrupted pull.
    pub resumed_from: u64,
}

/// What the hub says of the file before it is downloaded.
struct Head {
    /// Where the content is (the redirect target, or the resolve URL itself).
    content: Url,
    /// The hub's SHA-256 of the file, when it gives one.
    sha256: Option<String>,
    size: Option<u64>,
}

/// Downloads `file` into `dir` and installs it (see the module's doc). `progress` is called
/// as bytes arrive. An interrupted pull leaves its partial file; the same pull continues it.
pub async fn pull(
    dir: &Path,
    file: &HfFile,
    options: &PullOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<InstalledModel, ModelError> {
    let name = name_for(Path::new(file.file_name()), options.name.as_deref())?;
    super::refuse_existing(dir, &name)?;
    fs::create_dir_all(dir).map_err(|e| ModelError::io(dir, e))?;

    let client = reqwest::Client::builder()
        .user_agent(concat!("convo/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(20))
        .read_timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::limited(10))
        .build()
        .map_err(|e| ModelError::Network {
            url: options.endpoint.to_string(),
            message: format!("cannot build an HTTP client: {e}"),
        })?;
    let resolve = file.resolve_url(&options.endpoint, &options.revision)?;
    let head = head(&resolve, options).await?;
    let expected = expected_sha256(&resolve, head.sha256.as_deref(), options.sha256.as_deref())?;

    let part = part_path(dir, &name);
    download(&client, &head, &resolve, options, &part, progress).await?;

    let hashed = part.clone();
    let actual = tokio::task::spawn_blocking(move || sha256_file(&hashed))
        .await
        .map_err(|e| ModelError::io(&part, io::Error::other(e)))??;
    if actual != expected {
        let _ = fs::remove_file(&part);
        return Err(ModelError::Checksum {
            url: resolve.to_string(),
            expected,
            actual,
            part,
        });
    }
    if let Err(e) = verify_gguf(&part) {
        let _ = fs::remove_file(&part);
        return Err(e);
    }
    install_part(dir, &part, &name)
}

/// The SHA-256 the download must have: the catalogue's (`wanted`), which the hub's must equal
/// when it gives one, else the hub's; a file with neither cannot be verified and is refused.
fn expected_sha256(
    resolve: &Url,
    hub: Option<&str>,
    wanted: Option<&str>,
) -> Result<String, ModelError> {
    match (hub, wanted.map(str::to_ascii_lowercase)) {
        (Some(hub), Some(wanted)) if hub != wanted => Err(ModelError::Protocol {
            url: resolve.to_string(),
            message: format!(
                "the hub's file has SHA-256 {hub}, the catalogue's has {wanted}: it is not the catalogue's model, so nothing is downloaded"
            ),
        }),
        (_, Some(wanted)) => Ok(wanted),
        (Some(hub), None) => Ok(hub.to_string()),
        (None, None) => Err(ModelError::Protocol {
            url: resolve.to_string(),
            message: "the hub gives no SHA-256 for this file (no x-linked-etag: it is not an LFS file), so it cannot be verified".to_string(),
        }),
    }
}

/// The bearer token goes only to the hub itself, never to the CDN it redirects to.
fn authorize(
    request: reqwest::RequestBuilder,
    url: &Url,
    options: &PullOptions,
) -> reqwest::RequestBuilder {
    match &options.token {
        Some(t) if url.origin() == options.endpoint.origin() => request.bearer_auth(t),
        _ => request,
    }
}

fn network(url: &Url, e: reqwest::Error) -> ModelError {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    ModelError::Network {
        url: url.to_string(),
        message,
    }
}

fn http_error(url: &Url, status: StatusCode) -> ModelError {
    let hint = match status.as_u16() {
        401 | 403 => " (a gated or private repository needs HF_TOKEN with access to it)",
        404 => " (no such repository, revision or file)",
        _ => "",
    };
    ModelError::Http {
        url: url.to_string(),
        status: status.as_u16(),
        hint,
    }
}

/// A SHA-256 in hex, from an ETag value: quotes and a weak `W/` prefix removed.
fn sha256_etag(value: &str) -> Option<String> {
    let v = value.trim();
    let v = v.strip_prefix("W/").unwrap_or(v).trim_matches('"');
    (v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit())).then(|| v.to_ascii_lowercase())
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// HEAD the resolve URL, without following its redirect, for the checksum and size.
async fn head(resolve: &Url, options: &PullOptions) -> Result<Head, ModelError> {
    let client = reqwest::Client::builder()
        .user_agent(concat!("convo/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(20))
        .timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| network(resolve, e))?;
    let response = authorize(client.head(resolve.clone()), resolve, options)
        .header(header::ACCEPT_ENCODING, "identity")
        .send()
        .await
        .map_err(|e| network(resolve, e))?;
    let status = response.status();
    let headers = response.headers();
    let content = if status.is_redirection() {
        let location = header_str(headers, "location").ok_or_else(|| ModelError::Protocol {
            url: resolve.to_string(),
            message: format!("HTTP {} without a Location", status.as_u16()),
        })?;
        resolve.join(location).map_err(|e| ModelError::Protocol {
            url: resolve.to_string(),
            message: format!("bad Location `{location}`: {e}"),
        })?
    } else if status.is_success() {
        resolve.clone()
    } else {
        return Err(http_error(resolve, status));
    };
    let sha256 = header_str(headers, "x-linked-etag")
        .and_then(sha256_etag)
        .or_else(|| header_str(headers, "etag").and_then(sha256_etag));
    let size = header_str(headers, "x-linked-size")
        .and_then(|s| s.trim().parse().ok())
        .or_else(|| {
            status
                .is_success()
                .then(|| header_str(headers, "content-length"))
                .flatten()
                .and_then(|s| s.trim().parse().ok())
        });
    Ok(Head {
        content,
        sha256,
        size,
    })
}

/// The first byte of a `Content-Range: bytes START-END/TOTAL`.
fn content_range_start(headers: &HeaderMap) -> Option<u64> {
    let v = header_str(headers, "content-range")?.trim();
    let range = v.strip_prefix("bytes ")?;
    range.split('-').next()?.trim().parse().ok()
}

/// Fills `part` with the content, continuing what is already there.
async fn download(
    client: &reqwest::Client,
    head: &Head,
    resolve: &Url,
    options: &PullOptions,
    part: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), ModelError> {
    let url = &head.content;
    let mut have = match fs::metadata(part) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(ModelError::io(part, e)),
    };
    if let Some(size) = head.size {
        if have == size {
            // Complete already (interrupted before the checks): verify it as it is.
            progress(Progress {
                done: have,
                total: head.size,
                resumed_from: have,
            });
            return Ok(());
        }
        if have > size {
            have = 0;
        }
    }
    let mut request = authorize(client.get(url.clone()), url, options)
        .header(header::ACCEPT_ENCODING, "identity");
    if have > 0 {
        request = request.header(header::RANGE, format!("bytes={have}-"));
    }
    let mut response = request.send().await.map_err(|e| network(url, e))?;
    let status = response.status();
    let append = match status {
        StatusCode::PARTIAL_CONTENT if have > 0 => {
            if content_range_start(response.headers()) != Some(have) {
                return Err(ModelError::Protocol {
                    url: url.to_string(),
                    message: format!("asked for bytes from {have}, got another range"),
                });
            }
            true
        }
        // The server ignored the range: start again.
        StatusCode::OK => false,
        // The partial file is longer than the content: start again, from a clean file.
        StatusCode::RANGE_NOT_SATISFIABLE => {
            let _ = fs::remove_file(part);
            return Box::pin(download(client, head, resolve, options, part, progress)).await;
        }
        s => return Err(http_error(url, s)),
    };
    let resumed_from = if append { have } else { 0 };
    let mut out = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(part)
        .map_err(|e| ModelError::io(part, e))?;
    let mut done = resumed_from;
    progress(Progress {
        done,
        total: head.size,
        resumed_from,
    });
    let interrupted = |e: reqwest::Error, done: u64| {
        let mut err = network(url, e);
        if let ModelError::Network { message, .. } = &mut err {
            message.push_str(&format!(
                " (the download stopped at {done} bytes; run the same command again to continue it)"
            ));
        }
        err
    };
    while let Some(chunk) = response.chunk().await.map_err(|e| interrupted(e, done))? {
        out.write_all(&chunk).map_err(|e| ModelError::io(part, e))?;
        done += chunk.len() as u64;
        progress(Progress {
            done,
            total: head.size,
            resumed_from,
        });
    }
    out.flush().map_err(|e| ModelError::io(part, e))?;
    drop(out);
    match head.size {
        Some(size) if done < size => Err(ModelError::Protocol {
            url: url.to_string(),
            message: format!(
                "the download ended at {done} of {size} bytes; run the same command again to continue it"
            ),
        }),
        Some(size) if done > size => {
            let _ = fs::remove_file(part);
            Err(ModelError::Protocol {
                url: resolve.to_string(),
                message: format!(
                    "the download has {done} bytes, the hub said {size}; the partial file is deleted"
                ),
            })
        }
        _ => Ok(()),
    }
}

/// The SHA-256 of a file, in lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let mut file = fs::File::open(path).map_err(|e| ModelError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ModelError::io(path, e)),
        }
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
