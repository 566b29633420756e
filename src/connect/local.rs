//! The in-process control channel of loopback runs.

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use super::{Control, Message};
use crate::error::{Error, Result};

pub struct LocalChannel {
    tx: Sender<Message>,
    rx: Receiver<Message>,
    name: &'static str,
}

/// Two connected ends: (client, server).
pub fn local_pair() -> (LocalChannel, LocalChannel) {
    let (a_tx, b_rx) = channel();
    let (b_tx, a_rx) = channel();
    (
        LocalChannel {
            tx: a_tx,
            rx: a_rx,
            name: "loopback server thread",
        },
        LocalChannel {
            tx: b_tx,
            rx: b_rx,
            name: "loopback client",
        },
    )
}

impl Control for LocalChannel {
    fn send(&mut self, msg: &Message) -> Result<()> {
        self.tx.send(msg.clone()).map_err(|_| Error::Peer {
            peer: self.name.into(),
            what: format!("gone before '{}' could be sent", msg.name()),
        })
    }

    fn recv(&mut self, timeout: Duration) -> Result<Message> {
        self.rx.recv_timeout(timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => Error::Timeout {
                what: format!("the {}", self.name),
                secs: timeout.as_secs_f64(),
            },
            RecvTimeoutError::Disconnected => Error::Peer {
                peer: self.name.into(),
                what: "stopped".into(),
            },
        })
    }

    fn peer(&self) -> String {
        self.name.to_string()
    }
}
