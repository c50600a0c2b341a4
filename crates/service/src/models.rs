//! Local GGUF models: the models directory (`<data dir>/models/`), what is installed in it,
//! which one is the default, and getting one there (import a file, pull from Hugging Face).
//! No terminal code: `commands::model` prints, and reports a pull's progress through a
//! callback. docs/models.md describes the behaviour.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;

use convo_wire::exit;

/// The model installed by `scripts/fetch-model.sh`, preferred as the default when present.
pub const DEFAULT_MODEL: &str = "SmolLM2-135M-Instruct";

/// The first four bytes of every GGUF file.
pub const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// The GGUF versions llama.cpp reads.
pub const GGUF_VERSIONS: [u32; 2] = [2, 3];

/// What to do when there is no model, in every message that says so.
pub const HOW_TO_GET: &str = "install one with `scripts/fetch-model.sh`, \
     `convo model pull NAME` (`convo model list --available` shows the names) or \
     `convo model import FILE`";

/// The models directory inside a data directory.
pub fn models_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models")
}

/// One installed model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstalledModel {
    /// The file's stem: `SmolLM2-135M-Instruct` for `SmolLM2-135M-Instruct.gguf`.
    pub name: String,
    pub path: PathBuf,
    pub size_bytes: u64,
    /// Whether this is the model used when none is named.
    pub default: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("no model named `{name}` in {}: {HOW_TO_GET}", dir.display())]
    NotInstalled { name: String, dir: PathBuf },
    #[error("no model installed in {}: {HOW_TO_GET}", dir.display())]
    NoModels { dir: PathBuf },
    #[error("{} does not exist: {HOW_TO_GET}", path.display())]
    Missing { path: PathBuf },
    #[error("{} is not a file", path.display())]
    NotAFile { path: PathBuf },
    #[error("{} is not a GGUF model file ({reason})", path.display())]
    NotGguf { path: PathBuf, reason: String },
    #[error("{} is truncated: {}", path.display(), truncated(*needed, *actual))]
    Truncated {
        path: PathBuf,
        /// The bytes its header declares (0: the header itself is cut).
        needed: u64,
        actual: u64,
    },
    #[error(
        "no model named `{name}` in the catalogue; the names are: {known} (or give OWNER/REPO/FILE.gguf)"
    )]
    UnknownModel { name: String, known: String },
    #[error("`{name}` is in use: {why}; remove it anyway with `convo model rm {name} --force`")]
    InUse { name: String, why: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "a model named `{name}` is already installed at {}: remove it first with `convo model rm {name}`, or choose another name with --name",
        path.display()
    )]
    Exists { name: String, path: PathBuf },
    #[error("`{name}` is not a valid model name: {reason}")]
    BadName { name: String, reason: &'static str },
    #[error(
        "`{spec}` is not a Hugging Face file: expected OWNER/REPO/FILE.gguf (e.g. HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/smollm2-135m-instruct-q8_0.gguf)"
    )]
    BadSpec { spec: String },
    #[error("{url}: {message}")]
    Network { url: String, message: String },
    #[error("{url}: HTTP {status}{hint}")]
    Http {
        url: String,
        status: u16,
        hint: &'static str,
    },
    #[error("{url}: {message}")]
    Protocol { url: String, message: String },
    #[error(
        "{url}: the download does not match the hub's checksum (SHA-256 expected {expected}, got {actual}); the partial file {} is deleted",
        part.display()
    )]
    Checksum {
        url: String,
        expected: String,
        actual: String,
        part: PathBuf,
    },
}

impl ModelError {
    /// The exit code (`convo_wire::exit`): a transport failure is a network error (3), an answer
    /// of the hub that refuses or does not verify is a service error (1), everything local
    /// (a missing or bad file, a bad name) is a usage error (2).
    pub fn exit_code(&self) -> u8 {
        match self {
            ModelError::Network { .. } => exit::NETWORK_ERROR,
            ModelError::Http { .. } | ModelError::Protocol { .. } | ModelError::Checksum { .. } => {
                exit::SERVICE_ERROR
            }
            _ => exit::USAGE_ERROR,
        }
    }

    fn io(path: &Path, source: io::Error) -> ModelError {
        ModelError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The end of a `Truncated` message.
fn truncated(needed: u64, actual: u64) -> String {
    if needed == 0 {
        format!("it ends inside its header, at {actual} bytes (an interrupted download or copy?)")
    } else {
        format!(
            "its header declares {needed} bytes, the file has {actual} ({} missing; an interrupted download or copy?)",
            needed - actual
        )
    }
}

/// The file name of a model of this name.
fn file_name(name: &str) -> String {
    format!("{name}.gguf")
}

/// The partial file of a model being imported or pulled: a dotfile, so `list` skips it.
pub fn part_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.gguf.part"))
}

/// `scripts/fetch-model.sh`'s stamp of a verified model.
fn stamp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.verified"))
}

/// A model name: a file stem, so no path separators, not empty, not hidden.
pub fn validate_name(name: &str) -> Result<(), ModelError> {
    let bad = |reason| {
        Err(ModelError::BadName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.contains(['/', '\\']) {
        return bad("it contains a path separator");
    }
    if name.starts_with('.') {
        return bad("it starts with a dot");
    }
    if name.chars().any(char::is_control) {
        return bad("it contains a control character");
    }
    Ok(())
}

/// The name a `--name` or a file gives: a trailing `.gguf` is not part of it.
fn clean_name(name: &str) -> &str {
    name.strip_suffix(".gguf").unwrap_or(name)
}

/// The installed models, sorted by name; a missing directory has none. Only regular `*.gguf`
/// files (or links to one) count; dotfiles (partial downloads, stamps) do not.
pub fn list(dir: &Path, preferred: Option<&str>) -> Result<Vec<InstalledModel>, ModelError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ModelError::io(dir, e)),
    };
    let mut models = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ModelError::io(dir, e))?;
        let Some(file) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Some(name) = file.strip_suffix(".gguf") else {
            continue;
        };
        if name.is_empty() || file.starts_with('.') {
            continue;
        }
        let path = entry.path();
        // Follows links: a link to a model elsewhere is a model.
        let Ok(meta) = fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        models.push(InstalledModel {
            name: name.to_string(),
            path,
            size_bytes: meta.len(),
            default: false,
        });
    }
    models.sort_by(|a, b| a.name.cmp(&b.name));
    let default = preferred
        .and_then(|p| models.iter().position(|m| m.name == p))
        .or_else(|| models.iter().position(|m| m.name == DEFAULT_MODEL))
        .or(if models.is_empty() { None } else { Some(0) });
    if let Some(i) = default {
        models[i].default = true;
    }
    Ok(models)
}

/// The model file to load. An argument with a `/` or ending in `.gguf` is a path; any other
/// is a name in `dir`; none is the default (`preferred` if installed, else
/// `SmolLM2-135M-Instruct`, else the first by name). The file's header is checked.
pub fn resolve(
    dir: &Path,
    name_or_path: Option<&str>,
    preferred: Option<&str>,
) -> Result<PathBuf, ModelError> {
    let path = match name_or_path {
        Some(arg) if arg.contains('/') || arg.ends_with(".gguf") => PathBuf::from(arg),
        Some(name) => {
            validate_name(name)?;
            let path = dir.join(file_name(name));
            if !path.exists() {
                return Err(ModelError::NotInstalled {
                    name: name.to_string(),
                    dir: dir.to_path_buf(),
                });
            }
            path
        }
        None => list(dir, preferred)?
            .into_iter()
            .find(|m| m.default)
            .map(|m| m.path)
            .ok_or_else(|| ModelError::NoModels {
                dir: dir.to_path_buf(),
            })?,
    };
    check_gguf(&path)?;
    Ok(path)
}

/// Checks that `path` is a file that starts like a GGUF model: the magic `GGUF`, then a
/// little-endian version that llama.cpp reads (2 or 3).
pub fn check_gguf(path: &Path) -> Result<(), ModelError> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ModelError::Missing {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(ModelError::io(path, e)),
    };
    if !meta.is_file() {
        return Err(ModelError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let mut header = [0u8; 8];
    let mut file = fs::File::open(path).map_err(|e| ModelError::io(path, e))?;
    let mut got = 0;
    while got < header.len() {
        match file.read(&mut header[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ModelError::io(path, e)),
        }
    }
    let not_gguf = |reason: String| {
        Err(ModelError::NotGguf {
            path: path.to_path_buf(),
            reason,
        })
    };
    if got < header.len() {
        return not_gguf(format!("{got} bytes, too short for a GGUF header"));
    }
    if &header[..4] != GGUF_MAGIC {
        return not_gguf("it does not start with the GGUF magic".to_string());
    }
    let version = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if !GGUF_VERSIONS.contains(&version) {
        return not_gguf(format!("GGUF version {version}; llama.cpp reads 2 and 3"));
    }
    Ok(())
}

/// The installed model called `name`, as `list` describes it.
fn installed(dir: &Path, name: &str) -> Result<InstalledModel, ModelError> {
    list(dir, None)?
        .into_iter()
        .find(|m| m.name == name)
        .ok_or_else(|| ModelError::NotInstalled {
            name: name.to_string(),
            dir: dir.to_path_buf(),
        })
}

/// Fails if a model of this name is installed.
fn refuse_existing(dir: &Path, name: &str) -> Result<PathBuf, ModelError> {
    let target = dir.join(file_name(name));
    if target.symlink_metadata().is_ok() {
        return Err(ModelError::Exists {
            name: name.to_string(),
            path: target,
        });
    }
    Ok(target)
}

/// Moves a finished partial file into place under `name`; a reader never sees half a model.
fn install_part(dir: &Path, part: &Path, name: &str) -> Result<InstalledModel, ModelError> {
    let target = refuse_existing(dir, name)?;
    fs::rename(part, &target).map_err(|e| ModelError::io(&target, e))?;
    installed(dir, name)
}

/// The name a file installs under: `name` if given, else the file's stem.
fn name_for(file: &Path, name: Option<&str>) -> Result<String, ModelError> {
    let name = match name {
        Some(n) => clean_name(n).to_string(),
        None => file
            .file_name()
            .and_then(|f| f.to_str())
            .map(|f| clean_name(f).to_string())
            .unwrap_or_default(),
    };
    validate_name(&name)?;
    Ok(name)
}

/// Copies a GGUF file into `dir` as `name` (default: the file's stem), through a partial
/// file and a rename. Refuses a file that is not a whole GGUF model (`verify_gguf`: a
/// truncated one too), a bad name, and a name that is taken.
pub fn import(dir: &Path, file: &Path, name: Option<&str>) -> Result<InstalledModel, ModelError> {
    verify_gguf(file)?;
    let name = name_for(file, name)?;
    refuse_existing(dir, &name)?;
    fs::create_dir_all(dir).map_err(|e| ModelError::io(dir, e))?;
    let part = part_path(dir, &name);
    if let Err(e) = fs::copy(file, &part) {
        let _ = fs::remove_file(&part);
        return Err(ModelError::io(file, e));
    }
    install_part(dir, &part, &name).inspect_err(|_| {
        let _ = fs::remove_file(&part);
    })
}

/// The model a configuration runs, which `remove` keeps unless forced.
#[derive(Debug, Clone, Copy)]
pub struct Selected<'a> {
    pub name: &'a str,
    /// Named by the configuration (`[engine] model`), rather than the default.
    pub configured: bool,
}

/// Deletes the model called `name` (and `scripts/fetch-model.sh`'s stamp beside it); returns
/// the path it had. Unless `force`, refuses a model in use: one a running convo has loaded
/// (`mark_in_use`), or the one the configuration runs (`selected`).
pub fn remove(
    dir: &Path,
    name: &str,
    force: bool,
    selected: Option<Selected<'_>>,
) -> Result<PathBuf, ModelError> {
    let name = clean_name(name);
    validate_name(name)?;
    let path = dir.join(file_name(name));
    if !force {
        let in_use = |why: &str| {
            Err(ModelError::InUse {
                name: name.to_string(),
                why: why.to_string(),
            })
        };
        if loaded_elsewhere(&path) {
            return in_use("a running convo (the TUI or `convo serve`) has it loaded");
        }
        match selected {
            Some(s) if s.name == name && s.configured => {
                return in_use("it is the model the configuration selects ([engine] model)");
            }
            Some(s) if s.name == name => {
                return in_use("it is the default model, which convo runs when none is configured");
            }
            _ => {}
        }
    }
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ModelError::NotInstalled {
                name: name.to_string(),
                dir: dir.to_path_buf(),
            });
        }
        Err(e) => return Err(ModelError::io(&path, e)),
    }
    let _ = fs::remove_file(stamp_path(dir, name));
    Ok(path)
}

/// A shared lock on a model file, held for as long as an engine has the model loaded, so that
/// `remove` can tell (an advisory lock, which the system drops when the process ends however
/// it ends).
#[derive(Debug)]
pub struct InUse {
    _file: fs::File,
}

/// Marks the model at `path` as loaded by this process until the returned value is dropped;
/// `None` when the file cannot be opened or locked (the model still loads; `rm` just cannot
/// tell).
pub fn mark_in_use(path: &Path) -> Option<InUse> {
    let file = fs::File::open(path).ok()?;
    file.try_lock_shared().ok()?;
    Some(InUse { _file: file })
}

/// Whether some process holds `mark_in_use`'s lock on the file at `path`.
fn loaded_elsewhere(path: &Path) -> bool {
    let Ok(file) = fs::File::open(path) else {
        return false;
    };
    matches!(file.try_lock(), Err(fs::TryLockError::WouldBlock))
}

pub mod catalogue;
mod gguf;
mod pull;
pub use catalogue::{CatalogueModel, catalogue};
pub use gguf::{GgufSummary, verify_gguf};
pub use pull::{HfFile, Progress, PullOptions, pull};

#[cfg(test)]
mod tests;
