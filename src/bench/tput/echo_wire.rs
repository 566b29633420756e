//! The two encodings echo clients and the server agree on: where request and
//! response slots live in a client QP's buffer region, and what the
//! immediate of a SEND request or response says.

/// A client QP's region: request slots [0, W), then response slots [W, 2W),
/// `slot` bytes each. The server's region per client QP holds its W request
/// slots at the same offsets.
#[derive(Debug, Clone, Copy)]
pub struct EchoLayout {
    pub window: usize,
    pub slot: usize,
}

impl EchoLayout {
    #[inline(always)]
    pub fn request(&self, k: usize) -> usize {
        k * self.slot
    }

    #[inline(always)]
    pub fn response(&self, k: usize) -> usize {
        (self.window + k) * self.slot
    }

    /// Bytes a client QP needs (requests and responses).
    pub fn client_region(&self) -> usize {
        2 * self.window * self.slot
    }

    /// Bytes a server needs per client QP (requests only).
    pub fn server_region(&self) -> usize {
        self.window * self.slot
    }
}

/// The immediate of a SEND request: which client QP (numbered across all
/// the client's threads) and which of its slots asked. A SEND response
/// carries just the slot.
pub struct EchoImm;

impl EchoImm {
    #[inline(always)]
    pub fn pack(qp: usize, slot: usize) -> u32 {
        ((qp as u32) << 16) | slot as u32
    }

    #[inline(always)]
    pub fn unpack(imm: u32) -> (usize, usize) {
        ((imm >> 16) as usize, (imm & 0xffff) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immediates_round_trip_and_slots_do_not_overlap() {
        assert_eq!(EchoImm::unpack(EchoImm::pack(7, 127)), (7, 127));
        let l = EchoLayout {
            window: 4,
            slot: 64,
        };
        assert_eq!(l.response(0), l.request(3) + 64);
        assert_eq!(l.client_region(), l.response(3) + 64);
    }
}
