//! Redraws on demand: events mark the frame dirty, and the loop draws at most once per frame
//! interval, so a burst of stream deltas costs one frame. Nothing is scheduled while idle.

use std::time::{Duration, Instant};

/// At most 60 frames per second.
pub const FRAME_INTERVAL: Duration = Duration::from_millis(16);

#[derive(Debug)]
pub struct FrameScheduler {
    dirty: bool,
    last_draw: Option<Instant>,
    interval: Duration,
}

impl Default for FrameScheduler {
    fn default() -> Self {
        Self::new(FRAME_INTERVAL)
    }
}

impl FrameScheduler {
    pub fn new(interval: Duration) -> Self {
        FrameScheduler {
            dirty: true,
            last_draw: None,
            interval,
        }
    }

    /// Something changed: draw soon.
    pub fn request(&mut self) {
        self.dirty = true;
    }

    /// When the next frame should be drawn, or `None` when nothing changed.
    pub fn deadline(&self, now: Instant) -> Option<Instant> {
        if !self.dirty {
            return None;
        }
        Some(match self.last_draw {
            Some(last) => (last + self.interval).max(now),
            None => now,
        })
    }

    /// A frame was drawn at `now`.
    pub fn drawn(&mut self, now: Instant) {
        self.dirty = false;
        self.last_draw = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_means_no_deadline() {
        let mut f = FrameScheduler::default();
        let t0 = Instant::now();
        assert_eq!(f.deadline(t0), Some(t0));
        f.drawn(t0);
        assert_eq!(f.deadline(t0), None);
        assert_eq!(f.deadline(t0 + Duration::from_secs(100)), None);
    }

    #[test]
    fn bursts_are_coalesced_into_one_frame_per_interval() {
        let mut f = FrameScheduler::new(Duration::from_millis(16));
        let t0 = Instant::now();
        f.drawn(t0);
        for _ in 0..100 {
            f.request();
        }
        let d = f.deadline(t0 + Duration::from_millis(1)).unwrap();
        assert_eq!(d, t0 + Duration::from_millis(16));
        f.drawn(d);
        assert_eq!(f.deadline(d), None);
        f.request();
        let later = d + Duration::from_secs(1);
        assert_eq!(f.deadline(later), Some(later));
    }
}
