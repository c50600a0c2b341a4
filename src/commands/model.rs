//! `convo model`: the local GGUF models in `<data dir>/models/` (docs/models.md): list them,
//! import a file, remove one, pull one from Hugging Face.
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use comfy_table::Cell;

use super::{codes, fail, load_config, out, print_json, sanitize, table};
use convo_client::config::{Config, EngineKind};
use convo_client::format::bytes;
use convo_service::models::{
    self, InstalledModel, ModelError, Progress, PullOptions, Selected, catalogue,
};

#[derive(Debug, clap::Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    pub command: ModelCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ModelCommand {
    /// List the installed models and which one convo runs; with --available, the catalogue.
    List {
        /// Print the models as a JSON array
        #[arg(long)]
        json: bool,
        /// List the catalogue of models `convo model pull NAME` knows, marking what fits this
        /// machine's memory
        #[arg(long)]
        available: bool,
    },
    /// Copy a GGUF file into the models directory, after checking the whole file.
    Import {
        /// The .gguf file
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Install under this name instead of the file's stem
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
    /// Delete an installed model (not the one in use, unless --force).
    Rm {
        /// The model's name, as `convo model list` shows it
        #[arg(value_name = "NAME")]
        name: String,
        /// Delete it even if it is the configured or default model, or a running convo has it
        /// loaded
        #[arg(long)]
        force: bool,
    },
    /// Download a model from Hugging Face (HF_ENDPOINT, HF_TOKEN), resumably, and verify it.
    Pull {
        /// A name from `convo model list --available`, or any GGUF file as OWNER/REPO/FILE.gguf
        #[arg(value_name = "NAME|OWNER/REPO/FILE.gguf")]
        file: String,
        /// Branch, tag or commit of the repository (default: the catalogue's pinned commit,
        /// else main)
        #[arg(long, value_name = "REV")]
        revision: Option<String>,
        /// Install under this name instead of the catalogue's name or the file's stem
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
}

fn fail_model(e: &ModelError) -> ExitCode {
    let code = match e {
        ModelError::Network { .. } => codes::NETWORK,
        ModelError::Http { .. } | ModelError::Protocol { .. } | ModelError::Checksum { .. } => {
            codes::PROTOCOL
        }
        ModelError::Io { .. } => codes::IO,
        _ => codes::INVALID_ARGUMENT,
    };
    fail(e.exit_code(), code, e)
}

pub async fn run(args: ModelArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let config = match load_config(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let dir = models::models_dir(&config.paths.data_dir);
    match args.command {
        ModelCommand::List { json, available } if available => list_available(&dir, json),
        ModelCommand::List { json, .. } => list(&dir, &config, json),
        ModelCommand::Import { file, name } => match models::import(&dir, &file, name.as_deref()) {
            Ok(m) => installed(&m),
            Err(e) => fail_model(&e),
        },
        ModelCommand::Rm { name, force } => {
            let selected = selected_model(&dir, &config);
            let selected = selected.as_ref().map(|(name, configured)| Selected {
                name,
                configured: *configured,
            });
            match models::remove(&dir, &name, force, selected) {
                Ok(path) => {
                    out(format!(
                        "removed {} ({})\n",
                        sanitize(&name),
                        path.display()
                    ));
                    ExitCode::SUCCESS
                }
                Err(e) => fail_model(&e),
            }
        }
        ModelCommand::Pull {
            file,
            revision,
            name,
        } => pull(&dir, &file, revision, name).await,
    }
}

/// The `[engine] model` the configuration names, when it names an installed-model name (not a
/// path) and the engine may be local.
fn configured_name(config: &Config) -> Option<&str> {
    if !matches!(config.engine.kind, EngineKind::Auto | EngineKind::Local) {
        return None;
    }
    config
        .engine
        .model
        .as_deref()
        .filter(|m| !m.contains('/') && !m.ends_with(".gguf"))
}

/// The installed model the configuration runs, and whether it names it (rather than takes the
/// default); `None` when its engine is not local.
fn selected_model(dir: &Path, config: &Config) -> Option<(String, bool)> {
    if !matches!(config.engine.kind, EngineKind::Auto | EngineKind::Local) {
        return None;
    }
    if let Some(name) = configured_name(config) {
        return Some((name.to_string(), true));
    }
    if config.engine.model.is_some() {
        return None; // a path: not one of the installed models by name
    }
    models::list(dir, None)
        .ok()?
        .into_iter()
        .find(|m| m.default)
        .map(|m| (m.name, false))
}

fn list(dir: &Path, config: &Config, json: bool) -> ExitCode {
    let configured = configured_name(config);
    let models = match models::list(dir, configured) {
        Ok(m) => m,
        Err(e) => return fail_model(&e),
    };
    if json {
        return print_json(&models);
    }
    let memory = catalogue::total_memory();
    if models.is_empty() {
        let suggest = memory
            .and_then(catalogue::suggestion)
            .map(|m| format!("; for this machine: `convo model pull {}`", m.name))
            .unwrap_or_default();
        eprintln!(
            "no models in {}: {}{suggest}",
            dir.display(),
            models::HOW_TO_GET
        );
        return ExitCode::SUCCESS;
    }
    out(render(&models));
    if let Some(name) = configured.filter(|c| !models.iter().any(|m| m.name == *c)) {
        eprintln!(
            "[engine] model = \"{}\" in {} is not installed: `convo model pull {}`, or choose one above",
            sanitize(name),
            config.paths.config_file.display(),
            sanitize(name),
        );
    }
    if let Some(hint) = models
        .iter()
        .find(|m| m.default)
        .and_then(|m| catalogue::tiny_model_hint(&m.name, memory))
    {
        eprintln!("{hint}");
    }
    ExitCode::SUCCESS
}

/// The human-readable list: `*` marks the model convo runs.
pub fn render(models: &[InstalledModel]) -> String {
    let mut t = table(&["model", "size", "default", "path"], &[1]);
    for m in models {
        t.add_row(vec![
            Cell::new(sanitize(&m.name)),
            Cell::new(bytes(m.size_bytes)),
            Cell::new(if m.default { "*" } else { "" }),
            Cell::new(sanitize(&m.path.display().to_string())),
        ]);
    }
    format!("{t}\n")
}

/// One catalogue entry as `list --available --json` prints it.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Available<'a> {
    name: &'a str,
    repo: &'a str,
    file: &'a str,
    revision: &'a str,
    sha256: Option<&'a str>,
    size_mb: u64,
    ram_mb: u64,
    licence: &'a str,
    good_for: &'a str,
    /// Needs no more memory than this machine has (`null` when it cannot be read).
    fits: Option<bool>,
    /// The one `convo model list` suggests here.
    suggested: bool,
    installed: bool,
}

fn list_available(dir: &Path, json: bool) -> ExitCode {
    let memory = catalogue::total_memory();
    let installed = match models::list(dir, None) {
        Ok(m) => m,
        Err(e) => return fail_model(&e),
    };
    let suggested = memory.and_then(catalogue::suggestion);
    let rows: Vec<Available> = catalogue::catalogue()
        .iter()
        .map(|m| Available {
            name: &m.name,
            repo: &m.repo,
            file: &m.file,
            revision: &m.revision,
            sha256: m.sha256.as_deref(),
            size_mb: m.size_mb,
            ram_mb: m.ram_mb,
            licence: &m.licence,
            good_for: &m.good_for,
            fits: memory.map(|total| catalogue::fits(m, total)),
            suggested: suggested.is_some_and(|s| s.name == m.name),
            installed: installed.iter().any(|i| i.name == m.name),
        })
        .collect();
    if json {
        return print_json(&rows);
    }
    out(render_available(&rows, memory));
    ExitCode::SUCCESS
}

/// The catalogue as a table, and a line on the machine's memory and the marks.
fn render_available(rows: &[Available], memory: Option<u64>) -> String {
    let mut t = table(
        &["model", "size", "needs", "fits", "licence", "good for"],
        &[1, 2],
    );
    for r in rows {
        let mark = match (r.installed, r.suggested, r.fits) {
            (true, _, _) => "installed",
            (_, true, _) => "yes *",
            (_, _, Some(true)) => "yes",
            (_, _, Some(false)) => "no",
            (_, _, None) => "?",
        };
        t.add_row(vec![
            Cell::new(r.name),
            Cell::new(bytes(r.size_mb * 1_000_000)),
            Cell::new(bytes(r.ram_mb * 1_000_000)),
            Cell::new(mark),
            Cell::new(r.licence),
            Cell::new(r.good_for),
        ]);
    }
    let machine = match memory {
        Some(total) => format!(
            "This machine has {} of memory; * is the model suggested here (it needs at most half). ",
            bytes(total)
        ),
        None => "This machine's memory cannot be read here. ".to_string(),
    };
    format!("{t}\n{machine}Install one with `convo model pull NAME`.\n")
}

fn installed(m: &InstalledModel) -> ExitCode {
    out(format!(
        "installed {} ({}): {}\n",
        sanitize(&m.name),
        bytes(m.size_bytes),
        m.path.display()
    ));
    ExitCode::SUCCESS
}

async fn pull(dir: &Path, spec: &str, revision: Option<String>, name: Option<String>) -> ExitCode {
    let target = match catalogue::pull_target(spec) {
        Ok(t) => t,
        Err(e) => return fail_model(&e),
    };
    let mut options = match PullOptions::from_env() {
        Ok(o) => o,
        Err(e) => return fail_model(&e),
    };
    // The catalogue's SHA-256 is the file's at its pinned commit only.
    options.sha256 = if revision.is_none() {
        target.sha256
    } else {
        None
    };
    options.revision = revision
        .or(target.revision)
        .unwrap_or_else(|| "main".to_string());
    options.name = name.or(target.name);
    let mut bar = Bar::new(std::io::stderr().is_terminal());
    let result = models::pull(dir, &target.file, &options, &mut |p| bar.show(p)).await;
    bar.finish();
    match result {
        Ok(m) => {
            let code = installed(&m);
            eprintln!(
                "to use it: set [engine] model = \"{}\" in the config file (`convo config` shows where), or `convo serve --model {}`",
                sanitize(&m.name),
                sanitize(&m.name)
            );
            code
        }
        Err(e) => fail_model(&e),
    }
}

/// A one-line progress bar on stderr, redrawn at most ten times a second; nothing when
/// stderr is not a terminal.
struct Bar {
    tty: bool,
    started: Instant,
    last: Option<Instant>,
    drawn: bool,
}

impl Bar {
    fn new(tty: bool) -> Bar {
        Bar {
            tty,
            started: Instant::now(),
            last: None,
            drawn: false,
        }
    }

    fn show(&mut self, p: Progress) {
        if !self.tty {
            return;
        }
        let now = Instant::now();
        let complete = p.total == Some(p.done);
        if self
            .last
            .is_some_and(|l| now.duration_since(l) < Duration::from_millis(100))
            && !complete
        {
            return;
        }
        self.last = Some(now);
        self.drawn = true;
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K{}", bar_line(p, now - self.started));
        let _ = stderr.flush();
    }

    fn finish(&mut self) {
        if self.drawn {
            eprintln!();
        }
    }
}

/// `[#########...........]  45% 44.3 MB / 98.4 MB  5.1 MB/s`
fn bar_line(p: Progress, elapsed: Duration) -> String {
    const WIDTH: usize = 30;
    let fetched = p.done.saturating_sub(p.resumed_from);
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.2 {
        format!("  {}/s", bytes((fetched as f64 / secs) as u64))
    } else {
        String::new()
    };
    let resumed = if p.resumed_from > 0 {
        format!("  (resumed at {})", bytes(p.resumed_from))
    } else {
        String::new()
    };
    match p.total {
        Some(total) if total > 0 => {
            let ratio = (p.done as f64 / total as f64).clamp(0.0, 1.0);
            let filled = (ratio * WIDTH as f64).round() as usize;
            format!(
                "[{}{}] {:>3.0}% {} / {}{rate}{resumed}",
                "#".repeat(filled),
                ".".repeat(WIDTH - filled),
                ratio * 100.0,
                bytes(p.done),
                bytes(total),
            )
        }
        _ => format!("{}{rate}{resumed}", bytes(p.done)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_shows_progress_rate_and_resume() {
        let p = Progress {
            done: 50_000_000,
            total: Some(100_000_000),
            resumed_from: 25_000_000,
        };
        assert_eq!(
            bar_line(p, Duration::from_secs(5)),
            "[###############...............]  50% 50.0 MB / 100.0 MB  5.0 MB/s  (resumed at 25.0 MB)"
        );
        let p = Progress {
            done: 1_500,
            total: None,
            resumed_from: 0,
        };
        assert_eq!(bar_line(p, Duration::ZERO), "1.5 kB");
    }

    #[test]
    fn the_list_renders_as_a_table() {
        let models = vec![
            InstalledModel {
                name: "SmolLM2-135M-Instruct".into(),
                path: PathBuf::from("/data/convo/models/SmolLM2-135M-Instruct.gguf"),
                size_bytes: 98_362_432,
                default: true,
            },
            InstalledModel {
                name: "tiny".into(),
                path: PathBuf::from("/data/convo/models/tiny.gguf"),
                size_bytes: 900,
                default: false,
            },
        ];
        insta::assert_snapshot!("models", render(&models));
    }

    #[test]
    fn the_catalogue_renders_with_its_marks() {
        let row = |name, size_mb, ram_mb, fits, suggested, installed| Available {
            name,
            repo: "someone/x-GGUF",
            file: "x.gguf",
            revision: "0123",
            sha256: None,
            size_mb,
            ram_mb,
            licence: "Apache-2.0",
            good_for: "short answers",
            fits,
            suggested,
            installed,
        };
        let rows = vec![
            row("small", 398, 800, Some(true), false, true),
            row("middle", 986, 1600, Some(true), true, false),
            row("large", 2020, 3300, Some(true), false, false),
            row("huge", 9000, 12000, Some(false), false, false),
        ];
        insta::assert_snapshot!("available", render_available(&rows, Some(4_000_000_000)));
        assert!(render_available(&rows[..1], None).contains("cannot be read"));
    }
}
