use std::fs;
use std::path::{Path, PathBuf};

use super::*;

/// A small file that passes `check_gguf`: the magic, version 3, then some bytes.
fn fake_gguf(path: &Path, len: usize) {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.resize(len.max(8), 7);
    fs::write(path, bytes).unwrap();
}

/// A whole GGUF model file of exactly `len` bytes (at least 64): one I8 tensor holding the
/// bytes past the header, so `verify_gguf` passes it.
pub(super) fn whole_gguf(len: usize) -> Vec<u8> {
    assert!(len >= 64);
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes()); // tensors
    b.extend(0u64.to_le_bytes()); // metadata
    b.extend(1u64.to_le_bytes());
    b.push(b'w');
    b.extend(1u32.to_le_bytes());
    b.extend(((len - 64) as u64).to_le_bytes());
    b.extend(24u32.to_le_bytes()); // I8
    b.extend(0u64.to_le_bytes());
    b.resize(64, 0);
    b.extend((0..len - 64).map(|i| (i * 7) as u8));
    b
}

fn dir_with(names: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = models_dir(tmp.path());
    fs::create_dir_all(&dir).unwrap();
    for (i, n) in names.iter().enumerate() {
        fake_gguf(&dir.join(format!("{n}.gguf")), 16 + i);
    }
    (tmp, dir)
}

fn names(models: &[InstalledModel]) -> Vec<&str> {
    models.iter().map(|m| m.name.as_str()).collect()
}

fn default_of(models: &[InstalledModel]) -> Option<&str> {
    models.iter().find(|m| m.default).map(|m| m.name.as_str())
}

#[test]
fn the_models_dir_is_in_the_data_dir() {
    assert_eq!(models_dir(Path::new("/d")), PathBuf::from("/d/models"));
}

#[test]
fn a_missing_dir_lists_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(list(&tmp.path().join("nope"), None).unwrap().is_empty());
    assert!(matches!(
        resolve(&tmp.path().join("nope"), None, None),
        Err(ModelError::NoModels { .. })
    ));
}

#[test]
fn list_counts_only_gguf_files_sorted_with_sizes() {
    let (_tmp, dir) = dir_with(&["zeta", "alpha"]);
    fs::write(dir.join(".SmolLM2-135M-Instruct.verified"), "1 2").unwrap();
    fs::write(dir.join(".beta.gguf.part"), "GGUF").unwrap();
    fs::write(dir.join("notes.txt"), "x").unwrap();
    fs::write(dir.join(".hidden.gguf"), "x").unwrap();
    fs::create_dir(dir.join("folder.gguf")).unwrap();
    let models = list(&dir, None).unwrap();
    assert_eq!(names(&models), ["alpha", "zeta"]);
    assert_eq!(models[0].size_bytes, 17);
    assert_eq!(models[0].path, dir.join("alpha.gguf"));
    assert_eq!(models[1].size_bytes, 16);
}

#[test]
fn the_default_is_preferred_then_smollm2_then_first() {
    let (_tmp, dir) = dir_with(&["b", "a"]);
    assert_eq!(default_of(&list(&dir, None).unwrap()), Some("a"));
    fake_gguf(&dir.join(format!("{DEFAULT_MODEL}.gguf")), 8);
    assert_eq!(default_of(&list(&dir, None).unwrap()), Some(DEFAULT_MODEL));
    assert_eq!(
        default_of(&list(&dir, Some("not-there")).unwrap()),
        Some(DEFAULT_MODEL)
    );
    let models = list(&dir, Some("b")).unwrap();
    assert_eq!(default_of(&models), Some("b"));
    assert_eq!(models.iter().filter(|m| m.default).count(), 1);
    assert_eq!(resolve(&dir, None, Some("b")).unwrap(), dir.join("b.gguf"));
    assert_eq!(
        resolve(&dir, None, None).unwrap(),
        dir.join(format!("{DEFAULT_MODEL}.gguf"))
    );
}

#[test]
fn resolve_takes_names_and_paths() {
    let (tmp, dir) = dir_with(&["m"]);
    assert_eq!(resolve(&dir, Some("m"), None).unwrap(), dir.join("m.gguf"));
    // a path: with a slash, or ending in .gguf
    let elsewhere = tmp.path().join("other.gguf");
    fake_gguf(&elsewhere, 8);
    let arg = elsewhere.to_str().unwrap();
    assert_eq!(resolve(&dir, Some(arg), None).unwrap(), elsewhere);
    let e = resolve(&dir, Some("nothere.gguf"), None).unwrap_err();
    assert!(matches!(e, ModelError::Missing { .. }), "{e}");
    assert!(e.to_string().contains("nothere.gguf"), "{e}");
    let e = resolve(&dir, Some("nothere"), None).unwrap_err();
    assert!(matches!(e, ModelError::NotInstalled { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("`nothere`") && msg.contains(dir.to_str().unwrap()),
        "{msg}"
    );
    assert!(msg.contains("scripts/fetch-model.sh"), "{msg}");
    assert!(msg.contains("convo model pull"), "{msg}");
    assert!(msg.contains("convo model import"), "{msg}");
    assert_eq!(e.exit_code(), convo_wire::exit::USAGE_ERROR);
}

#[test]
fn check_gguf_reads_the_header() {
    let tmp = tempfile::tempdir().unwrap();
    let p = |n: &str| tmp.path().join(n);
    fake_gguf(&p("ok3.gguf"), 8);
    check_gguf(&p("ok3.gguf")).unwrap();
    let mut v2 = b"GGUF".to_vec();
    v2.extend_from_slice(&2u32.to_le_bytes());
    fs::write(p("ok2.gguf"), &v2).unwrap();
    check_gguf(&p("ok2.gguf")).unwrap();

    let cases: [(&str, &[u8], &str); 4] = [
        ("short", b"GGUF\x03", "too short"),
        ("empty", b"", "too short"),
        ("magic", b"GGML\x03\0\0\0rest", "GGUF magic"),
        ("version", b"GGUF\x09\0\0\0rest", "version 9"),
    ];
    for (name, bytes, why) in cases {
        fs::write(p(name), bytes).unwrap();
        let e = check_gguf(&p(name)).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, ModelError::NotGguf { .. }), "{name}: {msg}");
        assert!(msg.contains("not a GGUF model file"), "{msg}");
        assert!(msg.contains(why), "{msg}");
        assert!(msg.contains(p(name).to_str().unwrap()), "{msg}");
        assert_eq!(e.exit_code(), convo_wire::exit::USAGE_ERROR);
    }
    let e = check_gguf(&p("absent")).unwrap_err();
    assert!(matches!(e, ModelError::Missing { .. }));
    assert!(e.to_string().contains("scripts/fetch-model.sh"), "{e}");
    let e = check_gguf(tmp.path()).unwrap_err();
    assert!(matches!(e, ModelError::NotAFile { .. }), "{e}");
    assert!(e.to_string().contains(tmp.path().to_str().unwrap()));
}

#[cfg(unix)]
#[test]
fn an_unreadable_file_is_an_io_error_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("locked.gguf");
    fake_gguf(&path, 8);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
    if fs::File::open(&path).is_ok() {
        return; // root reads anything
    }
    let e = check_gguf(&path).unwrap_err();
    assert!(matches!(e, ModelError::Io { .. }), "{e}");
    assert!(e.to_string().contains("locked.gguf"), "{e}");
}

#[test]
fn names_are_file_stems() {
    for ok in ["SmolLM2-135M-Instruct", "a", "q4 model", "x.y"] {
        validate_name(ok).unwrap();
    }
    for bad in ["", "a/b", "a\\b", ".hidden", "..", "a\nb"] {
        assert!(
            matches!(validate_name(bad), Err(ModelError::BadName { .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn import_copies_refuses_overwrite_and_remove_deletes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = models_dir(tmp.path());
    let src = tmp.path().join("Some-Model.Q4.gguf");
    fs::write(&src, whole_gguf(64)).unwrap();

    let m = import(&dir, &src, None).unwrap();
    assert_eq!(m.name, "Some-Model.Q4");
    assert_eq!(m.path, dir.join("Some-Model.Q4.gguf"));
    assert_eq!(m.size_bytes, 64);
    assert!(m.default);
    assert_eq!(fs::read(&m.path).unwrap(), fs::read(&src).unwrap());
    assert!(src.exists(), "import copies");
    assert!(!part_path(&dir, "Some-Model.Q4").exists());

    let e = import(&dir, &src, None).unwrap_err();
    assert!(matches!(e, ModelError::Exists { .. }), "{e}");
    assert!(
        e.to_string().contains("convo model rm Some-Model.Q4"),
        "{e}"
    );

    // --name, with or without .gguf
    let m = import(&dir, &src, Some("other.gguf")).unwrap();
    assert_eq!(m.name, "other");
    assert!(!m.default);
    assert!(matches!(
        import(&dir, &src, Some(".x")),
        Err(ModelError::BadName { .. })
    ));
    assert!(matches!(
        import(&dir, &src, Some("a/b")),
        Err(ModelError::BadName { .. })
    ));

    // not GGUF: nothing installed
    let bad = tmp.path().join("bad.gguf");
    fs::write(&bad, b"<html>not a model</html>").unwrap();
    assert!(matches!(
        import(&dir, &bad, None),
        Err(ModelError::NotGguf { .. })
    ));
    assert_eq!(
        names(&list(&dir, None).unwrap()),
        ["Some-Model.Q4", "other"]
    );

    // a truncated copy: nothing installed
    let head = tmp.path().join("head.gguf");
    fs::write(&head, &whole_gguf(200)[..150]).unwrap();
    let e = import(&dir, &head, None).unwrap_err();
    assert!(matches!(e, ModelError::Truncated { .. }), "{e}");
    assert!(!dir.join("head.gguf").exists() && !part_path(&dir, "head").exists());

    // remove takes the stamp along
    fs::write(dir.join(".other.verified"), "1 2").unwrap();
    assert_eq!(
        remove(&dir, "other", false, None).unwrap(),
        dir.join("other.gguf")
    );
    assert!(!dir.join(".other.verified").exists());
    let e = remove(&dir, "other", false, None).unwrap_err();
    assert!(matches!(e, ModelError::NotInstalled { .. }), "{e}");
    assert!(matches!(
        remove(&dir, "../x", false, None),
        Err(ModelError::BadName { .. })
    ));
    assert_eq!(names(&list(&dir, None).unwrap()), ["Some-Model.Q4"]);
}

#[test]
fn hf_specs_parse_and_make_resolve_urls() {
    let f = HfFile::parse("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/smollm2.gguf").unwrap();
    assert_eq!(f.repo, "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF");
    assert_eq!(f.file, "smollm2.gguf");
    let f = HfFile::parse("o/r/sub dir/x.gguf").unwrap();
    assert_eq!(f.file, "sub dir/x.gguf");
    assert_eq!(f.file_name(), "x.gguf");
    let endpoint = url::Url::parse("http://127.0.0.1:9/mirror/").unwrap();
    assert_eq!(
        f.resolve_url(&endpoint, "refs/pr/1").unwrap().as_str(),
        "http://127.0.0.1:9/mirror/o/r/resolve/refs%2Fpr%2F1/sub%20dir/x.gguf"
    );
    for bad in [
        "o/r",
        "o/r/x.bin",
        "o//x.gguf",
        "o/r/../x.gguf",
        "/r/x.gguf",
        "x.gguf",
    ] {
        assert!(
            matches!(HfFile::parse(bad), Err(ModelError::BadSpec { .. })),
            "{bad}"
        );
    }
}

#[test]
fn installed_models_serialize_in_camel_case() {
    let m = InstalledModel {
        name: "m".into(),
        path: PathBuf::from("/d/models/m.gguf"),
        size_bytes: 12,
        default: true,
    };
    assert_eq!(
        serde_json::to_value(&m).unwrap(),
        serde_json::json!({"name": "m", "path": "/d/models/m.gguf", "sizeBytes": 12, "default": true})
    );
}

#[test]
fn remove_refuses_the_model_in_use_unless_forced() {
    let (_tmp, dir) = dir_with(&["a", "b", "c"]);
    let selected = |name, configured| Some(Selected { name, configured });
    // the configured one, and the default one
    let e = remove(&dir, "a", false, selected("a", true)).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ModelError::InUse { .. }), "{msg}");
    assert!(
        msg.contains("[engine] model") && msg.contains("--force"),
        "{msg}"
    );
    let e = remove(&dir, "a", false, selected("a", false)).unwrap_err();
    assert!(e.to_string().contains("default model"), "{e}");
    assert_eq!(e.exit_code(), convo_wire::exit::USAGE_ERROR);
    // one a running engine has loaded (the lock `mark_in_use` takes)
    let held = mark_in_use(&dir.join("b.gguf")).expect("a lock");
    let e = remove(&dir, "b", false, selected("a", true)).unwrap_err();
    assert!(e.to_string().contains("has it loaded"), "{e}");
    assert!(dir.join("b.gguf").exists());
    drop(held);
    remove(&dir, "b", false, selected("a", true)).unwrap();
    // --force removes any of them
    let _held = mark_in_use(&dir.join("c.gguf")).expect("a lock");
    remove(&dir, "c", true, None).unwrap();
    remove(&dir, "a", true, selected("a", true)).unwrap();
    assert!(list(&dir, None).unwrap().is_empty());
}
