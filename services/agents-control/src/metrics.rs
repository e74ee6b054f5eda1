//! What `/metrics` reports (Prometheus text): store operations by kind and result with their
//! latency, devices paired, codes pending and swept. [`MeteredStore`] counts every store call and remembers
//! when the store last answered, which is what `/readyz` reports.

use futures::future::BoxFuture;
use hyperhive_object_store::{Listed, Object, Store, StoreError, StoreResult};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Default, Clone, Copy)]
struct Latency {
    count: u64,
    sum: Duration,
}

#[derive(Debug, Default)]
pub struct Metrics {
    /// (operation, result) -> latency totals.
    store_ops: Mutex<BTreeMap<(&'static str, &'static str), Latency>>,
    pub devices_paired: AtomicU64,
    pub codes_swept: AtomicU64,
    /// Codes waiting to be redeemed, as the last sweep counted them.
    codes_pending: AtomicU64,
    last_answer: Mutex<Option<Instant>>,
    /// Frames relayed to a session on this copy and over a peer link.
    relayed_local: AtomicU64,
    relayed_peer: AtomicU64,
    /// Peer handshakes that failed either side's proof (another key on the bucket, a stale
    /// membership record pointing at another copy).
    pub peer_handshakes_refused: AtomicU64,
    /// Connections closed at once: the copy's cap, or the address's cap on unproven ones.
    pub connections_refused_copy: AtomicU64,
    pub connections_refused_address: AtomicU64,
    /// Hellos and pair requests refused because the lookup budget was spent.
    pub lookups_refused: AtomicU64,
    /// Requests whose head or body did not arrive in time.
    pub requests_timed_out: AtomicU64,
    /// Device records the last registry refresh could not read (skipped).
    pub unreadable_records: AtomicU64,
    /// Other copies this copy holds live: linked to it, or their membership record changed within 24 s.
    pub live_members: AtomicU64,
    /// Codes refused to a client that had as many waiting as it may.
    pub codes_refused: AtomicU64,
    /// Sealed peer frames that did not open: changed, injected or replayed on the path between
    /// copies (each drops its link).
    pub peer_frames_refused: AtomicU64,
}

fn result_label<T>(result: &StoreResult<T>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(StoreError::AlreadyExists { .. }) => "exists",
        Err(StoreError::VersionMismatch { .. }) => "changed",
        Err(StoreError::Unavailable { .. }) => "unavailable",
        Err(StoreError::Refused { .. }) => "refused",
        Err(StoreError::InvalidKey { .. }) => "invalid",
    }
}

impl Metrics {
    fn record<T>(&self, operation: &'static str, started: Instant, result: &StoreResult<T>) {
        let label = result_label(result);
        let mut ops = self.store_ops.lock().expect("metrics lock");
        let entry = ops.entry((operation, label)).or_default();
        entry.count += 1;
        entry.sum += started.elapsed();
        drop(ops);
        if !matches!(result, Err(StoreError::Unavailable { .. })) {
            *self.last_answer.lock().expect("metrics lock") = Some(Instant::now());
        }
    }

    /// Counts what a sweep removed and remembers how many codes it left pending.
    pub fn record_sweep(&self, sweep: crate::codes::Sweep) {
        self.codes_swept.fetch_add(sweep.removed as u64, Ordering::Relaxed);
        self.codes_pending.store(sweep.pending as u64, Ordering::Relaxed);
    }

    pub fn record_relay(&self, route: crate::sessions::Route) {
        let counter = match route {
            crate::sessions::Route::Local => &self.relayed_local,
            crate::sessions::Route::Peer => &self.relayed_peer,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Store requests of one operation (`get`, `list`, ...) made so far, whatever their result.
    pub fn store_operations(&self, operation: &str) -> u64 {
        let ops = self.store_ops.lock().expect("metrics lock");
        ops.iter().filter(|((op, _), _)| *op == operation).map(|(_, latency)| latency.count).sum()
    }

    /// When the store last answered (any answer but "unavailable").
    pub fn last_store_answer(&self) -> Option<Instant> {
        *self.last_answer.lock().expect("metrics lock")
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP agents_control_store_operations_total Store requests by operation and result.\n");
        out.push_str("# TYPE agents_control_store_operations_total counter\n");
        let ops = self.store_ops.lock().expect("metrics lock").clone();
        for ((operation, result), latency) in &ops {
            let _ = writeln!(
                out,
                "agents_control_store_operations_total{{operation=\"{operation}\",result=\"{result}\"}} {}",
                latency.count
            );
        }
        out.push_str("# HELP agents_control_store_operation_seconds Time spent in store requests, retries included.\n");
        out.push_str("# TYPE agents_control_store_operation_seconds summary\n");
        for ((operation, result), latency) in &ops {
            let labels = format!("operation=\"{operation}\",result=\"{result}\"");
            let _ = writeln!(
                out,
                "agents_control_store_operation_seconds_sum{{{labels}}} {:.6}",
                latency.sum.as_secs_f64()
            );
            let _ = writeln!(out, "agents_control_store_operation_seconds_count{{{labels}}} {}", latency.count);
        }
        for (name, help, value) in [
            ("agents_control_devices_paired_total", "Codes redeemed into device records.", &self.devices_paired),
            ("agents_control_codes_swept_total", "Expired or used code records removed.", &self.codes_swept),
            (
                "agents_control_peer_handshakes_refused_total",
                "Peer links refused: the other side did not prove the control key, or is not the copy expected.",
                &self.peer_handshakes_refused,
            ),
            (
                "agents_control_lookups_refused_total",
                "Unproven hellos and pair requests refused because the store lookup budget was spent.",
                &self.lookups_refused,
            ),
            (
                "agents_control_requests_timed_out_total",
                "Requests whose body did not arrive within the request timeout.",
                &self.requests_timed_out,
            ),
            (
                "agents_control_codes_refused_total",
                "Codes refused to a client holding its maximum.",
                &self.codes_refused,
            ),
            (
                "agents_control_peer_frames_refused_total",
                "Peer frames that failed authentication (changed, injected or replayed between copies); each dropped its link.",
                &self.peer_frames_refused,
            ),
        ] {
            let _ =
                writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", value.load(Ordering::Relaxed));
        }
        let _ = writeln!(
            out,
            "# HELP agents_control_codes_pending Codes made and not yet redeemed or expired, at the last sweep.\n\
             # TYPE agents_control_codes_pending gauge\nagents_control_codes_pending {}",
            self.codes_pending.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP agents_control_unreadable_records Device records skipped at the last refresh: this build cannot read them.\n\
             # TYPE agents_control_unreadable_records gauge\nagents_control_unreadable_records {}",
            self.unreadable_records.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP agents_control_members Other copies this copy holds live: linked to it, or their membership record changed within 24 s.\n\
             # TYPE agents_control_members gauge\nagents_control_members {}",
            self.live_members.load(Ordering::Relaxed)
        );
        out.push_str(
            "# HELP agents_control_connections_refused_total Connections closed at once, by the limit they met.\n",
        );
        out.push_str("# TYPE agents_control_connections_refused_total counter\n");
        for (limit, counter) in
            [("copy", &self.connections_refused_copy), ("address", &self.connections_refused_address)]
        {
            let _ = writeln!(
                out,
                "agents_control_connections_refused_total{{limit=\"{limit}\"}} {}",
                counter.load(Ordering::Relaxed)
            );
        }
        out.push_str(
            "# HELP agents_control_relayed_frames_total Frames relayed to a device, by where it was connected.\n",
        );
        out.push_str("# TYPE agents_control_relayed_frames_total counter\n");
        for (path, counter) in [("local", &self.relayed_local), ("peer", &self.relayed_peer)] {
            let _ = writeln!(
                out,
                "agents_control_relayed_frames_total{{path=\"{path}\"}} {}",
                counter.load(Ordering::Relaxed)
            );
        }
        out
    }

    /// [`Metrics::render`] and the gauges of what is connected now.
    pub fn render_with(&self, counts: crate::sessions::Counts) -> String {
        let mut out = self.render();
        out.push_str("# HELP agents_control_connections Device links connected to this copy, by kind.\n");
        out.push_str("# TYPE agents_control_connections gauge\n");
        let _ = writeln!(out, "agents_control_connections{{kind=\"client\"}} {}", counts.clients);
        let _ = writeln!(out, "agents_control_connections{{kind=\"host\"}} {}", counts.hosts);
        let _ = writeln!(
            out,
            "# HELP agents_control_peers Links to other copies that are up.\n# TYPE agents_control_peers gauge\nagents_control_peers {}",
            counts.peers
        );
        let _ = writeln!(
            out,
            "# HELP agents_control_remote_devices Devices connected to other copies, as their peers say.\n\
             # TYPE agents_control_remote_devices gauge\nagents_control_remote_devices {}",
            counts.remote_devices
        );
        out
    }
}

/// A store that reports every call to [`Metrics`].
#[derive(Debug)]
pub struct MeteredStore {
    inner: Arc<dyn Store>,
    metrics: Arc<Metrics>,
}

impl MeteredStore {
    pub fn wrap(inner: Arc<dyn Store>, metrics: Arc<Metrics>) -> Arc<dyn Store> {
        Arc::new(MeteredStore { inner, metrics })
    }

    async fn timed<T>(&self, operation: &'static str, call: BoxFuture<'_, StoreResult<T>>) -> StoreResult<T> {
        let started = Instant::now();
        let result = call.await;
        self.metrics.record(operation, started, &result);
        result
    }
}

impl Store for MeteredStore {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Object>>> {
        Box::pin(self.timed("get", self.inner.get(key)))
    }

    fn create<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<String>> {
        Box::pin(self.timed("create", self.inner.create(key, bytes)))
    }

    fn replace<'a>(&'a self, key: &'a str, bytes: Vec<u8>, version: &'a str) -> BoxFuture<'a, StoreResult<String>> {
        Box::pin(self.timed("replace", self.inner.replace(key, bytes, version)))
    }

    fn delete<'a>(&'a self, key: &'a str, version: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(self.timed("delete", self.inner.delete(key, version)))
    }

    // Both are one LIST to the store: counted alike.
    fn list_versions<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<Listed>>> {
        Box::pin(self.timed("list", self.inner.list_versions(prefix)))
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        Box::pin(self.timed("list", self.inner.list(prefix)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyperhive_object_store::file::FileStore;

    #[tokio::test]
    async fn store_calls_are_counted_by_operation_and_result() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = Arc::new(Metrics::default());
        let store = MeteredStore::wrap(Arc::new(FileStore::open(dir.path()).unwrap()), metrics.clone());
        assert!(metrics.last_store_answer().is_none());
        store.create("a.json", b"{}".to_vec()).await.unwrap();
        store.create("a.json", b"{}".to_vec()).await.unwrap_err();
        let text = metrics.render();
        assert!(text.contains("agents_control_store_operations_total{operation=\"create\",result=\"ok\"} 1"), "{text}");
        assert!(text.contains("agents_control_store_operations_total{operation=\"create\",result=\"exists\"} 1"));
        assert!(text.contains("agents_control_devices_paired_total 0"));
        assert!(metrics.last_store_answer().is_some());
    }
}
