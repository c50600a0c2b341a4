//! Files only their owner may read (mode 0600 on Unix): the embedded service's API key, the
//! TUI's log, the recent wallet ids. A leaf module, so the client and the service can both use it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// Open options that create a file with mode 0600 (the mode applies only when the file is new).
pub fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Writes `bytes` to `path`, replacing what was there; a new file is readable by its owner only.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = options().write(true).truncate(true).open(path)?;
    file.write_all(bytes)
}

/// Opens `path` for appending, creating it readable by its owner only.
pub fn append_private(path: &Path) -> std::io::Result<File> {
    options().append(true).open(path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn new_files_are_private_and_writes_replace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        write_private(&path, b"first, longer").unwrap();
        write_private(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mut log = append_private(&dir.path().join("log")).unwrap();
        log.write_all(b"a").unwrap();
        let mode = std::fs::metadata(dir.path().join("log"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
