//! `convo model`: the local GGUF models in `<data dir>/models/` (docs/models.md): list them,
//! import a file, remove one, pull one from Hugging Face.
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use comfy_table::Cell;

use super::{codes, fail, load_config, out, print_json, sanitize, table};
use convo_client::format::bytes;
use convo_service::models::{self, HfFile, InstalledModel, ModelError, Progress, PullOptions};

#[derive(Debug, clap::Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    pub command: ModelCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ModelCommand {
    /// List the installed models and which one is the default.
    List {
        /// Print the models as a JSON array
        #[arg(long)]
        json: bool,
    },
    /// Copy a GGUF file into the models directory.
    Import {
        /// The .gguf file
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Install under this name instead of the file's stem
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
    /// Delete an installed model.
    Rm {
        /// The model's name, as `convo model list` shows it
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Download a GGUF file from Hugging Face (HF_ENDPOINT, HF_TOKEN), resumably, and verify it.
    Pull {
        /// The file, as OWNER/REPO/FILE.gguf
        #[arg(value_name = "OWNER/REPO/FILE.gguf")]
        file: String,
        /// Branch, tag or commit of the repository
        #[arg(long, value_name = "REV", default_value = "main")]
        revision: String,
        /// Install under this name instead of the file's stem
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
        ModelCommand::List { json } => list(&dir, json),
        ModelCommand::Import { file, name } => match models::import(&dir, &file, name.as_deref()) {
            Ok(m) => installed(&m),
            Err(e) => fail_model(&e),
        },
        ModelCommand::Rm { name } => match models::remove(&dir, &name) {
            Ok(path) => {
                out(format!(
                    "removed {} ({})\n",
                    sanitize(&name),
                    path.display()
                ));
                ExitCode::SUCCESS
            }
            Err(e) => fail_model(&e),
        },
        ModelCommand::Pull {
            file,
            revision,
            name,
        } => pull(&dir, &file, revision, name).await,
    }
}

fn list(dir: &Path, json: bool) -> ExitCode {
    let models = match models::list(dir, None) {
        Ok(m) => m,
        Err(e) => return fail_model(&e),
    };
    if json {
        return print_json(&models);
    }
    if models.is_empty() {
        eprintln!("no models in {}: {}", dir.display(), models::HOW_TO_GET);
        return ExitCode::SUCCESS;
    }
    out(render(&models));
    ExitCode::SUCCESS
}

/// The human-readable list.
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

fn installed(m: &InstalledModel) -> ExitCode {
    out(format!(
        "installed {} ({}): {}\n",
        sanitize(&m.name),
        bytes(m.size_bytes),
        m.path.display()
    ));
    ExitCode::SUCCESS
}

async fn pull(dir: &Path, spec: &str, revision: String, name: Option<String>) -> ExitCode {
    let file = match HfFile::parse(spec) {
        Ok(f) => f,
        Err(e) => return fail_model(&e),
    };
    let mut options = match PullOptions::from_env() {
        Ok(o) => o,
        Err(e) => return fail_model(&e),
    };
    options.revision = revision;
    options.name = name;
    let mut bar = Bar::new(std::io::stderr().is_terminal());
    let result = models::pull(dir, &file, &options, &mut |p| bar.show(p)).await;
    bar.finish();
    match result {
        Ok(m) => installed(&m),
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
}
