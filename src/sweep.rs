//! Sweep lists on the command line: `2,64,1024`, `2..4096` (every power of two
//! from 2 to 4096, like perftest `-a`), suffixes `k`/`m` (×1024, ×1024²), and
//! mixtures such as `1..8,100`.

/// The most points one invocation (or one experiment file, all series
/// together) may measure; also the most values one list may hold.
pub const MAX_POINTS: u64 = 10_000;

/// Counts the points of a sweep, the product of each knob's number of
/// values, without building them, and refuses more than `MAX_POINTS` with
/// the count (exit 2): `knobs` pairs each option with its number of values.
pub fn count_points(knobs: &[(&str, usize)]) -> crate::error::Result<u64> {
    let total = knobs
        .iter()
        .try_fold(1u64, |acc, (_, n)| acc.checked_mul(*n as u64));
    match total {
        Some(n) if n <= MAX_POINTS => Ok(n),
        _ => {
            let swept: Vec<String> = knobs
                .iter()
                .filter(|(_, n)| *n != 1)
                .map(|(o, n)| format!("{n} {o}"))
                .collect();
            Err(crate::error::Error::usage(format!(
                "{} = {} points exceed the limit of {MAX_POINTS} per run",
                swept.join(" x "),
                total.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string())
            )))
        }
    }
}

/// Parses a list or power-of-two range of positive integers (at most
/// `MAX_POINTS` values). The error says what was wrong, for the caller to
/// prefix with the option name.
pub fn parse_list(text: &str) -> Result<Vec<u32>, String> {
    parse_list_from(text, 1)
}

/// `--size`: as [`parse_list`], but 0 (a header-only op) is a value too; the
/// spec says where it applies.
pub fn parse_sizes(text: &str) -> Result<Vec<u32>, String> {
    parse_list_from(text, 0)
}

fn parse_list_from(text: &str, min: u32) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in text.split(',') {
        if out.len() as u64 > MAX_POINTS {
            return Err(format!("more than {MAX_POINTS} values"));
        }
        let part = part.trim();
        if part.is_empty() {
            return Err(format!("empty item in '{text}'"));
        }
        if let Some((lo, hi)) = part.split_once("..") {
            let hi = hi.strip_prefix('=').unwrap_or(hi);
            let (lo, hi) = (parse_one(lo, min)?, parse_one(hi, min)?);
            if lo > hi {
                return Err(format!("range '{part}' runs backwards"));
            }
            // Powers of two from the first one ≥ lo; lo itself always starts the range.
            out.push(lo);
            let mut v = lo.next_power_of_two();
            if v == lo {
                v = v.saturating_mul(2);
            }
            while v <= hi && v > lo {
                out.push(v);
                if v == u32::MAX {
                    break;
                }
                v = v.saturating_mul(2);
            }
            if *out.last().unwrap() != hi && !hi.is_power_of_two() {
                out.push(hi);
            }
        } else {
            out.push(parse_one(part, min)?);
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|v| seen.insert(*v));
    if out.len() as u64 > MAX_POINTS {
        return Err(format!("more than {MAX_POINTS} values"));
    }
    Ok(out)
}

fn parse_one(s: &str, min: u32) -> Result<u32, String> {
    let s = s.trim();
    if s.starts_with('-') && s[1..].chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return Err(format!("'{s}' is negative (values start at 1)"));
    }
    let (digits, mult) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1024u64),
        Some('m' | 'M') => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    let v: u64 = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number"))?;
    let v = v
        .checked_mul(mult)
        .filter(|v| *v <= u32::MAX as u64)
        .ok_or_else(|| format!("'{s}' is too large (limit {})", u32::MAX))?;
    if v < u64::from(min) {
        return Err(format!("'{s}' must be at least {min}"));
    }
    Ok(v as u32)
}

#[cfg(test)]
mod tests {
    use super::{parse_list, parse_sizes};

    #[test]
    fn sizes_take_zero() {
        assert_eq!(parse_sizes("0,64").unwrap(), vec![0, 64]);
        assert_eq!(parse_sizes("0..4").unwrap(), vec![0, 1, 2, 4]);
        assert!(parse_sizes("-1").is_err());
    }

    #[test]
    fn lists_ranges_and_suffixes() {
        assert_eq!(parse_list("2,64,1024").unwrap(), vec![2, 64, 1024]);
        assert_eq!(
            parse_list("2..4096").unwrap(),
            vec![2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
        );
        assert_eq!(parse_list("3..20").unwrap(), vec![3, 4, 8, 16, 20]);
        assert_eq!(parse_list("1..=4").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_list("4k,1m").unwrap(), vec![4096, 1 << 20]);
        assert_eq!(parse_list("8..8").unwrap(), vec![8]);
        assert_eq!(parse_list("64, 2,64").unwrap(), vec![64, 2]);
    }

    #[test]
    fn bad_lists_say_why() {
        assert!(parse_list("").unwrap_err().contains("empty"));
        assert!(parse_list("0").unwrap_err().contains("at least 1"));
        assert!(parse_list("ten")
            .unwrap_err()
            .contains("not a whole number"));
        assert!(parse_list("64..2").unwrap_err().contains("backwards"));
        assert!(parse_list("5000000k").unwrap_err().contains("too large"));
        assert!(parse_list("1,,2").unwrap_err().contains("empty"));
        assert!(parse_list("-5").unwrap_err().contains("negative"));
        let many: Vec<String> = (1..=20_000).map(|v| v.to_string()).collect();
        assert!(parse_list(&many.join(","))
            .unwrap_err()
            .contains("more than 10000"));
    }

    #[test]
    fn points_are_counted_without_building_them() {
        use super::count_points;
        assert_eq!(count_points(&[("--size", 12), ("--qps", 3)]).unwrap(), 36);
        let e = count_points(&[("--size", 5000), ("--qps", 5000), ("--window", 1)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "5000 --size x 5000 --qps = 25000000 points exceed the limit of 10000 per run"
        );
        let huge = [("--size", usize::MAX); 3];
        assert!(count_points(&huge)
            .unwrap_err()
            .to_string()
            .contains("more than 2^64"));
    }
}
