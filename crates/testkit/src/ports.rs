//! Free loopback ports.

use std::collections::VecDeque;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::sync::{Mutex, PoisonError};

/// Where ports are picked: below Linux's default ephemeral range (32768-60999), from which the
/// kernel takes the local port of every outgoing connection. A port the kernel handed out for a
/// listener a moment ago (bind to port 0) is from that range too, so a test's client socket could
/// take it before the server it was meant for binds it ("address already in use").
const PICK_FROM: std::ops::Range<u16> = 20_000..32_000;
/// Random tries before falling back to a port the kernel picks.
const TRIES: usize = 64;
/// Ports this process handed out lately, never handed out again meanwhile: a server started with
/// several ports (SeaweedFS takes eight) has its ports probed before any is bound, so a repeated
/// pick would be free at each probe and collide at the bind.
const REMEMBERED: usize = 1024;

static HANDED_OUT: Mutex<VecDeque<u16>> = Mutex::new(VecDeque::new());

/// A TCP port on 127.0.0.1 that was free a moment ago.
///
/// Picked at random in [`PICK_FROM`], so parallel tests get different ports and outgoing
/// connections do not take them, and never one of the last [`REMEMBERED`] this process picked;
/// the small window between closing this probe and the server binding the port is why servers
/// are always waited for, never assumed ready.
///
/// # Panics
/// When the machine cannot bind a loopback socket at all: no test could run then.
pub fn free_port() -> u16 {
    let span = u64::from(PICK_FROM.end - PICK_FROM.start);
    for _ in 0..TRIES {
        // RandomState is seeded randomly per process and varies per call: random enough here.
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let port = PICK_FROM.start + (hasher.finish() % span) as u16;
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
        if !handed_out.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            if handed_out.len() == REMEMBERED {
                handed_out.pop_front();
            }
            handed_out.push_back(port);
            return port;
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0 for a free port");
    listener.local_addr().expect("local address of a bound socket").port()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_free_spread_and_outside_the_ephemeral_range() {
        let picks: Vec<u16> = (0..500).map(|_| free_port()).collect();
        let ports: std::collections::BTreeSet<u16> = picks.iter().copied().collect();
        assert_eq!(ports.len(), picks.len(), "a port was handed out twice");
        assert!(ports.iter().all(|p| PICK_FROM.contains(p)), "{ports:?}");
        let port = free_port();
        TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
    }
}
