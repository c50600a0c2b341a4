//! One TUI per data dir. Two would each run their own embedded service on the same database
//! and neither would see the other's messages as they come, so the second says that another
//! is running and stops, before it touches the terminal (docs/tui.md, "One instance per data
//! dir"). The lock is an advisory lock on `<data dir>/tui.lock`, which the system drops when
//! the process ends however it ends, so a crash never leaves a stale lock behind.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Held for as long as the TUI runs.
#[derive(Debug)]
pub struct InstanceLock {
    _file: File,
}

/// Takes the data dir's lock, or says who holds it.
pub fn lock(data_dir: &Path) -> Result<InstanceLock, String> {
    std::fs::create_dir_all(data_dir)
        .map_err(|e| format!("cannot create the data dir {}: {e}", data_dir.display()))?;
    let path = data_dir.join("tui.lock");
    let mut file = convo_client::private_file::options()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {
            // Who holds it, for the message another instance shows.
            let _ = file.set_len(0);
            let _ = file.seek(SeekFrom::Start(0));
            let _ = write!(file, "{}", std::process::id());
            let _ = file.flush();
            Ok(InstanceLock { _file: file })
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let who = match pid.trim() {
                "" => String::new(),
                pid => format!(" (pid {pid})"),
            };
            Err(format!(
                "another convo is already running on {}{who}: switch to it, or quit it first; \
                 to run a second one, give it its own data dir (CONVO_DATA_DIR)",
                data_dir.display()
            ))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_data_dir_is_refused_until_the_first_goes() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path()).unwrap();
        let err = lock(dir.path()).unwrap_err();
        assert!(err.contains("already running"), "{err}");
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        assert!(err.contains("CONVO_DATA_DIR"), "{err}");
        // Another data dir is another instance.
        let other = tempfile::tempdir().unwrap();
        assert!(lock(other.path()).is_ok());
        drop(first);
        assert!(
            lock(dir.path()).is_ok(),
            "free again once the first has gone"
        );
    }
}
