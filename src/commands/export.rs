//! `convo export`: a session's transcript as Markdown or JSON, from the local store (the
//! server may be down or gone), caught up first with what the configured server holds.
use std::path::PathBuf;
use std::process::ExitCode;

use super::{
    codes, fail, find_stored_session, in_store, load_config, open_store, out, store_command_client,
    warn,
};
use convo_client::config::Config;
use convo_client::export;
use convo_client::local_store::Store;
use convo_wire::exit;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Markdown: a heading per message (role, time, tokens), the text as written
    Md,
    /// JSON: the session's fields and its messages with theirs
    Json,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The session: its id, the start of its id, or its title
    #[arg(value_name = "SESSION_ID")]
    pub session: String,
    /// What to write
    #[arg(long, value_enum, default_value_t = Format::Md)]
    pub format: Format,
    /// The same as --format json (errors are JSON on stderr with either)
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Write to FILE (readable by you only) instead of stdout; an existing FILE is kept
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// With -o: replace FILE if it exists
    #[arg(long, requires = "output")]
    pub force: bool,
}

/// With a server configured, the messages of the session that the local store lacks are read
/// from it first ([`super::catch_up`]): a session listed here but opened only on another device
/// would otherwise export without them. Without a server, or when it cannot answer, the store
/// alone is exported, with a warning saying so in the second case.
async fn catch_up(config: &Config, store: &Store, session_id: &str) {
    let client = match store_command_client(config) {
        None => return,
        Some(Ok(c)) => c,
        Some(Err(e)) => return warn(format_args!("{}: {e}", from_store_only(session_id))),
    };
    if let Err(e) = super::catch_up(&client, store, session_id).await {
        warn(format_args!("{}: {e}", from_store_only(session_id)));
    }
}

fn from_store_only(session_id: &str) -> String {
    format!(
        "could not read {session_id} from the server, so the export holds what this device's store has"
    )
}

impl ExportArgs {
    pub fn format(&self) -> Format {
        if self.json { Format::Json } else { self.format }
    }
}

pub async fn run(args: ExportArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let config = match load_config(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let store = match open_store(&config) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let session = match find_stored_session(&store, &args.session).await {
        Ok((s, None)) => {
            catch_up(&config, &store, &s.id).await;
            s
        }
        // Not the configured server's: what the store keeps of it is all there is here.
        Ok((s, Some(target))) => {
            warn(format_args!(
                "{} is a session of {}, not of the configured server: exported from the local store",
                s.id,
                super::sanitize(&target)
            ));
            s
        }
        Err(code) => return code,
    };
    let transcript = match in_store(store, move |s| {
        // Caught up, the session's token total may have changed.
        let session = s.session(&session.id)?.unwrap_or(session);
        export::load(s, session)
    })
    .await
    {
        Ok(t) => t,
        Err(code) => return code,
    };
    let text = match args.format() {
        Format::Md => export::markdown(&transcript),
        Format::Json => match serde_json::to_string_pretty(&export::json(&transcript)) {
            Ok(s) => format!("{s}\n"),
            Err(e) => {
                return fail(
                    exit::SERVICE_ERROR,
                    codes::IO,
                    format_args!("cannot encode JSON: {e}"),
                );
            }
        },
    };
    let Some(path) = args.output else {
        out(text);
        return ExitCode::SUCCESS;
    };
    if path.is_dir() {
        return fail(
            exit::USAGE_ERROR,
            codes::INVALID_ARGUMENT,
            format_args!(
                "{} is a directory: -o takes the name of the file to write",
                path.display()
            ),
        );
    }
    let (to, force) = (path.clone(), args.force);
    let written = tokio::task::spawn_blocking(move || {
        convo_client::private_file::write_private_atomic(&to, text.as_bytes(), force)
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    match written {
        Ok(()) => {
            if !super::json_stderr() {
                eprintln!(
                    "exported {} to {}",
                    export::messages(transcript.messages.len()),
                    path.display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => fail(
            exit::USAGE_ERROR,
            codes::FILE_EXISTS,
            format_args!(
                "{} already exists and was left as it is: choose another file, or add --force to replace it",
                path.display()
            ),
        ),
        Err(e) => fail(
            exit::USAGE_ERROR,
            codes::IO,
            format_args!("cannot write {}: {e}", path.display()),
        ),
    }
}
