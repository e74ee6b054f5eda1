//! What a party that has proven nothing can cost a copy, and the bounds on it
//! (`docs/control-plane/security.md`, "Limits and unauthenticated load"):
//!
//! - [`Gate`]: connections, all of them and, per address, those not yet proven to be a paired
//!   device (a device's link stops counting against its address once its handshake passes, so
//!   thousands of devices behind one load balancer are never refused for sharing an address).
//! - [`Lookups`]: store reads made for unproven requests (a hello from a device this copy has not
//!   seen, a pair request), as token buckets for the whole copy and per address.
//! - [`UnknownDevices`]: device ids the store was asked about and does not hold, so asking again
//!   costs nothing.
//!
//! Time is passed in (`now`), so the rules are tested without waiting.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every limit of a copy; [`Default`] is what a copy runs with when nothing is set.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Connections of any kind held at once (`AGENTS_CONTROL_MAX_CONNECTIONS`). Also kept below
    /// the process's open-file limit, which a socket each counts against.
    pub max_connections: usize,
    /// Connections from one address not yet proven to be a paired device
    /// (`AGENTS_CONTROL_MAX_CONNECTIONS_PER_ADDRESS`).
    pub max_unproven_per_address: usize,
    /// How long a request's head, and then its body, may take to arrive
    /// (`AGENTS_CONTROL_REQUEST_TIMEOUT`).
    pub request_timeout: Duration,
    /// Store lookups per second for unproven requests, the whole copy (`AGENTS_CONTROL_LOOKUP_RATE`).
    pub lookups_per_second: u32,
    /// The same from one address (`AGENTS_CONTROL_LOOKUP_RATE_PER_ADDRESS`).
    pub lookups_per_second_per_address: u32,
    /// Codes one client may have waiting to be redeemed (`AGENTS_CONTROL_MAX_CODES_PER_CLIENT`).
    pub max_codes_per_client: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 50_000,
            max_unproven_per_address: 1_000,
            request_timeout: Duration::from_secs(10),
            lookups_per_second: 50,
            lookups_per_second_per_address: 5,
            max_codes_per_client: 20,
        }
    }
}

/// A bucket refills for this long at its rate: the burst it allows.
const BURST: Duration = Duration::from_secs(2);
/// How long "the store has no such device" is remembered.
const UNKNOWN_FOR: Duration = Duration::from_secs(10 * 60);
/// The most unknown ids remembered; past it the memory starts again (the lookup budget still
/// bounds what that costs).
const UNKNOWN_MAX: usize = 100_000;
/// The most addresses with a bucket of their own; past it, new addresses share the copy's bucket.
const ADDRESSES_MAX: usize = 65_536;

/// The address limits are counted by: IPv4 as is, IPv6 by its /64 (one host usually holds a
/// whole /64, and would otherwise have 2^64 addresses to spread over).
pub fn address_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
        v4 => v4,
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The copy holds as many connections as it may.
    Copy,
    /// This address holds as many unproven connections as it may.
    Address,
}

/// Counts connections and admits or refuses each new one.
#[derive(Debug)]
pub struct Gate {
    max_connections: usize,
    max_unproven_per_address: usize,
    open: AtomicUsize,
    unproven: Mutex<HashMap<IpAddr, usize>>,
}

impl Gate {
    pub fn new(max_connections: usize, max_unproven_per_address: usize) -> Gate {
        Gate { max_connections, max_unproven_per_address, open: AtomicUsize::new(0), unproven: Mutex::default() }
    }

    /// Admits a connection from `peer`, or says which limit it meets. The connection is counted
    /// until the returned value (and every clone of its `Arc`) is dropped.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Arc<Admitted>, Full> {
        let address = address_key(peer);
        let mut unproven = self.unproven.lock().expect("gate lock");
        if self.open.load(Ordering::SeqCst) >= self.max_connections {
            return Err(Full::Copy);
        }
        let count = unproven.entry(address).or_default();
        if *count >= self.max_unproven_per_address {
            return Err(Full::Address);
        }
        *count += 1;
        self.open.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(Admitted { gate: self.clone(), address, peer, unproven: AtomicBool::new(true) }))
    }

    /// Connections held now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    fn release_address(&self, address: IpAddr) {
        let mut unproven = self.unproven.lock().expect("gate lock");
        if let Some(count) = unproven.get_mut(&address) {
            *count -= 1;
            if *count == 0 {
                unproven.remove(&address);
            }
        }
    }
}

/// One admitted connection.
#[derive(Debug)]
pub struct Admitted {
    gate: Arc<Gate>,
    address: IpAddr,
    peer: IpAddr,
    unproven: AtomicBool,
}

impl Admitted {
    /// The address the connection came from.
    pub fn peer(&self) -> IpAddr {
        self.peer
    }

    /// The connection proved it is a paired device: it no longer counts against its address.
    pub fn proven(&self) {
        if self.unproven.swap(false, Ordering::SeqCst) {
            self.gate.release_address(self.address);
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.proven();
        self.gate.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A token bucket: `rate` tokens a second, at most [`BURST`] worth saved up.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: u32, now: Instant) -> Bucket {
        Bucket { tokens: capacity(rate), at: now }
    }

    fn refill(&mut self, rate: u32, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * f64::from(rate)).min(capacity(rate));
        self.at = now;
    }
}

fn capacity(rate: u32) -> f64 {
    (f64::from(rate) * BURST.as_secs_f64()).max(1.0)
}

/// The budget of store lookups for unproven requests.
#[derive(Debug)]
pub struct Lookups {
    rate: u32,
    rate_per_address: u32,
    buckets: Mutex<(Option<Bucket>, HashMap<IpAddr, Bucket>)>,
}

impl Lookups {
    pub fn new(rate: u32, rate_per_address: u32) -> Lookups {
        Lookups { rate, rate_per_address, buckets: Mutex::default() }
    }

    /// Takes one lookup for a request from `from` (its address's share and the copy's), or
    /// `false` when either is spent. `None`: an address not known (an in-process request); only
    /// the copy's budget applies.
    pub fn take(&self, from: Option<IpAddr>, now: Instant) -> bool {
        let mut buckets = self.buckets.lock().expect("lookups lock");
        let (copy, addresses) = &mut *buckets;
        let copy = copy.get_or_insert_with(|| Bucket::full(self.rate, now));
        copy.refill(self.rate, now);
        if copy.tokens < 1.0 {
            return false;
        }
        if let Some(address) = from.map(address_key) {
            if addresses.len() >= ADDRESSES_MAX && !addresses.contains_key(&address) {
                // A full bucket says nothing a missing one does not: forget those.
                let (rate, cap) = (self.rate_per_address, capacity(self.rate_per_address));
                addresses.retain(|_, bucket| {
                    bucket.refill(rate, now);
                    bucket.tokens < cap
                });
            }
            if addresses.len() < ADDRESSES_MAX || addresses.contains_key(&address) {
                let bucket = addresses.entry(address).or_insert_with(|| Bucket::full(self.rate_per_address, now));
                bucket.refill(self.rate_per_address, now);
                if bucket.tokens < 1.0 {
                    return false;
                }
                bucket.tokens -= 1.0;
            }
        }
        copy.tokens -= 1.0;
        true
    }
}

/// Device ids the store did not hold when asked, for [`UNKNOWN_FOR`].
#[derive(Debug, Default)]
pub struct UnknownDevices {
    ids: Mutex<HashMap<String, Instant>>,
}

impl UnknownDevices {
    pub fn contains(&self, id: &str, now: Instant) -> bool {
        self.ids.lock().expect("unknown lock").get(id).is_some_and(|until| *until > now)
    }

    pub fn insert(&self, id: &str, now: Instant) {
        let mut ids = self.ids.lock().expect("unknown lock");
        if ids.len() >= UNKNOWN_MAX {
            ids.retain(|_, until| *until > now);
            if ids.len() >= UNKNOWN_MAX {
                ids.clear();
            }
        }
        ids.insert(id.to_owned(), now + UNKNOWN_FOR);
    }

    pub fn len(&self) -> usize {
        self.ids.lock().expect("unknown lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Raises this process's open-file limit to its hard limit (every connection holds a socket;
/// systemd's default soft limit, 1,024, would cap a copy near 1,000 devices) and returns the
/// limit now in force, or `None` when it cannot be read.
pub fn raise_open_file_limit() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => return Some(hard),
            Err(error) => tracing::warn!(%error, soft, hard, "could not raise the open-file limit"),
        }
    }
    Some(soft)
}

/// Files a copy needs besides its connections (store and peer sockets, the key, logs).
const RESERVED_FILES: usize = 64;

/// `max_connections`, lowered to what `open_files` leaves room for: a copy out of descriptors
/// cannot even accept the connection it would refuse, nor reach its store.
pub fn connections_within(max_connections: usize, open_files: Option<u64>) -> usize {
    match open_files.map(|files| usize::try_from(files).unwrap_or(usize::MAX)) {
        Some(files) => max_connections.min(files.saturating_sub(RESERVED_FILES).max(1)),
        None => max_connections,
    }
}

/// The limits of a copy with their running state.
#[derive(Debug)]
pub struct Guards {
    pub limits: Limits,
    pub gate: Arc<Gate>,
    pub lookups: Lookups,
    /// The budget of `POST /v1/recheck` reads: its own, so an operator's forget is not refused
    /// because devices' hellos spent the lookups (they come through one load balancer's
    /// address), and a flood of rechecks costs unproven hellos nothing either.
    pub rechecks: Lookups,
    pub unknown: UnknownDevices,
}

/// Store reads `POST /v1/recheck` may cost a copy per second (a forget asks each copy once).
pub const RECHECKS_PER_SECOND: u32 = 20;

impl Guards {
    pub fn new(limits: Limits) -> Guards {
        Guards {
            gate: Arc::new(Gate::new(limits.max_connections, limits.max_unproven_per_address)),
            lookups: Lookups::new(limits.lookups_per_second, limits.lookups_per_second_per_address),
            rechecks: Lookups::new(RECHECKS_PER_SECOND, RECHECKS_PER_SECOND),
            unknown: UnknownDevices::default(),
            limits,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 3));

    #[test]
    fn the_gate_caps_the_copy_and_unproven_connections_per_address() {
        let gate = Arc::new(Gate::new(5, 2));
        let a1 = gate.admit(A).unwrap();
        let a2 = gate.admit(A).unwrap();
        assert_eq!(gate.admit(A).unwrap_err(), Full::Address);
        // A proven device no longer counts against its address.
        a1.proven();
        let a3 = gate.admit(A).unwrap();
        let (b1, b2) = (gate.admit(B).unwrap(), gate.admit(B).unwrap());
        assert_eq!(gate.open(), 5);
        assert_eq!(gate.admit(B).unwrap_err(), Full::Copy);
        drop((a2, b1));
        assert_eq!(gate.open(), 3);
        let _again = (gate.admit(A).unwrap(), gate.admit(B).unwrap());
        drop((a1, a3, b2));
        assert!(gate.unproven.lock().unwrap().len() <= 2);
    }

    #[test]
    fn ipv6_addresses_count_by_their_64_and_mapped_ipv4_as_ipv4() {
        let one: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let other: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        assert_eq!(address_key(one), address_key(other));
        assert_ne!(address_key(one), address_key("2001:db8:1:3::1".parse().unwrap()));
        assert_eq!(address_key("::ffff:127.0.0.2".parse().unwrap()), A);
    }

    #[test]
    fn lookups_are_bounded_per_address_and_for_the_copy() {
        let start = Instant::now();
        let lookups = Lookups::new(10, 2);
        // An address gets its burst (2 s at 2/s), then nothing until time passes.
        assert_eq!((0..10).filter(|_| lookups.take(Some(A), start)).count(), 4);
        // Others still get theirs, until the copy's budget (2 s at 10/s) is spent.
        let others =
            (0..100u8).filter(|n| lookups.take(Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, *n))), start)).count();
        assert_eq!(others, 20 - 4);
        assert!(!lookups.take(None, start));
        assert!(!lookups.take(Some(B), start), "the copy's budget binds every address");
        // Both refill with time.
        assert!(lookups.take(Some(A), start + Duration::from_millis(500)));
        assert!(!lookups.take(Some(A), start + Duration::from_millis(500)));
        assert!(lookups.take(None, start + Duration::from_secs(1)));
    }

    #[test]
    fn connections_stay_below_the_open_file_limit() {
        assert_eq!(connections_within(50_000, Some(1_024)), 1_024 - RESERVED_FILES);
        assert_eq!(connections_within(50_000, Some(1_048_576)), 50_000);
        assert_eq!(connections_within(50_000, None), 50_000);
        assert_eq!(connections_within(50_000, Some(10)), 1);
    }

    #[test]
    fn unknown_ids_are_remembered_for_a_while() {
        let now = Instant::now();
        let unknown = UnknownDevices::default();
        unknown.insert("d1", now);
        assert!(unknown.contains("d1", now + UNKNOWN_FOR - Duration::from_secs(1)));
        assert!(!unknown.contains("d1", now + UNKNOWN_FOR));
        assert!(!unknown.contains("d2", now));
    }
}
