//! `convo serve` (the local service alone) and `convo token` (mint a wallet JWT).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use super::config::{
    ConnectionLimits, DEFAULT_MAX_CONTEXT_TOKENS, DbLocation, EngineConfig, LocalOptions,
    ServiceConfig, Tier, is_valid_api_key, redact_key,
};
use super::engine::LoadState;
use convo_wire::exit;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineKind {
    /// The local model when one is installed (or --model names one), else builtin.
    Auto,
    /// Offline, deterministic replies built from the conversation.
    Builtin,
    /// A GGUF model run in-process by llama.cpp (--model; scripts/fetch-model.sh installs one).
    Local,
    /// An OpenAI-compatible /v1/chat/completions server (llama.cpp, Ollama, vLLM).
    Openai,
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub addr: String,
    /// Where everything is stored: a SQLite file, `:memory:`, or a PostgreSQL database
    /// (`postgres://USER@HOST:PORT/DB`), which any number of replicas can share (docs/deploy.md).
    /// Default: service.db in the platform data dir.
    #[arg(
        long,
        value_name = "PATH|URL",
        env = "CONVO_SERVE_DB",
        hide_env_values = true
    )]
    pub db: Option<String>,
    /// Accepted API key, `service_live_…` with an optional `=free|pro|enterprise` (default pro).
    /// Repeatable. Without one, a key is generated and printed once to stderr; on a SQLite file
    /// it is kept beside the database (`NAME.key`; the data dir's `service.db`:
    /// `local-service.key`) and used again at the next start (the client's `CONVO_API_KEY` is
    /// not read here).
    // The id `api_keys` is shared with the global client flag `--api-key` (config.rs), so that
    // clap does not define `--api-key` twice in `serve`.
    #[arg(
        long = "api-key",
        value_name = "KEY[=TIER]",
        env = "CONVO_SERVE_API_KEYS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub api_keys: Vec<String>,
    /// HS256 secret of the wallet endpoint's JWTs. Without one, a secret is generated and
    /// printed once to stderr.
    #[arg(long, env = "CONVO_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,
    /// The operator's key: `service_admin_` and at least 32 letters or digits. It alone opens
    /// the operator's endpoints (`/v1/admin/…`) and `/metrics`, and is refused everywhere
    /// else. Without one those endpoints are off. Generate one with `convo serve
    /// --new-admin-key`.
    #[arg(
        long,
        value_name = "KEY",
        env = "CONVO_SERVE_ADMIN_KEY",
        hide_env_values = true
    )]
    pub admin_key: Option<String>,
    /// A second address serving only `/metrics`, with no credential asked: for a Prometheus on
    /// a private network (it names every account's usage: never expose it). `/metrics` on
    /// --addr still takes the admin key.
    #[arg(
        long,
        value_name = "ADDR",
        env = "CONVO_SERVE_METRICS_ADDR",
        hide_env_values = true
    )]
    pub metrics_addr: Option<String>,
    /// Print a fresh admin key to stdout and exit.
    #[arg(long)]
    pub new_admin_key: bool,
    /// Seconds of clock skew allowed on a wallet JWT's `exp` and `nbf` (0: a token is expired
    /// from the second its `exp` names).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub jwt_leeway: u64,
    /// Seconds a connection has to send a whole request head, counted from when it starts
    /// waiting for one: when it opens, and after each answer (so also the idle keep-alive
    /// timeout). Past it the connection is closed.
    #[arg(long, value_name = "SECS", default_value_t = ConnectionLimits::DEFAULT_HEADER_READ_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout: u64,
    /// Seconds a request's body has to arrive whole after its head; past it the answer is 408
    /// `request_timeout`. WebSocket streams are not concerned.
    #[arg(long, value_name = "SECS", default_value_t = ConnectionLimits::DEFAULT_BODY_READ_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub body_read_timeout: u64,
    /// Open connections (WebSocket streams included) past which new ones are refused with 503
    /// `too_many_connections`; lowered at start to what the open-file limit leaves.
    #[arg(long, value_name = "N", default_value_t = ConnectionLimits::DEFAULT_MAX_CONNECTIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,
    /// Open connections from one client address past which its new ones are refused with 503
    /// (0: no cap per address; behind a load balancer, all come from its address).
    #[arg(long, value_name = "N", default_value_t = ConnectionLimits::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS)]
    pub max_connections_per_address: usize,
    /// Reply engine; `auto` runs the default installed model, or builtin when there is none.
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: EngineKind,
    /// The local engine's model: a name from `convo model list`, or a path to a GGUF file.
    /// Default: the default installed model.
    #[arg(long, value_name = "NAME|PATH")]
    pub model: Option<String>,
    /// The most tokens one reply of the local engine may have. Default: 2048. A reply also
    /// ends where the context window is full (cut by either, it ends with
    /// `finishReason: "length"`; the TUI's /continue asks for the rest).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_reply_tokens: Option<u32>,
    /// Disk the local engine may use for sessions' saved KV state (`<data dir>/kv`, kept
    /// across restarts; least recently used first out), in MB; 0 saves nothing. Nothing is
    /// saved with `--db :memory:`.
    #[arg(long, value_name = "MB", default_value_t = LocalOptions::DEFAULT_KV_DISK_BYTES >> 20)]
    pub model_kv_disk_mb: u64,
    /// KV cache of the local engine, in model tokens, shared by all sessions (about 23 KB each
    /// for SmolLM2-135M). A session's window is the smaller of this and the model's own.
    #[arg(long, default_value_t = LocalOptions::DEFAULT_KV_TOKENS, value_parser = clap::value_parser!(u32).range(256..))]
    pub model_kv_tokens: u32,
    /// Sessions whose state the local engine keeps between turns, and replies it computes at
    /// once (more wait their turn).
    #[arg(long, default_value_t = LocalOptions::DEFAULT_SESSIONS, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub model_sessions: u32,
    /// Sampling temperature of the local engine (0: always the most likely token).
    #[arg(long, default_value_t = LocalOptions::DEFAULT_TEMPERATURE, value_parser = parse_temperature)]
    pub temperature: f32,
    /// Top-p of the local engine's sampling: draw from the likeliest tokens holding this much
    /// of the probability (1: all).
    #[arg(long, default_value_t = LocalOptions::DEFAULT_TOP_P, value_parser = parse_top_p)]
    pub top_p: f32,
    /// Seed of the local engine's sampling, to make replies repeatable. Default: a fresh seed
    /// for every reply (asking again gets another answer).
    #[arg(long, value_name = "N")]
    pub seed: Option<u32>,
    /// CPU threads of the local engine (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub model_threads: u32,
    /// Base URL of the OpenAI-compatible server (with --engine openai).
    #[arg(long, default_value = "http://127.0.0.1:11434")]
    pub engine_url: String,
    /// Model name sent to the OpenAI-compatible server.
    #[arg(long, default_value = "llama3.2")]
    pub engine_model: String,
    /// Bearer key for the OpenAI-compatible server, if it needs one.
    #[arg(long, env = "CONVO_ENGINE_API_KEY", hide_env_values = true)]
    pub engine_api_key: Option<String>,
    /// Milliseconds between words of the builtin engine's streamed replies.
    #[arg(long, default_value_t = 15)]
    pub engine_pace_ms: u64,
    /// Context window of a session, in o200k tokens. With --engine local, a model whose own
    /// window is smaller lowers it to that.
    #[arg(long, default_value_t = DEFAULT_MAX_CONTEXT_TOKENS)]
    pub max_context_tokens: u64,
}

#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// The service's JWT secret (`convo serve --jwt-secret`).
    #[arg(long, env = "CONVO_JWT_SECRET", hide_env_values = true)]
    pub secret: String,
    /// Subject of the token (who it is for).
    #[arg(long)]
    pub sub: String,
    /// Lifetime in seconds.
    #[arg(long, default_value_t = 3600)]
    pub ttl: u64,
}

fn parse_temperature(arg: &str) -> Result<f32, String> {
    let t: f32 = arg.parse().map_err(|e| format!("`{arg}`: {e}"))?;
    convo_wire::engine::sampling::check_temperature(t)
}

fn parse_top_p(arg: &str) -> Result<f32, String> {
    let p: f32 = arg.parse().map_err(|e| format!("`{arg}`: {e}"))?;
    convo_wire::engine::sampling::check_top_p(p)
}

/// Parses `KEY[=TIER]`.
pub fn parse_key_arg(arg: &str) -> Result<(String, Tier), String> {
    let (key, tier) = match arg.split_once('=') {
        Some((key, tier)) => (key, tier.parse::<Tier>()?),
        None => (arg, Tier::Pro),
    };
    if !is_valid_api_key(key) {
        return Err(format!(
            "API key {} is not `service_live_` followed by at least 16 of [A-Za-z0-9]",
            redact_key(key)
        ));
    }
    Ok((key.to_string(), tier))
}

/// `service.db` in the data dir, which is made when missing.
fn default_db_path(data_dir: Option<&std::path::Path>) -> Result<PathBuf, String> {
    let dir = data_dir.ok_or("cannot find the platform data directory; pass --db PATH")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir.join("service.db"))
}

/// The key of a service given none, and what to say about it. On a SQLite file it is kept
/// beside the database (`config::key_file_for`, `kept_api_key`), so that a restart serves the
/// same account: printed whole when it is made, named by its file afterwards. On PostgreSQL
/// (whose replicas must share their keys, `docs/deploy.md`) or in memory it is made for this
/// run only.
fn generated_key(db: &DbLocation) -> Result<(String, String), String> {
    let DbLocation::File(path) = db else {
        let key = super::generate_api_key();
        let said = format!("API key (pro, shown only now): {key}");
        return Ok((key, said));
    };
    let file = crate::config::key_file_for(path);
    let (key, made) = keep(&file, crate::config::kept_api_key, "key")?;
    let said = if made {
        format!(
            "API key (pro, kept in {} for the next starts): {key}",
            file.display()
        )
    } else {
        format!(
            "API key (pro): the one kept in {} ({})",
            file.display(),
            redact_key(&key)
        )
    };
    Ok((key, said))
}

/// The secret kept in `file` by `kept` (`config::kept_api_key`, `kept_jwt_secret`), and
/// whether it was made now; the error as the start prints it.
fn keep(
    file: &std::path::Path,
    kept: fn(&std::path::Path) -> std::io::Result<(String, bool)>,
    what: &str,
) -> Result<(String, bool), String> {
    kept(file).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => e.to_string(),
        _ => format!(
            "cannot keep the generated {what} in {}: {e}",
            file.display()
        ),
    })
}

/// The JWT secret of a service given none, and what to say about it: kept beside a SQLite
/// file as its key is ([`generated_key`]; `config::jwt_secret_file_for`, `kept_jwt_secret`),
/// so that wallet tokens signed with it stay valid across restarts; for this run only on
/// PostgreSQL (replicas must share one: `--jwt-secret`) and in memory.
fn generated_jwt_secret(db: &DbLocation) -> Result<(String, String), String> {
    let DbLocation::File(path) = db else {
        let secret = super::ids::random_alnum(48);
        let said = format!("JWT secret (for `convo token --secret`, shown only now): {secret}");
        return Ok((secret, said));
    };
    let file = crate::config::jwt_secret_file_for(path);
    let (secret, made) = keep(&file, crate::config::kept_jwt_secret, "JWT secret")?;
    let f = file.display();
    let said = format!(
        "JWT secret: {} {f} (`convo token --secret \"$(cat {f})\" --sub NAME` mints a wallet token)",
        if made {
            "made and kept in"
        } else {
            "the one kept in"
        }
    );
    Ok((secret, said))
}

/// The service configuration of `args`, and the lines to print once it has started: the
/// secrets that were generated, and which engine answers (what `auto` chose, and why).
fn config_from_args(
    args: &ServeArgs,
    data_dir: Option<&std::path::Path>,
) -> Result<(ServiceConfig, Vec<String>), String> {
    let mut generated = Vec::new();
    let mut api_keys = args
        .api_keys
        .iter()
        .map(String::as_str)
        .filter(|k| !k.is_empty())
        .map(parse_key_arg)
        .collect::<Result<Vec<_>, _>>()?;
    let db = match args.db.as_deref() {
        Some("") => return Err("--db must not be empty".into()),
        Some(arg) => DbLocation::parse(arg),
        None => DbLocation::File(default_db_path(data_dir)?),
    };
    let jwt_secret = match &args.jwt_secret {
        Some(s) if s.is_empty() => return Err("--jwt-secret must not be empty".into()),
        Some(s) => s.clone(),
        None => {
            let (secret, said) = generated_jwt_secret(&db)?;
            generated.push(said);
            secret
        }
    };
    if api_keys.is_empty() {
        let (key, said) = generated_key(&db)?;
        generated.insert(0, said);
        api_keys.push((key, Tier::Pro));
    }
    // Saved KV state outlives the process only for sessions that do.
    let kv_dir = match db {
        DbLocation::Memory => None,
        _ => data_dir.map(|d| d.join("kv")),
    };
    let (engine, engine_notes) = engine_from_args(args, data_dir, kv_dir)?;
    generated.extend(engine_notes);
    Ok((
        ServiceConfig {
            db,
            api_keys,
            jwt_secret,
            jwt_leeway_secs: args.jwt_leeway,
            connections: ConnectionLimits {
                header_read_timeout: std::time::Duration::from_secs(args.header_read_timeout),
                body_read_timeout: std::time::Duration::from_secs(args.body_read_timeout),
                max_connections: args.max_connections,
                max_connections_per_address: args.max_connections_per_address,
            },
            engine,
            max_context_tokens: args.max_context_tokens,
            warm_token_counter: true,
            admin_key: match args.admin_key.as_deref() {
                Some("") => return Err("--admin-key must not be empty".into()),
                Some(key) => Some(key.to_string()),
                None => None,
            },
        },
        generated,
    ))
}

/// The engine `args` ask for, and what to say about it: which engine `auto` chose and why,
/// how to get a model, and a better model than the tiny default when one fits.
fn engine_from_args(
    args: &ServeArgs,
    data_dir: Option<&std::path::Path>,
    kv_dir: Option<PathBuf>,
) -> Result<(EngineConfig, Vec<String>), String> {
    let builtin = EngineConfig::Builtin {
        pace_ms: args.engine_pace_ms,
    };
    let local = |path: PathBuf| {
        let config = EngineConfig::Local(LocalOptions {
            max_reply_tokens: args.max_reply_tokens,
            kv_tokens: args.model_kv_tokens,
            sessions: args.model_sessions,
            temperature: args.temperature,
            top_p: args.top_p,
            seed: args.seed,
            threads: args.model_threads,
            kv_dir: kv_dir.clone().filter(|_| args.model_kv_disk_mb > 0),
            kv_disk_bytes: args.model_kv_disk_mb << 20,
            ..LocalOptions::new(path)
        });
        let hint = super::engine::better_model_hint(&config);
        (config, hint.into_iter().collect::<Vec<_>>())
    };
    match args.engine {
        EngineKind::Builtin => Ok((builtin, Vec::new())),
        EngineKind::Openai => Ok((
            EngineConfig::OpenAi {
                url: args.engine_url.clone(),
                model: args.engine_model.clone(),
                api_key: args.engine_api_key.clone(),
            },
            Vec::new(),
        )),
        EngineKind::Local => {
            if !cfg!(feature = "local-model") {
                return Err(super::engine::WITHOUT_LOCAL_MODELS.into());
            }
            Ok(local(resolve_model(args.model.as_deref(), data_dir)?))
        }
        EngineKind::Auto => {
            let dir = data_dir.map(crate::models::models_dir);
            match super::engine::auto_model(dir.as_deref(), args.model.as_deref())? {
                Some(path) => {
                    let (config, mut notes) = local(path.clone());
                    notes.insert(
                        0,
                        format!(
                            "engine local · {} (--engine auto: the default installed model)",
                            super::engine::local_options::model_name(&path)
                        ),
                    );
                    Ok((config, notes))
                }
                None if !super::engine::LOCAL_MODELS => Ok((
                    builtin,
                    vec![
                        "engine builtin (--engine auto: this convo was built without local models; canned replies)".into(),
                    ],
                )),
                None => Ok((
                    builtin,
                    vec![format!(
                        "engine builtin (--engine auto: no model installed, so replies are canned); {}",
                        crate::models::HOW_TO_GET
                    )],
                )),
            }
        }
    }
}

/// The GGUF file `--model` names: a path, or a model installed in the data dir's `models/`
/// (`convo model list`); without one, the default model. Its header is checked here, so a
/// missing or foreign file is a usage error before anything starts.
fn resolve_model(arg: Option<&str>, data_dir: Option<&std::path::Path>) -> Result<PathBuf, String> {
    let data_dir = data_dir.ok_or("cannot find the data dir for the models; pass --model PATH")?;
    crate::models::resolve(&crate::models::models_dir(data_dir), arg, None)
        .map_err(|e| e.to_string())
}

/// The address `addr` of the flag `flag` (`--addr`, `--metrics-addr`) names.
async fn resolve(flag: &str, addr: &str) -> Result<SocketAddr, String> {
    tokio::net::lookup_host(addr)
        .await
        .map_err(|e| format!("{flag} `{addr}`: {e}"))?
        .next()
        .ok_or_else(|| format!("{flag} `{addr}` resolves to no address"))
}

/// `--metrics-addr` bound (before the service starts, so that a bad one stops nothing).
async fn bind_metrics(addr: Option<&str>) -> Result<Option<tokio::net::TcpListener>, String> {
    let Some(arg) = addr else {
        return Ok(None);
    };
    let addr = resolve("--metrics-addr", arg).await?;
    super::bind(addr)
        .map(Some)
        .map_err(|e| format!("--metrics-addr `{arg}`: cannot listen on {addr}: {e}"))
}

/// Logs to stderr from a thread of its own, which writes the lines waiting in one batch: a
/// request's log line costs the async workers no `write`, and a stderr that blocks (a paused
/// terminal, a full pipe) cannot stall requests. Past 128,000 lines waiting, lines are
/// dropped rather than requests held (and counted: `Logging::report_dropped`). The guard
/// writes what is left when dropped.
fn init_logging() -> Option<Logging> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("convo=info,warn"));
    let (writer, guard) =
        tracing_appender::non_blocking(std::io::BufWriter::new(std::io::stderr()));
    let dropped = writer.error_counter();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(writer)
        .finish()
        .with(crate::engine::log_filter())
        .try_init()
        .ok()
        .map(|()| Logging {
            _guard: guard,
            dropped,
        })
}

/// The log's writer thread, for as long as the service runs.
struct Logging {
    _guard: tracing_appender::non_blocking::WorkerGuard,
    dropped: tracing_appender::non_blocking::ErrorCounter,
}

impl Logging {
    /// Says, through the log itself, how many lines were dropped because its reader fell
    /// behind (nothing when none were).
    fn report_dropped(&self) {
        let dropped = self.dropped.dropped_lines();
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "log lines were dropped: stderr was not read fast enough"
            );
        }
    }
}

/// SIGINT and SIGTERM, registered when made: a signal that arrives after the service says it
/// listens always stops it gracefully, however soon it comes.
struct ShutdownSignal {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl ShutdownSignal {
    fn register() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            ShutdownSignal {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        ShutdownSignal {}
    }

    async fn recv(mut self) {
        #[cfg(unix)]
        {
            async fn one(s: Option<&mut tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                _ = one(self.term.as_mut()) => {}
                _ = one(self.int.as_mut()) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

pub async fn serve(args: ServeArgs, data_dir: Option<PathBuf>) -> ExitCode {
    if args.new_admin_key {
        println!("{}", super::generate_admin_key());
        return ExitCode::SUCCESS;
    }
    let stop = ShutdownSignal::register();
    let log = init_logging();
    let (config, generated) = match config_from_args(&args, data_dir.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("convo serve: {e}");
            return ExitCode::from(exit::USAGE_ERROR);
        }
    };
    let addr = match resolve("--addr", &args.addr).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("convo serve: {e}");
            return ExitCode::from(exit::USAGE_ERROR);
        }
    };
    let metrics_listener = match bind_metrics(args.metrics_addr.as_deref()).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("convo serve: {e}");
            return ExitCode::from(exit::USAGE_ERROR);
        }
    };
    let service = match super::start(config, addr).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("convo serve: {e}");
            return ExitCode::from(exit::USAGE_ERROR);
        }
    };
    // A local model loads before the service says it listens: a broken file is an error here,
    // not at the first message.
    let mut load = service.engine_load();
    let loaded = load
        .wait_for(|s| !matches!(s, LoadState::Loading { .. }))
        .await
        .map(|s| s.clone());
    if let Ok(LoadState::Failed(e)) = loaded {
        eprintln!("convo serve: {e}");
        service.shutdown().await;
        return ExitCode::from(exit::USAGE_ERROR);
    }
    for line in generated {
        eprintln!("convo serve: {line}");
    }
    let metrics = metrics_listener.map(|listener| {
        let at = listener.local_addr().ok();
        let task = tokio::spawn(super::server::serve_metrics(
            listener,
            service.state.clone(),
        ));
        (at, task)
    });
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "listening on {}", service.base_url());
    if let Some((Some(at), _)) = &metrics {
        let _ = writeln!(stdout, "metrics on http://{at}/metrics");
    }
    let _ = stdout.flush();
    drop(stdout);
    stop.recv().await;
    // Through the log, not `eprintln!`: a stderr nobody reads must not hold the stop.
    tracing::info!("shutting down");
    service.shutdown().await;
    if let Some((_, task)) = metrics {
        let _ = task.await;
    }
    if let Some(log) = &log {
        log.report_dropped();
    }
    ExitCode::from(exit::OK)
}

pub fn token(args: TokenArgs) -> ExitCode {
    if args.secret.is_empty() {
        eprintln!("convo token: --secret must not be empty");
        return ExitCode::from(exit::USAGE_ERROR);
    }
    if args.sub.is_empty() {
        eprintln!("convo token: --sub must not be empty");
        return ExitCode::from(exit::USAGE_ERROR);
    }
    if args.ttl == 0 {
        eprintln!("convo token: --ttl must be at least 1 second");
        return ExitCode::from(exit::USAGE_ERROR);
    }
    println!("{}", super::jwt::mint(&args.secret, &args.sub, args.ttl));
    ExitCode::from(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_args_parse_with_tiers() {
        let k = "service_live_abcdefgh12345678";
        assert_eq!(parse_key_arg(k), Ok((k.to_string(), Tier::Pro)));
        assert_eq!(
            parse_key_arg(&format!("{k}=free")),
            Ok((k.to_string(), Tier::Free))
        );
        assert!(parse_key_arg(&format!("{k}=gold")).is_err());
        let err = parse_key_arg("service_live_short").unwrap_err();
        assert!(
            err.contains("service_live_…") && !err.contains("short"),
            "{err}"
        );
    }
}
