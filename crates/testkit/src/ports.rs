//! Free loopback ports.

use std::net::TcpListener;

/// A TCP port on 127.0.0.1 that was free a moment ago.
///
/// The kernel picks it (bind to port 0), so parallel tests get different ports; the small window
/// between closing this probe and the server binding the port is why servers are always waited
/// for, never assumed ready.
///
/// # Panics
/// When the machine cannot bind a loopback socket at all: no test could run then.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0 for a free port");
    listener.local_addr().expect("local address of a bound socket").port()
}
