//! Text from outside (files, hostnames, labels) made safe to print: on a
//! terminal, control characters and escape sequences are shown escaped
//! (`\n`, `\x1b`) rather than obeyed, so one line stays one line; in a shell
//! command line people copy and paste, every word is quoted so it stays one
//! word and runs nothing.

use std::borrow::Cow;
use std::fmt::Write;

/// `s` with every control character (C0, DEL, C1) written as an escape.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() && (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Bytes as text (an argument or environment value that is not UTF-8): each
/// byte that is not part of valid UTF-8 as `\xNN`, control characters
/// escaped as by [`printable`].
pub fn bytes(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(&printable(chunk.valid()));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// One shell word for POSIX shells (bash, zsh, dash): bare when it holds
/// only characters no shell treats specially, else single-quoted; a word
/// with control characters uses `$'...'` (bash, zsh, ksh, POSIX 2024) so a
/// newline cannot split the pasted line.
pub fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        return s.to_string();
    }
    if s.chars().any(char::is_control) {
        let mut out = String::from("$'");
        for c in s.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if c.is_control() && (c as u32) < 0x100 => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c if c.is_control() => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c => out.push(c),
            }
        }
        out.push('\'');
        return out;
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A command line: every word quoted as `shell_word` does.
pub fn shell_line<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| shell_word(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain"), "plain");
        assert_eq!(printable("a\nb\x1b[31m\u{9b}"), "a\\nb\\x1b[31m\\x9b");
    }

    #[test]
    fn shell_words_stay_one_word() {
        assert_eq!(shell_word("--size=2..64"), "--size=2..64");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("$(rm -rf ~)"), "'$(rm -rf ~)'");
        assert_eq!(shell_word("a\nb'c"), "$'a\\nb\\'c'");
    }
}
