//! What the PNG examples measure with: medians, and the process's CPU time.

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The CPU time this process has used, in seconds.
#[cfg(unix)]
pub fn cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given, which lives on this stack.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Not measured off Unix (printed as NaN).
#[cfg(not(unix))]
pub fn cpu_seconds() -> f64 {
    f64::NAN
}
