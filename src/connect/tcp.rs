//! Length-prefixed JSON frames over TCP: a 4-byte big-endian length, then
//! that many bytes of JSON. Frames are capped so a hostile or confused peer
//! cannot make us allocate without bound.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::{Control, Message};
use crate::error::{Error, Result};

/// The largest frame either side accepts.
pub const MAX_FRAME: usize = 64 * 1024;

pub struct TcpChannel {
    stream: TcpStream,
    peer: String,
}

impl TcpChannel {
    pub fn new(stream: TcpStream) -> Result<Self> {
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        stream
            .set_nodelay(true)
            .map_err(|e| Error::io(format!("setting TCP_NODELAY to {peer}"), e))?;
        Ok(Self { stream, peer })
    }

    fn peer_err(&self, what: impl Into<String>) -> Error {
        Error::Peer {
            peer: self.peer.clone(),
            what: what.into(),
        }
    }
}

/// Encodes one frame (also used by tests and the fuzz property).
pub fn encode(msg: &Message) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("messages always serialise");
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Decodes a frame body. Errors name what was wrong with the bytes.
pub fn decode(body: &[u8]) -> std::result::Result<Message, String> {
    serde_json::from_slice(body).map_err(|e| format!("malformed message: {e}"))
}

/// Checks a frame header and returns the body length.
pub fn frame_len(header: [u8; 4]) -> std::result::Result<usize, String> {
    let len = u32::from_be_bytes(header) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(format!("frame of {len} bytes refused (limit {MAX_FRAME})"));
    }
    Ok(len)
}

impl Control for TcpChannel {
    fn send(&mut self, msg: &Message) -> Result<()> {
        let frame = encode(msg);
        self.stream
            .write_all(&frame)
            .map_err(|e| self.peer_err(format!("sending '{}': {e}", msg.name())))
    }

    fn recv(&mut self, timeout: Duration) -> Result<Message> {
        self.stream
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .map_err(|e| Error::io("setting a read timeout", e))?;
        let mut header = [0u8; 4];
        self.read_exact_or(&mut header, timeout)?;
        let len = frame_len(header).map_err(|e| self.peer_err(e))?;
        let mut body = vec![0u8; len];
        self.read_exact_or(&mut body, timeout)?;
        decode(&body).map_err(|e| self.peer_err(e))
    }

    fn peer(&self) -> String {
        self.peer.clone()
    }
}

impl TcpChannel {
    fn read_exact_or(&mut self, buf: &mut [u8], timeout: Duration) -> Result<()> {
        self.stream.read_exact(buf).map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => Error::Timeout {
                what: format!("peer {}", self.peer),
                secs: timeout.as_secs_f64(),
            },
            ErrorKind::UnexpectedEof => self.peer_err("closed the connection"),
            _ => self.peer_err(format!("read failed: {e}")),
        })
    }
}
