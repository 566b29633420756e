//! Where results may be written, checked once before any work: a target is
//! a regular file or a new file in an existing, writable directory. Refused
//! (exit 2, naming the option): directories, device nodes, FIFOs, sockets,
//! symbolic links (never followed nor replaced: give the file they point
//! to), a path that is also one of the run's inputs, and two targets that are
//! the same file (both by file identity, so a hard link counts).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::input::describe_special;

/// One file a command will write, and the option that named it.
pub struct Target<'a> {
    pub option: &'a str,
    pub path: &'a Path,
}

/// (device, inode) of an existing file, following links.
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// What makes two targets one file: the file's (device, inode) where it
/// exists (so hard links and a second mount of one file compare equal), else
/// its directory's (device, inode) and its name; the canonical path only
/// where neither can be read.
#[derive(PartialEq, Eq)]
enum FileKey {
    File(u64, u64),
    New(u64, u64, std::ffi::OsString),
    Path(PathBuf),
}

fn file_key(path: &Path) -> FileKey {
    if let Some((dev, ino)) = identity(path) {
        return FileKey::File(dev, ino);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (identity(dir), path.file_name()) {
        (Some((dev, ino)), Some(name)) => FileKey::New(dev, ino, name.to_os_string()),
        _ => FileKey::Path(location(path).unwrap_or_else(|| path.to_path_buf())),
    }
}

/// Where a target will live: its canonical directory and file name.
fn location(path: &Path) -> Option<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some(std::fs::canonicalize(dir).ok()?.join(path.file_name()?))
}

/// Checks every target; `inputs` are the files the command reads (a target
/// may not be one of them).
pub fn check(targets: &[Target], inputs: &[&Path]) -> Result<()> {
    let input_ids: Vec<(u64, u64)> = inputs.iter().filter_map(|p| identity(p)).collect();
    let mut seen: Vec<(FileKey, &Target)> = Vec::new();
    for t in targets {
        check_one(t)?;
        let refuse =
            |why: String| Error::usage(format!("{} {}: {why}", t.option, t.path.display()));
        if identity(t.path).is_some_and(|id| input_ids.contains(&id)) {
            return Err(refuse(
                "is also an input of this command; write the results elsewhere".into(),
            ));
        }
        let key = file_key(t.path);
        if let Some((_, other)) = seen.iter().find(|(k, _)| *k == key) {
            // Each target is replaced by a rename, which would split a link.
            let how = if location(t.path) == location(other.path) {
                ""
            } else {
                "; two names of one file, e.g. hard links"
            };
            return Err(refuse(format!(
                "is the same file as {} ({}{how})",
                other.option,
                other.path.display()
            )));
        }
        seen.push((key, t));
    }
    Ok(())
}

fn check_one(t: &Target) -> Result<()> {
    let path = t.path;
    let refuse = |why: &str| Error::usage(format!("{} {}: {why}", t.option, path.display()));
    let text = path.as_os_str().as_encoded_bytes();
    if text.is_empty() {
        return Err(Error::usage(format!("{}: empty file name", t.option)));
    }
    if text.ends_with(b"/") || path.file_name().is_none() {
        return Err(refuse("names a directory, not a file"));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(refuse(
                "is a symbolic link; results are never written through links (give the file it points to)",
            ))
        }
        Ok(m) => {
            if let Some(what) = describe_special(&m.file_type()) {
                return Err(refuse(&format!(
                    "is {what}; results go only to regular files"
                )));
            }
            // Opening for writing changes nothing (no truncation) but says
            // whether the user may replace this file.
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| refuse(&format!("cannot be written: {e}")))?;
        }
        // A missing file, or a parent that is no directory: the parent check says which.
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTDIR) => {}
        Err(e) => return Err(refuse(&format!("cannot be checked: {e}"))),
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    check_dir(t.option, dir)
        .map_err(|e| Error::usage(format!("{} {}: {e}", t.option, path.display())))
}

/// Checks that `dir` exists, is a directory and that files can be created in
/// it (by creating and removing a probe file). The error is plain text for
/// the caller to prefix.
fn check_dir(_option: &str, dir: &Path) -> std::result::Result<(), String> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("{} is not a directory", dir.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("directory {} does not exist", dir.display()))
        }
        Err(e) => return Err(format!("directory {}: {e}", dir.display())),
    }
    // Unique per call, so a probe a crashed process left behind cannot make
    // a writable directory look unwritable.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let probe = dir.join(format!(".rdma-bench-probe-{}-{nanos}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot create files in directory {}: {e}",
            dir.display()
        )),
    }
}

/// Checks a directory results files are created in (`run --out`); a missing
/// one is fine when its parent can hold it (it is created later).
pub fn check_out_dir(option: &str, dir: &Path) -> Result<()> {
    let refuse = |why: String| Error::usage(format!("{option} {}: {why}", dir.display()));
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => check_dir(option, dir).map_err(refuse),
        Ok(m) => Err(refuse(format!(
            "is {}, not a directory",
            describe_special(&m.file_type()).unwrap_or("a regular file")
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Created later with its parents: the nearest existing ancestor must take it.
            let mut up = dir.parent();
            while let Some(d) = up {
                let d = if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                };
                if d.exists() {
                    return check_dir(option, d).map_err(refuse);
                }
                up = d.parent();
            }
            Ok(())
        }
        Err(e) => Err(refuse(e.to_string())),
    }
}
