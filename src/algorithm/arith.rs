//! Exact integer division, as `floor_div` and `ceil_div` in `lua/common.lua`, and the two places
//! where a script's double can pass 2^53 in a value it reports, where it rounds and so must we.
//!
//! The algorithms compute in `i64`, exactly. The scripts compute in doubles, which hold every
//! integer up to 2^53 exactly, so wherever the values stay below it (everywhere, by the checks in
//! `Params`, except in the few places the algorithms point out) both reach the same numbers.

/// The largest integer below 2^53: every integer up to it is exact in a double (a Lua number).
pub(crate) const MAX_EXACT: i64 = (1 << 53) - 1;

/// `floor(a / b)` for `b >= 1`: exact for every `a` (a negative `a` floors, like Lua's
/// `math.floor`). The script's `floor_div` reaches the same quotient for integer-valued `a` and `b`
/// below 2^53: it corrects the FPU's rounded quotient by one step when it lands on the wrong side.
#[inline]
pub(super) fn floor_div(a: i64, b: i64) -> i64 {
    debug_assert!(b >= 1, "floor_div by {b}");
    // `max(1)` changes nothing under the contract, and spares the checks for a zero divisor and
    // for i64::MIN / -1 that a division would otherwise make.
    a.div_euclid(b.max(1))
}

/// `ceil(a / b)`, same contract as [`floor_div`].
#[inline]
pub(super) fn ceil_div(a: i64, b: i64) -> i64 {
    debug_assert!(b >= 1, "ceil_div by {b}");
    let b = b.max(1);
    // Truncation is the ceiling of a negative quotient already, the floor of a positive one.
    a / b + i64::from(a % b > 0)
}

/// The number a script's double holds for the exact sum or product `x` of two numbers it holds
/// exactly: `x` itself up to 2^53, else `x` rounded to the nearest double (ties to even), which
/// is what the FPU's one rounded operation gives. For values the scripts report, which may pass
/// 2^53 (a wait counted from a time far ahead of now).
#[inline]
pub(super) fn lua_rounded(x: i64) -> i64 {
    if x.unsigned_abs() <= MAX_EXACT as u64 {
        x
    } else {
        round_to_double(x)
    }
}

#[cold]
fn round_to_double(x: i64) -> i64 {
    // Below 2^63 in magnitude, so the rounded double converts back exactly.
    x as f64 as i64
}

/// `ceil_div(a * b, c)` as the script computes it, for non-negative `a` and `b <= c`, each below
/// 2^53, and `c >= 1`. The product is exact while it stays below 2^53, in a double as in an
/// `i64`; beyond, the script's product rounds (and the division's correction steps round too):
/// then this takes the script's own steps on doubles. It only happens with counts far above the
/// limit (a limit lowered while the state was live).
#[inline]
pub(super) fn ceil_div_product(a: i64, b: i64, c: i64) -> i64 {
    match a.checked_mul(b) {
        Some(product) if product <= MAX_EXACT => ceil_div(product, c),
        _ => ceil_div_doubles(a, b, c),
    }
}

#[cold]
fn ceil_div_doubles(a: i64, b: i64, c: i64) -> i64 {
    // `a`, `b` and `c` are exact in doubles; `ceil_div` in `lua/common.lua`, step for step.
    let (a, b) = (a as f64 * b as f64, c as f64);
    let mut q = (a / b).ceil();
    if q > 0.0 && (q - 1.0) * b >= a {
        q -= 1.0;
    } else if q * b < a {
        q += 1.0;
    }
    // An integer-valued double no larger than the count `a` plus one (`b <= c`): below 2^63.
    q as i64
}

/// The whole microseconds a state must be kept for `us` more microseconds (the scripts round to
/// milliseconds for PEXPIRE; the memory store keeps microseconds, and both only drop state that
/// no longer matters, so the difference never shows in a decision).
#[inline]
pub(super) fn ttl_micros(us: u64) -> u64 {
    us.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `lua/common.lua`'s `floor_div`, on doubles.
    fn lua_floor_div(a: f64, b: f64) -> f64 {
        let mut q = (a / b).floor();
        if q * b > a {
            q -= 1.0;
        } else if (q + 1.0) * b <= a {
            q += 1.0;
        }
        q
    }

    /// `lua/common.lua`'s `ceil_div`, on doubles.
    fn lua_ceil_div(a: f64, b: f64) -> f64 {
        let mut q = (a / b).ceil();
        if q > 0.0 && (q - 1.0) * b >= a {
            q -= 1.0;
        } else if q * b < a {
            q += 1.0;
        }
        q
    }

    /// 100,000 pseudo-random numbers from `seed` (xorshift), to draw test operands from.
    fn xorshift(mut x: u64) -> impl Iterator<Item = u64> {
        (0..100_000).map(move |_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
    }

    #[test]
    fn divisions_are_exact_where_the_fpu_rounds() {
        // 2^53 - 1 over 3: the FPU's quotient is correct here, but near 2^53 neighbours collapse.
        let big = MAX_EXACT;
        assert_eq!(floor_div(big, 3), 3_002_399_751_580_330);
        assert_eq!(ceil_div(big, 3), 3_002_399_751_580_331);
        // a = k*b - 1 with a large b: a/b rounds up to k, the exact floor is k - 1.
        let b = 3_333_333_333_333;
        let a = 2 * b - 1;
        assert_eq!(floor_div(a, b), 1);
        assert_eq!(ceil_div(a, b), 2);
        assert_eq!(ceil_div(2 * b, b), 2);
        assert_eq!(ceil_div(0, b), 0);
        assert_eq!(floor_div(0, b), 0);
        // Negative dividends floor and ceil too, as Lua's math.floor and math.ceil do.
        assert_eq!((floor_div(-7, 2), ceil_div(-7, 2)), (-4, -3));
        assert_eq!((floor_div(-6, 2), ceil_div(-6, 2)), (-3, -3));
        assert_eq!((floor_div(-1, 5), ceil_div(-1, 5)), (-1, 0));
    }

    #[test]
    fn integer_division_agrees_with_the_scripts_steps_below_2_pow_53() {
        for x in xorshift(0x9E37_79B9_7F4A_7C15) {
            // Operands spread over every magnitude below 2^53, of either sign.
            let a = ((x >> 11) >> (x % 53)) as i64;
            let a = if x & (1 << 7) == 0 { a } else { -a };
            let b = (((x.rotate_left(29) >> 11) >> (x % 47)) as i64).max(1);
            let (af, bf) = (a as f64, b as f64);
            assert_eq!(floor_div(a, b) as f64, lua_floor_div(af, bf), "{a} / {b}");
            assert_eq!(ceil_div(a, b) as f64, lua_ceil_div(af, bf), "{a} / {b}");
        }
    }

    #[test]
    fn values_past_2_pow_53_round_as_the_scripts_doubles_do() {
        let two53 = MAX_EXACT + 1;
        assert_eq!(lua_rounded(MAX_EXACT), MAX_EXACT);
        assert_eq!(lua_rounded(-MAX_EXACT), -MAX_EXACT);
        assert_eq!(lua_rounded(two53), two53);
        // The spacing is 2 above 2^53: odd values round to the even neighbour.
        assert_eq!(lua_rounded(two53 + 1), two53);
        assert_eq!(lua_rounded(two53 + 3), two53 + 4);
        assert_eq!(lua_rounded(two53 + 5), two53 + 4);
        // Sums of two exact doubles, as the scripts add them.
        for x in [
            two53 + 1,
            two53 + 3,
            2 * MAX_EXACT - 1,
            2 * MAX_EXACT,
            -(two53 + 3),
        ] {
            let (a, b) = (x / 2, x - x / 2);
            assert_eq!(lua_rounded(a + b), (a as f64 + b as f64) as i64, "{x}");
        }
    }

    #[test]
    fn products_past_2_pow_53_divide_as_the_scripts_doubles_do() {
        // Exact: the integer path.
        assert_eq!(ceil_div_product(3, 5, 4), 4);
        assert_eq!(ceil_div_product(0, MAX_EXACT, 7), 0);
        for x in xorshift(0x2545_F491_4F6C_DD1D) {
            // A count up to 2^32 and a number of steps up to 2^52, their product often past 2^53
            // (and past 2^63).
            let a = ((x >> 32) >> (x % 32)) as i64;
            let b = ((x.rotate_left(17) >> 12) >> (x % 13)) as i64;
            let c = (b + ((x >> 5) & 0xFFFF) as i64).max(1);
            let expected = lua_ceil_div(a as f64 * b as f64, c as f64);
            assert_eq!(
                ceil_div_product(a, b, c) as f64,
                expected,
                "{a} * {b} / {c}"
            );
        }
    }
}
