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

/// File name of the database `ServiceConfig::persistent` keeps in its directory.
pub const DB_FILE: &str = "service.db";

impl ServiceConfig {
    /// A service that keeps its data in `dir` (created if needed): the database `service.db`
    /// and, beside it as `convo serve` keeps them ([`kept_api_key`], [`kept_jwt_secret`]), one
    /// `pro` key and a JWT secret generated on first use and reused afterwards, so that
    /// sessions (and wallet tokens) survive restarts of an embedding program. Builtin engine
    /// at the given pace.
    pub fn persistent(dir: &std::path::Path, pace_ms: u64) -> Result<Self, super::ServiceError> {
        use super::ServiceError;
        std::fs::create_dir_all(dir)
            .map_err(|e| ServiceError::Config(format!("cannot create {}: {e}", dir.display())))?;
        let db = dir.join(DB_FILE);
        let kept =
            |file: std::path::PathBuf,
             keep: fn(&std::path::Path) -> std::io::Result<(String, bool)>| {
                keep(&file)
                    .map(|(secret, _)| secret)
                    .map_err(|e| ServiceError::Config(e.to_string()))
            };
        let api_key = kept(key_file_for(&db), kept_api_key)?;
        let jwt_secret = kept(jwt_secret_file_for(&db), kept_jwt_secret)?;
        Ok(ServiceConfig {
            db: DbLocation::File(db),
            api_keys: vec![(api_key, Tier::Pro)],
            jwt_secret,
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

/// File name of the generated JWT secret kept beside the data dir's `service.db`
/// ([`jwt_secret_file_for`]).
pub const JWT_SECRET_FILE: &str = "local-service.jwt-secret";

/// The file beside the SQLite database `db` that keeps the key a service on it generated when
/// given none: [`KEY_FILE`] for a database named [`DB_FILE`] (the data dir's), `<name>.key` for
/// any other, so that two databases in one directory never share an account's key (a client
/// would take the second's sessions for the first's and drop its copies of those missing).
pub fn key_file_for(db: &std::path::Path) -> std::path::PathBuf {
    kept_file_for(db, KEY_FILE, "key")
}

/// The file beside the SQLite database `db` that keeps the JWT secret a service on it
/// generated when given none: [`JWT_SECRET_FILE`] for the data dir's [`DB_FILE`],
/// `<name>.jwt-secret` for any other (as [`key_file_for`]).
pub fn jwt_secret_file_for(db: &std::path::Path) -> std::path::PathBuf {
    kept_file_for(db, JWT_SECRET_FILE, "jwt-secret")
}

/// `data_dirs` beside `db` when it is the data dir's [`DB_FILE`], else `<name>.<extension>`.
fn kept_file_for(db: &std::path::Path, data_dirs: &str, extension: &str) -> std::path::PathBuf {
    let dir = db
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    match db.file_name() {
        Some(name) if name != DB_FILE => {
            let mut file = name.to_os_string();
            file.push(".");
            file.push(extension);
            dir.join(file)
        }
        _ => dir.join(data_dirs),
    }
}

/// The `pro` key kept in the file `path` ([`key_file_for`]), and whether it was made now
/// ([`kept_secret`]), so that the account and its sessions stay reachable across restarts.
pub fn kept_api_key(path: &std::path::Path) -> std::io::Result<(String, bool)> {
    kept_secret(
        path,
        Kept {
            what: "no valid key (`service_live_` and at least 16 letters or digits)",
            fresh: "a new key (and a new, empty account)",
            valid: is_valid_api_key,
            make: super::generate_api_key,
        },
    )
}

/// The JWT secret kept in the file `path` ([`jwt_secret_file_for`]), and whether it was made
/// now ([`kept_secret`]), so that wallet tokens signed with it stay valid across restarts.
pub fn kept_jwt_secret(path: &std::path::Path) -> std::io::Result<(String, bool)> {
    kept_secret(
        path,
        Kept {
            what: "no JWT secret (it is empty)",
            fresh: "a new secret (tokens signed with the old one are then refused)",
            valid: |secret| !secret.is_empty(),
            make: || super::ids::random_alnum(48),
        },
    )
}

/// One kind of secret kept in a file.
struct Kept {
    /// What a file that is not usable holds, for the error.
    what: &'static str,
    /// What removing such a file gives.
    fresh: &'static str,
    valid: fn(&str) -> bool,
    make: fn() -> String,
}

/// The secret kept in the file `path` (trimmed), and whether it was made now: generated and
/// written (mode 0600) when there is no such file. The file is created exclusively, so two
/// processes making it at once never write two secrets; the one that finds it made reads it
/// (in the instant it is being written, that read finds nothing valid and fails as below:
/// started again, it reads the secret). A file that holds nothing valid is an error naming
/// it, and is left as it is. Its directory must exist (a mistyped `--db` directory is not
/// made).
fn kept_secret(path: &std::path::Path, kind: Kept) -> std::io::Result<(String, bool)> {
    use std::io::{Error, ErrorKind};
    let read = |path: &std::path::Path| -> std::io::Result<String> {
        let text = std::fs::read_to_string(path)?;
        let secret = text.trim();
        if (kind.valid)(secret) {
            Ok(secret.to_string())
        } else {
            Err(Error::new(
                ErrorKind::InvalidData,
                format!(
                    "{} holds {}: fix it, or remove it to have {} made",
                    path.display(),
                    kind.what,
                    kind.fresh
                ),
            ))
        }
    };
    match read(path) {
        Ok(secret) => return Ok((secret, false)),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let secret = (kind.make)();
    match write_private(path, &secret) {
        Ok(()) => Ok((secret, true)),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => read(path).map(|secret| (secret, false)),
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
        assert_eq!(
            jwt_secret_file_for(Path::new("/data/convo/service.db")),
            Path::new("/data/convo/local-service.jwt-secret")
        );
        assert_eq!(
            jwt_secret_file_for(Path::new("/srv/a.db")),
            Path::new("/srv/a.db.jwt-secret")
        );
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
        // Kept where `convo serve` on that database keeps them.
        let (key, secret) = (data.join(KEY_FILE), data.join(JWT_SECRET_FILE));
        assert_eq!(std::fs::read_to_string(&key).unwrap(), first.api_keys[0].0);
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), first.jwt_secret);
        #[cfg(unix)]
        for file in [&key, &secret] {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&secret, " \n").unwrap();
        let err = ServiceConfig::persistent(&data, 0).unwrap_err().to_string();
        assert!(
            err.contains("local-service.jwt-secret holds no JWT secret (it is empty)"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), " \n");
    }
}
