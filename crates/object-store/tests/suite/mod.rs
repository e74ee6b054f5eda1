//! The store contract, run against every backend (see `file_store.rs` and `s3_store.rs`).

use hyperhive_object_store::{Listed, Store, StoreError};
use std::sync::Arc;

fn body(text: &str) -> Vec<u8> {
    format!("{{\"v\":\"{text}\",\"id\":{}}}", rand::random::<u64>()).into_bytes()
}

pub async fn create_is_exclusive(store: Arc<dyn Store>) {
    let first = body("first");
    let version = store.create("a/one.json", first.clone()).await.unwrap();
    let err = store.create("a/one.json", body("second")).await.unwrap_err();
    assert_eq!(err, StoreError::AlreadyExists { key: "a/one.json".into() });
    let read = store.get("a/one.json").await.unwrap().unwrap();
    assert_eq!((read.bytes, read.version), (first, version));
    assert_eq!(store.get("a/none.json").await.unwrap(), None);
}

pub async fn replace_needs_the_current_version(store: Arc<dyn Store>) {
    let v1 = store.create("r.json", body("1")).await.unwrap();
    let two = body("2");
    let v2 = store.replace("r.json", two.clone(), &v1).await.unwrap();
    assert_ne!(v1, v2);
    let stale = store.replace("r.json", body("3"), &v1).await.unwrap_err();
    assert_eq!(stale, StoreError::VersionMismatch { key: "r.json".into() });
    assert_eq!(store.get("r.json").await.unwrap().unwrap().bytes, two);
    let absent = store.replace("absent.json", body("x"), &v2).await.unwrap_err();
    assert!(matches!(absent, StoreError::VersionMismatch { .. }));
    assert_eq!(store.get("absent.json").await.unwrap(), None);
}

pub async fn delete_needs_the_current_version(store: Arc<dyn Store>) {
    let v1 = store.create("d.json", body("1")).await.unwrap();
    let v2 = store.replace("d.json", body("2"), &v1).await.unwrap();
    let stale = store.delete("d.json", &v1).await.unwrap_err();
    assert!(matches!(stale, StoreError::VersionMismatch { .. }));
    assert!(store.get("d.json").await.unwrap().is_some());
    store.delete("d.json", &v2).await.unwrap();
    assert_eq!(store.get("d.json").await.unwrap(), None);
    let again = store.delete("d.json", &v2).await.unwrap_err();
    assert!(matches!(again, StoreError::VersionMismatch { .. }));
}

pub async fn list_by_prefix(store: Arc<dyn Store>) {
    for key in ["devices/b.json", "devices/a.json", "codes/c.json", "devicesx.json"] {
        store.create(key, body(key)).await.unwrap();
    }
    assert_eq!(store.list("devices/").await.unwrap(), ["devices/a.json", "devices/b.json"]);
    assert_eq!(store.list("codes/").await.unwrap(), ["codes/c.json"]);
    assert_eq!(store.list("none/").await.unwrap(), Vec::<String>::new());
    assert_eq!(store.list("").await.unwrap().len(), 4);
}

/// A listing's versions are the ones reads and writes give, so a caller can skip re-reading an
/// object whose listed version it already holds; every write shows as a new version.
pub async fn list_gives_the_versions_get_gives(store: Arc<dyn Store>) {
    let created = store.create("v/a.json", body("a")).await.unwrap();
    let b = store.create("v/b.json", body("b")).await.unwrap();
    let listed = store.list_versions("v/").await.unwrap();
    let keys: Vec<&str> = listed.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(keys, ["v/a.json", "v/b.json"]);
    for entry in &listed {
        let read = store.get(&entry.key).await.unwrap().unwrap();
        assert_eq!(entry.version, read.version, "{}", entry.key);
    }
    assert_eq!(listed[0].version, created);

    let replaced = store.replace("v/a.json", body("a2"), &created).await.unwrap();
    store.delete("v/b.json", &b).await.unwrap();
    let after = store.list_versions("v/").await.unwrap();
    assert_eq!(after, [Listed { key: "v/a.json".into(), version: replaced.clone() }]);
    assert_ne!(replaced, created);
    assert_eq!(store.list("v/").await.unwrap(), ["v/a.json"]);
}

pub async fn racing_creates_have_one_winner(store: Arc<dyn Store>) {
    for round in 0..10 {
        let key = format!("race/{round}.json");
        let attempts = (0..16).map(|_| {
            let (store, key) = (store.clone(), key.clone());
            tokio::spawn(async move { store.create(&key, body("racer")).await })
        });
        let results = futures::future::join_all(attempts).await;
        let wins = results.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
        let losses = results.iter().filter(|r| matches!(r, Ok(Err(StoreError::AlreadyExists { .. })))).count();
        assert_eq!((wins, losses), (1, 15), "round {round}: {results:?}");
    }
}

pub async fn racing_replaces_have_one_winner(store: Arc<dyn Store>) {
    let base = store.create("swap.json", body("base")).await.unwrap();
    let attempts = (0..8).map(|_| {
        let (store, base) = (store.clone(), base.clone());
        tokio::spawn(async move { store.replace("swap.json", body("racer"), &base).await })
    });
    let results = futures::future::join_all(attempts).await;
    let wins = results.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
    assert_eq!(wins, 1, "{results:?}");
}

pub async fn bad_keys_store_nothing(store: Arc<dyn Store>) {
    for key in ["", "../escape.json", "a//b", ".lock", "with space"] {
        let err = store.create(key, body("x")).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidKey { .. }), "{key:?}: {err:?}");
        assert!(err.to_string().contains("invalid store key"));
    }
    assert!(store.list("").await.unwrap().is_empty());
}

/// Runs every case, each on a fresh store from `fresh`.
pub async fn run_all<F, Fut>(fresh: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Arc<dyn Store>>,
{
    create_is_exclusive(fresh().await).await;
    replace_needs_the_current_version(fresh().await).await;
    delete_needs_the_current_version(fresh().await).await;
    list_by_prefix(fresh().await).await;
    list_gives_the_versions_get_gives(fresh().await).await;
    racing_creates_have_one_winner(fresh().await).await;
    racing_replaces_have_one_winner(fresh().await).await;
    bad_keys_store_nothing(fresh().await).await;
}
