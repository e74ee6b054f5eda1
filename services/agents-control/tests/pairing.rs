//! Pairing, codes and the registry through the HTTP routes, in process, on a `file://` store.
//! (The same behaviour on the real S3 server, across processes, is in `two_copies.rs`.)

use agents_control::clock::FakeClock;
use agents_control::codes::{self, CodeRequest, Issuer};
use agents_control::control::Control;
use agents_control::key::ControlKey;
use agents_control::{records, registry};
use ed25519_dalek::SigningKey;
use futures::future::BoxFuture;
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::pair::{PairRequest, PairResponse};
use hyperhive_object_store::file::FileStore;
use hyperhive_object_store::{Listed, Object, Store, StoreError, StoreResult};
use std::sync::Arc;
use std::time::Duration;
use time::macros::datetime;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    clock: Arc<FakeClock>,
    control: Arc<Control>,
    issuer: Issuer,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(FileStore::open(dir.path()).unwrap());
    let clock = Arc::new(FakeClock::at(datetime!(2026-11-30 04:00 UTC)));
    let key = ControlKey::from_seed([7; 32]);
    let control = Arc::new(Control::new(store.clone(), key.clone(), clock.clone()));
    let issuer = Issuer { key, control_url: "https://agents.example.com".into(), pin: None };
    Fixture { _dir: dir, store, clock, control, issuer }
}

impl Fixture {
    async fn code(&self, kind: DeviceKind) -> String {
        let role = (kind == DeviceKind::Client).then_some(hyperhive_control_proto::role::Role::Operator);
        let request = CodeRequest { kind, name: None, role, ttl: codes::DEFAULT_TTL, made_by: "test".into() };
        codes::make_code(self.store.as_ref(), self.clock.as_ref(), &self.issuer, &request).await.unwrap().to_token()
    }

    async fn post(&self, body: Vec<u8>) -> (u16, serde_json::Value) {
        let response = warp::test::request()
            .method("POST")
            .path("/v1/pair")
            .body(body)
            .reply(&agents_control::http::routes(self.control.clone()))
            .await;
        let json = serde_json::from_slice(response.body()).unwrap_or(serde_json::Value::Null);
        (response.status().as_u16(), json)
    }

    async fn pair(&self, token: &str, device: &SigningKey, name: &str) -> (u16, serde_json::Value) {
        self.post(serde_json::to_vec(&PairRequest::sign(token, device, name)).unwrap()).await
    }
}

#[tokio::test]
async fn a_code_pairs_a_device_once() {
    let f = fixture();
    let token = f.code(DeviceKind::Host).await;
    let device = SigningKey::from_bytes(&[1; 32]);
    let (status, body) = f.pair(&token, &device, "build box").await;
    assert_eq!(status, 200, "{body}");
    let response: PairResponse = serde_json::from_value(body).unwrap();
    let public = hyperhive_control_proto::encoding::encode(device.verifying_key().as_bytes());
    assert!(response.verify(&SigningKey::from_bytes(&[7; 32]).verifying_key(), &public));
    assert_eq!(response.kind, DeviceKind::Host);

    let hosts = registry::list(f.store.as_ref(), DeviceKind::Host).await.unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!((hosts[0].id.as_str(), hosts[0].name.as_str()), (response.device_id.as_str(), "build box"));
    assert!(f.store.list(records::CODES).await.unwrap().is_empty(), "the used code is tidied away");

    let other = SigningKey::from_bytes(&[2; 32]);
    let (status, body) = f.pair(&token, &other, "intruder").await;
    assert_eq!(status, 409);
    assert!(body["error"].as_str().unwrap().contains("already used"), "{body}");
    assert!(f.control.metrics.render().contains("agents_control_devices_paired_total 1"));
}

#[tokio::test]
async fn expired_unknown_and_foreign_codes_are_refused() {
    let f = fixture();
    let device = SigningKey::from_bytes(&[1; 32]);
    let token = f.code(DeviceKind::Client).await;
    f.clock.advance(codes::DEFAULT_TTL);
    let (status, body) = f.pair(&token, &device, "late").await;
    assert_eq!(status, 410, "{body}");
    assert!(body["error"].as_str().unwrap().contains("expired"));

    let unknown = hyperhive_control_proto::code::Code {
        control_url: "https://agents.example.com".into(),
        control_public_key: f.issuer.key.public_key(),
        pin: None,
        kind: DeviceKind::Client,
        secret: [3; 32],
    };
    let (status, body) = f.pair(&unknown.to_token(), &device, "x").await;
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("unknown code"));

    let foreign = hyperhive_control_proto::code::Code { control_public_key: [9; 32], ..unknown };
    let (status, body) = f.pair(&foreign.to_token(), &device, "x").await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("another control plane"));
    assert!(f.store.list(records::DEVICES).await.unwrap().is_empty());
}

#[tokio::test]
async fn malformed_requests_get_a_clear_4xx_and_store_nothing() {
    let f = fixture();
    let token = f.code(DeviceKind::Client).await;
    let device = SigningKey::from_bytes(&[1; 32]);
    let good = serde_json::to_value(PairRequest::sign(&token, &device, "laptop")).unwrap();
    let mut cases: Vec<(Vec<u8>, &str)> = vec![
        (b"not json".to_vec(), "malformed pair request"),
        (b"{}".to_vec(), "missing field"),
        (b"[]".to_vec(), "malformed pair request"),
    ];
    for (field, value, needle) in [
        ("code", serde_json::json!("hhcode1.%%%"), "damaged"),
        ("code", serde_json::json!(""), "empty"),
        ("code", serde_json::json!(42), "invalid type"),
        ("public_key", serde_json::json!("short"), "public_key"),
        ("name", serde_json::json!(""), "name is empty"),
        ("name", serde_json::json!("n".repeat(100)), "at most 64"),
        ("proof", serde_json::json!("AAAA"), "proof"),
        ("extra", serde_json::json!(1), "unknown field"),
    ] {
        let mut body = good.clone();
        body[field] = value;
        cases.push((serde_json::to_vec(&body).unwrap(), needle));
    }
    let mut wrong_proof = good.clone();
    wrong_proof["name"] = "renamed".into();
    cases.push((serde_json::to_vec(&wrong_proof).unwrap(), "does not verify"));
    for (body, needle) in cases {
        let (status, reply) = f.post(body.clone()).await;
        assert_eq!(status, 400, "{} -> {reply}", String::from_utf8_lossy(&body));
        let message = reply["error"].as_str().unwrap();
        assert!(message.contains(needle), "{message} lacks {needle}");
    }
    let (status, reply) = f.post(vec![b' '; 20_000]).await;
    assert_eq!(status, 413, "{reply}");
    assert!(f.store.list(records::DEVICES).await.unwrap().is_empty());
    assert_eq!(f.store.list(records::CODES).await.unwrap().len(), 1, "the code is still pending");
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json_errors() {
    let f = fixture();
    let routes = agents_control::http::routes(f.control.clone());
    let response = warp::test::request().path("/nope").reply(&routes).await;
    assert_eq!(response.status(), 404);
    let response = warp::test::request().method("GET").path("/v1/pair").reply(&routes).await;
    assert_eq!(response.status(), 405);
    assert!(String::from_utf8_lossy(response.body()).contains("error"));
}

#[tokio::test]
async fn readyz_follows_the_store_and_draining() {
    let f = fixture();
    let routes = agents_control::http::routes(f.control.clone());
    let ready = || warp::test::request().path("/readyz").reply(&routes);
    assert_eq!(ready().await.status(), 503, "no store answer yet");
    f.control.registry.refresh(f.control.store.as_ref()).await.unwrap();
    assert_eq!(ready().await.status(), 200);
    let health = warp::test::request().path("/healthz").reply(&routes).await;
    assert_eq!(health.status(), 200);
    let metrics = warp::test::request().path("/metrics").reply(&routes).await;
    assert_eq!(metrics.status(), 200);
    let text = String::from_utf8_lossy(metrics.body()).into_owned();
    assert!(text.contains("agents_control_store_operations_total{operation=\"list\",result=\"ok\"} 1"), "{text}");
    assert!(text.contains("\nagents_control_open_connections 0\n"), "{text}");
    f.control.start_draining();
    let response = ready().await;
    assert_eq!(response.status(), 503);
    assert!(String::from_utf8_lossy(response.body()).contains("shutting down"));
}

#[tokio::test]
async fn forgetting_leaves_a_tombstone_that_keeps_the_code_used() {
    let f = fixture();
    let token = f.code(DeviceKind::Client).await;
    let device = SigningKey::from_bytes(&[1; 32]);
    let (_, body) = f.pair(&token, &device, "phone").await;
    let id = body["device_id"].as_str().unwrap().to_owned();

    let forgotten = registry::forget(f.store.as_ref(), f.clock.as_ref(), &id).await.unwrap();
    assert!(forgotten.forgotten_at.is_some());
    assert!(registry::list(f.store.as_ref(), DeviceKind::Client).await.unwrap().is_empty());
    let again = registry::forget(f.store.as_ref(), f.clock.as_ref(), &id).await.unwrap_err();
    assert!(again.to_string().contains("already forgotten"));
    for bad in ["", "nope", "d0000"] {
        let err = registry::forget(f.store.as_ref(), f.clock.as_ref(), bad).await.unwrap_err();
        assert!(err.to_string().contains("not a device id"), "{err}");
    }
    let missing = format!("d{}", "0".repeat(32));
    let err = registry::forget(f.store.as_ref(), f.clock.as_ref(), &missing).await.unwrap_err();
    assert!(err.to_string().contains("no device"));

    // The code cannot come back to life after the device is forgotten.
    let (status, _) = f.pair(&token, &device, "phone").await;
    assert_eq!(status, 409);
}

#[tokio::test]
async fn the_sweeper_removes_expired_codes_and_leaves_live_ones() {
    let f = fixture();
    f.code(DeviceKind::Client).await;
    f.clock.advance(Duration::from_secs(300));
    f.code(DeviceKind::Host).await;
    f.clock.advance(Duration::from_secs(301));
    let sweep = f.control.codes.sweep(f.store.as_ref(), f.clock.as_ref(), |_| false).await.unwrap();
    assert_eq!(sweep, codes::Sweep { removed: 1, pending: 1 });
    assert_eq!(f.store.list(records::CODES).await.unwrap().len(), 1);
    f.control.metrics.record_sweep(sweep);
    let text = f.control.metrics.render();
    assert!(text.contains("agents_control_codes_pending 1\n"), "{text}");
    assert!(text.contains("agents_control_codes_swept_total 1\n"), "{text}");
}

/// A file store whose first device-record create lands but is reported unavailable (the answer
/// was lost, and the backend's retries could not tell).
#[derive(Debug)]
struct LandsButUnavailable {
    inner: FileStore,
    lost: std::sync::atomic::AtomicBool,
}

impl Store for LandsButUnavailable {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Object>>> {
        self.inner.get(key)
    }
    fn create<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<String>> {
        Box::pin(async move {
            let created = self.inner.create(key, bytes).await?;
            if key.starts_with(records::DEVICES) && !self.lost.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Err(StoreError::Unavailable { detail: "the answer was lost".into() });
            }
            Ok(created)
        })
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

/// The device asks again with the same code and key after its pairing's write landed unseen:
/// it is paired (once, with the same answer), not told its code is used; another device with
/// that code is.
#[tokio::test]
async fn a_pairing_retried_after_a_landed_write_was_reported_unavailable_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let store = LandsButUnavailable {
        inner: FileStore::open(dir.path()).unwrap(),
        lost: std::sync::atomic::AtomicBool::new(false),
    };
    let clock = FakeClock::at(datetime!(2026-11-30 04:00 UTC));
    let key = ControlKey::from_seed([7; 32]);
    let issuer = Issuer { key: key.clone(), control_url: "https://agents.example.com".into(), pin: None };
    let code = CodeRequest {
        kind: DeviceKind::Client,
        name: None,
        role: None,
        ttl: codes::DEFAULT_TTL,
        made_by: "test".into(),
    };
    let token = codes::make_code(&store, &clock, &issuer, &code).await.unwrap().to_token();
    let device = SigningKey::from_bytes(&[1; 32]);
    let request = PairRequest::sign(&token, &device, "laptop");

    let first = agents_control::pairing::redeem(&store, &clock, &key, &request).await.unwrap_err();
    assert_eq!(first.status(), 503, "{first}");
    assert_eq!(store.inner.list(records::DEVICES).await.unwrap().len(), 1, "the write landed");
    let retried = agents_control::pairing::redeem(&store, &clock, &key, &request).await.unwrap().response;
    let public = hyperhive_control_proto::encoding::encode(device.verifying_key().as_bytes());
    assert!(retried.verify(&SigningKey::from_bytes(&[7; 32]).verifying_key(), &public));
    assert_eq!(retried.name, "laptop");
    let again = agents_control::pairing::redeem(&store, &clock, &key, &request).await.unwrap().response;
    assert_eq!(again.device_id, retried.device_id);
    assert_eq!(store.inner.list(records::DEVICES).await.unwrap().len(), 1);
    // The used code record is the sweeper's to remove (it sees the device in the registry).
    let paired = retried.device_id.clone();
    let swept = codes::CodeIndex::default().sweep(&store, &clock, |id| id == paired).await.unwrap();
    assert_eq!(swept, codes::Sweep { removed: 1, pending: 0 });

    let other = PairRequest::sign(&token, &SigningKey::from_bytes(&[2; 32]), "intruder");
    let refused = agents_control::pairing::redeem(&store, &clock, &key, &other).await.unwrap_err();
    assert_eq!(refused.status(), 409, "{refused}");
    // Forgotten, the device cannot come back with its old request either.
    registry::forget(&store.inner, &clock, &retried.device_id).await.unwrap();
    let forgotten = agents_control::pairing::redeem(&store, &clock, &key, &request).await.unwrap_err();
    assert_eq!(forgotten.status(), 409, "{forgotten}");
}
