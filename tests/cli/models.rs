//! `convo model`: list, import, rm on a temporary data dir, and pull from a fake Hugging Face
//! hub on 127.0.0.1 that answers the way the real one does (a 302 from `resolve` to a CDN
//! path with `x-linked-etag` and `x-linked-size`, a CDN that honours `Range`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use convo_service::models::catalogue::{self, catalogue};

use super::support::Sandbox;

/// A whole GGUF model file of exactly `len` bytes (at least 64) that passes convo's checks:
/// the header, one I8 tensor, and its `len - 64` varied bytes of data.
fn gguf_bytes(len: usize) -> Vec<u8> {
    assert!(len >= 64);
    let mut bytes = b"GGUF".to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes()); // one tensor
    bytes.extend_from_slice(&0u64.to_le_bytes()); // no metadata
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.push(b'w');
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&((len - 64) as u64).to_le_bytes());
    bytes.extend_from_slice(&24u32.to_le_bytes()); // I8
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.resize(64, 0);
    let mut x: u32 = 12345;
    while bytes.len() < len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        bytes.push((x >> 16) as u8);
    }
    bytes
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The default data dir in a sandbox (Linux layout: $XDG_DATA_HOME/convo).
fn models_in(s: &Sandbox) -> PathBuf {
    s.home().join("data").join("convo").join("models")
}

#[tokio::test]
async fn list_json_import_and_rm() {
    let s = Sandbox::new();
    // Nothing yet: a helpful line, exit 0; JSON is an empty array.
    let empty = s.run(&["model", "list"]).await.expect(0);
    assert_eq!(empty.stdout, "");
    assert!(
        empty.stderr.contains("no models in")
            && empty.stderr.contains("scripts/fetch-model.sh")
            && empty.stderr.contains("convo model pull"),
        "{}",
        empty.stderr
    );
    assert_eq!(
        s.run(&["model", "list", "--json"]).await.expect(0).json(),
        serde_json::json!([])
    );

    let dir = models_in(&s);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("beta.gguf"), gguf_bytes(100)).unwrap();
    std::fs::write(dir.join("alpha.gguf"), gguf_bytes(2_000)).unwrap();
    std::fs::write(dir.join(".alpha.verified"), "x").unwrap();
    std::fs::write(dir.join(".gamma.gguf.part"), "GGUF").unwrap();

    let listed = s.run(&["model", "list", "--json"]).await.expect(0).json();
    assert_eq!(
        listed,
        serde_json::json!([
            {"name": "alpha", "path": dir.join("alpha.gguf"), "sizeBytes": 2000, "default": true},
            {"name": "beta", "path": dir.join("beta.gguf"), "sizeBytes": 100, "default": false},
        ])
    );
    let table = s.run(&["model", "list"]).await.expect(0);
    assert!(
        table.stdout.contains("alpha") && table.stdout.contains("2.0 kB"),
        "{}",
        table.stdout
    );

    // import a file from elsewhere, under its stem and under --name
    let src = s.home().join("SmolLM2-135M-Instruct.gguf");
    std::fs::write(&src, gguf_bytes(300)).unwrap();
    let src_arg = src.to_str().unwrap();
    let imported = s.run(&["model", "import", src_arg]).await.expect(0);
    assert!(
        imported
            .stdout
            .starts_with("installed SmolLM2-135M-Instruct (300 B): "),
        "{}",
        imported.stdout
    );
    s.run(&["model", "import", src_arg, "--name", "copy"])
        .await
        .expect(0);
    let again = s.run(&["model", "import", src_arg]).await.expect(2);
    assert!(
        again.stderr.contains("already installed"),
        "{}",
        again.stderr
    );
    let listed = s.run(&["model", "list", "--json"]).await.expect(0).json();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["SmolLM2-135M-Instruct", "alpha", "beta", "copy"]);
    // SmolLM2-135M-Instruct is the default when installed
    assert_eq!(listed[0]["default"], true);
    assert_eq!(listed[1]["default"], false);
    assert_eq!(
        std::fs::read(dir.join("copy.gguf")).unwrap(),
        gguf_bytes(300)
    );

    let removed = s.run(&["model", "rm", "copy"]).await.expect(0);
    assert!(
        removed.stdout.starts_with("removed copy ("),
        "{}",
        removed.stdout
    );
    let gone = s.run(&["model", "rm", "copy"]).await.expect(2);
    assert!(
        gone.stderr.contains("no model named `copy`"),
        "{}",
        gone.stderr
    );
    s.run(&["model", "rm", "alpha"]).await.expect(0);
    assert!(
        !dir.join(".alpha.verified").exists(),
        "the stamp goes with the model"
    );
    let listed = s.run(&["model", "list", "--json"]).await.expect(0).json();
    assert_eq!(listed.as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn bad_files_are_usage_errors_naming_the_path() {
    let s = Sandbox::new();
    let data = s.home().join("elsewhere");
    let data_arg = data.to_str().unwrap();
    let cases: [(&str, &[u8], &str); 3] = [
        (
            "page.gguf",
            b"<!doctype html><html>",
            "not a GGUF model file",
        ),
        ("short.gguf", b"GGU", "too short"),
        ("v9.gguf", b"GGUF\x09\0\0\0........", "version 9"),
    ];
    for (name, bytes, why) in cases {
        let path = s.home().join(name);
        std::fs::write(&path, bytes).unwrap();
        let run = s
            .run_env(
                &["model", "import", path.to_str().unwrap()],
                &[("CONVO_DATA_DIR", data_arg)],
            )
            .await
            .expect(2);
        assert!(
            run.stderr.contains(path.to_str().unwrap()),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains(why), "{}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    }
    let missing = s.home().join("missing.gguf");
    let run = s
        .run(&[
            "model",
            "import",
            missing.to_str().unwrap(),
            "--data-dir",
            data_arg,
        ])
        .await
        .expect(2);
    assert!(
        run.stderr.contains(missing.to_str().unwrap()),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("does not exist"), "{}", run.stderr);
    let run = s
        .run(&["model", "import", s.home().to_str().unwrap()])
        .await
        .expect(2);
    assert!(run.stderr.contains("is not a file"), "{}", run.stderr);
    let bad_name = s.home().join("ok.gguf");
    std::fs::write(&bad_name, gguf_bytes(64)).unwrap();
    let run = s
        .run(&[
            "model",
            "import",
            bad_name.to_str().unwrap(),
            "--name",
            ".hidden",
        ])
        .await
        .expect(2);
    assert!(
        run.stderr.contains("not a valid model name"),
        "{}",
        run.stderr
    );
    // nothing was installed, and no partial file is left
    assert!(
        !data.join("models").exists()
            || std::fs::read_dir(data.join("models"))
                .unwrap()
                .next()
                .is_none()
    );
}

/// A fake hub serving one file.
struct Hub {
    /// `owner/repo`, revision and file it serves.
    repo: String,
    revision: String,
    file: String,
    content: Vec<u8>,
    /// What it claims the SHA-256 is (the truth unless a test makes it lie).
    claimed_sha256: String,
    /// The `Range` header of every CDN GET.
    ranges: Mutex<Vec<Option<String>>>,
    /// The `Authorization` header of every resolve request.
    auth: Mutex<Vec<Option<String>>>,
}

impl Hub {
    fn new(content: Vec<u8>) -> Hub {
        Hub {
            repo: "someone/tiny-GGUF".into(),
            revision: "main".into(),
            file: "Tiny-Model.Q4.gguf".into(),
            claimed_sha256: sha256_hex(&content),
            content,
            ranges: Mutex::new(Vec::new()),
            auth: Mutex::new(Vec::new()),
        }
    }
}

async fn resolve(
    State(hub): State<Arc<Hub>>,
    UrlPath((owner, repo, rev, file)): UrlPath<(String, String, String, String)>,
    headers: HeaderMap,
) -> Response {
    hub.auth.lock().unwrap().push(
        headers
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap().to_string()),
    );
    if format!("{owner}/{repo}") != hub.repo || rev != hub.revision || file != hub.file {
        return (StatusCode::NOT_FOUND, "Entry not found").into_response();
    }
    let etag = format!("\"{}\"", hub.claimed_sha256);
    (
        StatusCode::FOUND,
        [
            (
                header::LOCATION,
                format!("/cdn/xet/{file}?X-Amz-Signature=abc"),
            ),
            (header::ETAG, etag.clone()),
            (header::HeaderName::from_static("x-linked-etag"), etag),
            (
                header::HeaderName::from_static("x-linked-size"),
                hub.content.len().to_string(),
            ),
            (
                header::HeaderName::from_static("x-repo-commit"),
                "0123abcd".to_string(),
            ),
        ],
    )
        .into_response()
}

async fn cdn(State(hub): State<Arc<Hub>>, headers: HeaderMap) -> Response {
    let range = headers
        .get(header::RANGE)
        .map(|v| v.to_str().unwrap().to_string());
    hub.ranges.lock().unwrap().push(range.clone());
    let len = hub.content.len();
    let start = match range.as_deref().and_then(|r| r.strip_prefix("bytes=")) {
        Some(r) => r.split('-').next().unwrap().parse::<usize>().unwrap(),
        None => {
            return (
                StatusCode::OK,
                [(header::ACCEPT_RANGES, "bytes")],
                hub.content.clone(),
            )
                .into_response();
        }
    };
    if start >= len {
        return StatusCode::RANGE_NOT_SATISFIABLE.into_response();
    }
    (
        StatusCode::PARTIAL_CONTENT,
        [(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{len}", len - 1),
        )],
        hub.content[start..].to_vec(),
    )
        .into_response()
}

/// Starts the hub; returns its endpoint (for HF_ENDPOINT).
async fn start_hub(hub: Arc<Hub>) -> String {
    let app = Router::new()
        .route("/{owner}/{repo}/resolve/{rev}/{*file}", get(resolve))
        .route("/cdn/xet/{*file}", get(cdn))
        .with_state(hub);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

async fn pull(s: &Sandbox, endpoint: &str, data: &Path, extra: &[&str]) -> super::support::Run {
    let mut args = vec![
        "model",
        "pull",
        "someone/tiny-GGUF/Tiny-Model.Q4.gguf",
        "--data-dir",
    ];
    args.push(data.to_str().unwrap());
    args.extend_from_slice(extra);
    s.run_env(
        &args,
        &[("HF_ENDPOINT", endpoint), ("HF_TOKEN", "hf_testtoken")],
    )
    .await
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn pull_downloads_verifies_and_installs() {
    let content = gguf_bytes(300_000);
    let hub = Arc::new(Hub::new(content.clone()));
    let endpoint = start_hub(hub.clone()).await;
    let s = Sandbox::new();
    let data = s.home().join("d");

    let run = pull(&s, &endpoint, &data, &[]).await.expect(0);
    let models = data.join("models");
    assert_eq!(
        run.stdout,
        format!(
            "installed Tiny-Model.Q4 (300.0 kB): {}\n",
            models.join("Tiny-Model.Q4.gguf").display()
        )
    );
    assert_eq!(
        std::fs::read(models.join("Tiny-Model.Q4.gguf")).unwrap(),
        content
    );
    assert_eq!(
        entries(&models),
        ["Tiny-Model.Q4.gguf"],
        "no partial file left"
    );
    assert_eq!(*hub.ranges.lock().unwrap(), [None], "one plain GET");
    assert!(
        hub.auth
            .lock()
            .unwrap()
            .iter()
            .all(|a| a.as_deref() == Some("Bearer hf_testtoken")),
        "HF_TOKEN goes to the hub: {:?}",
        hub.auth.lock().unwrap()
    );
    // no progress bar when stderr is not a terminal; how to use the model
    assert_eq!(
        run.stderr,
        "to use it: set [engine] model = \"Tiny-Model.Q4\" in the config file (`convo config` shows where), or `convo serve --model Tiny-Model.Q4`\n"
    );

    // an installed name is refused before anything is fetched; --name installs a second copy
    let taken = pull(&s, &endpoint, &data, &[]).await.expect(2);
    assert!(
        taken.stderr.contains("already installed"),
        "{}",
        taken.stderr
    );
    assert_eq!(hub.ranges.lock().unwrap().len(), 1);
    pull(&s, &endpoint, &data, &["--name", "second"])
        .await
        .expect(0);
    assert_eq!(std::fs::read(models.join("second.gguf")).unwrap(), content);

    // a revision that is not there, and a bad spec
    let missing = pull(
        &s,
        &endpoint,
        &data,
        &["--revision", "v9", "--name", "third"],
    )
    .await
    .expect(1);
    assert!(missing.stderr.contains("HTTP 404"), "{}", missing.stderr);
    assert!(
        missing.stderr.contains("/resolve/v9/"),
        "{}",
        missing.stderr
    );
    let bad = s
        .run_env(
            &[
                "model",
                "pull",
                "just-a-name",
                "--data-dir",
                data.to_str().unwrap(),
            ],
            &[("HF_ENDPOINT", &endpoint)],
        )
        .await
        .expect(2);
    assert!(
        bad.stderr.contains("OWNER/REPO/FILE.gguf"),
        "{}",
        bad.stderr
    );
    // a name that is not in the catalogue lists the names that are
    assert!(
        bad.stderr
            .contains("no model named `just-a-name` in the catalogue")
    );
    for m in catalogue() {
        assert!(bad.stderr.contains(&m.name), "{}", bad.stderr);
    }
}

#[tokio::test]
async fn pull_resumes_a_partial_file_with_a_range_request() {
    let content = gguf_bytes(200_001);
    let hub = Arc::new(Hub::new(content.clone()));
    let endpoint = start_hub(hub.clone()).await;
    let s = Sandbox::new();
    let data = s.home().join("d");
    let models = data.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let half = content.len() / 2;
    std::fs::write(models.join(".Tiny-Model.Q4.gguf.part"), &content[..half]).unwrap();

    pull(&s, &endpoint, &data, &[]).await.expect(0);
    assert_eq!(
        *hub.ranges.lock().unwrap(),
        [Some(format!("bytes={half}-"))],
        "continued from the partial file"
    );
    assert_eq!(
        std::fs::read(models.join("Tiny-Model.Q4.gguf")).unwrap(),
        content
    );
    assert_eq!(entries(&models), ["Tiny-Model.Q4.gguf"]);
}

#[tokio::test]
async fn a_checksum_mismatch_installs_nothing() {
    let content = gguf_bytes(50_000);
    let mut hub = Hub::new(content);
    hub.claimed_sha256 = sha256_hex(b"something else");
    let hub = Arc::new(hub);
    let endpoint = start_hub(hub.clone()).await;
    let s = Sandbox::new();
    let data = s.home().join("d");

    let run = pull(&s, &endpoint, &data, &[]).await.expect(1);
    assert!(
        run.stderr.contains("does not match the hub's checksum"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(&hub.claimed_sha256), "{}", run.stderr);
    assert_eq!(
        entries(&data.join("models")),
        Vec::<String>::new(),
        "no model, no partial file"
    );
    let listed = s
        .run(&[
            "model",
            "list",
            "--json",
            "--data-dir",
            data.to_str().unwrap(),
        ])
        .await
        .expect(0)
        .json();
    assert_eq!(listed, serde_json::json!([]));
}

/// `convo model pull NAME` takes the catalogue's repository, file and pinned commit, installs
/// under the catalogue's name, and checks the catalogue's SHA-256 against the hub's before
/// downloading anything.
#[tokio::test]
async fn pull_by_catalogue_name() {
    // An entry without a SHA-256: the hub's is checked, as for any file.
    let entry = catalogue()
        .iter()
        .find(|m| m.sha256.is_none())
        .expect("the catalogue has an entry the hub's checksum verifies");
    let content = gguf_bytes(120_000);
    let mut hub = Hub::new(content.clone());
    hub.repo = entry.repo.clone();
    hub.revision = entry.revision.clone();
    hub.file = entry.file.clone();
    let hub = Arc::new(hub);
    let endpoint = start_hub(hub.clone()).await;
    let s = Sandbox::new();
    let data = s.home().join("d");
    let data_arg = data.to_str().unwrap();
    let run = s
        .run_env(
            &[
                "model",
                "pull",
                &entry.name.to_uppercase(),
                "--data-dir",
                data_arg,
            ],
            &[("HF_ENDPOINT", &endpoint)],
        )
        .await
        .expect(0);
    let path = data.join("models").join(format!("{}.gguf", entry.name));
    assert_eq!(
        run.stdout,
        format!("installed {} (120.0 kB): {}\n", entry.name, path.display())
    );
    assert_eq!(std::fs::read(&path).unwrap(), content);
    assert!(
        run.stderr
            .contains(&format!("[engine] model = \"{}\"", entry.name)),
        "{}",
        run.stderr
    );
    // It shows as installed in the catalogue.
    let listed = s
        .run(&[
            "model",
            "list",
            "--available",
            "--json",
            "--data-dir",
            data_arg,
        ])
        .await
        .expect(0)
        .json();
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == entry.name.as_str())
        .unwrap();
    assert_eq!(row["installed"], true);

    // An entry with a SHA-256 the hub does not agree with: refused before any download.
    let pinned = catalogue()
        .iter()
        .find(|m| m.sha256.is_some())
        .expect("an entry with a SHA-256");
    let mut hub = Hub::new(gguf_bytes(1_000));
    hub.repo = pinned.repo.clone();
    hub.revision = pinned.revision.clone();
    hub.file = pinned.file.clone();
    let hub = Arc::new(hub);
    let endpoint = start_hub(hub.clone()).await;
    let run = s
        .run_env(
            &["model", "pull", &pinned.name, "--data-dir", data_arg],
            &[("HF_ENDPOINT", &endpoint)],
        )
        .await
        .expect(1);
    assert!(
        run.stderr.contains("not the catalogue's model")
            && run.stderr.contains(pinned.sha256.as_deref().unwrap()),
        "{}",
        run.stderr
    );
    assert!(hub.ranges.lock().unwrap().is_empty(), "nothing downloaded");
    assert!(
        !data
            .join("models")
            .join(format!("{}.gguf", pinned.name))
            .exists()
    );
}

#[tokio::test]
async fn import_refuses_a_truncated_model() {
    let s = Sandbox::new();
    let whole = gguf_bytes(10_000);
    let head = s.home().join("head.gguf");
    std::fs::write(&head, &whole[..5_000]).unwrap();
    let run = s
        .run(&["model", "import", head.to_str().unwrap()])
        .await
        .expect(2);
    assert!(
        run.stderr.contains("is truncated")
            && run
                .stderr
                .contains("declares 10000 bytes, the file has 5000"),
        "{}",
        run.stderr
    );
    assert_eq!(
        s.run(&["model", "list", "--json"]).await.expect(0).json(),
        serde_json::json!([])
    );
}

/// `list` marks the model the configuration selects; `rm` keeps it (and the default) unless
/// forced.
#[tokio::test]
async fn list_marks_the_configured_model_and_rm_keeps_it() {
    let s = Sandbox::new();
    let dir = models_in(&s);
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["alpha", "beta", "SmolLM2-135M-Instruct"] {
        std::fs::write(dir.join(format!("{name}.gguf")), gguf_bytes(100)).unwrap();
    }
    let default_of = |listed: &serde_json::Value| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["default"] == true)
            .map(|m| m["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let listed = s.run(&["model", "list", "--json"]).await.expect(0).json();
    assert_eq!(default_of(&listed), ["SmolLM2-135M-Instruct"]);
    // The tiny default: `list` says which pull would be better here.
    let table = s.run(&["model", "list"]).await.expect(0);
    match catalogue::total_memory().and_then(catalogue::suggestion) {
        Some(better) => assert!(
            table.stderr.contains("tiny model")
                && table
                    .stderr
                    .contains(&format!("convo model pull {}", better.name)),
            "{}",
            table.stderr
        ),
        None => assert_eq!(table.stderr, ""),
    }
    let rm = s
        .run(&["model", "rm", "SmolLM2-135M-Instruct"])
        .await
        .expect(2);
    assert!(
        rm.stderr.contains("is in use: it is the default model") && rm.stderr.contains("--force"),
        "{}",
        rm.stderr
    );

    let config = s.default_config_file();
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[engine]\nmodel = \"beta\"\n").unwrap();
    let listed = s.run(&["model", "list", "--json"]).await.expect(0).json();
    assert_eq!(default_of(&listed), ["beta"]);
    let table = s.run(&["model", "list"]).await.expect(0);
    assert_eq!(table.stderr, "", "beta is not the tiny one");
    let rm = s.run(&["model", "rm", "beta"]).await.expect(2);
    assert!(
        rm.stderr
            .contains("it is the model the configuration selects ([engine] model)"),
        "{}",
        rm.stderr
    );
    // Not the selected one any more: the old default goes without --force.
    s.run(&["model", "rm", "SmolLM2-135M-Instruct"])
        .await
        .expect(0);
    s.run(&["model", "rm", "beta", "--force"]).await.expect(0);
    // A configured model that is not installed is pointed out.
    let table = s.run(&["model", "list"]).await.expect(0);
    assert!(
        table.stderr.contains("[engine] model = \"beta\"")
            && table.stderr.contains("is not installed"),
        "{}",
        table.stderr
    );
    // An engine that is not local keeps nothing.
    std::fs::write(&config, "[engine]\nkind = \"openai\"\nmodel = \"alpha\"\n").unwrap();
    s.run(&["model", "rm", "alpha"]).await.expect(0);
}

#[tokio::test]
async fn list_available_shows_the_catalogue_and_what_fits() {
    let s = Sandbox::new();
    let run = s.run(&["model", "list", "--available"]).await.expect(0);
    for m in catalogue() {
        assert!(run.stdout.contains(&m.name), "{}", run.stdout);
    }
    assert!(
        run.stdout.contains("convo model pull NAME"),
        "{}",
        run.stdout
    );
    let listed = s
        .run(&["model", "list", "--available", "--json"])
        .await
        .expect(0)
        .json();
    let rows = listed.as_array().unwrap();
    assert_eq!(rows.len(), catalogue().len());
    let memory = catalogue::total_memory();
    for (row, m) in rows.iter().zip(catalogue()) {
        assert_eq!(row["name"], m.name.as_str());
        assert_eq!(row["repo"], m.repo.as_str());
        assert_eq!(row["ramMb"], m.ram_mb);
        assert_eq!(row["installed"], false);
        let fits = memory.map(|t| catalogue::fits(m, t));
        assert_eq!(row["fits"], serde_json::json!(fits), "{row}");
    }
    let suggested: Vec<_> = rows.iter().filter(|r| r["suggested"] == true).collect();
    let expected = memory.and_then(catalogue::suggestion);
    assert_eq!(suggested.len(), usize::from(expected.is_some()));
}

/// A running `convo serve` has its model loaded: `rm` refuses it even when no configuration
/// selects it, and deletes it once the service has stopped.
#[tokio::test]
#[cfg(feature = "local-model")]
async fn rm_refuses_the_model_a_running_service_has_loaded() {
    use tokio::io::AsyncBufReadExt;
    let model = std::env::var_os("CONVO_TEST_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            convo_client::config::default_data_dir()
                .expect("a data dir")
                .join("models/SmolLM2-135M-Instruct.gguf")
        });
    assert!(
        model.is_file(),
        "{} is missing: run scripts/fetch-model.sh",
        model.display()
    );
    let s = Sandbox::new();
    let dir = models_in(&s);
    std::fs::create_dir_all(&dir).unwrap();
    // A private copy: the lock is on the file, and other tests running now load the shared one.
    let private = dir.parent().unwrap().join("private-model.gguf");
    std::fs::copy(&model, &private).unwrap();
    let model = private;
    std::os::unix::fs::symlink(&model, dir.join("loaded.gguf")).unwrap();
    // The client's configuration runs another engine: only the running service holds it.
    let config = s.default_config_file();
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[engine]\nkind = \"builtin\"\n").unwrap();
    let mut serve = s
        .command(&[
            "serve",
            "--engine",
            "local",
            "--model",
            "loaded",
            "--addr",
            "127.0.0.1:0",
            "--db",
            ":memory:",
        ])
        .env("RUST_LOG", "off")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    tokio::io::BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut line)
        .await
        .unwrap();
    assert!(line.starts_with("listening on"), "{line}");
    let rm = s.run(&["model", "rm", "loaded"]).await.expect(2);
    assert!(
        rm.stderr
            .contains("a running convo (the TUI or `convo serve`) has it loaded"),
        "{}",
        rm.stderr
    );
    assert!(dir.join("loaded.gguf").exists());
    serve.kill().await.unwrap();
    s.run(&["model", "rm", "loaded"]).await.expect(0);
    assert!(!dir.join("loaded.gguf").exists());
    assert!(model.is_file(), "only the link is removed");
}
