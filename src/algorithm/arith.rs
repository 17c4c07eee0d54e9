//! Exact integer division on integer-valued doubles, as in `lua/common.lua`.

/// `floor(a / b)` for non-negative integer-valued `a` and positive integer-valued `b`, corrected
/// by one step when the rounded quotient lands on the wrong side.
pub(super) fn floor_div(a: f64, b: f64) -> f64 {
    let mut q = (a / b).floor();
    if q * b > a {
        q -= 1.0;
    } else if (q + 1.0) * b <= a {
        q += 1.0;
    }
    q
}

/// `ceil(a / b)`, same contract as [`floor_div`].
pub(super) fn ceil_div(a: f64, b: f64) -> f64 {
    let mut q = (a / b).ceil();
    if q > 0.0 && (q - 1.0) * b >= a {
        q -= 1.0;
    } else if q * b < a {
        q += 1.0;
    }
    q
}

/// The whole microseconds a state must be kept for `us` more microseconds (the scripts round to
/// milliseconds for PEXPIRE; the memory store keeps microseconds, and both only drop state that
/// no longer matters, so the difference never shows in a decision).
pub(super) fn ttl_micros(us: f64) -> u64 {
    us.max(1.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisions_are_exact_where_the_fpu_rounds() {
        // 2^53 - 1 over 3: the FPU's quotient is correct here, but near 2^53 neighbours collapse.
        let big = 9_007_199_254_740_991.0;
        assert_eq!(floor_div(big, 3.0), 3_002_399_751_580_330.0);
        assert_eq!(ceil_div(big, 3.0), 3_002_399_751_580_331.0);
        // a = k*b - 1 with a large b: a/b rounds up to k, the exact floor is k - 1.
        let b = 3_333_333_333_333.0;
        let a = 2.0 * b - 1.0;
        assert_eq!(floor_div(a, b), 1.0);
        assert_eq!(ceil_div(a, b), 2.0);
        assert_eq!(ceil_div(2.0 * b, b), 2.0);
        assert_eq!(ceil_div(0.0, b), 0.0);
        assert_eq!(floor_div(0.0, b), 0.0);
    }
}
