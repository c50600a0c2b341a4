//! Sessions' KV state on disk (`LocalOptions::kv_dir`), so that a conversation continues after
//! a restart without its prompt being read again.
//!
//! A state file is llama.cpp's sequence state (`llama_state_seq_save_file`), which holds the
//! tokens whose cells it saves. Files live in `<kv dir>/<model id>/<session hash>.kv`: the
//! model id is taken from the model file's contents (`model_id`), so a state saved with another
//! model (or another version of the file) is never found; the scheduler uses a found state
//! only up to the longest prefix its tokens share with the new prompt (the same tokens at the
//! same positions have the same cells), so a stale state is never used either. The files are
//! bounded on disk: past `cap` bytes the least recently used (saved or loaded) go first, and
//! one unused for longer than a node's first look for deleted sessions reaches back
//! (`convo_wire::sessions::deletions_listed_since`, 90 days: `storage/deletions.rs`) goes at
//! the store's opening and at each save, so that no state outlives its session's deletion
//! unseen.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// How much of each end of the model file `model_id` reads.
const ID_SAMPLE: u64 = 1 << 20;

const EXTENSION: &str = "kv";

/// Where one model's saved states are, and how much disk all of them may take.
pub struct KvStore {
    root: PathBuf,
    dir: PathBuf,
    cap: u64,
}

/// An identity of the model file's contents: its length and a hash of its first and last MiB
/// (the GGUF header and metadata, and the last tensors' data), cheap to compute at every start.
pub fn model_id(model: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(model)?;
    let len = file.metadata()?.len();
    let mut hash = Sha256::new();
    hash.update(len.to_le_bytes());
    let mut buf = Vec::with_capacity(ID_SAMPLE as usize);
    file.by_ref().take(ID_SAMPLE).read_to_end(&mut buf)?;
    hash.update(&buf);
    if len > ID_SAMPLE {
        buf.clear();
        file.seek(SeekFrom::Start(
            len.saturating_sub(ID_SAMPLE).max(ID_SAMPLE),
        ))?;
        file.take(ID_SAMPLE).read_to_end(&mut buf)?;
        hash.update(&buf);
    }
    Ok(hex(&hash.finalize()[..12]))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl KvStore {
    /// The store under `root` for the model in `model` (created if missing).
    pub fn open(root: &Path, model: &Path, cap: u64) -> Result<KvStore, String> {
        let id = model_id(model)
            .map_err(|e| format!("cannot read the model {}: {e}", model.display()))?;
        let dir = root.join(id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let store = KvStore {
            root: root.to_path_buf(),
            dir,
            cap,
        };
        store.enforce_cap();
        Ok(store)
    }

    /// The file for `session`'s state (session ids are hashed: any string is a safe name).
    pub fn path(&self, session: &str) -> PathBuf {
        self.dir.join(file_name(session))
    }

    /// Where a state is written before it replaces the last one (a crash mid-write leaves no
    /// half file under the real name).
    pub fn temp_path(&self, session: &str) -> PathBuf {
        self.dir.join(format!("{}.tmp", file_name(session)))
    }

    /// `session`'s state was just written to `temp_path`: it becomes the saved state, and the
    /// oldest states go while the store is over its cap.
    pub fn commit(&self, session: &str) -> std::io::Result<()> {
        std::fs::rename(self.temp_path(session), self.path(session))?;
        self.enforce_cap();
        Ok(())
    }

    /// `session`'s saved state was used: it is now the most recently used.
    pub fn touch(&self, session: &str) {
        if let Ok(file) = std::fs::File::options()
            .append(true)
            .open(self.path(session))
        {
            let _ = file.set_modified(SystemTime::now());
        }
    }

    /// Removes `session`'s saved state, for every model (the session was deleted).
    pub fn forget(&self, session: &str) {
        let name = file_name(session);
        for dir in model_dirs(&self.root) {
            let _ = std::fs::remove_file(dir.join(&name));
        }
    }

    /// Removes the states (of every model) unused since before a first look for deleted
    /// sessions reaches back (`deletions_listed_since`), then the least recently used until all
    /// of them take at most `cap` bytes.
    pub fn enforce_cap(&self) {
        let mut files: Vec<(SystemTime, u64, PathBuf)> = model_dirs(&self.root)
            .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
            .filter(|e| e.path().extension().is_some_and(|x| x == EXTENSION))
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort();
        let oldest_kept = SystemTime::UNIX_EPOCH
            + Duration::from_millis(
                convo_wire::sessions::deletions_listed_since(crate::time::now_ms()).max(0) as u64,
            );
        for (used, len, path) in files {
            let expired = used < oldest_kept;
            if !expired && total <= self.cap {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                tracing::debug!(file = %path.display(), bytes = len, expired, "saved KV state evicted");
                total -= len;
            }
        }
    }
}

fn file_name(session: &str) -> String {
    format!(
        "{}.{EXTENSION}",
        hex(&Sha256::digest(session.as_bytes())[..16])
    )
}

fn model_dirs(root: &Path) -> impl Iterator<Item = PathBuf> {
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, bytes: usize, age_s: u64) {
        std::fs::write(path, vec![7u8; bytes]).unwrap();
        let file = std::fs::File::options().append(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - std::time::Duration::from_secs(age_s))
            .unwrap();
    }

    #[test]
    fn the_model_id_follows_the_files_contents() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.gguf");
        let b = dir.path().join("b.gguf");
        let mut bytes = vec![1u8; 3 << 20];
        std::fs::write(&a, &bytes).unwrap();
        std::fs::write(&b, &bytes).unwrap();
        // The same contents under another name: the same model.
        assert_eq!(model_id(&a).unwrap(), model_id(&b).unwrap());
        // A byte changed near the end (another version of the weights): another model.
        let n = bytes.len();
        bytes[n - 10] = 2;
        std::fs::write(&b, &bytes).unwrap();
        assert_ne!(model_id(&a).unwrap(), model_id(&b).unwrap());
        // A different length: another model.
        std::fs::write(&b, &bytes[..n - 1]).unwrap();
        assert_ne!(model_id(&a).unwrap(), model_id(&b).unwrap());
    }

    #[test]
    fn over_the_cap_the_least_recently_used_states_go() {
        let root = tempfile::tempdir().unwrap();
        let model = root.path().join("m.gguf");
        std::fs::write(&model, b"model").unwrap();
        let store = KvStore::open(&root.path().join("kv"), &model, 250).unwrap();
        write(&store.path("old"), 100, 300);
        write(&store.path("used"), 100, 200);
        write(&store.path("new"), 100, 100);
        // Loading a state makes it the most recent.
        store.touch("used");
        store.enforce_cap();
        assert!(!store.path("old").exists());
        assert!(store.path("used").exists());
        assert!(store.path("new").exists());
        write(&store.temp_path("newest"), 100, 0);
        store.commit("newest").unwrap();
        assert!(!store.path("new").exists());
        assert!(store.path("used").exists());
        assert!(store.path("newest").exists());
    }

    #[test]
    fn a_state_unused_for_longer_than_the_first_look_for_deletions_reaches_goes() {
        let root = tempfile::tempdir().unwrap();
        let model = root.path().join("m.gguf");
        std::fs::write(&model, b"model").unwrap();
        let kv = root.path().join("kv");
        let store = KvStore::open(&kv, &model, 1 << 20).unwrap();
        let day = 86_400;
        let days = convo_wire::sessions::DELETIONS_LISTED_DAYS as u64;
        write(&store.path("recent"), 100, (days - 1) * day);
        write(&store.path("expired"), 100, (days + 1) * day);
        // Another model's too: a node's first look is the same whatever model saved it.
        let other = kv.join("another-model");
        std::fs::create_dir_all(&other).unwrap();
        write(&other.join(file_name("expired too")), 100, (days + 1) * day);
        // At the store's opening (the node starts), well under the cap.
        let store = KvStore::open(&kv, &model, 1 << 20).unwrap();
        assert!(store.path("recent").exists());
        assert!(!store.path("expired").exists());
        assert!(!other.join(file_name("expired too")).exists());
        // And at a save, for a node that runs that long.
        write(&store.path("expired"), 100, (days + 1) * day);
        write(&store.temp_path("new"), 100, 0);
        store.commit("new").unwrap();
        assert!(!store.path("expired").exists());
        assert!(store.path("recent").exists());
        assert!(store.path("new").exists());
    }

    #[test]
    fn a_forgotten_session_has_no_state_for_any_model() {
        let root = tempfile::tempdir().unwrap();
        let kv = root.path().join("kv");
        let (m1, m2) = (root.path().join("1.gguf"), root.path().join("2.gguf"));
        std::fs::write(&m1, b"one").unwrap();
        std::fs::write(&m2, b"two").unwrap();
        let s1 = KvStore::open(&kv, &m1, 1 << 20).unwrap();
        let s2 = KvStore::open(&kv, &m2, 1 << 20).unwrap();
        assert_ne!(s1.path("s"), s2.path("s"));
        write(&s1.path("s"), 10, 0);
        write(&s2.path("s"), 10, 0);
        write(&s1.path("other"), 10, 0);
        s1.forget("s");
        assert!(!s1.path("s").exists());
        assert!(!s2.path("s").exists());
        assert!(s1.path("other").exists());
    }
}
