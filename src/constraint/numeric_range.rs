//! Numeric bounds as regular expressions over JSON's number syntax: integers in [lo, hi] and
//! numbers in [lo, hi] for integral bounds (`json_schema`'s minimum/maximum).

fn digits(n: u64) -> u32 {
    n.checked_ilog10().unwrap_or(0) + 1
}

/// Regex alternatives for the decimal integers `a..=b` (0 ≤ a ≤ b), no leading zeros.
fn nonneg_range(a: u64, b: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut lo = a;
    while lo <= b {
        // Split by digit count so every piece has a fixed length.
        let len = digits(lo);
        let top = if len >= 19 {
            u64::MAX
        } else {
            10u64.pow(len) - 1
        };
        let hi = b.min(top);
        let mut start = lo;
        while start <= hi {
            // The largest aligned block of 10^k starting at `start` inside [start, hi] …
            let mut k = 0u32;
            while k + 1 < len {
                let p = 10u64.pow(k + 1);
                if start % p == 0 && start + (p - 1) <= hi {
                    k += 1;
                } else {
                    break;
                }
            }
            let p = 10u64.pow(k);
            // … repeated while the digit at position k can grow.
            let d1 = (start / p) % 10;
            let mut n = 1;
            while d1 + n <= 9 && start + (n + 1) * p - 1 <= hi {
                n += 1;
            }
            let prefix = start / (p * 10);
            let d2 = d1 + n - 1;
            let mut s = if len - k > 1 {
                prefix.to_string()
            } else {
                String::new()
            };
            s.push_str(&if d1 == d2 {
                d1.to_string()
            } else {
                format!("[{d1}-{d2}]")
            });
            if k > 0 {
                s.push_str(&format!("[0-9]{{{k}}}"));
            }
            out.push(s);
            match start.checked_add(n * p) {
                Some(next) => start = next,
                None => break,
            }
        }
        match hi.checked_add(1) {
            Some(next) if hi < b => lo = next,
            _ => break,
        }
    }
    out
}

/// Integers ≥ a (a ≥ 0): a..(next power of ten), then any longer number.
fn nonneg_from(a: u64) -> Vec<String> {
    let len = digits(a);
    let mut out = nonneg_range(a, 10u64.pow(len) - 1);
    out.push(format!("[1-9][0-9]{{{len},}}"));
    out
}

fn alternation(v: Vec<String>) -> String {
    if v.len() == 1 {
        v.into_iter().next().unwrap_or_default()
    } else {
        format!("(?:{})", v.join("|"))
    }
}

/// Integers in [lo, hi] (None: unbounded), as JSON writes them.
pub fn integer_range(lo: Option<i64>, hi: Option<i64>) -> String {
    let mut alts = Vec::new();
    // x ≥ 0.
    if hi.is_none_or(|h| h >= 0) {
        let a = lo.map_or(0, |l| l.max(0) as u64);
        alts.extend(match hi {
            Some(h) => nonneg_range(a, h as u64),
            None => nonneg_from(a),
        });
    }
    // x < 0: -y for y in [max(1, -hi), -lo].
    if lo.is_none_or(|l| l < 0) {
        let a = hi.map_or(1, |h| (-h).max(1) as u64);
        let neg = match lo {
            Some(l) => nonneg_range(a, l.unsigned_abs()),
            None => nonneg_from(a),
        };
        alts.push(format!("-{}", alternation(neg)));
    }
    alternation(alts)
}

/// Numbers in [lo, hi] for integral bounds: y ∈ [a, b) with any fraction, or b with zeros.
pub fn number_range(lo: Option<i64>, hi: Option<i64>) -> String {
    let frac = r"(?:\.[0-9]+)?";
    let zeros = r"(?:\.0+)?";
    // Magnitudes in [a, b] (b None: unbounded) as integer part and fraction.
    let magnitude = |a: u64, b: Option<u64>| -> String {
        match b {
            None => format!("{}{frac}", alternation(nonneg_from(a))),
            Some(b) if a == b => format!("{a}{zeros}"),
            Some(b) => format!(
                "(?:{}{frac}|{b}{zeros})",
                alternation(nonneg_range(a, b - 1))
            ),
        }
    };
    let mut alts = Vec::new();
    if hi.is_none_or(|h| h >= 0) {
        alts.push(magnitude(
            lo.map_or(0, |l| l.max(0) as u64),
            hi.map(|h| h as u64),
        ));
    }
    if lo.is_none_or(|l| l < 0) {
        // -y for y in [max(0, -hi), -lo]; "-0" is 0, inside any range that reaches here.
        let a = hi.map_or(0, |h| (-h).max(0) as u64);
        alts.push(format!("-{}", magnitude(a, lo.map(i64::unsigned_abs))));
    }
    alternation(alts)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::constraint::byte_dfa::FullMatch;

    fn full(re: &str) -> FullMatch {
        FullMatch::new(re)
    }

    #[test]
    fn integer_ranges_match_exactly_their_integers() {
        for (lo, hi) in [
            (Some(0), Some(0)),
            (Some(0), Some(99)),
            (Some(7), Some(1234)),
            (Some(-45), Some(12)),
            (Some(-300), Some(-17)),
            (Some(18), None),
            (None, Some(-3)),
            (None, None),
            (Some(100), Some(100)),
        ] {
            let re = full(&integer_range(lo, hi));
            for x in -2000i64..=2000 {
                let inside = lo.is_none_or(|l| x >= l) && hi.is_none_or(|h| x <= h);
                assert_eq!(
                    re.is_match(&x.to_string()),
                    inside,
                    "{x} in {lo:?}..={hi:?}"
                );
            }
            assert!(!re.is_match("007"));
            assert!(!re.is_match("-0"));
        }
    }

    #[test]
    fn number_ranges_match_their_numbers() {
        for (lo, hi) in [
            (Some(0), Some(10)),
            (Some(-5), Some(5)),
            (Some(3), None),
            (None, Some(-2)),
            (Some(-9), Some(-4)),
        ] {
            let re = full(&number_range(lo, hi));
            for tenths in -200i64..=200 {
                let x = tenths as f64 / 10.0;
                let text = format!("{x:.1}");
                let inside = lo.is_none_or(|l| x >= l as f64) && hi.is_none_or(|h| x <= h as f64);
                assert_eq!(re.is_match(&text), inside, "{text} in {lo:?}..={hi:?}");
            }
        }
    }
}
