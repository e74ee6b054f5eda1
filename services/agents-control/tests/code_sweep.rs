//! Thousands of codes waiting to be redeemed, on a store that takes a few milliseconds per
//! request (as S3 does): sweeping them never holds up the registry refresh, the membership
//! heartbeat, or the enforcement of a forget (`docs/control-plane/security.md`).

use agents_control::clock::SystemClock;
use agents_control::codes::{self, CodeRequest, Issuer};
use agents_control::control::Control;
use agents_control::key::ControlKey;
use agents_control::membership::Membership;
use agents_control::records::{self, CodeRecord, MemberRecord};
use agents_control::{cadence, registry, serve};
use futures::StreamExt;
use futures::future::BoxFuture;
use hyperhive_control_proto::DeviceKind;
use hyperhive_object_store::file::FileStore;
use hyperhive_object_store::{Listed, Object, Store, StoreResult};
use hyperhive_testkit::wait_until;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const CODES: usize = 2_000;
/// Each read of a code record takes this long: 2,000 of them, 30 s.
const CODE_READ: Duration = Duration::from_millis(15);

/// A file store whose reads of code records are slow, counting them.
#[derive(Debug)]
struct SlowCodeReads {
    inner: FileStore,
    code_reads: AtomicUsize,
}

impl Store for SlowCodeReads {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Object>>> {
        Box::pin(async move {
            if key.starts_with(records::CODES) {
                self.code_reads.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(CODE_READ).await; // the store's latency, simulated
            }
            self.inner.get(key).await
        })
    }
    fn create<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<String>> {
        self.inner.create(key, bytes)
    }
    fn replace<'a>(&'a self, key: &'a str, bytes: Vec<u8>, version: &'a str) -> BoxFuture<'a, StoreResult<String>> {
        self.inner.replace(key, bytes, version)
    }
    fn delete<'a>(&'a self, key: &'a str, version: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        self.inner.delete(key, version)
    }
    fn list_versions<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<Listed>>> {
        self.inner.list_versions(prefix)
    }
}

async fn heartbeat_at(store: &dyn Store, copy_id: &str) -> Option<String> {
    let key = records::member_key(copy_id);
    let object = store.get(&key).await.ok()??;
    Some(records::decode::<MemberRecord>(&key, &object.bytes).ok()?.heartbeat_at)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_code_sweep_holds_up_neither_forgets_nor_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let files = FileStore::open(dir.path()).unwrap();
    let key = ControlKey::from_seed([4; 32]);
    let issuer = Issuer { key: key.clone(), control_url: "https://agents.example.com".into(), pin: None };
    let request = CodeRequest {
        kind: DeviceKind::Client,
        name: None,
        role: None,
        ttl: codes::DEFAULT_TTL,
        made_by: "test".into(),
    };
    futures::stream::iter(0..CODES)
        .for_each_concurrent(16, |_| async {
            codes::make_code(&files, &SystemClock, &issuer, &request).await.unwrap();
        })
        .await;
    let token = codes::make_code(&files, &SystemClock, &issuer, &request).await.unwrap().to_token();
    let device = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let request = hyperhive_control_proto::pair::PairRequest::sign(&token, &device, "phone");
    let paired = agents_control::pairing::redeem(&files, &SystemClock, &key, &request).await.unwrap().response;

    let store =
        Arc::new(SlowCodeReads { inner: FileStore::open(dir.path()).unwrap(), code_reads: AtomicUsize::new(0) });
    let control = Arc::new(Control::new(store.clone(), key, Arc::new(SystemClock)));
    let membership = Arc::new(Membership::new("sweeper".into(), None));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let copy = tokio::spawn(serve::run(
        control.clone(),
        membership.clone(),
        listener,
        async move {
            let _ = stopped.await;
        },
        Duration::ZERO,
    ));

    // The sweep is under way (a copy sweeps once soon after it starts, then every 30 s).
    wait_until("the sweep to start reading codes", Duration::from_secs(45), || {
        let reads = store.code_reads.load(Ordering::SeqCst);
        async move { (reads > 0).then_some(()) }
    })
    .await
    .unwrap();
    assert!(control.registry.active(&paired.device_id).is_some());

    // A forget made elsewhere (another copy, the command line) is enforced at the next refresh.
    registry::forget(&store.inner, &SystemClock, &paired.device_id).await.unwrap();
    wait_until("the forget to be enforced", cadence::REFRESH_EVERY * 2 + Duration::from_secs(1), || {
        let refused = control.registry.active(&paired.device_id).is_none();
        async move { refused.then_some(()) }
    })
    .await
    .unwrap();

    // Two heartbeats go by.
    let copy_id = membership.copy_id().to_owned();
    for _ in 0..2 {
        let last = heartbeat_at(&store.inner, &copy_id).await;
        wait_until("a heartbeat", cadence::HEARTBEAT_EVERY + Duration::from_secs(2), || {
            let (store, last, copy_id) = (&store.inner, last.clone(), &copy_id);
            async move { (heartbeat_at(store, copy_id).await != last).then_some(()) }
        })
        .await
        .unwrap();
    }
    let reads = store.code_reads.load(Ordering::SeqCst);
    assert!(reads < CODES, "the sweep ended ({reads} reads) before the checks: make it longer");

    // The sweep finishes: every waiting code counted, the redeemed one's record long gone, and a
    // second sweep would read no code again.
    wait_until("the sweep to finish", Duration::from_secs(60), || {
        let text = control.metrics.render();
        async move { text.contains(&format!("agents_control_codes_pending {CODES}\n")).then_some(()) }
    })
    .await
    .unwrap();
    let swept = control.codes.sweep(store.as_ref(), &SystemClock, |id| control.registry.holds(id)).await.unwrap();
    assert_eq!(swept.pending, CODES);
    assert_eq!(store.code_reads.load(Ordering::SeqCst), CODES, "a code record was read twice");
    let left: Vec<String> = store.inner.list(records::CODES).await.unwrap();
    assert_eq!(left.len(), CODES);
    let one = store.inner.get(&left[0]).await.unwrap().unwrap();
    records::decode::<CodeRecord>(&left[0], &one.bytes).unwrap();

    let _ = stop.send(());
    copy.await.unwrap().unwrap();
}
