//! Several client processes running one throughput point together against a
//! `serve`: each client's server thread meets the others here to start
//! together and again to stop, exchanging what each measured.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// A meeting point keyed by a string (the test, the point and the phase).
#[derive(Default)]
pub struct Rendezvous {
    rooms: Mutex<HashMap<String, Room>>,
    changed: Condvar,
    next_id: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Room {
    /// (member id, item) of everyone who arrived.
    items: Vec<(u64, String)>,
    /// Members that have seen the room full and left with its items.
    left: usize,
    /// Set once the room was full: late timeouts must not remove anyone then.
    complete: bool,
}

impl Rendezvous {
    /// Adds `item` to room `key` and waits until `expected` items are there;
    /// returns all of them. Gives up after `timeout` (a client that never
    /// came), taking only its own item out of the room.
    pub fn meet(
        &self,
        key: &str,
        expected: usize,
        item: String,
        timeout: Duration,
    ) -> Result<Vec<String>> {
        if expected <= 1 {
            return Ok(vec![item]);
        }
        let me = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let deadline = Instant::now() + timeout;
        let mut rooms = self.rooms.lock().unwrap_or_else(|e| e.into_inner());
        rooms
            .entry(key.to_string())
            .or_default()
            .items
            .push((me, item));
        self.changed.notify_all();
        loop {
            let Some(room) = rooms.get_mut(key) else {
                return Err(Error::Interrupted);
            };
            if room.complete || room.items.len() >= expected {
                room.complete = true;
                let items = room.items.iter().map(|(_, i)| i.clone()).collect();
                room.left += 1;
                if room.left >= room.items.len() {
                    rooms.remove(key);
                }
                return Ok(items);
            }
            let now = Instant::now();
            if now >= deadline {
                let have = room.items.len();
                room.items.retain(|(id, _)| *id != me);
                if room.items.is_empty() {
                    rooms.remove(key);
                }
                return Err(Error::Timeout {
                    what: format!("{expected} clients of a --group run ({have} arrived)"),
                    secs: timeout.as_secs_f64(),
                });
            }
            rooms = self
                .changed
                .wait_timeout(rooms, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn members_meet_and_see_everyone() {
        let r = Arc::new(Rendezvous::default());
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let r = r.clone();
                std::thread::spawn(move || {
                    r.meet("k", 3, format!("c{i}"), Duration::from_secs(5))
                        .unwrap()
                })
            })
            .collect();
        for h in handles {
            let mut got = h.join().unwrap();
            got.sort();
            assert_eq!(got, vec!["c0", "c1", "c2"]);
        }
        assert!(r.rooms.lock().unwrap().is_empty(), "rooms are cleaned up");
    }

    #[test]
    fn a_missing_member_times_out() {
        let r = Rendezvous::default();
        let e = r
            .meet("k", 2, "a".into(), Duration::from_millis(50))
            .unwrap_err();
        assert!(e.to_string().contains("2 clients"), "{e}");
        assert_eq!(
            r.meet("solo", 1, "x".into(), Duration::ZERO).unwrap(),
            vec!["x"]
        );
    }
}
