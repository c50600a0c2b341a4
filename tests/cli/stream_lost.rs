//! `convo send --stream` when its server dies mid-reply (issue 19, item 15b): a real
//! `convo serve` child is killed (SIGKILL: the connection closes) or stopped (SIGSTOP: the
//! connection stays open and silent) while the reply streams. `send` must end by itself,
//! end the partial reply with a newline, and say on stderr what happened, with exit 3.
//!
//! The hang guard is generous on purpose (the machines are noisy): the fixed client ends in
//! about 4 s after a kill and about 8 s after a stop, where it used to wait 120 s.

#![cfg(target_os = "linux")]

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdout};

use super::support::Sandbox;

const KEY: &str = "service_live_streamlosttestkey0000";

/// Well above the client's own bounds, well below the 120 s it used to wait.
const GUARD: Duration = Duration::from_secs(50);

/// `convo serve` on an ephemeral port with the builtin engine writing slowly; its base URL.
async fn serve(s: &Sandbox) -> (Child, String) {
    let db = s.home().join("service.db");
    let mut cmd = s.command(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--api-key",
        KEY,
        "--engine",
        "builtin",
        "--engine-pace-ms",
        "400",
        "--db",
        db.to_str().unwrap(),
    ]);
    cmd.stdout(Stdio::null());
    let mut child = cmd.spawn().expect("convo serve starts");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = tokio::time::timeout(GUARD, async {
        while let Some(line) = lines.next_line().await.expect("serve's stderr") {
            if let Some(rest) = line.split("addr=").nth(1)
                && line.contains("service listening")
            {
                return rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | ':'))
                    .collect::<String>();
            }
        }
        panic!("convo serve ended before listening");
    })
    .await
    .expect("convo serve listens");
    // Keep reading its log, so that a full pipe never stalls it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, format!("http://{addr}"))
}

/// `convo send --stream` against `base`, once part of the reply is printed: the child and
/// what it printed so far.
async fn sending(s: &Sandbox, base: &str) -> (Child, ChildStdout, Vec<u8>) {
    let mut cmd = s.command(&["send", "--stream", "tell me a long story, please"]);
    cmd.env("CONVO_BASE_URL", base).env("CONVO_API_KEY", KEY);
    let mut child = cmd.spawn().expect("convo send starts");
    let mut stdout = child.stdout.take().unwrap();
    let mut printed = Vec::new();
    tokio::time::timeout(GUARD, async {
        let mut buf = [0u8; 256];
        // A few words in, the reply is well under way (and far from its end).
        while String::from_utf8_lossy(&printed).split_whitespace().count() < 3 {
            let n = stdout.read(&mut buf).await.expect("send's stdout");
            assert!(
                n > 0,
                "send ended early: {:?}",
                String::from_utf8_lossy(&printed)
            );
            printed.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("part of the reply is printed");
    (child, stdout, printed)
}

/// Waits (guarded) for `send` to end by itself: its exit code, stdout and stderr.
async fn ended(
    mut child: Child,
    mut stdout: ChildStdout,
    mut printed: Vec<u8>,
) -> (i32, String, String) {
    let mut stderr = child.stderr.take().unwrap();
    let mut errors = Vec::new();
    let status = tokio::time::timeout(GUARD, async {
        let (out, err) = tokio::join!(
            stdout.read_to_end(&mut printed),
            stderr.read_to_end(&mut errors)
        );
        out.expect("stdout");
        err.expect("stderr");
        child.wait().await.expect("send ends")
    })
    .await
    .expect("convo send ends by itself (guard against the old 120 s wait)");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&printed).into_owned(),
        String::from_utf8_lossy(&errors).into_owned(),
    )
}

fn signal(child: &Child, name: &str) {
    let pid = child.id().expect("the server runs").to_string();
    let ok = std::process::Command::new("kill")
        .args([name, &pid])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill {name} {pid}");
}

#[tokio::test]
async fn send_stream_ends_soon_when_its_server_is_killed_mid_reply() {
    let s = Sandbox::new();
    let (mut server, base) = serve(&s).await;
    let (send, stdout, printed) = sending(&s, &base).await;
    signal(&server, "-KILL");
    let _ = server.wait().await;

    let (code, stdout, stderr) = ended(send, stdout, printed).await;
    assert_eq!(code, 3, "stdout: {stdout:?}\nstderr: {stderr}");
    assert!(
        stdout.ends_with('\n') && stdout.trim().len() > 1,
        "the partial reply, ended with a newline: {stdout:?}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("convo: stream_lost: the stream dropped mid-reply")
            && stderr.contains("cannot be reached"),
        "{stderr}"
    );
}

#[tokio::test]
async fn send_stream_ends_soon_when_its_server_goes_silent_mid_reply() {
    let s = Sandbox::new();
    let (mut server, base) = serve(&s).await;
    let (send, stdout, printed) = sending(&s, &base).await;
    // Stopped: the kernel keeps the connections open (and accepts new ones), nothing answers.
    signal(&server, "-STOP");

    let (code, stdout, stderr) = ended(send, stdout, printed).await;
    signal(&server, "-KILL");
    let _ = server.wait().await;
    assert_eq!(code, 3, "stdout: {stdout:?}\nstderr: {stderr}");
    assert!(
        stdout.ends_with('\n') && stdout.trim().len() > 1,
        "the partial reply, ended with a newline: {stdout:?}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("convo: stream_lost: the stream dropped mid-reply")
            && stderr.contains("nothing heard on the stream"),
        "{stderr}"
    );
}
