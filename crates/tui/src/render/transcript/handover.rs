//! A transcript model built off the UI task (on the store thread) and handed to it.

/// A transcript model built off the UI task, handed over once: the first `take` gets it.
#[derive(Clone)]
pub struct Rendered(std::sync::Arc<std::sync::Mutex<Option<super::Transcript>>>);

impl Rendered {
    pub fn new(transcript: super::Transcript) -> Self {
        Rendered(std::sync::Arc::new(std::sync::Mutex::new(Some(transcript))))
    }

    /// The transcript, unless it was taken already.
    pub fn take(&self) -> Option<super::Transcript> {
        self.0.lock().ok().and_then(|mut t| t.take())
    }
}

impl std::fmt::Debug for Rendered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rendered(..)")
    }
}
