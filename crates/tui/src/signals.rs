//! Signals from outside: `kill`, a closed terminal window, an interrupt. Each quits the TUI
//! the way `Ctrl-C` does (the draft saved, replies cut short kept, the terminal restored),
//! rather than leaving the terminal in raw mode. While `$EDITOR` has the terminal, an interrupt
//! or quit typed there reaches this process too (same process group): those are the editor's
//! and are dropped ([`Signals::forget_typed`]).

/// The signals the TUI takes itself once it has set up the terminal.
pub struct Signals {
    #[cfg(unix)]
    streams: Vec<(&'static str, bool, tokio::signal::unix::Signal)>,
}

impl Signals {
    /// Takes SIGINT, SIGQUIT, SIGTERM and SIGHUP from now on (a signal that cannot be taken
    /// keeps its default action). Must be called inside a tokio runtime.
    pub fn take() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            // (name, whether the keyboard can send it to the foreground group)
            let kinds = [
                ("SIGINT", true, SignalKind::interrupt()),
                ("SIGQUIT", true, SignalKind::quit()),
                ("SIGTERM", false, SignalKind::terminate()),
                ("SIGHUP", false, SignalKind::hangup()),
            ];
            let streams = kinds
                .into_iter()
                .filter_map(|(name, typed, kind)| match signal(kind) {
                    Ok(s) => Some((name, typed, s)),
                    Err(e) => {
                        tracing::warn!(signal = name, error = %e, "cannot take the signal");
                        None
                    }
                })
                .collect();
            Signals { streams }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The next signal's name. Pending forever where signals are not taken.
    pub async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            if self.streams.is_empty() {
                return std::future::pending().await;
            }
            let (name, ..) =
                futures_util::future::select_all((self.streams.iter_mut()).map(|(name, _, s)| {
                    Box::pin(async move {
                        if s.recv().await.is_none() {
                            // The signal driver is gone: nothing more comes from it.
                            std::future::pending::<()>().await;
                        }
                        *name
                    })
                }))
                .await;
            name
        }
        #[cfg(not(unix))]
        std::future::pending().await
    }

    /// Drops interrupts and quits received so far: typed in an editor that had the terminal,
    /// they were meant for it.
    pub fn forget_typed(&mut self) {
        #[cfg(unix)]
        for (_, typed, s) in self.streams.iter_mut() {
            if *typed {
                while let Some(Some(())) = futures_util::FutureExt::now_or_never(s.recv()) {}
            }
        }
    }
}
