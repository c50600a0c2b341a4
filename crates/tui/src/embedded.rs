//! The embedded local service: started in-process when no base URL is configured.

use std::path::Path;
use std::sync::Mutex;

use convo_client::api::client::{Client, ClientOptions};
use convo_client::config::{Engine, EngineKind};
pub use convo_service::RunningService;
use convo_service::config::LocalOptions;
use convo_service::{DbLocation, EngineConfig, ServiceConfig, Tier};
use convo_wire::engine::LoadState;

use super::event::{Endpoint, EngineStatus};

const WALLET_TOKEN_TTL_SECS: u64 = 30 * 24 * 3600;

/// What the TUI shows while there is no language model: how to get one.
pub const NO_MODEL_HINT: &str = "No language model is installed, so replies are canned \
     (the builtin engine). Run scripts/fetch-model.sh, or `convo model pull NAME` (`convo model \
     list --available` shows the names), then restart convo for real replies.";

/// The same for a build without the `local-model` feature.
pub const NO_LOCAL_MODELS_HINT: &str = "This convo was built without local models, so replies \
     are canned (the builtin engine). Set [engine] kind = \"openai\" in the config file to use \
     a model server such as Ollama.";

/// The engine the embedded service runs for the `[engine]` section, and a hint for the user
/// when it is the builtin engine only because no model is there.
pub fn engine_config(
    choice: &Engine,
    data_dir: &Path,
    pace_ms: u64,
) -> Result<(EngineConfig, Option<&'static str>), String> {
    let models = convo_service::models::models_dir(data_dir);
    let local = |path| {
        EngineConfig::Local(LocalOptions {
            temperature: choice.temperature,
            top_p: choice.top_p,
            seed: choice.seed,
            max_reply_tokens: choice.max_reply_tokens,
            // Sessions live in `data_dir`'s database: their KV state is kept beside it.
            kv_dir: Some(data_dir.join("kv")),
            ..LocalOptions::new(path)
        })
    };
    match choice.kind {
        EngineKind::Builtin => Ok((EngineConfig::Builtin { pace_ms }, None)),
        EngineKind::Openai => Ok((
            EngineConfig::OpenAi {
                url: choice.url.clone(),
                model: choice.model.clone().unwrap_or_else(|| "llama3.2".into()),
                api_key: choice.api_key.clone(),
            },
            None,
        )),
        EngineKind::Local => {
            if !convo_service::engine::LOCAL_MODELS {
                return Err(convo_service::engine::WITHOUT_LOCAL_MODELS.into());
            }
            let path = convo_service::models::resolve(&models, choice.model.as_deref(), None)
                .map_err(|e| e.to_string())?;
            Ok((local(path), None))
        }
        EngineKind::Auto => {
            if !convo_service::engine::LOCAL_MODELS {
                return Ok((
                    EngineConfig::Builtin { pace_ms },
                    Some(NO_LOCAL_MODELS_HINT),
                ));
            }
            match convo_service::engine::auto_model(Some(&models), choice.model.as_deref())? {
                Some(path) => Ok((local(path), None)),
                None => Ok((EngineConfig::Builtin { pace_ms }, Some(NO_MODEL_HINT))),
            }
        }
    }
}

/// The embedded service's client, where it listens, and what answers in it (with the
/// engine's load state to follow).
pub struct Started {
    pub client: Client,
    pub endpoint: Endpoint,
    pub engine: EngineStatus,
    pub load: tokio::sync::watch::Receiver<LoadState>,
}

/// What the gauges of the embedded service measure against: the plan of `tier` (already made
/// terminal-safe), and whose it is, so that an offline user does not take it for a
/// subscription. The TUI's usage band and `convo usage` with no base URL both say it.
pub fn plan_label(tier: &str) -> String {
    format!("embedded service · {tier} plan of the local account")
}

/// The embedded service's configuration on `data_dir`: its database there, the local account
/// (pro) whose key is kept there (made on first use), `engine`, and a JWT secret and an
/// operator's key new at each start (the latter for the accounts view, F4, and known only to
/// this process). Returns it with the local account's key.
fn local_config(data_dir: &Path, engine: EngineConfig) -> Result<(ServiceConfig, String), String> {
    // The key `convo serve` on the same database uses too (`local-service.key`).
    let db = data_dir.join(convo_service::config::DB_FILE);
    let (key, _) = std::fs::create_dir_all(data_dir)
        .and_then(|()| {
            convo_service::config::kept_api_key(&convo_service::config::key_file_for(&db))
        })
        .map_err(|e| format!("cannot prepare {}: {e}", data_dir.display()))?;
    let config = ServiceConfig {
        db: DbLocation::File(db),
        api_keys: vec![(key.clone(), Tier::Pro)],
        jwt_secret: convo_service::ids::random_alnum(48),
        jwt_leeway_secs: 0,
        connections: Default::default(),
        engine,
        max_context_tokens: convo_service::config::DEFAULT_MAX_CONTEXT_TOKENS,
        // Warmed by the TUI when the user starts typing (`workers`), not at start.
        warm_token_counter: false,
        admin_key: Some(format!(
            "service_admin_{}",
            convo_service::ids::random_alnum(40)
        )),
    };
    Ok((config, key))
}

/// Starts the local service on `127.0.0.1:<ephemeral>` with its database in `data_dir`.
/// The key is kept in `data_dir` (mode 0600) so that sessions stay reachable across runs.
pub async fn start(
    data_dir: &Path,
    engine: &Engine,
    pace_ms: u64,
    slot: &Mutex<Option<RunningService>>,
) -> Result<Started, String> {
    let (engine_config, hint) = engine_config(engine, data_dir, pace_ms)?;
    let hint = hint
        .map(str::to_string)
        .or_else(|| convo_service::engine::better_model_hint(&engine_config));
    let (config, key) = local_config(data_dir, engine_config)?;
    let (jwt_secret, admin_key) = (config.jwt_secret.clone(), config.admin_key.clone());
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let service = convo_service::start(config, addr)
        .await
        .map_err(|e| e.to_string())?;
    let base = url::Url::parse(&service.base_url()).map_err(|e| e.to_string())?;
    let mut options = ClientOptions::new(base);
    options.api_key = Some(key);
    options.admin_key = admin_key;
    // A wallet token for the wallet view, valid for this run (the secret is new each start).
    options.wallet_token = Some(convo_service::jwt::mint(
        &jwt_secret,
        "convo-tui",
        WALLET_TOKEN_TTL_SECS,
    ));
    let client = Client::new(options).map_err(|e| e.to_string())?;
    let endpoint = Endpoint::Embedded {
        addr: service.addr.to_string(),
    };
    let load = service.engine_load();
    let engine = EngineStatus {
        label: service.engine_label(),
        state: load.borrow().clone(),
        hint,
    };
    tracing::info!(addr = %service.addr, engine = %engine.label, "embedded service started");
    advertise(data_dir, &service.addr.to_string());
    if let Ok(mut slot) = slot.lock() {
        *slot = Some(service);
    }
    Ok(Started {
        client,
        endpoint,
        engine,
        load,
    })
}

/// How long an embedded service gets to stop (its turns end first; a local model's reply
/// still running would otherwise hold the process for as long as it generates): the TUI's
/// at exit and a one-shot command's. After it, the process ends without waiting more; what
/// was committed stays (SQLite in WAL mode).
pub const STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The file in the data dir where a running TUI says where its embedded service listens, so
/// that the one-shot commands use that service rather than start a second one on the same
/// database ([`running`]).
pub const ADDRESS_FILE: &str = "embedded.addr";

/// This process's [`ADDRESS_FILE`], removed by [`withdraw`] (or when replaced).
static ADVERTISED: Mutex<Option<Advertised>> = Mutex::new(None);

struct Advertised {
    path: std::path::PathBuf,
    addr: String,
}

impl Drop for Advertised {
    fn drop(&mut self) {
        // Only if it still says this service: a later TUI on the data dir may have written it.
        if std::fs::read_to_string(&self.path).is_ok_and(|a| a.trim() == self.addr) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Writes where the embedded service on `data_dir` listens into its [`ADDRESS_FILE`] (mode
/// 0600, as the key beside it), for as long as the TUI runs. A failure only costs the
/// one-shot commands that service: they start their own.
fn advertise(data_dir: &Path, addr: &str) {
    let path = data_dir.join(ADDRESS_FILE);
    match convo_client::private_file::write_private_atomic(&path, addr.as_bytes(), true) {
        Ok(()) => {
            let advertised = Advertised {
                path,
                addr: addr.to_string(),
            };
            if let Ok(mut slot) = ADVERTISED.lock() {
                *slot = Some(advertised);
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, path = %path.display(), "cannot say where the embedded service listens")
        }
    }
}

/// Removes the [`ADDRESS_FILE`] this process wrote, when its embedded service stops.
pub fn withdraw() {
    let advertised = ADVERTISED.lock().ok().and_then(|mut slot| slot.take());
    drop(advertised);
}

/// The embedded service a TUI running on `data_dir` has, when its [`ADDRESS_FILE`] names one
/// that answers (`GET /healthz` within a second): a client of the local account on it. `None`
/// when no TUI runs there (no file, or one a TUI that ended without removing it left behind,
/// whose address no longer answers).
pub async fn running(data_dir: &Path) -> Option<Client> {
    let addr = std::fs::read_to_string(data_dir.join(ADDRESS_FILE)).ok()?;
    let addr: std::net::SocketAddr = addr.trim().parse().ok()?;
    if !addr.ip().is_loopback() {
        return None;
    }
    let db = data_dir.join(convo_service::config::DB_FILE);
    let key = std::fs::read_to_string(convo_service::config::key_file_for(&db)).ok()?;
    let base = url::Url::parse(&format!("http://{addr}")).ok()?;
    let mut options = ClientOptions::new(base);
    options.api_key = Some(key.trim().to_string());
    let client = Client::new(options).ok()?;
    match tokio::time::timeout(std::time::Duration::from_secs(1), client.health()).await {
        Ok(Ok(true)) => Some(client),
        _ => None,
    }
}

/// The embedded service on `data_dir` for a one-shot command that reads the local account
/// (`convo usage` with no base URL), and a client of that account: the TUI's configuration,
/// but the builtin engine, which loads nothing and answers no message here. Safe beside a TUI
/// running on the same data dir: the database is SQLite in WAL mode, whose readers and
/// writers in two processes wait for each other's transactions (up to 5 s) rather than fail,
/// and the service takes no lock file (the TUI's `tui.lock` is the TUI's own); what this
/// process writes is the local account's row as the TUI writes it at start, and the requests
/// its client makes, counted as the TUI's are.
pub async fn start_for_reading(data_dir: &Path) -> Result<(RunningService, Client), String> {
    start_for_command(data_dir, EngineConfig::Builtin { pace_ms: 0 }).await
}

/// The embedded service on `data_dir` for a one-shot command that changes sessions (`convo
/// send`, `delete`, `fork`, `undo` with no base URL), and a client of the local account: the
/// TUI's configuration with `engine` (from [`engine_config`]; a local model loads as the
/// service starts, and a reply waits for it). Beside a running TUI it is as safe as
/// [`start_for_reading`]: the two services share the database, and the TUI sees what this
/// one wrote when it next reads its list or the session, not live.
pub async fn start_for_command(
    data_dir: &Path,
    engine: EngineConfig,
) -> Result<(RunningService, Client), String> {
    let (config, key) = local_config(data_dir, engine)?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let service = convo_service::start(config, addr)
        .await
        .map_err(|e| e.to_string())?;
    let base = url::Url::parse(&service.base_url()).map_err(|e| e.to_string())?;
    let mut options = ClientOptions::new(base);
    options.api_key = Some(key);
    let client = Client::new(options).map_err(|e| e.to_string())?;
    Ok((service, client))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(kind: EngineKind, model: Option<&str>) -> Engine {
        Engine {
            kind,
            model: model.map(str::to_string),
            url: "http://127.0.0.1:11434".into(),
            api_key: None,
            temperature: convo_service::config::LocalOptions::DEFAULT_TEMPERATURE,
            top_p: convo_service::config::LocalOptions::DEFAULT_TOP_P,
            seed: None,
            max_reply_tokens: None,
        }
    }

    fn install(data_dir: &Path, name: &str) -> std::path::PathBuf {
        let dir = convo_service::models::models_dir(data_dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.gguf"));
        std::fs::write(&path, b"GGUF\x03\x00\x00\x00rest of a model").unwrap();
        path
    }

    #[test]
    fn auto_runs_the_installed_model_or_builtin_with_a_hint() {
        let data = tempfile::tempdir().unwrap();
        let (config, hint) =
            engine_config(&choice(EngineKind::Auto, None), data.path(), 5).unwrap();
        assert_eq!(config, EngineConfig::Builtin { pace_ms: 5 });
        let expected_hint = if convo_service::engine::LOCAL_MODELS {
            NO_MODEL_HINT
        } else {
            NO_LOCAL_MODELS_HINT
        };
        assert_eq!(hint, Some(expected_hint));
        let path = install(data.path(), "SmolLM2-135M-Instruct");
        let (config, hint) =
            engine_config(&choice(EngineKind::Auto, None), data.path(), 5).unwrap();
        if convo_service::engine::LOCAL_MODELS {
            let expected = LocalOptions {
                kv_dir: Some(data.path().join("kv")),
                ..LocalOptions::new(path)
            };
            assert_eq!(config, EngineConfig::Local(expected));
            assert_eq!(hint, None);
        }
    }

    #[test]
    fn a_named_model_must_be_there() {
        if !convo_service::engine::LOCAL_MODELS {
            return; // without local models, every engine choice is refused first
        }
        let data = tempfile::tempdir().unwrap();
        install(data.path(), "SmolLM2-135M-Instruct");
        for kind in [EngineKind::Auto, EngineKind::Local] {
            let err = engine_config(&choice(kind, Some("Missing")), data.path(), 5).unwrap_err();
            assert!(err.contains("Missing"), "{err}");
        }
        let err = engine_config(
            &choice(EngineKind::Local, None),
            tempfile::tempdir().unwrap().path(),
            5,
        )
        .unwrap_err();
        assert!(
            err.contains("fetch-model.sh") || err.contains("built without"),
            "{err}"
        );
    }

    #[test]
    fn openai_and_builtin_are_taken_as_configured() {
        let data = tempfile::tempdir().unwrap();
        let (config, hint) =
            engine_config(&choice(EngineKind::Openai, Some("qwen2.5")), data.path(), 5).unwrap();
        assert_eq!(
            config,
            EngineConfig::OpenAi {
                url: "http://127.0.0.1:11434".into(),
                model: "qwen2.5".into(),
                api_key: None
            }
        );
        assert_eq!(hint, None);
        let (config, _) =
            engine_config(&choice(EngineKind::Builtin, None), data.path(), 7).unwrap();
        assert_eq!(config, EngineConfig::Builtin { pace_ms: 7 });
    }
}
