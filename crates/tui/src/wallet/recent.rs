//! The recent wallet ids: most recent first, at most [`MAX_RECENT`], kept in a small JSON
//! file in the data directory so that the prompt remembers them across runs.

use std::io;
use std::path::{Path, PathBuf};

/// Ids remembered.
pub const MAX_RECENT: usize = 10;
/// The file in the data directory.
pub const FILE_NAME: &str = "recent-wallets.json";

/// Where the recent ids live for a data directory.
pub fn path_in(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// Puts `id` first, without repeats, keeping at most [`MAX_RECENT`].
pub fn remember(recent: &mut Vec<String>, id: &str) {
    recent.retain(|r| r != id);
    recent.insert(0, id.to_string());
    recent.truncate(MAX_RECENT);
}

/// Reads the recent ids; a missing file is no ids. Entries that are not plausible ids
/// (empty, too long, with spaces or control characters) are dropped.
pub fn load(path: &Path) -> io::Result<Vec<String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let ids: Vec<String> =
        serde_json::from_str(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut out = Vec::new();
    for id in ids {
        if super::validate_id(&id).is_ok() && !out.contains(&id) {
            out.push(id);
        }
    }
    out.truncate(MAX_RECENT);
    Ok(out)
}

/// Writes the recent ids (through a temporary file and a rename, so a crash never leaves
/// half a file).
pub fn save(path: &Path, ids: &[String]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    let json = serde_json::to_string_pretty(ids).map_err(io::Error::other)?;
    // A leftover temporary file would keep its mode: start from a new one, readable by its
    // owner only (the ids say which wallets the user looks at).
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    convo_client::private_file::write_private(&tmp, json.as_bytes())?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remember_moves_an_id_to_the_front_and_caps_the_list() {
        let mut r = vec!["a".to_string(), "b".to_string()];
        remember(&mut r, "b");
        assert_eq!(r, ["b", "a"]);
        for i in 0..20 {
            remember(&mut r, &format!("w{i}"));
        }
        assert_eq!(r.len(), MAX_RECENT);
        assert_eq!(r[0], "w19");
    }

    #[test]
    fn ids_survive_a_save_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(&dir.path().join("nested"));
        assert_eq!(load(&path).unwrap(), Vec::<String>::new());
        save(&path, &["treasury".to_string(), "flagged".to_string()]).unwrap();
        assert_eq!(load(&path).unwrap(), ["treasury", "flagged"]);
        std::fs::write(&path, r#"["ok", "", "has space", "ok", "x\u001b"]"#).unwrap();
        assert_eq!(load(&path).unwrap(), ["ok"]);
        std::fs::write(&path, "not json").unwrap();
        assert!(load(&path).is_err());
    }
}
