//! Naming the option whose value is not valid UTF-8 (clap's error names none).

/// clap's invalid-UTF-8 error names no argument: find the first argument
/// that is not UTF-8 and say which option (or positional) it is the value of.
pub(super) fn invalid_utf8(cmd: &clap::Command, argv: &[std::ffi::OsString]) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let i = argv.iter().skip(1).position(|a| a.to_str().is_none())? + 1;
    let bytes = argv[i].as_bytes();
    // The value alone: after `=` of `--name=VALUE`, after `-d` of `-dVALUE`.
    let value = match bytes {
        [b'-', b'-', rest @ ..] => rest.splitn(2, |b| *b == b'=').nth(1).unwrap_or(bytes),
        [b'-', c, rest @ ..] if *c != b'-' && !rest.is_empty() => rest,
        _ => bytes,
    };
    let shown = crate::escape::bytes(value);
    let Some(sub) = argv.get(1).and_then(|s| s.to_str()).filter(|_| i > 1) else {
        return Some(format!("the subcommand '{shown}' is not valid UTF-8"));
    };
    let sub = cmd.find_subcommand(sub)?;
    let takes = |a: &clap::Arg| a.get_action().takes_values();
    let long = |name: &[u8]| {
        sub.get_arguments()
            .find(|a| {
                a.get_long().is_some_and(|l| l.as_bytes() == name)
                    || a.get_all_aliases()
                        .is_some_and(|al| al.iter().any(|x| x.as_bytes() == name))
            })
            .filter(|a| takes(a))
    };
    let short = |c: u8| {
        sub.get_arguments()
            .find(|a| {
                a.get_short().is_some_and(|s| s.is_ascii() && s as u8 == c)
                    || a.get_short_and_visible_aliases()
                        .is_some_and(|v| v.iter().any(|s| s.is_ascii() && *s as u8 == c))
            })
            .filter(|a| takes(a))
    };
    let name = |a: &clap::Arg| match a.get_long() {
        Some(l) => format!("--{l}"),
        None => format!("-{}", a.get_short().unwrap_or('?')),
    };
    let option = if let Some(rest) = bytes.strip_prefix(b"--") {
        // `--name=VALUE`
        let key = rest.split(|b| *b == b'=').next().unwrap_or(rest);
        long(key).map(name)
    } else if bytes.len() > 2 && bytes[0] == b'-' && bytes[1] != b'-' {
        // `-dVALUE`
        short(bytes[1]).map(name)
    } else {
        None
    };
    let prev = argv[i - 1].as_bytes();
    let option = option
        .or_else(|| prev.strip_prefix(b"--").and_then(long).map(name))
        .or_else(|| match prev {
            [b'-', c] => short(*c).map(name),
            _ => None,
        })
        .unwrap_or_else(|| {
            sub.get_positionals()
                .next()
                .map(|p| format!("<{}>", p.get_id().as_str().to_uppercase()))
                .unwrap_or_else(|| "an argument".into())
        });
    Some(format!("{option}: the value '{shown}' is not valid UTF-8"))
}
