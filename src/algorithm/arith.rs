//! Exact integer division on integer-valued doubles, as in `lua/common.lua`.

/// `floor(a / b)` for non-negative integer-valued `a` and positive integer-valued `b`, corrected
/// by one step when the rounded quotient lands on the wrong side.
pub(super) fn floor_div(a: f64, b: f64) -> f64 {
    // In the contract's range the exact quotient is the integer one (and far cheaper than the
    // FPU's floor, which without SSE4.1 is a libm call); outside it, the script's own steps.
    if let Some((a, b)) = exact_operands(a, b) {
        return (a / b) as f64;
    }
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
    if let Some((a, b)) = exact_operands(a, b) {
        return a.div_ceil(b) as f64;
    }
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
/// `a` and `b` as integers, when both are integer-valued, `a >= 0`, `b >= 1` and below 2^53: there
/// integer division gives exactly the quotient that the corrected float steps compute.
#[inline]
fn exact_operands(a: f64, b: f64) -> Option<(u64, u64)> {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    let valid = (0.0..EXACT).contains(&a) && (1.0..EXACT).contains(&b);
    let (ai, bi) = (a as u64, b as u64);
    (valid && ai as f64 == a && bi as f64 == b).then_some((ai, bi))
}

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

    #[test]
    fn the_integer_fast_path_agrees_with_exact_division() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..100_000 {
            // xorshift: operands spread over every magnitude below 2^53.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = (x >> 11) >> (x % 53);
            let b = ((x.rotate_left(29) >> 11) >> (x % 47)).max(1);
            let (af, bf) = (a as f64, b as f64);
            assert_eq!(floor_div(af, bf), (a / b) as f64, "{a} / {b}");
            assert_eq!(ceil_div(af, bf), a.div_ceil(b) as f64, "{a} / {b}");
        }
        // Outside the fast path's range the float steps still answer.
        assert_eq!(floor_div(7.5, 2.0), 3.0);
        assert_eq!(ceil_div(7.5, 2.0), 4.0);
    }
}
