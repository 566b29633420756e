//! Reading an input file (an experiment file, a results file) without
//! trusting it: only regular files are read (a FIFO, a device such as
//! `/dev/zero`, a socket or a directory is refused before anything blocks or
//! grows), the file is opened non-blocking so a FIFO swapped in at the last
//! moment cannot stall the program, and never more than a stated number of
//! bytes is read.

use std::fs::{File, FileType, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, Result};

mod census;
pub use census::{census, Census};

/// Largest experiment file read (`rdma-bench run`).
pub const MAX_EXPERIMENT_BYTES: u64 = 1 << 20;
/// Largest results file read (`compare`, `run --resume`).
pub const MAX_RESULTS_BYTES: u64 = 256 << 20;

/// What a file type is, in words, when it is not a regular file.
pub fn describe_special(t: &FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a named pipe (FIFO)")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

fn refuse(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::usage(format!("{}: {why}", path.display()))
}

fn check_type(path: &Path, t: &FileType) -> Result<()> {
    match describe_special(t) {
        None => Ok(()),
        Some(what) => Err(refuse(
            path,
            format!("is {what}; only regular files are read"),
        )),
    }
}

/// Reads a regular file of at most `limit` bytes as UTF-8 text. Everything
/// else is bad input (exit 2) naming the path and, for size, the limit.
pub fn read_text(path: &Path, limit: u64) -> Result<String> {
    // The type first (symlinks followed), so nothing special is even opened...
    let meta = std::fs::metadata(path).map_err(|e| refuse(path, format!("cannot read: {e}")))?;
    check_type(path, &meta.file_type())?;
    // ...then opened without blocking and checked again on the open file.
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| refuse(path, format!("cannot read: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| refuse(path, format!("cannot read: {e}")))?;
    check_type(path, &meta.file_type())?;
    let too_big = || {
        refuse(
            path,
            format!("larger than the input limit of {limit} bytes"),
        )
    };
    if meta.len() > limit {
        return Err(too_big());
    }
    // A failed allocation would abort the process: ask first, so a
    // memory-limited run (`ulimit -v`) gets an error naming the file.
    let mut bytes = Vec::new();
    reserve(&mut bytes, meta.len().saturating_add(1))
        .map_err(|n| refuse(path, format!("cannot allocate {n} bytes to read it")))?;
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(path, format!("cannot read: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|e| {
        refuse(
            path,
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// Reserves room for `n` more bytes in `v`, or says how many could not be had.
fn reserve(v: &mut Vec<u8>, n: u64) -> std::result::Result<(), u64> {
    usize::try_from(n)
        .ok()
        .and_then(|n| v.try_reserve_exact(n).ok())
        .ok_or(n)
}

/// Whether this process may allocate `bytes` more now: asked of the
/// allocator and given back at once, before a parse that would otherwise
/// abort the process half way when the memory is not there (`ulimit -v`).
pub fn can_allocate(bytes: u64) -> bool {
    reserve(&mut Vec::new(), bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_and_oversize_files_are_refused() {
        let e = read_text(Path::new("/dev/zero"), 10).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = read_text(Path::new("/"), 10).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let dir = std::env::temp_dir().join(format!("rdma-bench-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("big");
        std::fs::write(&f, "0123456789A").unwrap();
        let e = read_text(&f, 10).unwrap_err();
        assert!(e.to_string().contains("limit of 10 bytes"), "{e}");
        assert_eq!(read_text(&f, 11).unwrap(), "0123456789A");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
