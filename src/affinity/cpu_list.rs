//! CPU lists (`0,2-3`): parsing, the kernel's compact form, and the check
//! that a user's list names only CPUs this process may use. A list is read
//! into a fixed set of `CPU_SETSIZE` bits, so however many (or however
//! overlapping) its items are, its parsed form never exceeds 1024 CPUs:
//! no CPU above that can be pinned anyway (`sys::set_thread_cpus`).

/// One past the highest CPU that can be named: the kernel's `cpu_set_t`.
pub const CPU_LIMIT: usize = libc::CPU_SETSIZE as usize;

const WORDS: usize = CPU_LIMIT / 64;

/// At most this much of a list is quoted back in an error, so a huge
/// argument still gives a readable line.
const QUOTED: usize = 40;

/// Parses a CPU list as the kernel writes it and `--cpu` takes it: `0,2-3`,
/// ranges inclusive, surrounding whitespace ignored. Returns the CPUs
/// ascending without duplicates; an empty list, an empty item, a reversed
/// range, a non-number or a CPU at or above `CPU_LIMIT` is an error naming
/// the item.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    parse(s, true)
}

/// `parse_cpu_list` for lists the kernel wrote (sysfs): CPUs this program
/// cannot pin are left out rather than refused.
pub fn parse_kernel_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    parse(s, false)
}

fn parse(s: &str, strict: bool) -> Result<Vec<usize>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty CPU list (expected e.g. 0,2-3)".into());
    }
    let shown = quoted(s);
    let num = |t: &str, item: &str| {
        t.trim().parse::<usize>().map_err(|_| {
            format!(
                "bad CPU list item '{}' in '{shown}' (expected e.g. 0,2-3)",
                quoted(item)
            )
        })
    };
    let mut set = [0u64; WORDS];
    for item in s.split(',') {
        let item = item.trim();
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => (num(a, item)?, num(b, item)?),
            None => {
                let c = num(item, item)?;
                (c, c)
            }
        };
        if a > b {
            return Err(format!(
                "CPU range '{}' in '{shown}' runs backwards",
                quoted(item)
            ));
        }
        if b >= CPU_LIMIT {
            if strict {
                return Err(format!(
                    "CPU {b} in '{shown}' is above the highest CPU rdma-bench can pin ({}, CPU_SETSIZE)",
                    CPU_LIMIT - 1
                ));
            }
            if a >= CPU_LIMIT {
                continue;
            }
        }
        set_range(&mut set, a, b.min(CPU_LIMIT - 1));
    }
    Ok((0..CPU_LIMIT)
        .filter(|&c| set[c / 64] & (1 << (c % 64)) != 0)
        .collect())
}

/// Sets bits `a..=b` (both below `CPU_LIMIT`) a word at a time, so an item
/// costs at most `WORDS` steps.
fn set_range(set: &mut [u64; WORDS], a: usize, b: usize) {
    for (w, word) in set.iter_mut().enumerate().take(b / 64 + 1).skip(a / 64) {
        let lo = if w == a / 64 { a % 64 } else { 0 };
        let hi = if w == b / 64 { b % 64 } else { 63 };
        *word |= (u64::MAX >> (63 - hi)) & (u64::MAX << lo);
    }
}

/// `s` itself if short, else its start and its length.
fn quoted(s: &str) -> String {
    if s.len() <= QUOTED {
        return s.to_string();
    }
    let mut end = QUOTED;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

/// Writes CPUs in the kernel's compact form (`0-3,8`); the input need not be sorted.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Whether the user's list names only CPUs in `allowed`. It needs no
/// device, so commands check it before opening one. The error says which
/// CPUs are not allowed and which are; the caller puts in front who gave the
/// list (`--cpu 1,5-6` or a file's key).
pub fn check_user(user: &[usize], allowed: &[usize]) -> Result<(), String> {
    if user.is_empty() {
        return Err("empty CPU list".into());
    }
    let mut mask = [0u64; WORDS];
    for &c in allowed.iter().filter(|&&c| c < CPU_LIMIT) {
        mask[c / 64] |= 1 << (c % 64);
    }
    let outside: Vec<usize> = user
        .iter()
        .copied()
        .filter(|&c| c >= CPU_LIMIT || mask[c / 64] & (1 << (c % 64)) == 0)
        .collect();
    if outside.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "CPU {} not available to this process (allowed: {})",
            format_cpu_list(&outside),
            format_cpu_list(allowed)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_like_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0,2-3").unwrap(), vec![0, 2, 3]);
        assert_eq!(
            parse_cpu_list("0-3,8-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 9, 10, 11]
        );
        assert_eq!(parse_cpu_list(" 5 ").unwrap(), vec![5]);
        assert_eq!(parse_cpu_list("3,1,1-2").unwrap(), vec![1, 2, 3]);
        assert_eq!(parse_cpu_list("4-4").unwrap(), vec![4]);
        assert_eq!(parse_cpu_list("0, 2 - 3").unwrap(), vec![0, 2, 3]);
        assert_eq!(parse_cpu_list("62-65").unwrap(), vec![62, 63, 64, 65]);
        assert_eq!(parse_cpu_list("0-1023").unwrap().len(), CPU_LIMIT);
        assert_eq!(parse_cpu_list("1023").unwrap(), vec![1023]);
    }

    #[test]
    fn bad_cpu_lists_are_refused_naming_the_item() {
        for (bad, says) in [
            ("", "empty"),
            ("  \n", "empty"),
            ("1,,2", "''"),
            ("1,", "''"),
            ("a", "'a'"),
            ("-1", "'-1'"),
            ("3-1", "backwards"),
            ("1-", "'1-'"),
            ("0-99999999", "CPU 99999999 in '0-99999999' is above the highest CPU rdma-bench can pin (1023, CPU_SETSIZE)"),
            ("1024", "above the highest CPU"),
            ("99999999999999999999999", "bad CPU list item"),
            ("1.5", "'1.5'"),
        ] {
            let e = parse_cpu_list(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_list_of_any_length_parses_into_at_most_1024_cpus() {
        // 128 KiB of whole-set ranges: the parsed form stays 1024 entries.
        let s = vec!["0-1023"; 128 * 1024 / 7].join(",");
        assert_eq!(parse_cpu_list(&s).unwrap().len(), CPU_LIMIT);
        // An error about such a list quotes only its start.
        let e = parse_cpu_list(&format!("{s},x")).unwrap_err();
        assert!(e.len() < 200, "{e}");
        assert!(e.contains("bytes)"), "{e}");
    }

    #[test]
    fn kernel_lists_leave_out_what_cannot_be_pinned() {
        assert_eq!(
            parse_kernel_cpu_list("1022-1025,2000").unwrap(),
            vec![1022, 1023]
        );
        assert!(parse_cpu_list("1022-1025").is_err());
    }

    #[test]
    fn cpu_lists_format_compactly() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8]), "0-3,8");
        assert_eq!(format_cpu_list(&[5, 3, 4, 3]), "3-5");
        assert_eq!(format_cpu_list(&[0, 2, 4]), "0,2,4");
        assert_eq!(format_cpu_list(&[]), "");
        for s in ["0-3,8", "1", "0,2-3,7-9"] {
            assert_eq!(format_cpu_list(&parse_cpu_list(s).unwrap()), s);
        }
    }

    #[test]
    fn the_users_list_must_be_allowed() {
        assert_eq!(check_user(&[0, 1], &[0, 1, 2]), Ok(()));
        assert_eq!(
            check_user(&[1, 5, 6], &[0, 1, 2, 3]),
            Err("CPU 5-6 not available to this process (allowed: 0-3)".into())
        );
        assert!(check_user(&[], &[0]).unwrap_err().contains("empty"));
    }
}
