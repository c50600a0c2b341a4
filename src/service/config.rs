//! Configuration of a running service: where the database lives, which keys it accepts, the
//! reply engine and the context window.

use std::path::PathBuf;

pub use super::engine::local_options::LocalOptions;

/// Where the database lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbLocation {
    /// A private in-memory SQLite database, gone when the service stops.
    Memory,
    /// A SQLite database file (created if missing), with its `-wal` and `-shm` companions
    /// beside it.
    File(PathBuf),
    /// A PostgreSQL database (`postgres://USER@HOST:PORT/DB` or `postgresql://…`), which
    /// replicas can share.
    Postgres(String),
}

impl DbLocation {
    /// What `--db` (or `CONVO_SERVE_DB`) names: a PostgreSQL URL, `:memory:`, or a SQLite file.
    pub fn parse(arg: &str) -> DbLocation {
        if arg.starts_with("postgres://") || arg.starts_with("postgresql://") {
            DbLocation::Postgres(arg.to_string())
        } else if arg == ":memory:" {
            DbLocation::Memory
        } else {
            DbLocation::File(PathBuf::from(arg))
        }
    }
}

/// Subscription tier of an account; decides its plan limits (docs/design.md, "Usage").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Tier {
    Free,
    #[default]
    Pro,
    Enterprise,
}

/// The plan limits of a tier, per billing period (sessions: at any time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanLimits {
    pub requests: u64,
    pub tokens: u64,
    pub sessions: u64,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Free => "free",
            Tier::Pro => "pro",
            Tier::Enterprise => "enterprise",
        }
    }

    pub fn limits(self) -> PlanLimits {
        match self {
            Tier::Free => PlanLimits {
                requests: 1_000,
                tokens: 200_000,
                sessions: 10,
            },
            Tier::Pro => PlanLimits {
                requests: 50_000,
                tokens: 10_000_000,
                sessions: 500,
            },
            Tier::Enterprise => PlanLimits {
                requests: 1_000_000,
                tokens: 500_000_000,
                sessions: 10_000,
            },
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "free" => Ok(Tier::Free),
            "pro" => Ok(Tier::Pro),
            "enterprise" => Ok(Tier::Enterprise),
            other => Err(format!(
                "unknown tier `{other}` (expected free, pro or enterprise)"
            )),
        }
    }
}

/// Which reply engine answers messages.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineConfig {
    /// Offline and deterministic, streamed word by word every `pace_ms` milliseconds.
    Builtin { pace_ms: u64 },
    /// A GGUF model run in-process by llama.cpp.
    Local(LocalOptions),
    /// Any OpenAI-compatible `/v1/chat/completions` server, streamed over SSE.
    OpenAi {
        url: String,
        model: String,
        api_key: Option<String>,
    },
}

/// Everything `start` needs.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub db: DbLocation,
    /// Accepted API keys with their tiers; each key is its own account.
    pub api_keys: Vec<(String, Tier)>,
    /// HS256 secret of the JWTs accepted on the wallet endpoint.
    pub jwt_secret: String,
    pub engine: EngineConfig,
    /// Context window of a session, in o200k tokens.
    pub max_context_tokens: u64,
    /// Ready o200k token counting (compile its pattern, ~1 MB) in the background at start, so
    /// that the first send does not wait for it. The TUI's embedded service leaves this off
    /// and warms it when the user starts typing: a user who only reads history never pays.
    pub warm_token_counter: bool,
}

/// Default context window (docs/design.md, "Limits").
pub const DEFAULT_MAX_CONTEXT_TOKENS: u64 = 8192;

impl ServiceConfig {
    /// In-memory db, one generated `pro` key, random JWT secret, builtin engine at the given pace.
    pub fn ephemeral(pace_ms: u64) -> Self {
        ServiceConfig {
            db: DbLocation::Memory,
            api_keys: vec![(super::generate_api_key(), Tier::Pro)],
            jwt_secret: super::ids::random_alnum(48),
            engine: EngineConfig::Builtin { pace_ms },
            max_context_tokens: DEFAULT_MAX_CONTEXT_TOKENS,
            warm_token_counter: true,
        }
    }
}

/// True when `key` is `service_live_` followed by at least 16 of `[A-Za-z0-9]`.
pub fn is_valid_api_key(key: &str) -> bool {
    key.strip_prefix("service_live_")
        .is_some_and(|rest| rest.len() >= 16 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// `service_live_…abcd`: the only form in which a key is ever shown or logged.
pub fn redact_key(key: &str) -> String {
    let tail: String = key
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if key.starts_with("service_live_") {
        format!("service_live_…{tail}")
    } else {
        format!("…{tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_validated_and_redacted() {
        assert!(is_valid_api_key("service_live_abcdefgh12345678"));
        assert!(!is_valid_api_key("service_live_abcdefgh1234567"));
        assert!(!is_valid_api_key("service_live_abcdefgh1234567-"));
        assert!(!is_valid_api_key("service_test_abcdefgh12345678"));
        assert_eq!(
            redact_key("service_live_abcdefgh12345678"),
            "service_live_…5678"
        );
    }

    #[test]
    fn tiers_parse() {
        assert_eq!("free".parse::<Tier>(), Ok(Tier::Free));
        assert!("gold".parse::<Tier>().is_err());
        assert_eq!(Tier::default(), Tier::Pro);
        assert_eq!(Tier::Free.limits().sessions, 10);
    }
}

/// Key and JWT secret of a persistent embedded service, kept beside its database.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredCredentials {
    api_key: String,
    jwt_secret: String,
}

/// File name of the credentials `ServiceConfig::persistent` keeps in its directory.
pub const CREDENTIALS_FILE: &str = "service-credentials.json";
/// File name of the database `ServiceConfig::persistent` keeps in its directory.
pub const DB_FILE: &str = "service.db";

impl ServiceConfig {
    /// A service that keeps its data in `dir` (created if needed): the database `service.db`
    /// and, in `service-credentials.json` (mode 0600), one `pro` key and a JWT secret generated
    /// on first use and reused afterwards, so that sessions survive restarts of an embedding
    /// program. Builtin engine at the given pace.
    pub fn persistent(dir: &std::path::Path, pace_ms: u64) -> Result<Self, super::ServiceError> {
        use super::ServiceError;
        std::fs::create_dir_all(dir)
            .map_err(|e| ServiceError::Config(format!("cannot create {}: {e}", dir.display())))?;
        let path = dir.join(CREDENTIALS_FILE);
        let credentials = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let stored: StoredCredentials = serde_json::from_str(&text).map_err(|e| {
                    ServiceError::Config(format!("{} is not valid: {e}", path.display()))
                })?;
                if !is_valid_api_key(&stored.api_key) || stored.jwt_secret.is_empty() {
                    return Err(ServiceError::Config(format!(
                        "{} holds an invalid key or an empty secret",
                        path.display()
                    )));
                }
                stored
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let fresh = StoredCredentials {
                    api_key: super::generate_api_key(),
                    jwt_secret: super::ids::random_alnum(48),
                };
                write_private(
                    &path,
                    &serde_json::to_string_pretty(&fresh).unwrap_or_default(),
                )
                .map_err(|e| {
                    ServiceError::Config(format!("cannot write {}: {e}", path.display()))
                })?;
                fresh
            }
            Err(e) => {
                return Err(ServiceError::Config(format!(
                    "cannot read {}: {e}",
                    path.display()
                )));
            }
        };
        Ok(ServiceConfig {
            db: DbLocation::File(dir.join(DB_FILE)),
            api_keys: vec![(credentials.api_key, Tier::Pro)],
            jwt_secret: credentials.jwt_secret,
            engine: EngineConfig::Builtin { pace_ms },
            max_context_tokens: DEFAULT_MAX_CONTEXT_TOKENS,
            warm_token_counter: true,
        })
    }
}

/// Writes `text` to a new file readable by its owner only.
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod persistent_tests {
    use super::*;

    #[test]
    fn persistent_configs_reuse_their_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("nested");
        let first = ServiceConfig::persistent(&data, 15).unwrap();
        let again = ServiceConfig::persistent(&data, 0).unwrap();
        assert_eq!(first.api_keys, again.api_keys);
        assert_eq!(first.jwt_secret, again.jwt_secret);
        assert_eq!(first.db, DbLocation::File(data.join(DB_FILE)));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(data.join(CREDENTIALS_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(data.join(CREDENTIALS_FILE), "{oops").unwrap();
        let err = ServiceConfig::persistent(&data, 0).unwrap_err().to_string();
        assert!(err.contains("not valid"), "{err}");
    }
}
