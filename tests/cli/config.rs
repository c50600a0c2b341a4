//! Configuration: fixtures of invalid files with their messages, a valid file, precedence,
//! redaction and the permission warning.

use super::support::Sandbox;

#[tokio::test]
async fn every_invalid_config_names_file_line_and_field() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/invalid_configs");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "fixtures found: {files:?}");
    let sandbox = Sandbox::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} lacks its `# expect:` line", file.display()));
        let run = sandbox
            .run(&["config", "--config", file.to_str().unwrap()])
            .await;
        assert_eq!(run.code, 2, "{}: {}", file.display(), run.stderr);
        let want = format!("convo: {}{expect}", file.display());
        assert!(
            run.stderr.starts_with(&want),
            "{}:\n want prefix: {want}\n got: {}",
            file.display(),
            run.stderr
        );
        assert_eq!(run.stderr.lines().count(), 1, "one line: {}", run.stderr);
        assert!(run.stdout.is_empty());
    }
}

#[tokio::test]
async fn a_missing_named_config_file_is_an_error() {
    let sandbox = Sandbox::new();
    let run = sandbox
        .run_env(&["config"], &[("CONVO_CONFIG", "/nonexistent/convo.toml")])
        .await
        .expect(2);
    assert!(
        run.stderr
            .contains("cannot read config file /nonexistent/convo.toml"),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn a_valid_file_is_merged_over_the_defaults_and_the_key_is_redacted() {
    let sandbox = Sandbox::new();
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/configs/valid.toml");
    let run = sandbox
        .run(&["config", "--config", file.to_str().unwrap()])
        .await
        .expect(0);
    let out = &run.stdout;
    assert!(
        out.contains(&format!("# config file: {}\n", file.display())),
        "{out}"
    );
    assert!(out.contains("base_url = \"http://127.0.0.1:1/\""), "{out}");
    assert!(out.contains("api_key = \"service_live_…0001\""), "{out}");
    assert!(
        !out.contains("fromthefile"),
        "the key is never shown in full: {out}"
    );
    assert!(out.contains("request_timeout_ms = 1500"), "{out}");
    assert!(
        out.contains("connect_timeout_ms = 5000"),
        "default kept: {out}"
    );
    assert!(out.contains("usage_refresh_secs = 30"), "{out}");
    assert!(out.contains("mouse = false"), "{out}");
    assert!(out.contains("send = \"<Ctrl-s>\""), "{out}");
    assert!(out.contains("quit = \"q\""), "default binding kept: {out}");
    // The parsed output is itself a valid TOML document.
    let body: String = out
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    body.parse::<toml::Table>().expect("TOML");
}

#[tokio::test]
async fn flags_beat_environment_beat_the_file() {
    let sandbox = Sandbox::new();
    let file = sandbox.default_config_file();
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        &file,
        "[connection]\nbase_url = \"http://127.0.0.1:1001\"\n",
    )
    .unwrap();

    let from_file = sandbox.run(&["config"]).await.expect(0);
    assert!(
        from_file
            .stdout
            .contains(&format!("# config file: {}\n", file.display()))
    );
    assert!(
        from_file
            .stdout
            .contains("base_url = \"http://127.0.0.1:1001/\""),
        "{}",
        from_file.stdout
    );

    let env = [("CONVO_BASE_URL", "http://127.0.0.1:1002")];
    let from_env = sandbox.run_env(&["config"], &env).await.expect(0);
    assert!(
        from_env
            .stdout
            .contains("base_url = \"http://127.0.0.1:1002/\""),
        "{}",
        from_env.stdout
    );

    let from_flag = sandbox
        .run_env(&["config", "--base-url", "http://127.0.0.1:1003"], &env)
        .await
        .expect(0);
    assert!(
        from_flag
            .stdout
            .contains("base_url = \"http://127.0.0.1:1003/\""),
        "{}",
        from_flag.stdout
    );

    let data = sandbox
        .run_env(&["config"], &[("CONVO_DATA_DIR", "/tmp/convo-elsewhere")])
        .await
        .expect(0);
    assert!(
        data.stdout.contains("# data dir: /tmp/convo-elsewhere\n"),
        "{}",
        data.stdout
    );

    let bad = sandbox
        .run_env(&["config"], &[("CONVO_BASE_URL", "127.0.0.1:8080")])
        .await
        .expect(2);
    assert!(
        bad.stderr
            .starts_with("convo: --base-url / CONVO_BASE_URL: "),
        "{}",
        bad.stderr
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_key_in_a_file_readable_by_others_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let file = sandbox.home().join("convo.toml");
    std::fs::write(
        &file,
        "[connection]\napi_key = \"service_live_secret000000000042\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let args = ["config", "--config", file.to_str().unwrap()];
    let run = sandbox.run(&args).await.expect(0);
    assert!(
        run.stderr
            .contains("holds a key and is readable by other users"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("chmod 600"), "{}", run.stderr);
    assert!(!run.stderr.contains("secret0000"), "{}", run.stderr);

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let run = sandbox.run(&args).await.expect(0);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[tokio::test]
async fn a_closed_stdout_is_not_a_panic() {
    let sandbox = Sandbox::new();
    // `convo config | head -0`: the reader is gone before convo writes anything.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = sandbox.command(&["config"]);
    cmd.stdout(writer);
    // Not `output()`: it would replace stdout with a pipe of its own.
    let child = cmd.spawn().unwrap();
    drop(cmd);
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        child.wait_with_output(),
    )
    .await
    .expect("convo finished (guard against a hang)")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}
