//! How many prompt tokens the next step should read, from what the last steps cost.
//!
//! A step costs a fixed part (the graph, and llama.cpp's threads meeting at every operation:
//! a few milliseconds on an idle machine, far more when other processes hold the cores) plus
//! a part per token. Sizing steps by the average cost per token alone shrinks them when the
//! fixed part grows, which makes every token dearer still; so the cost is fitted as
//! `fixed + per_token × tokens` (least squares over recent steps, older ones weighing less),
//! and a step reads what fits in the target time, or, when the fixed part alone takes half of
//! that, as many tokens as cost the fixed part again (a stop then waits about two fixed parts,
//! which no step size could avoid).

/// How much an older step still counts against the next one.
const DECAY: f64 = 0.8;

/// Weighted sums of recent steps' sizes (`n`) and times (`t`, ms).
#[derive(Debug, Clone)]
pub struct StepCost {
    w: f64,
    n: f64,
    t: f64,
    nn: f64,
    nt: f64,
}

impl StepCost {
    /// Before any step: `ms_per_token` a token, nothing fixed.
    pub fn new(ms_per_token: f64) -> StepCost {
        let mut cost = StepCost {
            w: 0.0,
            n: 0.0,
            t: 0.0,
            nn: 0.0,
            nt: 0.0,
        };
        cost.record(1, ms_per_token);
        cost.record(64, 64.0 * ms_per_token);
        cost
    }

    /// A step of `tokens` tokens took `ms`.
    pub fn record(&mut self, tokens: usize, ms: f64) {
        let n = tokens as f64;
        self.w = self.w * DECAY + 1.0;
        self.n = self.n * DECAY + n;
        self.t = self.t * DECAY + ms;
        self.nn = self.nn * DECAY + n * n;
        self.nt = self.nt * DECAY + n * ms;
    }

    /// The fitted (fixed ms, ms per token), both at least 0 (per token above 0).
    pub fn fit(&self) -> (f64, f64) {
        let det = self.w * self.nn - self.n * self.n;
        // Steps all of one size say nothing of the fixed part: the average then.
        let per_token = if det > 1e-6 * self.w * self.nn {
            (self.w * self.nt - self.n * self.t) / det
        } else {
            self.t / self.n.max(1e-9)
        };
        let per_token = per_token.max(1e-3);
        let fixed = ((self.t - per_token * self.n) / self.w).max(0.0);
        (fixed, per_token)
    }

    /// Prompt tokens for a step of about `target_ms`, within `min..=max`.
    pub fn tokens(&self, target_ms: f64, min: usize, max: usize) -> usize {
        let (fixed, per_token) = self.fit();
        let n = ((target_ms - fixed) / per_token).max(fixed / per_token);
        (n as usize).clamp(min, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_an_idle_machine_a_step_reads_what_fits_in_the_target() {
        let mut cost = StepCost::new(0.5);
        // 2 ms fixed, 0.5 ms a token.
        for n in [1, 1, 40, 1, 120, 1, 160, 1] {
            cost.record(n, 2.0 + 0.5 * n as f64);
        }
        let (fixed, per_token) = cost.fit();
        assert!((fixed - 2.0).abs() < 0.5, "{fixed}");
        assert!((per_token - 0.5).abs() < 0.05, "{per_token}");
        let n = cost.tokens(80.0, 8, 512);
        assert!((140..=170).contains(&n), "{n}");
    }

    #[test]
    fn a_large_fixed_cost_grows_the_steps_instead_of_shrinking_them() {
        let mut cost = StepCost::new(0.5);
        // Busy cores: 400 ms a step whatever its size, 2 ms a token on top.
        for n in [8, 1, 8, 1, 8, 1, 30, 1] {
            cost.record(n, 400.0 + 2.0 * n as f64);
        }
        let n = cost.tokens(80.0, 8, 512);
        assert!(n >= 150, "{n}");
    }

    #[test]
    fn steps_of_one_size_fall_back_to_the_average_cost() {
        let mut cost = StepCost::new(1.0);
        for _ in 0..60 {
            cost.record(100, 50.0);
        }
        let n = cost.tokens(80.0, 8, 512);
        assert!((150..=170).contains(&n), "{n}");
    }
}
