//! Layered configuration (docs/design.md, "Configuration"), lowest to highest precedence: built-in defaults
//! (`assets/config.toml`), the config file (platform config dir, or `--config`/`CONVO_CONFIG`),
//! environment variables, then flags. Environment and flags are merged by clap (`GlobalArgs`).
//!
//! ```no_run
//! use clap::Parser;
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     global: convo_client::config::GlobalArgs,
//! }
//! let cli = Cli::parse();
//! let config = convo_client::config::Config::load(&cli.global).expect("valid configuration");
//! println!("{:?}", config.connection.base_url);
//! ```

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use url::Url;

/// The built-in defaults, also the documented example of every key.
pub const DEFAULT_CONFIG: &str = include_str!("../../../assets/config.toml");

/// Flags that apply to every command. Each has an environment variable except
/// `--allow-insecure`; a flag wins over its variable.
/// The client's API key variable (the `--api-key` flag wins over it).
pub const API_KEY_ENV: &str = "CONVO_API_KEY";
/// The operator's admin key variable (`[connection] admin_key` in the file; the variable wins).
pub const ADMIN_KEY_ENV: &str = "CONVO_ADMIN_KEY";

#[derive(Clone, Default, clap::Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Base URL of the service, e.g. http://127.0.0.1:8787 (`convo serve`)
    #[arg(long, global = true, env = "CONVO_BASE_URL", value_name = "URL")]
    pub base_url: Option<String>,
    /// API key (service_live_…) for the session, message and analytics endpoints [env:
    /// CONVO_API_KEY]
    // The id is that of `convo serve --api-key` (field `api_keys`): clap then does not add
    // this global flag to `serve` a second time, and `serve` parses its own repeatable
    // `--api-key`. Tested below for every subcommand. `CONVO_API_KEY` is read by
    // `Config::load`, not by clap: through the shared id clap would hand it to `serve` as a
    // key to accept (`serve` has its own `CONVO_SERVE_API_KEYS`).
    #[arg(id = "api_keys", long = "api-key", global = true, value_name = "KEY")]
    pub api_key: Option<String>,
    /// JWT bearer token for the wallet endpoint
    #[arg(
        long,
        global = true,
        env = "CONVO_WALLET_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub wallet_token: Option<String>,
    /// Config file to read instead of the one in the platform config directory
    #[arg(long, global = true, env = "CONVO_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Allow sending the key over plain http:// to a host other than loopback
    #[arg(long, global = true)]
    pub allow_insecure: bool,
    /// Directory of the local store (convo.db)
    #[arg(long, global = true, env = "CONVO_DATA_DIR", value_name = "PATH")]
    pub data_dir: Option<PathBuf>,
}

impl std::fmt::Debug for GlobalArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlobalArgs")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_deref().map(redact_key))
            .field(
                "wallet_token",
                &self.wallet_token.as_deref().map(redact_key),
            )
            .field("config", &self.config)
            .field("allow_insecure", &self.allow_insecure)
            .field("data_dir", &self.data_dir)
            .finish()
    }
}

/// The effective configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub connection: Connection,
    pub ui: Ui,
    /// What answers in the embedded local service.
    pub engine: Engine,
    /// The merged `[keys]` section, passed through raw: the TUI parses and validates it.
    pub keys: toml::Table,
    pub paths: Paths,
    /// How the TUI announces a finished reply.
    pub notify: Notify,
    /// Things the user should know that are not errors (e.g. a key in a world-readable file).
    /// Callers print them on stderr or show them in the status bar.
    pub warnings: Vec<String>,
}

/// `connection.connect_timeout_ms` when the configuration does not set it.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// `connection.request_timeout_ms` when the configuration does not set it.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// `connection.reply_timeout_ms` when the configuration does not set it: a send whose reply
/// comes whole in the answer waits as long as the reply takes to write.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Clone)]
pub struct Connection {
    /// `None`: no server configured (the TUI embeds the local service).
    pub base_url: Option<Url>,
    pub api_key: Option<String>,
    pub wallet_token: Option<String>,
    /// The operator's key (`service_admin_…`) for the admin endpoints (F4, `convo accounts`).
    pub admin_key: Option<String>,
    pub allow_insecure: bool,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// Time for a message whose reply comes whole in the answer (a send without streaming),
    /// which takes as long as the reply is written.
    pub reply_timeout: Duration,
    pub max_retries: u32,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("base_url", &self.base_url.as_ref().map(Url::as_str))
            .field("api_key", &self.api_key.as_deref().map(redact_key))
            .field(
                "wallet_token",
                &self.wallet_token.as_deref().map(redact_key),
            )
            .field("admin_key", &self.admin_key.as_deref().map(redact_key))
            .field("allow_insecure", &self.allow_insecure)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("reply_timeout", &self.reply_timeout)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

/// The `[engine]` section: which reply engine the embedded local service runs.
#[derive(Clone, PartialEq)]
pub struct Engine {
    pub kind: EngineKind,
    /// `local`: a model name (`convo model list`) or a GGUF path; `openai`: the model name
    /// sent to the server. `None`: the default.
    pub model: Option<String>,
    /// `openai`: the server's base URL.
    pub url: String,
    /// `openai`: its bearer key, if it needs one.
    pub api_key: Option<String>,
    /// `local`: the sampling temperature (0: always the likeliest token).
    pub temperature: f32,
    /// `local`: top-p, the share of the probability the next token is drawn from.
    pub top_p: f32,
    /// `local`: a fixed sampling seed, for repeatable replies. `None`: a fresh seed for every
    /// reply, so that `/retry` gets another answer.
    pub seed: Option<u32>,
    /// `local`: the most tokens one reply may have. `None`: the engine's default
    /// (`LocalOptions::DEFAULT_MAX_REPLY_TOKENS` in `convo_service`, 2,048); a reply also
    /// ends where the context window is full.
    pub max_reply_tokens: Option<u32>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_deref().map(redact_key))
            .field("temperature", &self.temperature)
            .field("top_p", &self.top_p)
            .field("seed", &self.seed)
            .field("max_reply_tokens", &self.max_reply_tokens)
            .finish()
    }
}

/// `[engine] kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// The local model when one is installed (and this build has local models), else builtin.
    Auto,
    Local,
    Openai,
    Builtin,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Auto => "auto",
            EngineKind::Local => "local",
            EngineKind::Openai => "openai",
            EngineKind::Builtin => "builtin",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Ui {
    pub usage_refresh_secs: u64,
    pub max_context_tokens: u64,
    pub show_sessions: bool,
    pub mouse: bool,
}

/// The `[notify]` section: how the TUI announces a reply that finished while you were not
/// looking (the terminal lost focus, or the reply took long).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notify {
    pub mode: NotifyMode,
    /// A reply that took at least this many seconds notifies even while the terminal has
    /// focus; 0: only an unfocused terminal does.
    pub after_seconds: u64,
}

/// `[notify] mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyMode {
    Off,
    /// The terminal bell (BEL).
    Bell,
    /// A desktop notification (OSC 9) and the bell.
    Osc9,
}

impl NotifyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyMode::Off => "off",
            NotifyMode::Bell => "bell",
            NotifyMode::Osc9 => "osc9",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Paths {
    /// The config file that was (or would be) read.
    pub config_file: PathBuf,
    /// Whether `config_file` exists and was read.
    pub config_file_present: bool,
    /// Directory of the local store.
    pub data_dir: PathBuf,
}

impl Paths {
    /// The local store's database file.
    pub fn store_file(&self) -> PathBuf {
        self.data_dir.join("convo.db")
    }
}

/// Upper bound on `max_retries`, so that a typo cannot make a command hang for hours.
pub const MAX_RETRIES_LIMIT: u32 = 10;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A config file that cannot be parsed or holds a bad value: file, line, field and reason.
    #[error("{}:{line}: {field}: {message}", path.display())]
    Invalid {
        path: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A bad value given as a flag or environment variable.
    #[error("{origin}: {message}")]
    BadValue {
        origin: &'static str,
        message: String,
    },
    #[error(
        "cannot find a home directory for the config and data files; set CONVO_CONFIG and CONVO_DATA_DIR"
    )]
    NoHome,
    #[error(
        "refusing to send the API key over plain http:// to {host}; use https://, a loopback address, or --allow-insecure"
    )]
    Insecure { host: String },
}

// ---- the file layer: everything optional, unknown fields refused -------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLayer {
    connection: Option<ConnectionLayer>,
    ui: Option<UiLayer>,
    engine: Option<EngineLayer>,
    keys: Option<toml::Table>,
    notify: Option<NotifyLayer>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotifyLayer {
    mode: Option<Spanned<String>>,
    after_seconds: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EngineLayer {
    kind: Option<Spanned<String>>,
    model: Option<String>,
    url: Option<Spanned<String>>,
    api_key: Option<String>,
    temperature: Option<Spanned<Number>>,
    top_p: Option<Spanned<Number>>,
    seed: Option<Spanned<i64>>,
    max_reply_tokens: Option<Spanned<i64>>,
}

/// A TOML number: `1` and `1.0` alike.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    fn as_f32(self) -> f32 {
        match self {
            Number::Int(n) => n as f32,
            Number::Float(x) => x as f32,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectionLayer {
    base_url: Option<Spanned<String>>,
    api_key: Option<String>,
    wallet_token: Option<String>,
    admin_key: Option<String>,
    allow_insecure: Option<bool>,
    connect_timeout_ms: Option<Spanned<u64>>,
    request_timeout_ms: Option<Spanned<u64>>,
    reply_timeout_ms: Option<Spanned<u64>>,
    max_retries: Option<Spanned<u32>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UiLayer {
    usage_refresh_secs: Option<Spanned<u64>>,
    max_context_tokens: Option<Spanned<u64>>,
    show_sessions: Option<bool>,
    mouse: Option<bool>,
}

/// A parsed file with its source, to turn byte spans into lines.
struct SourceFile<'a> {
    path: &'a Path,
    text: &'a str,
}

impl SourceFile<'_> {
    fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// The dotted name of the key at `span`: the nearest `[section]` header above it plus
    /// the key on its line.
    fn field_at(&self, span: &Range<usize>) -> String {
        let start = span.start.min(self.text.len());
        let line_start = self.text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |i| start + i);
        let line = self.text[line_start..line_end].trim();
        let section = self.text[..line_start]
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('['))
            .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_string());
        if line.starts_with('[') {
            return line
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_string();
        }
        let key = line
            .split_once('=')
            .map_or(line, |(k, _)| k)
            .trim()
            .trim_matches('"');
        match (section, key.is_empty()) {
            (Some(s), false) => format!("{s}.{key}"),
            (Some(s), true) => s,
            (None, false) => key.to_string(),
            (None, true) => "(top level)".to_string(),
        }
    }

    fn invalid(&self, span: Range<usize>, field: Option<&str>, message: String) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_path_buf(),
            line: self.line_of(span.start),
            field: field.map_or_else(|| self.field_at(&span), str::to_string),
            message,
        }
    }

    fn parse(&self) -> Result<FileLayer, ConfigError> {
        toml::from_str::<FileLayer>(self.text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            // toml's messages can span lines; keep the error to one line.
            let message = e.message().trim().replace('\n', " ");
            self.invalid(span, None, message)
        })
    }
}

/// Parse a URL given for `base_url`: http or https, with a host.
pub fn parse_base_url(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw.trim()).map_err(|e| format!("`{raw}` is not a URL: {e}"))?;
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(format!(
                "`{raw}`: unsupported scheme `{other}` (expected http or https)"
            ));
        }
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{raw}` has no host"));
    }
    Ok(url)
}

/// True when `url` points to this machine (localhost, 127.0.0.0/8, ::1).
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Refuse to send a key over plain http to a host other than loopback, unless allowed.
pub fn check_transport(url: &Url, has_key: bool, allow_insecure: bool) -> Result<(), ConfigError> {
    if url.scheme() == "http" && has_key && !allow_insecure && !is_loopback(url) {
        return Err(ConfigError::Insecure {
            host: url.host_str().unwrap_or_default().to_string(),
        });
    }
    Ok(())
}

pub use convo_wire::api_key::redact_key;

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.trim().is_empty())
}

fn project_dirs() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "convo")
}

/// Where the config file is read from when neither `--config` nor `CONVO_CONFIG` is given.
pub fn default_config_file() -> Option<PathBuf> {
    project_dirs().map(|d| d.config_dir().join("config.toml"))
}

/// Where the local store lives when neither `--data-dir` nor `CONVO_DATA_DIR` is given.
pub fn default_data_dir() -> Option<PathBuf> {
    project_dirs().map(|d| d.data_dir().to_path_buf())
}

impl GlobalArgs {
    /// The data dir: `--data-dir` (or `CONVO_DATA_DIR`) when given and not empty, else the
    /// platform's; `None` only when there is no home directory to find it in.
    pub fn data_dir(&self) -> Option<PathBuf> {
        match &self.data_dir {
            Some(d) if !d.as_os_str().is_empty() => Some(d.clone()),
            _ => default_data_dir(),
        }
    }
}

impl Config {
    /// Load the effective configuration for these flags (which already carry the
    /// environment variables).
    pub fn load(global: &GlobalArgs) -> Result<Config, ConfigError> {
        let defaults_path = Path::new("<built-in defaults>");
        let defaults = SourceFile {
            path: defaults_path,
            text: DEFAULT_CONFIG,
        }
        .parse()?;

        let explicit = global.config.clone();
        let config_file = match &explicit {
            Some(p) => p.clone(),
            None => default_config_file().ok_or(ConfigError::NoHome)?,
        };
        let text = match std::fs::read_to_string(&config_file) {
            Ok(t) => Some(t),
            // A missing default file is normal; a missing file the user named is an error.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() => None,
            Err(source) => {
                return Err(ConfigError::Read {
                    path: config_file,
                    source,
                });
            }
        };

        let mut config = Config::from_layer(
            defaults,
            &SourceFile {
                path: defaults_path,
                text: DEFAULT_CONFIG,
            },
        )?;
        let mut warnings = Vec::new();
        if let Some(text) = &text {
            let source = SourceFile {
                path: &config_file,
                text,
            };
            let layer = source.parse()?;
            let file_has_secret = layer.connection.as_ref().is_some_and(|c| {
                non_empty(c.api_key.clone()).is_some()
                    || non_empty(c.wallet_token.clone()).is_some()
                    || non_empty(c.admin_key.clone()).is_some()
            }) || layer
                .engine
                .as_ref()
                .is_some_and(|e| non_empty(e.api_key.clone()).is_some());
            config.apply(layer, &source)?;
            if file_has_secret && readable_by_others(&config_file) {
                warnings.push(format!(
                    "{} holds a key and is readable by other users; run `chmod 600 {}`",
                    config_file.display(),
                    config_file.display()
                ));
            }
        }

        // Environment and flags (clap merged them, the flag winning).
        if let Some(raw) = non_empty(global.base_url.clone()) {
            config.connection.base_url =
                Some(
                    parse_base_url(&raw).map_err(|message| ConfigError::BadValue {
                        origin: "--base-url / CONVO_BASE_URL",
                        message,
                    })?,
                );
        }
        let key = non_empty(global.api_key.clone())
            .or_else(|| non_empty(std::env::var(API_KEY_ENV).ok()));
        if let Some(key) = key {
            config.connection.api_key = Some(key.trim().to_string());
        }
        if let Some(key) = non_empty(std::env::var(ADMIN_KEY_ENV).ok()) {
            config.connection.admin_key = Some(key.trim().to_string());
        }
        if let Some(token) = non_empty(global.wallet_token.clone()) {
            config.connection.wallet_token = Some(token.trim().to_string());
        }
        if global.allow_insecure {
            config.connection.allow_insecure = true;
        }
        config.paths = Paths {
            config_file,
            config_file_present: text.is_some(),
            data_dir: global.data_dir().ok_or(ConfigError::NoHome)?,
        };
        config.warnings = warnings;
        Ok(config)
    }

    /// The built-in defaults alone (no file, environment or flags), e.g. for tests.
    pub fn defaults() -> Config {
        let source = SourceFile {
            path: Path::new("<built-in defaults>"),
            text: DEFAULT_CONFIG,
        };
        // The defaults are compiled in and covered by a unit test.
        #[allow(clippy::expect_used)]
        let layer = source.parse().expect("built-in defaults parse");
        #[allow(clippy::expect_used)]
        Config::from_layer(layer, &source).expect("built-in defaults are valid")
    }

    fn from_layer(layer: FileLayer, source: &SourceFile<'_>) -> Result<Config, ConfigError> {
        let mut config = Config {
            connection: Connection {
                base_url: None,
                api_key: None,
                wallet_token: None,
                admin_key: None,
                allow_insecure: false,
                connect_timeout: DEFAULT_CONNECT_TIMEOUT,
                request_timeout: DEFAULT_REQUEST_TIMEOUT,
                reply_timeout: DEFAULT_REPLY_TIMEOUT,
                max_retries: 3,
            },
            ui: Ui {
                usage_refresh_secs: 10,
                max_context_tokens: 8192,
                show_sessions: true,
                mouse: true,
            },
            engine: Engine {
                kind: EngineKind::Auto,
                model: None,
                url: "http://127.0.0.1:11434".into(),
                api_key: None,
                temperature: convo_wire::engine::sampling::DEFAULT_TEMPERATURE,
                top_p: convo_wire::engine::sampling::DEFAULT_TOP_P,
                seed: None,
                max_reply_tokens: None,
            },
            keys: toml::Table::new(),
            paths: Paths {
                config_file: PathBuf::new(),
                config_file_present: false,
                data_dir: PathBuf::new(),
            },
            notify: Notify {
                mode: NotifyMode::Bell,
                after_seconds: 30,
            },
            warnings: Vec::new(),
        };
        config.apply(layer, source)?;
        Ok(config)
    }

    /// Lay `layer` over `self`: a layer changes only what it names.
    fn apply(&mut self, layer: FileLayer, source: &SourceFile<'_>) -> Result<(), ConfigError> {
        if let Some(c) = layer.connection {
            if let Some(url) = c.base_url {
                let span = url.span();
                let raw = url.into_inner();
                self.connection.base_url = if raw.trim().is_empty() {
                    None
                } else {
                    Some(
                        parse_base_url(&raw)
                            .map_err(|m| source.invalid(span, Some("connection.base_url"), m))?,
                    )
                };
            }
            if let Some(k) = c.api_key {
                self.connection.api_key = non_empty(Some(k.trim().to_string()));
            }
            if let Some(t) = c.wallet_token {
                self.connection.wallet_token = non_empty(Some(t.trim().to_string()));
            }
            if let Some(k) = c.admin_key {
                self.connection.admin_key = non_empty(Some(k.trim().to_string()));
            }
            if let Some(b) = c.allow_insecure {
                self.connection.allow_insecure = b;
            }
            if let Some(ms) = c.connect_timeout_ms {
                self.connection.connect_timeout =
                    positive_ms(ms, source, "connection.connect_timeout_ms")?;
            }
            if let Some(ms) = c.request_timeout_ms {
                self.connection.request_timeout =
                    positive_ms(ms, source, "connection.request_timeout_ms")?;
            }
            if let Some(ms) = c.reply_timeout_ms {
                self.connection.reply_timeout =
                    positive_ms(ms, source, "connection.reply_timeout_ms")?;
            }
            if let Some(n) = c.max_retries {
                let span = n.span();
                let n = n.into_inner();
                if n > MAX_RETRIES_LIMIT {
                    return Err(source.invalid(
                        span,
                        Some("connection.max_retries"),
                        format!("{n} is too many (at most {MAX_RETRIES_LIMIT})"),
                    ));
                }
                self.connection.max_retries = n;
            }
        }
        if let Some(u) = layer.ui {
            if let Some(s) = u.usage_refresh_secs {
                self.ui.usage_refresh_secs = positive(s, source, "ui.usage_refresh_secs")?;
            }
            if let Some(t) = u.max_context_tokens {
                self.ui.max_context_tokens = positive(t, source, "ui.max_context_tokens")?;
            }
            if let Some(b) = u.show_sessions {
                self.ui.show_sessions = b;
            }
            if let Some(b) = u.mouse {
                self.ui.mouse = b;
            }
        }
        if let Some(e) = layer.engine {
            if let Some(kind) = e.kind {
                let span = kind.span();
                self.engine.kind = match kind.into_inner().trim() {
                    "auto" => EngineKind::Auto,
                    "local" => EngineKind::Local,
                    "openai" => EngineKind::Openai,
                    "builtin" => EngineKind::Builtin,
                    other => {
                        return Err(source.invalid(
                            span,
                            Some("engine.kind"),
                            format!(
                                "unknown engine `{other}` (expected auto, local, openai or builtin)"
                            ),
                        ));
                    }
                };
            }
            if let Some(m) = e.model {
                self.engine.model = non_empty(Some(m.trim().to_string()));
            }
            if let Some(url) = e.url {
                let span = url.span();
                let raw = url.into_inner();
                match Url::parse(raw.trim()) {
                    Ok(u) if matches!(u.scheme(), "http" | "https") => {
                        self.engine.url = raw.trim().to_string();
                    }
                    _ => {
                        return Err(source.invalid(
                            span,
                            Some("engine.url"),
                            format!("`{raw}` is not an http:// or https:// URL"),
                        ));
                    }
                }
            }
            if let Some(k) = e.api_key {
                self.engine.api_key = non_empty(Some(k.trim().to_string()));
            }
            if let Some(t) = e.temperature {
                let span = t.span();
                self.engine.temperature =
                    convo_wire::engine::sampling::check_temperature(t.into_inner().as_f32())
                        .map_err(|m| source.invalid(span, Some("engine.temperature"), m))?;
            }
            if let Some(p) = e.top_p {
                let span = p.span();
                self.engine.top_p =
                    convo_wire::engine::sampling::check_top_p(p.into_inner().as_f32())
                        .map_err(|m| source.invalid(span, Some("engine.top_p"), m))?;
            }
            if let Some(seed) = e.seed {
                let span = seed.span();
                self.engine.seed = Some(u32::try_from(seed.into_inner()).map_err(|_| {
                    source.invalid(
                        span,
                        Some("engine.seed"),
                        format!("the seed must be 0 to {}", u32::MAX),
                    )
                })?);
            }
            if let Some(cap) = e.max_reply_tokens {
                let span = cap.span();
                let n = cap.into_inner();
                self.engine.max_reply_tokens =
                    Some(u32::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| {
                        source.invalid(
                            span,
                            Some("engine.max_reply_tokens"),
                            format!("the reply cap must be 1 to {}, not {n}", u32::MAX),
                        )
                    })?);
            }
        }
        if let Some(keys) = layer.keys {
            for (k, v) in keys {
                self.keys.insert(k, v);
            }
        }
        if let Some(n) = layer.notify {
            if let Some(mode) = n.mode {
                let span = mode.span();
                self.notify.mode = match mode.into_inner().trim() {
                    "off" => NotifyMode::Off,
                    "bell" => NotifyMode::Bell,
                    "osc9" => NotifyMode::Osc9,
                    other => {
                        return Err(source.invalid(
                            span,
                            Some("notify.mode"),
                            format!("unknown mode `{other}` (expected off, bell or osc9)"),
                        ));
                    }
                };
            }
            if let Some(secs) = n.after_seconds {
                self.notify.after_seconds = secs;
            }
        }
        Ok(())
    }

    /// Refuse a plain-http base URL to a non-loopback host when a key would be sent.
    pub fn check_transport(&self) -> Result<(), ConfigError> {
        match &self.connection.base_url {
            Some(url) => check_transport(
                url,
                self.connection.api_key.is_some()
                    || self.connection.wallet_token.is_some()
                    || self.connection.admin_key.is_some(),
                self.connection.allow_insecure,
            ),
            None => Ok(()),
        }
    }

    /// The effective configuration as TOML, keys redacted, for `convo config`.
    pub fn to_redacted_toml(&self) -> String {
        let mut root = toml::Table::new();
        let mut conn = toml::Table::new();
        let c = &self.connection;
        conn.insert(
            "base_url".into(),
            c.base_url
                .as_ref()
                .map_or(String::new(), Url::to_string)
                .into(),
        );
        conn.insert(
            "api_key".into(),
            c.api_key
                .as_deref()
                .map_or(String::new(), redact_key)
                .into(),
        );
        conn.insert(
            "wallet_token".into(),
            c.wallet_token
                .as_deref()
                .map_or(String::new(), redact_key)
                .into(),
        );
        conn.insert(
            "admin_key".into(),
            c.admin_key
                .as_deref()
                .map_or(String::new(), redact_key)
                .into(),
        );
        conn.insert("allow_insecure".into(), c.allow_insecure.into());
        conn.insert(
            "connect_timeout_ms".into(),
            toml::Value::Integer(c.connect_timeout.as_millis().min(i64::MAX as u128) as i64),
        );
        conn.insert(
            "request_timeout_ms".into(),
            toml::Value::Integer(c.request_timeout.as_millis().min(i64::MAX as u128) as i64),
        );
        conn.insert(
            "reply_timeout_ms".into(),
            toml::Value::Integer(c.reply_timeout.as_millis().min(i64::MAX as u128) as i64),
        );
        conn.insert(
            "max_retries".into(),
            toml::Value::Integer(i64::from(c.max_retries)),
        );
        let mut ui = toml::Table::new();
        ui.insert(
            "usage_refresh_secs".into(),
            toml::Value::Integer(i64::try_from(self.ui.usage_refresh_secs).unwrap_or(i64::MAX)),
        );
        ui.insert(
            "max_context_tokens".into(),
            toml::Value::Integer(i64::try_from(self.ui.max_context_tokens).unwrap_or(i64::MAX)),
        );
        ui.insert("show_sessions".into(), self.ui.show_sessions.into());
        ui.insert("mouse".into(), self.ui.mouse.into());
        let mut engine = toml::Table::new();
        let e = &self.engine;
        engine.insert("kind".into(), e.kind.as_str().into());
        engine.insert("model".into(), e.model.clone().unwrap_or_default().into());
        engine.insert("url".into(), e.url.clone().into());
        engine.insert(
            "api_key".into(),
            e.api_key
                .as_deref()
                .map_or(String::new(), redact_key)
                .into(),
        );
        // Through their shortest decimal form: `0.6`, not the f32's `0.6000000238418579`.
        let decimal = |x: f32| x.to_string().parse::<f64>().unwrap_or(f64::from(x));
        engine.insert("temperature".into(), decimal(e.temperature).into());
        engine.insert("top_p".into(), decimal(e.top_p).into());
        if let Some(seed) = e.seed {
            engine.insert("seed".into(), i64::from(seed).into());
        }
        if let Some(cap) = e.max_reply_tokens {
            engine.insert("max_reply_tokens".into(), i64::from(cap).into());
        }
        root.insert("connection".into(), conn.into());
        root.insert("ui".into(), ui.into());
        root.insert("engine".into(), engine.into());
        let mut notify = toml::Table::new();
        notify.insert("mode".into(), self.notify.mode.as_str().into());
        notify.insert(
            "after_seconds".into(),
            toml::Value::Integer(i64::try_from(self.notify.after_seconds).unwrap_or(i64::MAX)),
        );
        root.insert("notify".into(), notify.into());
        root.insert("keys".into(), self.keys.clone().into());
        toml::to_string(&root).unwrap_or_default()
    }
}

fn positive(v: Spanned<u64>, source: &SourceFile<'_>, field: &str) -> Result<u64, ConfigError> {
    let span = v.span();
    match v.into_inner() {
        0 => Err(source.invalid(span, Some(field), "must be greater than 0".into())),
        n => Ok(n),
    }
}

fn positive_ms(
    v: Spanned<u64>,
    source: &SourceFile<'_>,
    field: &str,
) -> Result<Duration, ConfigError> {
    positive(v, source, field).map(Duration::from_millis)
}

#[cfg(unix)]
fn readable_by_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0)
}

#[cfg(not(unix))]
fn readable_by_others(_path: &Path) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let source = SourceFile {
            path: Path::new("test.toml"),
            text,
        };
        let mut config = Config::defaults();
        let layer = source.parse()?;
        config.apply(layer, &source)?;
        Ok(config)
    }

    #[test]
    fn defaults_parse() {
        let c = Config::defaults();
        assert_eq!(c.connection.base_url, None);
        assert_eq!(c.connection.connect_timeout, Duration::from_millis(5000));
        assert_eq!(c.connection.request_timeout, Duration::from_millis(30000));
        assert_eq!(c.ui.max_context_tokens, 8192);
        assert!(c.keys.contains_key("send"));
    }

    #[test]
    fn a_file_overrides_only_what_it_names() {
        let c = parse("[connection]\nmax_retries = 1\n[keys]\nsend = \"<Ctrl-s>\"\n").unwrap();
        assert_eq!(c.connection.max_retries, 1);
        assert_eq!(c.connection.request_timeout, Duration::from_secs(30));
        assert_eq!(c.keys["send"].as_str(), Some("<Ctrl-s>"));
        assert!(c.keys.contains_key("quit"));
    }

    #[test]
    fn the_reply_cap_is_optional_and_checked() {
        assert_eq!(Config::defaults().engine.max_reply_tokens, None);
        let c = parse("[engine]\nmax_reply_tokens = 300\n").unwrap();
        assert_eq!(c.engine.max_reply_tokens, Some(300));
        assert!(c.to_redacted_toml().contains("max_reply_tokens = 300\n"));
        for bad in ["0", "-1", "4294967296"] {
            let e = parse(&format!("[engine]\nmax_reply_tokens = {bad}\n"))
                .unwrap_err()
                .to_string();
            assert_eq!(
                e,
                format!(
                    "test.toml:2: engine.max_reply_tokens: the reply cap must be 1 to 4294967295, not {bad}"
                )
            );
        }
    }

    #[test]
    fn engine_sampling_is_set_and_checked() {
        let c = Config::defaults();
        assert_eq!(
            (c.engine.temperature, c.engine.top_p, c.engine.seed),
            (0.6, 0.95, None),
            "the defaults: a fresh seed for every reply"
        );
        let c = parse("[engine]\ntemperature = 1\ntop_p = 0.5\nseed = 42\n").unwrap();
        assert_eq!(
            (c.engine.temperature, c.engine.top_p, c.engine.seed),
            (1.0, 0.5, Some(42))
        );
        let c = parse("[engine]\ntemperature = 0.0\nseed = 4294967295\n").unwrap();
        assert_eq!((c.engine.temperature, c.engine.seed), (0.0, Some(u32::MAX)));
        let shown = Config::defaults().to_redacted_toml();
        assert!(
            shown.contains("temperature = 0.6\ntop_p = 0.95\n") && !shown.contains("seed"),
            "{shown}"
        );
        for (text, expect) in [
            (
                "[engine]\ntemperature = -1\n",
                "test.toml:2: engine.temperature: the temperature must be 0 or more, not -1",
            ),
            (
                "[engine]\n\ntop_p = 1.5\n",
                "test.toml:3: engine.top_p: top-p must be more than 0 and at most 1, not 1.5",
            ),
            (
                "[engine]\nseed = -3\n",
                "test.toml:2: engine.seed: the seed must be 0 to 4294967295",
            ),
        ] {
            assert_eq!(parse(text).unwrap_err().to_string(), expect);
        }
        let e = parse("[engine]\ntemperature = \"hot\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("test.toml:2: engine.temperature: "), "{e}");
    }

    #[test]
    fn errors_name_line_and_field() {
        let e = parse("[ui]\nmouse = true\n\n[connection]\ntimeout = 3\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("test.toml:5: connection.timeout: "), "{e}");
        assert!(e.contains("unknown field"), "{e}");

        let e = parse("[connection]\nrequest_timeout_ms = \"soon\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("test.toml:2: connection.request_timeout_ms: "),
            "{e}"
        );

        let e = parse("[connection]\nbase_url = \"ftp://x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("test.toml:2: connection.base_url: "), "{e}");
        assert!(e.contains("unsupported scheme"), "{e}");

        let e = parse("\n[ui]\nusage_refresh_secs = 0\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "test.toml:3: ui.usage_refresh_secs: must be greater than 0"
        );
    }

    #[test]
    fn the_notify_section_is_read_and_checked() {
        let c = Config::defaults();
        assert_eq!(
            c.notify,
            Notify {
                mode: NotifyMode::Bell,
                after_seconds: 30
            }
        );
        let c = parse("[notify]\nmode = \"osc9\"\nafter_seconds = 0\n").unwrap();
        assert_eq!(c.notify.mode, NotifyMode::Osc9);
        assert_eq!(c.notify.after_seconds, 0);
        let c = parse("[notify]\nmode = \"off\"\n").unwrap();
        assert_eq!(c.notify.mode, NotifyMode::Off);
        assert_eq!(
            c.notify.after_seconds, 30,
            "what the file does not name stays"
        );
        let e = parse("[notify]\nmode = \"loud\"\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "test.toml:2: notify.mode: unknown mode `loud` (expected off, bell or osc9)"
        );
        let e = parse("[notify]\nafter_seconds = -1\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("test.toml:2: notify.after_seconds: "), "{e}");
        let e = parse("[notify]\nsound = true\n").unwrap_err().to_string();
        assert!(e.starts_with("test.toml:2: notify.sound: "), "{e}");
    }

    #[test]
    fn debug_output_redacts_credentials() {
        let mut c = Config::defaults();
        c.connection.api_key = Some("service_live_abcdefghijklmnop1234".into());
        c.connection.wallet_token = Some("eyJhbGciOiJIUzI1NiJ9.payload.signature".into());
        let s = format!("{c:?}");
        assert!(!s.contains("abcdefgh") && !s.contains("payload"), "{s}");
        assert!(s.contains("service_live_…1234"), "{s}");
    }

    #[test]
    fn insecure_transport_is_refused() {
        let remote = Url::parse("http://example.com").unwrap();
        let local = Url::parse("http://127.0.0.1:8080").unwrap();
        let tls = Url::parse("https://example.com").unwrap();
        assert!(check_transport(&remote, true, false).is_err());
        assert!(check_transport(&remote, true, true).is_ok());
        assert!(check_transport(&remote, false, false).is_ok());
        assert!(check_transport(&local, true, false).is_ok());
        assert!(check_transport(&Url::parse("http://localhost").unwrap(), true, false).is_ok());
        assert!(check_transport(&Url::parse("http://[::1]:1").unwrap(), true, false).is_ok());
        assert!(check_transport(&tls, true, false).is_ok());
    }
}
