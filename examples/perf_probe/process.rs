//! CPU time, wake-ups and memory of a process, from /proc; small helpers.

use super::*;

/// CPU time and wake-ups of a process, summed over its threads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuSample {
    pub(crate) at: Instant,
    /// utime + stime, in clock ticks.
    pub(crate) ticks: u64,
    /// Time on CPU from schedstat, nanoseconds, of the threads alive now (finer than ticks,
    /// but the time of threads that ended is lost).
    pub(crate) run_ns: u64,
    /// Voluntary + involuntary context switches.
    pub(crate) switches: u64,
}

pub(crate) fn clock_ticks_per_sec() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

pub(crate) fn cpu_sample(pid: u32) -> Result<CpuSample> {
    let at = Instant::now();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // Fields after the command (which may hold spaces) start at field 3.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or("malformed /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> u64 { fields.get(n - 3).and_then(|f| f.parse().ok()).unwrap_or(0) };
    let ticks = field(14) + field(15);
    let mut run_ns = 0;
    let mut switches = 0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let path = task.path();
            if let Ok(s) = std::fs::read_to_string(path.join("schedstat")) {
                run_ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
            if let Ok(s) = std::fs::read_to_string(path.join("status")) {
                for line in s.lines() {
                    if let Some(v) = line
                        .strip_prefix("voluntary_ctxt_switches:")
                        .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
                    {
                        switches += v.trim().parse::<u64>().unwrap_or(0);
                    }
                }
            }
        }
    }
    Ok(CpuSample {
        at,
        ticks,
        run_ns,
        switches,
    })
}

/// Share of one core used between two samples, in percent, by ticks and by schedstat.
pub(crate) fn cpu_percent(a: &CpuSample, b: &CpuSample, hz: u64) -> (f64, f64) {
    let secs = b.at.duration_since(a.at).as_secs_f64();
    let by_ticks = b.ticks.saturating_sub(a.ticks) as f64 / hz as f64 / secs * 100.0;
    let by_sched = b.run_ns.saturating_sub(a.run_ns) as f64 / 1e9 / secs * 100.0;
    (by_ticks, by_sched)
}

/// `VmRSS`, `VmHWM` and `RssAnon` in kB.
pub(crate) fn memory(pid: u32) -> Result<(u64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    let kb = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    Ok((kb("VmRSS:"), kb("VmHWM:"), kb("RssAnon:")))
}

pub(crate) fn temp_home() -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("convo-perf-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
