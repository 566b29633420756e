//! The in-process control channel of loopback runs.

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::{Control, Message, SLICE};
use crate::abort::aborted;
use crate::error::{Error, Result};

pub struct LocalChannel {
    tx: Sender<Message>,
    rx: Receiver<Message>,
    /// Who is at the other end.
    name: String,
}

/// Two connected ends: (client, server).
pub fn local_pair() -> (LocalChannel, LocalChannel) {
    local_pair_named("loopback server thread".into(), "loopback client".into())
}

/// Two connected ends, each named after the peer it talks to.
pub fn local_pair_named(a_peer: String, b_peer: String) -> (LocalChannel, LocalChannel) {
    let (a_tx, b_rx) = channel();
    let (b_tx, a_rx) = channel();
    (
        LocalChannel {
            tx: a_tx,
            rx: a_rx,
            name: a_peer,
        },
        LocalChannel {
            tx: b_tx,
            rx: b_rx,
            name: b_peer,
        },
    )
}

impl LocalChannel {
    /// A message if one is waiting, without blocking.
    pub fn try_recv(&mut self) -> Option<Message> {
        self.rx.try_recv().ok()
    }
}

impl Control for LocalChannel {
    fn send(&mut self, msg: &Message) -> Result<()> {
        self.tx.send(msg.clone()).map_err(|_| Error::Peer {
            peer: self.name.clone(),
            what: format!("gone before '{}' could be sent", msg.name()),
        })
    }

    fn recv(&mut self, timeout: Duration) -> Result<Message> {
        let deadline = Instant::now() + timeout;
        loop {
            // Wait in slices so an interrupt is noticed within one.
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left.min(SLICE)) {
                Ok(m) => return Ok(m),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::Peer {
                        peer: self.name.clone(),
                        what: "stopped".into(),
                    })
                }
                Err(RecvTimeoutError::Timeout) if left <= SLICE => {
                    return Err(Error::Timeout {
                        what: format!("the {}", self.name),
                        secs: timeout.as_secs_f64(),
                    })
                }
                Err(RecvTimeoutError::Timeout) if aborted() => return Err(Error::Interrupted),
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    fn poll(&mut self) -> Result<Option<Message>> {
        match self.rx.try_recv() {
            Ok(m) => Ok(Some(m)),
            Err(std::sync::mpsc::TryRecvError::Empty) => Ok(None),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => Err(Error::Peer {
                peer: self.name.clone(),
                what: "stopped".into(),
            }),
        }
    }

    fn peer(&self) -> String {
        self.name.clone()
    }
}
