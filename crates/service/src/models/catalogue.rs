//! The catalogue of models `convo model pull NAME` knows (`assets/models.toml`, built in), this
//! machine's memory, and which model to suggest when the default is the tiny one.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::{DEFAULT_MODEL, HfFile, ModelError};

/// One model of the catalogue (`assets/models.toml` says what each field is).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogueModel {
    pub name: String,
    pub repo: String,
    pub file: String,
    pub revision: String,
    #[serde(default)]
    pub sha256: Option<String>,
    pub size_mb: u64,
    pub ram_mb: u64,
    pub licence: String,
    #[serde(default = "yes")]
    pub suggest: bool,
    pub good_for: String,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    model: Vec<CatalogueModel>,
}

/// The built-in catalogue, smallest first. A unit test parses it, so it cannot fail here.
pub fn catalogue() -> &'static [CatalogueModel] {
    static CATALOGUE: OnceLock<Vec<CatalogueModel>> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        toml::from_str::<CatalogueFile>(include_str!("../../../../assets/models.toml"))
            .map(|f| f.model)
            .unwrap_or_else(|e| panic!("assets/models.toml: {e}"))
    })
}

/// The catalogue's model called `name` (case does not matter).
pub fn find(name: &str) -> Option<&'static CatalogueModel> {
    catalogue()
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(name.trim()))
}

/// `find`, or an error that lists the names there are.
pub fn lookup(name: &str) -> Result<&'static CatalogueModel, ModelError> {
    find(name).ok_or_else(|| ModelError::UnknownModel {
        name: name.to_string(),
        known: catalogue()
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// What `convo model pull SPEC` fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullTarget {
    pub file: HfFile,
    /// The catalogue's pinned commit; `None` for an `OWNER/REPO/FILE.gguf` (then `main`).
    pub revision: Option<String>,
    /// The catalogue's name, which the model is installed under.
    pub name: Option<String>,
    /// The catalogue's SHA-256 of the file at `revision`.
    pub sha256: Option<String>,
}

/// A catalogue name (no `/`), or a file as `OWNER/REPO/FILE.gguf`.
pub fn pull_target(spec: &str) -> Result<PullTarget, ModelError> {
    if spec.contains('/') {
        return Ok(PullTarget {
            file: HfFile::parse(spec)?,
            revision: None,
            name: None,
            sha256: None,
        });
    }
    let m = lookup(spec)?;
    Ok(PullTarget {
        file: HfFile {
            repo: m.repo.clone(),
            file: m.file.clone(),
        },
        revision: Some(m.revision.clone()),
        name: Some(m.name.clone()),
        sha256: m.sha256.clone(),
    })
}

/// Whether a model needing `ram_mb` fits in `total` bytes of memory.
pub fn fits(model: &CatalogueModel, total: u64) -> bool {
    model.ram_mb.saturating_mul(1_000_000) <= total
}

/// The model to suggest on a machine with `total` bytes of memory: the largest one that may
/// be suggested and needs at most half of it (the rest is the system's and the user's).
pub fn suggestion(total: u64) -> Option<&'static CatalogueModel> {
    catalogue()
        .iter()
        .filter(|m| m.suggest && m.ram_mb.saturating_mul(2_000_000) <= total)
        .max_by_key(|m| m.ram_mb)
}

/// This machine's total memory in bytes (Linux: `MemTotal` in `/proc/meminfo`); `None` where
/// it cannot be read.
pub fn total_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    mem_total(&text)
}

/// `MemTotal:  24683656 kB` → bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut parts = line["MemTotal:".len()..].split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | None => n.checked_mul(1024),
        _ => None,
    }
}

/// What to say when `model` (a file stem) is the tiny default and a better model fits this
/// machine: one line naming the pull and how to select it. `None` for any other model.
pub fn tiny_model_hint(model: &str, total: Option<u64>) -> Option<String> {
    if model != DEFAULT_MODEL {
        return None;
    }
    let better = suggestion(total?)?;
    Some(format!(
        "{DEFAULT_MODEL} is a tiny model and often wrong. For better replies: \
         `convo model pull {name}` ({size} MB), then set [engine] model = \"{name}\" \
         (or `convo serve --model {name}`).",
        name = better.name,
        size = better.size_mb,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1_000_000_000;

    #[test]
    fn the_catalogue_parses_and_every_entry_is_complete() {
        let all = catalogue();
        assert!(all.len() >= 5, "{all:?}");
        let mut names = std::collections::HashSet::new();
        for m in all {
            assert!(
                names.insert(m.name.to_ascii_lowercase()),
                "{} twice",
                m.name
            );
            super::super::validate_name(&m.name).unwrap();
            let spec = format!("{}/{}", m.repo, m.file);
            super::super::HfFile::parse(&spec).unwrap();
            assert!(!m.name.contains('/'), "a name is not a file spec");
            assert_eq!(m.revision.len(), 40, "{}: a pinned commit", m.name);
            assert!(m.revision.bytes().all(|b| b.is_ascii_hexdigit()));
            if let Some(sha) = &m.sha256 {
                assert_eq!(sha.len(), 64, "{}", m.name);
                assert!(sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
            }
            assert!(m.ram_mb > m.size_mb, "{}: the file and more", m.name);
            assert!(!m.licence.is_empty() && !m.good_for.is_empty());
        }
        // smallest first
        assert!(all.windows(2).all(|w| w[0].size_mb <= w[1].size_mb));
    }

    #[test]
    fn names_are_found_whatever_their_case_and_unknown_ones_list_the_known() {
        let first = &catalogue()[0];
        assert_eq!(find(&first.name.to_uppercase()), Some(first));
        let e = lookup("gpt-5").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("`gpt-5`"), "{msg}");
        for m in catalogue() {
            assert!(msg.contains(&m.name), "{msg}");
        }
        assert_eq!(e.exit_code(), convo_wire::exit::USAGE_ERROR);
    }

    #[test]
    fn a_pull_takes_a_name_or_a_file() {
        let m = &catalogue()[1];
        let t = pull_target(&m.name).unwrap();
        assert_eq!(t.file.repo, m.repo);
        assert_eq!(t.file.file, m.file);
        assert_eq!(t.revision.as_deref(), Some(m.revision.as_str()));
        assert_eq!(t.name.as_deref(), Some(m.name.as_str()));
        assert_eq!(t.sha256, m.sha256);
        let t = pull_target("o/r/x.gguf").unwrap();
        assert_eq!((t.revision, t.name, t.sha256), (None, None, None));
        assert!(matches!(
            pull_target("nope"),
            Err(ModelError::UnknownModel { .. })
        ));
        assert!(matches!(
            pull_target("o/r"),
            Err(ModelError::BadSpec { .. })
        ));
    }

    #[test]
    fn what_fits_and_what_is_suggested_follow_the_memory() {
        let small = &catalogue()[0];
        assert!(fits(small, small.ram_mb * 1_000_000));
        assert!(!fits(small, small.ram_mb * 1_000_000 - 1));
        assert_eq!(suggestion(GB / 2), None, "nothing fits in half of 0.5 GB");
        // More memory never suggests a smaller model; what is suggested needs at most half.
        let mut last = 0;
        for gb in [2, 4, 8, 16, 64] {
            let s = suggestion(gb * GB).expect("something fits");
            assert!(s.suggest);
            assert!(s.ram_mb * 2_000_000 <= gb * GB, "{gb} GB: {}", s.name);
            assert!(s.ram_mb >= last);
            last = s.ram_mb;
        }
    }

    #[test]
    fn meminfo_gives_the_total_in_bytes() {
        let text = "MemTotal:       24683656 kB\nMemFree:        21792916 kB\n";
        assert_eq!(mem_total(text), Some(24_683_656 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total("MemTotal: lots\n"), None);
        if cfg!(target_os = "linux") {
            assert!(total_memory().unwrap() > 100_000_000);
        }
    }

    #[test]
    fn the_hint_is_for_the_tiny_default_only() {
        let hint = tiny_model_hint(DEFAULT_MODEL, Some(16 * GB)).unwrap();
        let s = suggestion(16 * GB).unwrap();
        assert!(
            hint.contains(&format!("convo model pull {}", s.name)),
            "{hint}"
        );
        assert!(
            hint.contains(&format!("[engine] model = \"{}\"", s.name)),
            "{hint}"
        );
        assert!(hint.contains("tiny"), "{hint}");
        assert_eq!(tiny_model_hint("qwen2.5-1.5b", Some(16 * GB)), None);
        assert_eq!(tiny_model_hint(DEFAULT_MODEL, None), None);
        assert_eq!(tiny_model_hint(DEFAULT_MODEL, Some(GB / 2)), None);
    }
}
