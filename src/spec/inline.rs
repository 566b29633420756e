//! What a run asked for about inline payloads: nothing, `--inline` (every
//! payload) or `-I SIZE` (perftest's `--inline_size`: a payload is inlined
//! when it is at most SIZE). Whether one point posts inline is decided per
//! size from this request; `bench::ops::posts_inline` adds the verb's rule.

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The inline request of a run. On the wire (the spec crosses it in the
/// handshake) it is `false`, `true` or the size limit, so a run without
/// `-I` is spelled as it was before the limit existed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "Wire", into = "Wire")]
pub enum InlineRequest {
    /// Neither option: payloads are posted from registered memory (echo
    /// still inlines what fits its QPs, as HERD's clients do).
    #[default]
    Never,
    /// `--inline`: every payload.
    Always,
    /// `-I N`: the payloads of at most N bytes.
    UpTo(u32),
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Wire {
    Flag(bool),
    UpTo(u32),
}

impl From<Wire> for InlineRequest {
    fn from(w: Wire) -> Self {
        match w {
            Wire::Flag(false) => InlineRequest::Never,
            Wire::Flag(true) => InlineRequest::Always,
            Wire::UpTo(n) => InlineRequest::UpTo(n),
        }
    }
}

impl From<InlineRequest> for Wire {
    fn from(r: InlineRequest) -> Self {
        match r {
            InlineRequest::Never => Wire::Flag(false),
            InlineRequest::Always => Wire::Flag(true),
            InlineRequest::UpTo(n) => Wire::UpTo(n),
        }
    }
}

impl InlineRequest {
    /// Whether the request asks to inline a `size`-byte payload.
    pub fn wants(self, size: u32) -> bool {
        match self {
            InlineRequest::Never => false,
            InlineRequest::Always => true,
            InlineRequest::UpTo(n) => size <= n,
        }
    }

    /// Whether any inlining was asked for (`--inline` or `-I`).
    pub fn is_asked(self) -> bool {
        self != InlineRequest::Never
    }

    /// The requested size limit (`-I N`), as results records keep it.
    pub fn limit(self) -> Option<u32> {
        match self {
            InlineRequest::UpTo(n) => Some(n),
            _ => None,
        }
    }

    /// The largest of `sizes` the request inlines, if any.
    pub fn largest_inlined(self, sizes: impl IntoIterator<Item = u32>) -> Option<u32> {
        sizes.into_iter().filter(|&s| self.wants(s)).max()
    }

    /// The option as the user gave it: `--inline` or `--inline-size N`.
    pub fn option(self) -> String {
        match self {
            InlineRequest::UpTo(n) => format!("--inline-size {n}"),
            _ => "--inline".into(),
        }
    }

    /// The refusal of a payload of `size` bytes that the request inlines but
    /// the device cannot (`on` names the transport where limits differ):
    /// both numbers, as for every device limit.
    pub fn exceeds_device(self, size: u32, on: &str, device: &str, max_inline: u32) -> Error {
        match self {
            InlineRequest::UpTo(n) => Error::usage(format!(
                "--inline-size {n} --size {size}{on}: a payload of at most {n} B is inlined, and {size} B exceeds the max_inline of {device} ({max_inline}); use -I {max_inline} or less"
            )),
            _ => Error::usage(format!(
                "--inline --size {size}{on}: exceeds the max_inline of {device} ({max_inline})"
            )),
        }
    }

    /// How the header says it: "inline", "not inline", or the limit.
    pub fn describe(self) -> String {
        match self {
            InlineRequest::Never => "not inline".into(),
            InlineRequest::Always => "inline".into(),
            InlineRequest::UpTo(n) => {
                format!("inline when the payload is at most {n} B (-I {n}; see each row)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::InlineRequest::{self, *};

    #[test]
    fn each_size_is_decided_on_its_own() {
        let sizes = [16, 64, 65, 256];
        let inlined = |r: InlineRequest| sizes.map(|s| r.wants(s));
        assert_eq!(inlined(Never), [false; 4]);
        assert_eq!(inlined(Always), [true; 4]);
        assert_eq!(inlined(UpTo(64)), [true, true, false, false]);
        assert_eq!(inlined(UpTo(0)), [false; 4]);
        assert_eq!(UpTo(64).largest_inlined(sizes), Some(64));
        assert_eq!(UpTo(8).largest_inlined(sizes), None);
        assert_eq!(Always.largest_inlined(sizes), Some(256));
        assert_eq!(Never.largest_inlined(sizes), None);
        assert_eq!(UpTo(64).limit(), Some(64));
        assert_eq!(Always.limit(), None);
        assert!(UpTo(0).is_asked() && Always.is_asked() && !Never.is_asked());
    }

    #[test]
    fn wire_form_is_the_old_flag_or_the_limit() {
        for (r, json) in [(Never, "false"), (Always, "true"), (UpTo(64), "64")] {
            assert_eq!(serde_json::to_string(&r).unwrap(), json);
            assert_eq!(serde_json::from_str::<InlineRequest>(json).unwrap(), r);
        }
        assert!(serde_json::from_str::<InlineRequest>("-1").is_err());
        assert!(serde_json::from_str::<InlineRequest>("\"64\"").is_err());
    }

    #[test]
    fn refusals_name_the_option_and_both_numbers() {
        let e = UpTo(1024).exceeds_device(768, "", "rxe0", 512).to_string();
        assert!(e.starts_with("--inline-size 1024 --size 768"), "{e}");
        assert!(e.contains("max_inline of rxe0 (512)"), "{e}");
        let e = Always
            .exceeds_device(1024, " (rc)", "rxe0", 512)
            .to_string();
        assert_eq!(
            e,
            "--inline --size 1024 (rc): exceeds the max_inline of rxe0 (512)"
        );
    }
}
