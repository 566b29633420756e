//! rdma_cm (librdmacm): an event channel and the connection ids that
//! establish RC QPs by IP address, route resolution and connect/accept,
//! instead of by GIDs and QP numbers exchanged over the control channel.
//!
//! The QPs stay ours: created by `ibv_create_qp` on our own context and PD.
//! librdmacm opens its own `ibv_context` for the device an id resolves to,
//! and `rdma_create_qp` refuses a PD from any other context, so creating the
//! QPs through it would move every PD, CQ and MR of a run onto librdmacm's
//! context. Instead a cm id carries only the connection: our QP number goes
//! in the connect/accept parameters, and the QP's RTR and RTS attributes
//! (path, remote QP number, PSNs) come from `rdma_init_qp_attr`, with the
//! run's own knobs (MTU, traffic class, flow label, SL, timeouts, READ
//! depth) laid over them before `ibv_modify_qp` (`QueuePair::ready_via`).
//! A QP holds the id that connected it, so the connection lives exactly as
//! long as the QP.
//!
//! The rdma-mummy-sys shim `dlopen`s `librdmacm.so.1` when the program
//! starts; without it every `rdma_*` call fails with EOPNOTSUPP, which
//! `rdma_create_event_channel` reports with a hint.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rdma_mummy_sys as ffi;

use super::error::{Result, Verb, VerbsError};

/// `rdma_set_option` level and option for the IP type of service (rdma_cma.h:
/// `RDMA_OPTION_ID`, `RDMA_OPTION_ID_TOS`); the bindings carry no constants.
const RDMA_OPTION_ID: i32 = 0;
const RDMA_OPTION_ID_TOS: i32 = 0;

/// Has librdmacm open its own context of every RDMA device now, in the
/// calling thread's descriptor table, instead of on first use by an id.
///
/// librdmacm keeps those contexts process-wide and reaches them by
/// descriptor number. A thread that moves to a table of its own (`serve`'s
/// sessions) takes copies of the descriptors open at that moment, so a
/// context opened afterwards in one table is a dangling number in every
/// other. Opening them all before the move keeps them valid in each copy.
/// The contexts stay open after this returns (librdmacm closes a device's
/// only when it is unplugged); only the list is freed.
pub fn open_device_contexts() -> Result<()> {
    let mut n = 0;
    // SAFETY: `n` is a live c_int for the call; a null return is handled.
    let list = unsafe { ffi::rdma_get_devices(&mut n) };
    if list.is_null() {
        return Err(VerbsError::last_os(Verb::CmGetDevices, "this process"));
    }
    // SAFETY: `list` came from rdma_get_devices and is freed once.
    unsafe { ffi::rdma_free_devices(list) };
    Ok(())
}

/// An rdma_cm event channel: where every id made on it reports its events.
pub struct EventChannel {
    raw: *mut ffi::rdma_event_channel,
}

// SAFETY: the channel is a file descriptor; librdmacm serialises its use.
unsafe impl Send for EventChannel {}
// SAFETY: see Send; reading events takes `&self` but the kernel hands each
// event to one reader.
unsafe impl Sync for EventChannel {}

/// What rdma_cm said happened. Only what the callers need is kept: the
/// event's kind and status, which id it concerns, its private data, and for
/// a connect request the new id it created.
pub struct CmEvent {
    pub kind: u32,
    pub status: i32,
    /// The id the event concerns (for a request: the new id), as a key.
    pub id: usize,
    pub private_data: Vec<u8>,
    /// A connect request's new id, now ours to accept or reject.
    pub request: Option<CmId>,
}

/// Event kinds (librdmacm's `enum rdma_cm_event_type`).
pub mod event {
    use rdma_mummy_sys::rdma_cm_event_type as t;
    pub const ADDR_RESOLVED: u32 = t::RDMA_CM_EVENT_ADDR_RESOLVED;
    pub const ROUTE_RESOLVED: u32 = t::RDMA_CM_EVENT_ROUTE_RESOLVED;
    pub const CONNECT_REQUEST: u32 = t::RDMA_CM_EVENT_CONNECT_REQUEST;
    pub const CONNECT_RESPONSE: u32 = t::RDMA_CM_EVENT_CONNECT_RESPONSE;
    pub const ESTABLISHED: u32 = t::RDMA_CM_EVENT_ESTABLISHED;
    pub const DISCONNECTED: u32 = t::RDMA_CM_EVENT_DISCONNECTED;
    pub const TIMEWAIT_EXIT: u32 = t::RDMA_CM_EVENT_TIMEWAIT_EXIT;
}

/// The name librdmacm gives an event kind.
pub fn event_name(kind: u32) -> String {
    use ffi::rdma_cm_event_type as t;
    let name = match kind {
        t::RDMA_CM_EVENT_ADDR_RESOLVED => "ADDR_RESOLVED",
        t::RDMA_CM_EVENT_ADDR_ERROR => "ADDR_ERROR",
        t::RDMA_CM_EVENT_ROUTE_RESOLVED => "ROUTE_RESOLVED",
        t::RDMA_CM_EVENT_ROUTE_ERROR => "ROUTE_ERROR",
        t::RDMA_CM_EVENT_CONNECT_REQUEST => "CONNECT_REQUEST",
        t::RDMA_CM_EVENT_CONNECT_RESPONSE => "CONNECT_RESPONSE",
        t::RDMA_CM_EVENT_CONNECT_ERROR => "CONNECT_ERROR",
        t::RDMA_CM_EVENT_UNREACHABLE => "UNREACHABLE",
        t::RDMA_CM_EVENT_REJECTED => "REJECTED",
        t::RDMA_CM_EVENT_ESTABLISHED => "ESTABLISHED",
        t::RDMA_CM_EVENT_DISCONNECTED => "DISCONNECTED",
        t::RDMA_CM_EVENT_DEVICE_REMOVAL => "DEVICE_REMOVAL",
        t::RDMA_CM_EVENT_ADDR_CHANGE => "ADDR_CHANGE",
        t::RDMA_CM_EVENT_TIMEWAIT_EXIT => "TIMEWAIT_EXIT",
        other => return format!("RDMA_CM_EVENT {other}"),
    };
    format!("RDMA_CM_EVENT_{name}")
}

impl CmEvent {
    /// The error for this event arriving where `verb`'s outcome was due.
    pub fn error(&self, verb: Verb, object: impl Into<String>) -> VerbsError {
        let detail = if self.status < 0 {
            format!(": {}", io::Error::from_raw_os_error(-self.status))
        } else if self.kind == ffi::rdma_cm_event_type::RDMA_CM_EVENT_REJECTED {
            // IB CM reject reasons: 28 is "consumer reject" (the peer
            // refused, or nobody listens on that port).
            ", the IB CM reject reason".to_string()
        } else {
            String::new()
        };
        VerbsError::CmEvent {
            verb,
            object: object.into(),
            event: event_name(self.kind),
            status: self.status,
            detail,
        }
    }
}

impl EventChannel {
    pub fn new() -> Result<Arc<EventChannel>> {
        // SAFETY: no arguments; a null return is handled.
        let raw = unsafe { ffi::rdma_create_event_channel() };
        if raw.is_null() {
            return Err(VerbsError::last_os(Verb::CmCreateChannel, "this process"));
        }
        let channel = EventChannel { raw };
        // Non-blocking, so a read after poll() can never hang.
        let fd = channel.fd();
        // SAFETY: fcntl on a descriptor this channel owns.
        let ok = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
        };
        if !ok {
            return Err(VerbsError::last_os(
                Verb::CmCreateChannel,
                "its descriptor (O_NONBLOCK)",
            ));
        }
        Ok(Arc::new(channel))
    }

    fn fd(&self) -> i32 {
        // SAFETY: the channel is alive; `fd` is plain data.
        unsafe { (*self.raw).fd }
    }

    /// The next event, waiting at most `wait`; `None` if none arrived. The
    /// event is acknowledged before this returns (what callers need is
    /// copied out), so no id's destruction ever waits on it.
    pub fn next(self: &Arc<Self>, wait: Duration) -> Result<Option<CmEvent>> {
        let mut pfd = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = wait.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(None);
            }
            return Err(VerbsError::last_os(Verb::CmGetEvent, "the event channel"));
        }
        if rc == 0 {
            return Ok(None);
        }
        let mut ev: *mut ffi::rdma_cm_event = std::ptr::null_mut();
        // SAFETY: the channel is alive and non-blocking; `ev` is written on success.
        if unsafe { ffi::rdma_get_cm_event(self.raw, &mut ev) } != 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted {
                return Ok(None);
            }
            return Err(VerbsError::last_os(Verb::CmGetEvent, "the event channel"));
        }
        // SAFETY: rdma_get_cm_event returned a valid event, ours until acked.
        let e = unsafe { &*ev };
        let kind = e.event;
        let carries_conn = matches!(
            kind,
            event::CONNECT_REQUEST | event::CONNECT_RESPONSE | event::ESTABLISHED
        );
        let private_data = if carries_conn {
            // SAFETY: for these events the union holds `conn`; its private
            // data (if any) is `private_data_len` bytes valid until the ack.
            unsafe {
                let conn = &e.param.conn;
                if conn.private_data.is_null() || conn.private_data_len == 0 {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(
                        conn.private_data as *const u8,
                        conn.private_data_len as usize,
                    )
                    .to_vec()
                }
            }
        } else {
            Vec::new()
        };
        let request = (kind == event::CONNECT_REQUEST).then(|| CmId {
            raw: e.id,
            _channel: self.clone(),
        });
        let out = CmEvent {
            kind,
            status: e.status,
            id: e.id as usize,
            private_data,
            request,
        };
        // SAFETY: acknowledged once; a request's new id stays valid (it is
        // ours, destroyed by its CmId).
        unsafe { ffi::rdma_ack_cm_event(ev) };
        Ok(Some(out))
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: every id on this channel holds an Arc to it, so none is left.
        unsafe { ffi::rdma_destroy_event_channel(self.raw) };
    }
}

/// An rdma_cm id (RDMA_PS_TCP, so RC), destroyed when dropped. A connected
/// id's destruction disconnects (the kernel sends the DREQ).
pub struct CmId {
    raw: *mut ffi::rdma_cm_id,
    _channel: Arc<EventChannel>,
}

// SAFETY: librdmacm ids may be used from any thread; we never share one
// between threads at a time (methods take `&self` but callers own the id).
unsafe impl Send for CmId {}

/// A socket address in the layout the kernel expects.
fn sockaddr(addr: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain data; zero is valid.
    let mut s: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr.ip() {
        IpAddr::V4(ip) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in.
            let sin = unsafe { &mut *(&mut s as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = addr.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(ip.octets());
        }
        IpAddr::V6(ip) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut s as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = addr.port().to_be();
            sin6.sin6_addr.s6_addr = ip.octets();
        }
    }
    s
}

impl CmId {
    pub fn new(channel: &Arc<EventChannel>) -> Result<CmId> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: the channel is alive (the id keeps an Arc to it).
        let rc = unsafe {
            ffi::rdma_create_id(
                channel.raw,
                &mut raw,
                std::ptr::null_mut(),
                ffi::rdma_port_space::RDMA_PS_TCP,
            )
        };
        if rc != 0 {
            return Err(VerbsError::last_os(Verb::CmCreateId, "RDMA_PS_TCP"));
        }
        Ok(CmId {
            raw,
            _channel: channel.clone(),
        })
    }

    /// This id as a key, to match events against.
    pub fn key(&self) -> usize {
        self.raw as usize
    }

    /// Sets the IP type of service (the traffic class) of the route this id
    /// resolves next (before `resolve_route`).
    pub fn set_tos(&self, tos: u8) -> Result<()> {
        let mut v = tos;
        // SAFETY: a one-byte option value, as RDMA_OPTION_ID_TOS takes.
        let rc = unsafe {
            ffi::rdma_set_option(
                self.raw,
                RDMA_OPTION_ID,
                RDMA_OPTION_ID_TOS,
                &mut v as *mut u8 as *mut libc::c_void,
                1,
            )
        };
        if rc != 0 {
            return Err(VerbsError::last_os(
                Verb::CmSetOption,
                format!("RDMA_OPTION_ID_TOS {tos}"),
            ));
        }
        Ok(())
    }

    /// Starts resolving `dst` to a device and port (ADDR_RESOLVED follows).
    pub fn resolve_addr(&self, dst: SocketAddr, timeout: Duration) -> Result<()> {
        let mut d = sockaddr(dst);
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `d` is a valid socket address for the call's duration.
        let rc = unsafe {
            ffi::rdma_resolve_addr(
                self.raw,
                std::ptr::null_mut(),
                &mut d as *mut _ as *mut libc::sockaddr,
                ms,
            )
        };
        if rc != 0 {
            return Err(VerbsError::last_os(Verb::CmResolveAddr, dst.to_string()));
        }
        Ok(())
    }

    /// Starts resolving the route to the resolved address (ROUTE_RESOLVED follows).
    pub fn resolve_route(&self, timeout: Duration) -> Result<()> {
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: the id is alive and its address resolved.
        if unsafe { ffi::rdma_resolve_route(self.raw, ms) } != 0 {
            return Err(VerbsError::last_os(
                Verb::CmResolveRoute,
                "a resolved address",
            ));
        }
        Ok(())
    }

    /// Binds to `addr` (port 0: an ephemeral one) and listens.
    pub fn listen(&self, addr: SocketAddr, backlog: i32) -> Result<()> {
        let mut a = sockaddr(addr);
        // SAFETY: `a` is a valid socket address for the call's duration.
        let rc = unsafe { ffi::rdma_bind_addr(self.raw, &mut a as *mut _ as *mut libc::sockaddr) };
        if rc != 0 {
            return Err(VerbsError::last_os(Verb::CmBindAddr, addr.to_string()));
        }
        // SAFETY: the id is bound.
        if unsafe { ffi::rdma_listen(self.raw, backlog) } != 0 {
            return Err(VerbsError::last_os(Verb::CmListen, addr.to_string()));
        }
        Ok(())
    }

    /// The local port this id is bound to (a listener's announced port).
    pub fn local_port(&self) -> u16 {
        // SAFETY: the id is alive; both address families keep the port at
        // the same offset (sin_port / sin6_port), network order.
        unsafe {
            let sin = &(*self.raw).route.addr.src_addr_union.src_sin;
            u16::from_be(sin.sin_port)
        }
    }

    /// The device the id resolved to (or a request arrived on), if any.
    pub fn device_name(&self) -> Option<String> {
        // SAFETY: the id is alive; `verbs` is null or librdmacm's open context.
        unsafe {
            let verbs = (*self.raw).verbs;
            if verbs.is_null() || (*verbs).device.is_null() {
                return None;
            }
            let name = ffi::ibv_get_device_name((*verbs).device);
            (!name.is_null()).then(|| {
                std::ffi::CStr::from_ptr(name)
                    .to_string_lossy()
                    .into_owned()
            })
        }
    }

    pub fn port_num(&self) -> u8 {
        // SAFETY: the id is alive; plain data.
        unsafe { (*self.raw).port_num }
    }

    fn conn_param(qpn: u32, private: &[u8], rd_atomic: u8) -> ffi::rdma_conn_param {
        ffi::rdma_conn_param {
            private_data: private.as_ptr() as *const libc::c_void,
            private_data_len: private.len().min(56) as u8,
            responder_resources: rd_atomic,
            initiator_depth: rd_atomic,
            flow_control: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            srq: 0,
            qp_num: qpn,
        }
    }

    /// Asks the resolved peer to connect our QP `qpn` (CONNECT_RESPONSE
    /// follows; then `QueuePair::ready_via` and `establish`). `private` (at
    /// most 56 bytes) reaches the listener with the request.
    pub fn connect(&self, qpn: u32, private: &[u8], rd_atomic: u8) -> Result<()> {
        let mut p = Self::conn_param(qpn, private, rd_atomic);
        // SAFETY: `p` and the private data it points at outlive the call,
        // which copies them.
        if unsafe { ffi::rdma_connect(self.raw, &mut p) } != 0 {
            return Err(VerbsError::last_os(Verb::CmConnect, format!("QP {qpn}")));
        }
        Ok(())
    }

    /// Accepts this request with our QP `qpn`, which `QueuePair::ready_via`
    /// has brought to RTS.
    pub fn accept(&self, qpn: u32, rd_atomic: u8) -> Result<()> {
        let mut p = Self::conn_param(qpn, &[], rd_atomic);
        // SAFETY: `p` outlives the call; no QP is attached to the id, so
        // librdmacm only sends the reply carrying `qp_num`.
        if unsafe { ffi::rdma_accept(self.raw, &mut p) } != 0 {
            return Err(VerbsError::last_os(Verb::CmAccept, format!("QP {qpn}")));
        }
        Ok(())
    }

    /// Refuses this request (best effort: the requester sees REJECTED).
    pub fn reject(&self) {
        // SAFETY: the id is a live request; no private data.
        unsafe { ffi::rdma_reject(self.raw, std::ptr::null(), 0) };
    }

    /// Active side, after CONNECT_RESPONSE and `QueuePair::ready_via`: tells the passive
    /// side the connection is up (the RTU).
    pub fn establish(&self) -> Result<()> {
        // SAFETY: the id is connected and has no QP attached.
        if unsafe { ffi::rdma_establish(self.raw) } != 0 {
            return Err(VerbsError::last_os(Verb::CmEstablish, "a connected id"));
        }
        Ok(())
    }

    /// The attributes and mask rdma_cm negotiated for moving a QP of this
    /// connection to `state` (`QueuePair::ready_via` applies them).
    pub(super) fn init_qp_attr(
        &self,
        state: ffi::ibv_qp_state::Type,
        step: &str,
        qpn: u32,
    ) -> Result<(ffi::ibv_qp_attr, u32)> {
        // SAFETY: ibv_qp_attr is plain data; zero is valid.
        let mut attr: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = state;
        let mut mask = 0i32;
        // SAFETY: the id is alive; `attr` and `mask` are written.
        if unsafe { ffi::rdma_init_qp_attr(self.raw, &mut attr, &mut mask) } != 0 {
            return Err(VerbsError::last_os(
                Verb::CmInitQpAttr,
                format!("QP {qpn} ({step})"),
            ));
        }
        Ok((attr, mask as u32))
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: destroyed once; every event for it was acknowledged as it
        // was read (EventChannel::next), so this does not wait.
        unsafe { ffi::rdma_destroy_id(self.raw) };
    }
}
