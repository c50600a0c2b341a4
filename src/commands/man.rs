//! `convo man`: the manual page in roff, generated from the command line's definition
//! (clap_mangen): `convo.1` on stdout, or with `-o DIR` one page per command in DIR.
use std::path::PathBuf;
use std::process::ExitCode;

use super::{codes, fail, out};
use convo_wire::exit;

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write convo.1 and a page per subcommand (convo-send.1, …) into DIR instead of
    /// printing convo.1
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Renders the pages of `command` (the whole command line, from `cli`).
pub fn run(args: ManArgs, command: clap::Command) -> ExitCode {
    let Some(dir) = args.out else {
        let mut page = Vec::new();
        if let Err(e) = clap_mangen::Man::new(command).render(&mut page) {
            return fail(exit::USAGE_ERROR, codes::IO, e);
        }
        out(String::from_utf8_lossy(&page));
        return ExitCode::SUCCESS;
    };
    let written = std::fs::create_dir_all(&dir)
        .and_then(|()| clap_mangen::generate_to(command, &dir))
        .and_then(|()| pages_in(&dir));
    match written {
        Ok(pages) => {
            out(format!(
                "wrote {} pages to {}: {}\n",
                pages.len(),
                dir.display(),
                pages.join(", ")
            ));
            ExitCode::SUCCESS
        }
        Err(e) => fail(
            exit::USAGE_ERROR,
            codes::IO,
            format_args!("cannot write the man pages to {}: {e}", dir.display()),
        ),
    }
}

/// The `convo*.1` files in `dir`, sorted.
fn pages_in(dir: &std::path::Path) -> std::io::Result<Vec<String>> {
    let mut pages = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.starts_with("convo") && name.ends_with(".1") {
            pages.push(name);
        }
    }
    pages.sort();
    Ok(pages)
}
