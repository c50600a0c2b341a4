//! Configuration of a running service: where the database lives, which keys it accepts, the
//! reply engine and the context window.

pub use crate::connections::ConnectionLimits;
pub use crate::engine::EngineConfig;
pub use crate::engine::local_options::LocalOptions;
pub use crate::storage::DbLocation;
pub use convo_core::{PlanLimits, Tier};

/// Everything `start` needs.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub db: DbLocation,
    /// Accepted API keys with their tiers; each key is its own account.
    pub api_keys: Vec<(String, Tier)>,
    /// HS256 secret of the JWTs accepted on the wallet endpoint.
    pub jwt_secret: String,
    /// Seconds of clock skew allowed on a JWT's `exp` and `nbf` (0: a token is expired from
    /// the second its `exp` names).
    pub jwt_leeway_secs: u64,
    /// Timeouts and caps of client connections.
    pub connections: ConnectionLimits,
    pub engine: EngineConfig,
    /// Context window of a session, in o200k tokens.
    pub max_context_tokens: u64,
    /// Ready o200k token counting (compile its pattern, ~1 MB) in the background at start, so
    /// that the first send does not wait for it. The TUI's embedded service leaves this off
    /// and warms it when the user starts typing: a user who only reads history never pays.
    pub warm_token_counter: bool,
    /// The operator's key (`--admin-key`): the only credential the admin endpoints and
    /// `/metrics` take, never accepted on the interface's endpoints. `None`: those are off.
    pub admin_key: Option<String>,
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
            jwt_leeway_secs: 0,
            connections: ConnectionLimits::default(),
            engine: EngineConfig::Builtin { pace_ms },
            max_context_tokens: DEFAULT_MAX_CONTEXT_TOKENS,
            warm_token_counter: true,
            admin_key: None,
        }
    }
}

pub use convo_wire::api_key::{is_valid_api_key, redact_key};

#[cfg(test)]
mod tests {
    use super::*;

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
            jwt_leeway_secs: 0,
            connections: ConnectionLimits::default(),
            engine: EngineConfig::Builtin { pace_ms },
            max_context_tokens: DEFAULT_MAX_CONTEXT_TOKENS,
            warm_token_counter: true,
            admin_key: None,
        })
    }
}

/// File name of the generated key kept beside the data dir's `service.db` ([`key_file_for`]):
/// the TUI's embedded service and `convo serve` on its default database share it.
pub const KEY_FILE: &str = "local-service.key";

/// The file beside the SQLite database `db` that keeps the key a service on it generated when
/// given none: [`KEY_FILE`] for a database named [`DB_FILE`] (the data dir's), `<name>.key` for
/// any other, so that two databases in one directory never share an account's key (a client
/// would take the second's sessions for the first's and drop its copies of those missing).
pub fn key_file_for(db: &std::path::Path) -> std::path::PathBuf {
    let dir = db
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    match db.file_name() {
        Some(name) if name != DB_FILE => {
            let mut file = name.to_os_string();
            file.push(".key");
            dir.join(file)
        }
        _ => dir.join(KEY_FILE),
    }
}

/// The `pro` key kept in the file `path` ([`key_file_for`]), and whether it was made now:
/// generated and written (mode 0600) when there is no such file, so that the account and its
/// sessions stay reachable across restarts. The file is created exclusively, so two processes
/// making it at once never write two keys; the one that finds it made reads it (in the instant
/// it is being written, that read finds no valid key and fails as below: started again, it
/// reads the key). A file that holds no valid key is an error naming it, and is left as it is. Its directory must exist (a mistyped `--db`
/// directory is not made).
pub fn kept_api_key(path: &std::path::Path) -> std::io::Result<(String, bool)> {
    use std::io::{Error, ErrorKind};
    let read = |path: &std::path::Path| -> std::io::Result<String> {
        let text = std::fs::read_to_string(path)?;
        let key = text.trim();
        if is_valid_api_key(key) {
            Ok(key.to_string())
        } else {
            Err(Error::new(
                ErrorKind::InvalidData,
                format!(
                    "{} holds no valid key (`service_live_` and at least 16 letters or digits): fix it, or remove it to have a new key (and a new, empty account) made",
                    path.display()
                ),
            ))
        }
    };
    match read(path) {
        Ok(key) => return Ok((key, false)),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let key = super::generate_api_key();
    match write_private(path, &key) {
        Ok(()) => Ok((key, true)),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => read(path).map(|key| (key, false)),
        Err(e) => Err(e),
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
    fn each_database_has_its_own_key_file_and_the_data_dirs_is_the_tuis() {
        use std::path::Path;
        assert_eq!(
            key_file_for(Path::new("/data/convo/service.db")),
            Path::new("/data/convo/local-service.key")
        );
        assert_eq!(
            key_file_for(Path::new("/srv/a.db")),
            Path::new("/srv/a.db.key")
        );
        assert_eq!(
            key_file_for(Path::new("/srv/b.db")),
            Path::new("/srv/b.db.key")
        );
        assert_eq!(key_file_for(Path::new("b.db")), Path::new("./b.db.key"));
    }

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
