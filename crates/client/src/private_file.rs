//! Files only their owner may read (mode 0600 on Unix): the embedded service's API key, the
//! TUI's log, the recent wallet ids, exported transcripts. A leaf module, so the client and the
//! service can both use it.

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

/// Writes `bytes` to `path` as a file readable by its owner only, atomically: a temporary file
/// beside it is written in full and synced, then renamed to `path`, so that no reader sees
/// half a file and a crash leaves none. A file already at `path` is replaced only when
/// `replace` is true; otherwise it is kept and the error is `AlreadyExists` (checked by the
/// rename itself, so a file that appears meanwhile is not overwritten either).
pub fn write_private_atomic(path: &Path, bytes: &[u8], replace: bool) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // tempfile creates the file with mode 0600.
    let mut temp = tempfile::Builder::new()
        .prefix(".convo-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(without_temp_path)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    let persisted = if replace {
        temp.persist(path)
    } else {
        temp.persist_noclobber(path)
    };
    persisted.map(|_| ()).map_err(|e| e.error)
}

/// The system's error of a temporary file that could not be made, without the temporary
/// file's name (tempfile adds it: "… at path \"dir/.convo-x1y2.tmp\""), which the user never
/// named: the caller says which file it was writing.
fn without_temp_path(e: std::io::Error) -> std::io::Error {
    match e.to_string().rsplit_once(" at path ") {
        Some((system, _)) => std::io::Error::new(e.kind(), system.to_string()),
        None => e,
    }
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

    #[test]
    fn atomic_writes_are_private_and_replace_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.md");
        std::fs::write(&path, b"theirs").unwrap();
        let e = write_private_atomic(&path, b"ours", false).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&path).unwrap(), b"theirs");
        write_private_atomic(&path, b"ours", true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"ours");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let fresh = dir.path().join("fresh.md");
        write_private_atomic(&fresh, b"new", false).unwrap();
        assert_eq!(std::fs::read(&fresh).unwrap(), b"new");
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_missing_directory_is_the_system_s_error_without_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("out.md");
        let e = write_private_atomic(&path, b"ours", false).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(e.to_string(), "No such file or directory (os error 2)");
    }
}
