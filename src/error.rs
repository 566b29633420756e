//! The program's error type and its exit codes: bad input is the user's to
//! fix (exit 2); anything that fails at run time exits 1; a run that
//! measured and saved everything but missed an `--expect` limit exits 3, so a
//! script can tell "too slow" from "broken" (130: interrupted).

use crate::clock::ClockError;
use crate::verbs::VerbsError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: an option, a combination, or a value the device cannot do.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// The cycle counter's calibration was implausible or unsteady.
    #[error(transparent)]
    Clock(#[from] ClockError),
    /// The out-of-band exchange with the peer failed or was refused.
    #[error("peer {peer}: {what}")]
    Peer { peer: String, what: String },
    /// A wait on the peer (data or control) saw no progress for too long.
    #[error("timed out after {secs:.1} s waiting for {what} (--timeout)")]
    Timeout { what: String, secs: f64 },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// Results were measured and saved, but did not verify.
    #[error("{0}")]
    Verification(String),
    /// Results were measured and saved, but missed an `--expect` limit.
    #[error("{0}")]
    Expectation(String),
    /// A program the command runs (the plotting scripts) failed.
    #[error("{0}")]
    Tool(String),
    /// `fabric`: every pair measured and saved, and some were slow.
    #[error("{0}")]
    Outlier(String),
    #[error(
        "interrupted (the point in progress was abandoned; points measured before it are saved)"
    )]
    Interrupted,
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            // A device name that does not exist is a typo, not a run-time failure.
            Error::Usage(_) | Error::Verbs(VerbsError::DeviceNotFound { .. }) => 2,
            // The shell's convention for "ended by SIGINT".
            Error::Interrupted => 130,
            // Distinct from 1 and 2: the run worked, the figures missed a limit.
            Error::Expectation(_) => 3,
            // `fabric`: slow pairs against the best ones, apart from a limit missed.
            Error::Outlier(_) => 4,
            _ => 1,
        }
    }

    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }

    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
