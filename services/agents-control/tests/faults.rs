//! Nothing half done: the connection to the real S3 server is cut (ChaosProxy) before each store
//! request of making a code, pairing and forgetting in turn; then, with the bucket reachable
//! again, the store must hold only whole records that mean what the user asked for, and
//! repeating the operation must complete it exactly once.

use agents_control::clock::SystemClock;
use agents_control::codes::{self, CodeRequest, Issuer};
use agents_control::key::ControlKey;
use agents_control::pairing::{self, PairError};
use agents_control::records::{self, CodeRecord, DeviceRecord};
use agents_control::registry;
use ed25519_dalek::SigningKey;
use futures::future::BoxFuture;
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::pair::PairRequest;
use hyperhive_object_store::s3::S3Store;
use hyperhive_object_store::{Listed, Object, Store, StoreResult};
use hyperhive_testkit::{ChaosProxy, S3, S3Server};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The real store, through the proxy, cutting the proxy just before its `cut_at`-th request.
#[derive(Debug)]
struct CutBefore {
    inner: S3Store,
    proxy: Arc<ChaosProxy>,
    calls: AtomicUsize,
    cut_at: usize,
}

impl CutBefore {
    fn tick(&self) {
        if self.calls.fetch_add(1, Ordering::SeqCst) == self.cut_at {
            self.proxy.cut();
        }
    }
}

impl Store for CutBefore {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Object>>> {
        self.tick();
        self.inner.get(key)
    }
    fn create<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<String>> {
        self.tick();
        self.inner.create(key, bytes)
    }
    fn replace<'a>(&'a self, key: &'a str, bytes: Vec<u8>, version: &'a str) -> BoxFuture<'a, StoreResult<String>> {
        self.tick();
        self.inner.replace(key, bytes, version)
    }
    fn delete<'a>(&'a self, key: &'a str, version: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        self.tick();
        self.inner.delete(key, version)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        self.tick();
        self.inner.list(prefix)
    }
    fn list_versions<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<Listed>>> {
        self.tick();
        self.inner.list_versions(prefix)
    }
}

struct Bench {
    s3: S3,
    proxy: Arc<ChaosProxy>,
    key: ControlKey,
}

impl Bench {
    async fn start() -> Bench {
        let s3 = S3::start(S3Server::Moto).await.unwrap();
        let proxy = Arc::new(ChaosProxy::start(s3.addr()).await.unwrap());
        Bench { s3, proxy, key: ControlKey::from_seed([0x11; 32]) }
    }

    /// A store on its own prefix, reaching the bucket directly.
    fn direct(&self, prefix: &str) -> S3Store {
        S3Store::from_client(&self.s3.client(), self.s3.bucket(), prefix)
    }

    /// The same prefix through the proxy, cut before request number `cut_at`.
    fn faulty(&self, prefix: &str, cut_at: usize) -> CutBefore {
        self.proxy.pass();
        let through_proxy =
            self.s3.client().config().to_builder().endpoint_url(format!("http://{}", self.proxy.addr())).build();
        let client = aws_sdk_s3::Client::from_conf(through_proxy);
        CutBefore {
            inner: S3Store::from_client(&client, self.s3.bucket(), prefix),
            proxy: self.proxy.clone(),
            calls: AtomicUsize::new(0),
            cut_at,
        }
    }

    fn issuer(&self) -> Issuer {
        Issuer { key: self.key.clone(), control_url: "https://agents.example.com".into(), pin: None }
    }

    async fn make_code(&self, store: &dyn Store) -> StoreResult<String> {
        let request = CodeRequest {
            kind: DeviceKind::Host,
            name: None,
            role: None,
            ttl: codes::DEFAULT_TTL,
            made_by: "test".into(),
        };
        Ok(codes::make_code(store, &SystemClock, &self.issuer(), &request).await?.to_token())
    }
}

/// Every record whole and readable; every device names exactly one code, no code two devices.
async fn check_invariants(store: &dyn Store) -> (Vec<DeviceRecord>, Vec<CodeRecord>) {
    let mut devices = Vec::new();
    let mut codes_seen = HashSet::new();
    for key in store.list(records::DEVICES).await.unwrap() {
        let bytes = store.get(&key).await.unwrap().unwrap().bytes;
        let device: DeviceRecord = records::decode(&key, &bytes).expect("a whole device record");
        assert_eq!(device.id, records::device_id_for(&device.code), "{key} points to its code");
        assert!(codes_seen.insert(device.code.clone()), "two devices share a code");
        devices.push(device);
    }
    let mut pending = Vec::new();
    for key in store.list(records::CODES).await.unwrap() {
        let bytes = store.get(&key).await.unwrap().unwrap().bytes;
        pending.push(records::decode::<CodeRecord>(&key, &bytes).expect("a whole code record"));
    }
    (devices, pending)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_during_code_making_leaves_the_code_whole_or_absent() {
    let bench = Bench::start().await;
    for cut_at in 0..2 {
        let prefix = format!("make{cut_at}");
        let faulty = bench.faulty(&prefix, cut_at);
        let result = bench.make_code(&faulty).await;
        bench.proxy.pass();
        let (devices, pending) = check_invariants(&bench.direct(&prefix)).await;
        assert!(devices.is_empty());
        // Making a code is one request: a cut before it refuses, and nothing comes after it.
        match (cut_at, result) {
            (0, Err(error)) => {
                assert!(error.is_unavailable(), "{error:?}");
                assert!(pending.len() <= 1);
            }
            (1, Ok(_)) => assert_eq!(pending.len(), 1),
            (_, other) => panic!("cut at {cut_at}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_at_any_step_of_pairing_pairs_at_most_once_and_a_retry_completes_it() {
    let bench = Bench::start().await;
    let device = SigningKey::from_bytes(&[0x22; 32]);
    // Pairing makes 4 requests (get device, get code, create device, delete code); cut before
    // each, and once after all of them.
    for cut_at in 0..5 {
        let prefix = format!("pair{cut_at}");
        let direct = bench.direct(&prefix);
        let token = bench.make_code(&direct).await.unwrap();
        let request = PairRequest::sign(&token, &device, "box");
        let faulty = bench.faulty(&prefix, cut_at);
        let first = pairing::redeem(&faulty, &SystemClock, &bench.key, &request).await;
        bench.proxy.pass();

        let (devices, _) = check_invariants(&direct).await;
        assert!(devices.len() <= 1, "cut at {cut_at}");
        // Cuts before the reads and the create refuse the pairing; a cut before the tidying
        // delete, or none at all, leaves it paired.
        assert_eq!(first.is_ok(), cut_at >= 3, "cut at {cut_at}: {first:?}");
        // The same device asking again is paired, once, whether or not its first write landed.
        let retry = pairing::redeem(&direct, &SystemClock, &bench.key, &request).await;
        let retry = retry.unwrap_or_else(|error| panic!("cut at {cut_at}: the retry failed: {error}"));
        if let Ok(first) = &first {
            assert_eq!(first.response.device_id, retry.response.device_id);
        }
        let (devices, _) = check_invariants(&direct).await;
        assert_eq!(devices.len(), 1, "cut at {cut_at}");
        // The code is used: another device cannot pair with it.
        let other = PairRequest::sign(&token, &SigningKey::from_bytes(&[0x23; 32]), "other");
        let third = pairing::redeem(&direct, &SystemClock, &bench.key, &other).await;
        assert!(matches!(third, Err(PairError::AlreadyUsed)), "cut at {cut_at}: {third:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_during_forgetting_leaves_the_device_whole_and_a_retry_forgets_it() {
    let bench = Bench::start().await;
    for cut_at in 0..2 {
        let prefix = format!("forget{cut_at}");
        let direct = bench.direct(&prefix);
        let token = bench.make_code(&direct).await.unwrap();
        let request = PairRequest::sign(&token, &SigningKey::from_bytes(&[0x33; 32]), "box");
        let paired = pairing::redeem(&direct, &SystemClock, &bench.key, &request).await.unwrap().response;
        let faulty = bench.faulty(&prefix, cut_at);
        let first = registry::forget(&faulty, &SystemClock, &paired.device_id).await;
        bench.proxy.pass();
        let (devices, _) = check_invariants(&direct).await;
        assert_eq!(devices.len(), 1);
        // Forgetting is a read then one replace: a cut before either refuses it, and the
        // device is either still paired or whole as a tombstone (if the replace landed unseen).
        let error = first.expect_err("a cut forget must be refused");
        assert!(error.to_string().contains("store unavailable"), "cut at {cut_at}: {error}");
        let retry = registry::forget(&direct, &SystemClock, &paired.device_id).await;
        assert!(retry.is_ok() || retry.as_ref().unwrap_err().to_string().contains("already forgotten"), "{retry:?}");
        let listed = registry::list(&direct, DeviceKind::Host).await.unwrap();
        assert!(listed.is_empty(), "cut at {cut_at}");
    }
}
