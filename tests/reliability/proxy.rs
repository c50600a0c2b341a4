//! A fault-injecting TCP proxy for the client's network tests: it sits between the client
//! and the service on 127.0.0.1 and, per connection, passes bytes through, resets, stalls,
//! drops the response after the server produced it, truncates it, or delays it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the proxy does with a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Pass bytes both ways (to the upstream, or reset when none is set).
    Pass,
    /// Accept and reset at once: what a client sees of a server that is down.
    Reset,
    /// Accept and never answer, holding the connection open.
    Stall,
    /// Forward the request; once the server starts answering (so it has done the work),
    /// reset the client's connection without passing the answer on.
    DropResponse,
    /// Pass on only the first `n` bytes of the answer, then reset.
    Truncate(usize),
    /// Pass everything, each chunk of the answer after this pause.
    Delay(Duration),
}

struct Inner {
    upstream: Mutex<Option<SocketAddr>>,
    fault: Mutex<Fault>,
    /// Faults for the next connections, used before `fault`.
    queued: Mutex<Vec<Fault>>,
    accepted: AtomicUsize,
    live: Mutex<Vec<JoinHandle<()>>>,
}

pub struct FaultProxy {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on 127.0.0.1:0 in front of `upstream` (None: every connection is reset).
    pub async fn start(upstream: Option<SocketAddr>) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let inner = Arc::new(Inner {
            upstream: Mutex::new(upstream),
            fault: Mutex::new(Fault::Pass),
            queued: Mutex::new(Vec::new()),
            accepted: AtomicUsize::new(0),
            live: Mutex::new(Vec::new()),
        });
        let accept = tokio::spawn({
            let inner = inner.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    inner.accepted.fetch_add(1, Ordering::SeqCst);
                    let fault = {
                        let mut q = inner.queued.lock().unwrap();
                        if q.is_empty() {
                            *inner.fault.lock().unwrap()
                        } else {
                            q.remove(0)
                        }
                    };
                    let upstream = *inner.upstream.lock().unwrap();
                    let task = tokio::spawn(handle(client, upstream, fault));
                    let mut live = inner.live.lock().unwrap();
                    live.retain(|t| !t.is_finished());
                    live.push(task);
                }
            }
        });
        FaultProxy {
            addr,
            inner,
            accept,
        }
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> url::Url {
        url::Url::parse(&format!("http://{}", self.addr)).unwrap()
    }

    /// The fault for every new connection from now on.
    pub fn set(&self, fault: Fault) {
        *self.inner.fault.lock().unwrap() = fault;
    }

    /// A fault for the next new connection only.
    pub fn next(&self, fault: Fault) {
        self.inner.queued.lock().unwrap().push(fault);
    }

    pub fn set_upstream(&self, upstream: Option<SocketAddr>) {
        *self.inner.upstream.lock().unwrap() = upstream;
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.inner.accepted.load(Ordering::SeqCst)
    }

    /// Cuts every open connection (pooled HTTP connections and WebSockets alike).
    pub fn cut_all(&self) {
        for t in self.inner.live.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut_all();
    }
}

fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

async fn handle(client: TcpStream, upstream: Option<SocketAddr>, fault: Fault) {
    match fault {
        Fault::Reset => return reset(client),
        Fault::Stall => {
            // Hold the socket until the proxy cuts it; read and discard so the client's
            // writes do not fail either.
            let mut client = client;
            let mut buf = [0u8; 4096];
            while let Ok(n) = client.read(&mut buf).await {
                if n == 0 {
                    std::future::pending::<()>().await;
                }
            }
            return std::future::pending::<()>().await;
        }
        _ => {}
    }
    let Some(upstream) = upstream else {
        return reset(client);
    };
    let Ok(server) = TcpStream::connect(upstream).await else {
        return reset(client);
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // Requests go through untouched.
    let upward = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        let _ = server_write.shutdown().await;
        client_read
    });
    let mut passed = 0usize;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match server_read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        match fault {
            Fault::DropResponse => {
                // The server has answered; the client never hears it: the connection closes
                // without a byte of the response.
                upward.abort();
                return;
            }
            Fault::Truncate(limit) => {
                let take = n.min(limit - passed);
                if client_write.write_all(&buf[..take]).await.is_err() {
                    break;
                }
                passed += take;
                if passed >= limit {
                    upward.abort();
                    return;
                }
            }
            Fault::Delay(d) => {
                tokio::time::sleep(d).await;
                if client_write.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
            _ => {
                if client_write.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = client_write.shutdown().await;
    let _ = upward.await;
}
