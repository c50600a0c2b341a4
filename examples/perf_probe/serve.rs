//! `convo serve` run as a child process.

use super::*;

pub(crate) struct Serve {
    pub(crate) child: ProcChild,
    pub(crate) base_url: String,
    pub(crate) key: String,
}

impl Serve {
    pub(crate) fn start(bin: &Path, db: &Path, extra: &[&str]) -> Result<Serve> {
        let key = "service_live_perfprobe0000000001".to_string();
        let mut child = Command::new(bin)
            .arg("serve")
            .args(["--addr", "127.0.0.1:0", "--jwt-secret", "perf-probe-secret"])
            .arg("--db")
            .arg(db)
            .arg("--api-key")
            .arg(format!("{key}=enterprise"))
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn {} serve: {e}", bin.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("reading serve's stdout: {e}"))?;
        let base_url = line
            .trim()
            .strip_prefix("listening on ")
            .ok_or_else(|| format!("serve said `{}`", line.trim()))?
            .to_string();
        Ok(Serve {
            child,
            base_url,
            key,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
