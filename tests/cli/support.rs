//! Running the binary in a sandbox.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use tokio::io::AsyncWriteExt;

/// A temporary home: config, data and cache dirs all inside it.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

/// What a run of the binary gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// Asserts the exit code, showing everything when it differs.
    pub fn expect(self, code: i32) -> Run {
        assert_eq!(
            self.code, code,
            "exit code; stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }

    /// The one JSON object a failed `--json` run leaves on stderr (and nothing on stdout):
    /// its `error`.
    pub fn error_json(&self) -> serde_json::Value {
        assert!(self.stdout.is_empty(), "stdout: {}", self.stdout);
        assert_eq!(self.stderr.lines().count(), 1, "one line: {}", self.stderr);
        let v: serde_json::Value = serde_json::from_str(&self.stderr)
            .unwrap_or_else(|e| panic!("stderr is not JSON ({e}): {}", self.stderr));
        assert_eq!(v.as_object().unwrap().len(), 1, "only `error`: {v}");
        assert!(v["error"]["code"].is_string(), "{v}");
        assert!(v["error"]["message"].is_string(), "{v}");
        v["error"].clone()
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    /// The config file `convo` reads by default in this sandbox (Linux layout).
    pub fn default_config_file(&self) -> PathBuf {
        self.home().join("config").join("convo").join("config.toml")
    }

    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_convo"));
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join("config"))
            .env("XDG_DATA_HOME", self.home().join("data"))
            .env("XDG_CACHE_HOME", self.home().join("cache"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Run `convo args…` with extra environment variables.
    pub async fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output())
            .await
            .expect("convo finished (guard against a hang)")
            .expect("convo ran");
        Run::from(out)
    }

    pub async fn run(&self, args: &[&str]) -> Run {
        self.run_env(args, &[]).await
    }

    /// Run with `input` on stdin.
    pub async fn run_stdin(&self, args: &[&str], env: &[(&str, &str)], input: &str) -> Run {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn convo");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(input.as_bytes())
            .await
            .expect("write stdin");
        drop(stdin);
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            child.wait_with_output(),
        )
        .await
        .expect("convo finished (guard against a hang)")
        .expect("convo ran");
        Run::from(out)
    }
}
