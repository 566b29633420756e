//! Length-prefixed JSON frames over TCP: a 4-byte big-endian length, then
//! that many bytes of JSON. Frames are capped so a hostile or confused peer
//! cannot make us allocate without bound.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use super::{Control, Message, SLICE};
use crate::abort::aborted;
use crate::error::{Error, Result};

/// The largest frame either side accepts: room for the endpoint lists of
/// thousands of QPs, small enough that a hostile peer cannot exhaust memory.
pub const MAX_FRAME: usize = 4 * 1024 * 1024;

pub struct TcpChannel {
    stream: TcpStream,
    peer: String,
    /// Bytes of a frame received so far. A `recv` that times out mid-frame
    /// keeps them, so the next `recv` continues the same frame instead of
    /// mistaking its middle for a header.
    pending: Vec<u8>,
    /// How long the peer's host may go without answering (`new`).
    liveness: Duration,
}

impl TcpChannel {
    /// A channel on `stream` whose peer counts as gone once the connection
    /// has had no answer from its host for `liveness` (the run's
    /// `--timeout`): the kernel probes an idle connection every second, so
    /// a dead host or a cut wire ends every wait on it within that time,
    /// however long the wait was meant to be.
    pub fn new(stream: TcpStream, liveness: Duration) -> Result<Self> {
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        stream
            .set_nodelay(true)
            .map_err(|e| Error::io(format!("setting TCP_NODELAY to {peer}"), e))?;
        crate::sys::tcp_liveness(stream.as_raw_fd(), liveness)
            .map_err(|e| Error::io(format!("setting TCP keepalive to {peer}"), e))?;
        Ok(Self {
            stream,
            peer,
            pending: Vec::new(),
            liveness,
        })
    }

    /// Ends the connection both ways now, whatever duplicates of its
    /// socket stay open elsewhere (the peer sees it end).
    pub fn end(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }

    fn peer_err(&self, what: impl Into<String>) -> Error {
        Error::Peer {
            peer: self.peer.clone(),
            what: what.into(),
        }
    }

    /// The error for a failed read or write (`doing` says which): a
    /// connection that timed out means the peer's host stopped answering.
    fn io_err(&self, doing: &str, e: std::io::Error) -> Error {
        match e.kind() {
            ErrorKind::TimedOut => self.peer_err(format!(
                "{doing}: its host stopped answering for {:.0} s (--timeout): the host, or the network to it, is down",
                self.liveness.as_secs_f64()
            )),
            ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => {
                self.peer_err(format!("{doing}: the connection was reset (its process ended?)"))
            }
            _ => self.peer_err(format!("{doing}: {e}")),
        }
    }
}

/// Encodes one frame as `send` writes it (the tests' and the fuzz property's frames).
#[cfg(test)]
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
        self.send_value(msg.name(), msg)
    }

    fn recv(&mut self, timeout: Duration) -> Result<Message> {
        let body = self.recv_frame(timeout)?;
        decode(&body).map_err(|e| self.peer_err(e))
    }

    fn poll(&mut self) -> Result<Option<Message>> {
        match self.poll_frame()? {
            Some(body) => decode(&body).map(Some).map_err(|e| self.peer_err(e)),
            None => Ok(None),
        }
    }

    fn peer(&self) -> String {
        self.peer.clone()
    }

    fn peer_ip(&self) -> Option<std::net::IpAddr> {
        self.stream.peer_addr().ok().map(|a| a.ip())
    }

    fn local_ip(&self) -> Option<std::net::IpAddr> {
        self.stream.local_addr().ok().map(|a| a.ip())
    }

    fn name_peer(&mut self, host: &str) {
        if !host.is_empty() && !self.peer.starts_with(host) {
            let host = crate::escape::printable(host);
            self.peer = format!("{host} ({})", self.peer);
        }
    }

    fn hangup_fd(&self) -> Option<RawFd> {
        Some(self.stream.as_raw_fd())
    }
}

impl TcpChannel {
    /// Sends any serde value as one frame (`name` says what it is in
    /// errors): the control channel's `Message`s, and `fabric`'s own
    /// messages between ranks, share the framing, its cap and its liveness.
    pub fn send_value<T: serde::Serialize>(&mut self, name: &str, value: &T) -> Result<()> {
        let body = serde_json::to_vec(value).expect("control values always serialise");
        if body.len() > MAX_FRAME {
            return Err(self.peer_err(format!(
                "'{name}' would be a {}-byte frame, over the limit of {MAX_FRAME}",
                body.len()
            )));
        }
        let mut frame = Vec::with_capacity(4 + body.len());
        frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
        frame.extend_from_slice(&body);
        self.stream
            .write_all(&frame)
            .map_err(|e| self.io_err(&format!("sending '{name}'"), e))
    }

    /// One frame, decoded as `T`, within `timeout`.
    pub fn recv_value<T: serde::de::DeserializeOwned>(&mut self, timeout: Duration) -> Result<T> {
        let body = self.recv_frame(timeout)?;
        serde_json::from_slice(&body).map_err(|e| self.peer_err(format!("malformed message: {e}")))
    }

    /// A whole frame if one has arrived, decoded as `T`, without waiting.
    pub fn poll_value<T: serde::de::DeserializeOwned>(&mut self) -> Result<Option<T>> {
        match self.poll_frame()? {
            Some(body) => serde_json::from_slice(&body)
                .map(Some)
                .map_err(|e| self.peer_err(format!("malformed message: {e}"))),
            None => Ok(None),
        }
    }

    /// The local end's address (the address the peer reached this host at).
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.stream.local_addr().ok()
    }

    fn recv_frame(&mut self, timeout: Duration) -> Result<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        self.fill_to(4, deadline, timeout)?;
        let header: [u8; 4] = self.pending[..4].try_into().expect("four bytes");
        let len = frame_len(header).map_err(|e| self.peer_err(e))?;
        self.fill_to(4 + len, deadline, timeout)?;
        let mut frame: Vec<u8> = self.pending.drain(..4 + len).collect();
        Ok(frame.split_off(4))
    }

    fn poll_frame(&mut self) -> Result<Option<Vec<u8>>> {
        // Take whatever has arrived without blocking, then see if a frame is whole.
        let nb = |s: &TcpStream, on: bool| {
            s.set_nonblocking(on)
                .map_err(|e| Error::io("switching the control socket's blocking mode", e))
        };
        nb(&self.stream, true)?;
        let mut chunk = [0u8; 4096];
        let read = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break Err(self.peer_err("closed the connection")),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => break Err(self.io_err("read failed", e)),
            }
        };
        nb(&self.stream, false)?;
        read?;
        if self.pending.len() < 4 {
            return Ok(None);
        }
        let header: [u8; 4] = self.pending[..4].try_into().expect("four bytes");
        let len = frame_len(header).map_err(|e| self.peer_err(e))?;
        if self.pending.len() < 4 + len {
            return Ok(None);
        }
        let mut frame: Vec<u8> = self.pending.drain(..4 + len).collect();
        Ok(Some(frame.split_off(4)))
    }

    /// Reads until `pending` holds `want` bytes or `deadline` passes, in
    /// slices so an interrupt is noticed.
    fn fill_to(&mut self, want: usize, deadline: Instant, timeout: Duration) -> Result<()> {
        let mut chunk = [0u8; 4096];
        while self.pending.len() < want {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout {
                    what: format!("peer {}", self.peer),
                    secs: timeout.as_secs_f64(),
                });
            }
            if aborted() {
                return Err(Error::Interrupted);
            }
            self.stream
                .set_read_timeout(Some(left.min(SLICE).max(Duration::from_millis(1))))
                .map_err(|e| Error::io("setting a read timeout", e))?;
            let room = (want - self.pending.len()).min(chunk.len());
            match self.stream.read(&mut chunk[..room]) {
                Ok(0) => return Err(self.peer_err("closed the connection")),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                // A read timeout (SO_RCVTIMEO) is EAGAIN: this slice is over.
                // ETIMEDOUT is the connection's own failure (`new`).
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(e) => return Err(self.io_err("read failed", e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{AtomicOp, LatencyMode, LatencySpec, TestSpec, VerbKind};
    use crate::verbs::{Endpoint, Gid, Transport};
    use proptest::prelude::*;

    fn hello() -> Message {
        Message::Hello {
            version: crate::connect::PROTOCOL_VERSION,
            tool_version: "0.1.0".into(),
            spec: TestSpec::Latency(LatencySpec {
                verb: VerbKind::Atomic,
                mode: LatencyMode::Completion,
                transport: Transport::Rc,
                inline: Default::default(),
                imm: false,
                op: Some(AtomicOp::Cas),
                sizes: vec![8],
                iters: 5,
                duration_s: None,
                warmup: 1,
                timeout_s: 3.0,
                sge: 1,
                path: Default::default(),
                events: true,
                post_api: crate::spec::PostApi::Ex,
                live: Default::default(),
                validate: false,
                memory: Default::default(),
                keep_samples: 0,
            }),
            endpoint: Some(Endpoint {
                qpn: 17,
                psn: 0xabcdef,
                lid: 0,
                gid: Gid([7; 16]),
                addr: 0xdead_beef,
                rkey: 99,
                len: 4096,
            }),
            client: crate::report::PeerInfo {
                host: "h1".into(),
                device: "rxe0".into(),
                port: 1,
                active_mtu: 1024,
                gid: "::ffff:10.98.0.1".into(),
            },
        }
    }

    #[test]
    fn frames_round_trip() {
        let m = hello();
        let frame = encode(&m);
        let len = frame_len(frame[..4].try_into().unwrap()).unwrap();
        assert_eq!(len, frame.len() - 4);
        assert_eq!(decode(&frame[4..]).unwrap(), m);
        for m in [
            Message::Bye,
            Message::Go { index: 3 },
            Message::Ready { index: 1 },
        ] {
            assert_eq!(decode(&encode(&m)[4..]).unwrap(), m);
        }
    }

    #[test]
    fn oversized_empty_and_truncated_frames_are_refused() {
        assert!(frame_len((MAX_FRAME as u32 + 1).to_be_bytes())
            .unwrap_err()
            .contains("limit"));
        assert!(frame_len(0u32.to_be_bytes()).is_err());
        let frame = encode(&hello());
        assert!(
            decode(&frame[4..frame.len() - 3]).is_err(),
            "truncated body"
        );
        assert!(decode(br#"{"type":"hello"}"#).is_err(), "missing fields");
        assert!(
            decode(br#"{"type":"launch_missiles"}"#).is_err(),
            "unknown message"
        );
    }

    /// A frame that arrives in pieces across several short `recv` timeouts is
    /// still read whole: a timeout must never desynchronise the framing.
    #[test]
    fn a_timeout_mid_frame_keeps_the_frame() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            let frame = encode(&hello());
            for piece in [&frame[..2], &frame[2..7], &frame[7..]] {
                s.write_all(piece).unwrap();
                s.flush().unwrap();
                std::thread::sleep(Duration::from_millis(30));
            }
            s.write_all(&encode(&Message::Bye)).unwrap();
            std::thread::sleep(Duration::from_millis(100));
        });
        let (stream, _) = listener.accept().unwrap();
        let mut ch = TcpChannel::new(stream, Duration::from_secs(5)).unwrap();
        let mut got = Vec::new();
        let mut timeouts = 0;
        while got.len() < 2 {
            match ch.recv(Duration::from_millis(5)) {
                Ok(m) => got.push(m),
                Err(crate::error::Error::Timeout { .. }) => timeouts += 1,
                Err(e) => panic!("{e}"),
            }
        }
        writer.join().unwrap();
        assert!(timeouts > 0, "the test did time out mid-frame");
        assert_eq!(got, vec![hello(), Message::Bye]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Whatever bytes arrive, decoding answers (Ok or Err) and never panics.
        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&bytes);
            if bytes.len() >= 4 {
                let _ = frame_len(bytes[..4].try_into().unwrap());
            }
        }

        /// Mutating a valid frame's body yields an error or a well-formed message, never a panic.
        #[test]
        fn corrupted_frames_never_panic(at in 0usize..400, byte in any::<u8>(), cut in 0usize..400) {
            let mut body = encode(&hello())[4..].to_vec();
            let i = at % body.len();
            body[i] = byte;
            body.truncate(body.len() - cut % body.len());
            let _ = decode(&body);
        }
    }
}
