//! The store contract on the `s3://` backend, against both real S3 servers from the test kit:
//! SeaweedFS (a production server, atomic conditional writes) and moto (a second implementation).

mod suite;

use futures::StreamExt;
use hyperhive_object_store::s3::S3Store;
use hyperhive_object_store::{Store, StoreError, probe};
use hyperhive_testkit::{S3, S3Server, wait_until};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_s3_store_keeps_the_store_contract_on_seaweedfs() {
    store_contract(S3Server::SeaweedFs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_s3_store_keeps_the_store_contract_on_moto() {
    store_contract(S3Server::Moto).await;
}

async fn store_contract(server: S3Server) {
    let s3 = S3::start(server).await.unwrap();
    let client = s3.client();
    let next = AtomicUsize::new(0);
    suite::run_all(|| {
        // A fresh prefix per case: the same bucket, nothing shared.
        let prefix = format!("case{}", next.fetch_add(1, Ordering::SeqCst));
        let store: Arc<dyn Store> = Arc::new(S3Store::from_client(&client, s3.bucket(), &prefix));
        async move { store }
    })
    .await;
}

#[tokio::test]
async fn the_real_s3_servers_pass_the_probe() {
    for server in S3Server::ALL {
        let s3 = S3::start(server).await.unwrap();
        let store = S3Store::from_client(&s3.client(), s3.bucket(), "control");
        let mut steps = Vec::new();
        probe::run(&store, |step| steps.push(step)).await.unwrap();
        assert_eq!(steps, probe::Step::ALL, "{server}");
        assert!(store.list("").await.unwrap().is_empty(), "the probe left its object on {server}");
    }
}

#[tokio::test]
async fn a_paused_bucket_is_unavailable_within_seconds_then_works_again() {
    for server in S3Server::ALL {
        paused_then_working(server).await;
    }
}

async fn paused_then_working(server: S3Server) {
    let mut s3 = S3::start(server).await.unwrap();
    let store = S3Store::from_client(&s3.client(), s3.bucket(), "outage");
    let version = store.create("k.json", b"{\"n\":1}".to_vec()).await.unwrap();

    s3.pause().unwrap();
    let started = Instant::now();
    let err = store.replace("k.json", b"{\"n\":2}".to_vec(), &version).await.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(err.to_string().contains("store unavailable"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    assert!(matches!(store.list("").await, Err(StoreError::Unavailable { .. })));

    s3.resume().unwrap();
    // The replace may or may not have reached the frozen server before it stopped, and the
    // server may apply it (or a retry of it) only after it thaws, even after a read: either way
    // the object is always whole, at one of the two versions, and writes work again within
    // seconds (SeaweedFS's servers also re-register with its master after the freeze).
    let what = format!("writes to work again on {server}");
    wait_until(&what, Duration::from_secs(30), || async {
        let now = store.get("k.json").await.ok()??;
        assert!(now.bytes == b"{\"n\":1}" || now.bytes == b"{\"n\":2}", "{server}: {:?}", now.bytes);
        match store.replace("k.json", b"{\"n\":3}".to_vec(), &now.version).await {
            Ok(_) => Some(()),
            Err(err) if err.is_unavailable() || matches!(err, StoreError::VersionMismatch { .. }) => None,
            Err(err) => panic!("{server}: {err}"),
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_of_more_than_a_page_gives_every_key_with_its_version() {
    for server in S3Server::ALL {
        listing_of_more_than_a_page(server).await;
    }
}

async fn listing_of_more_than_a_page(server: S3Server) {
    let s3 = S3::start(server).await.unwrap();
    let store = S3Store::from_client(&s3.client(), s3.bucket(), "pages");
    // ListObjectsV2 answers at most 1,000 keys a page.
    let written: Vec<(String, String)> = futures::stream::iter(0..1005)
        .map(|n| {
            let store = &store;
            async move {
                let key = format!("many/{n:04}.json");
                let version = store.create(&key, format!("{{\"n\":{n}}}").into_bytes()).await.unwrap();
                (key, version)
            }
        })
        .buffered(16)
        .collect()
        .await;
    let listed = store.list_versions("many/").await.unwrap();
    let listed: Vec<(String, String)> = listed.into_iter().map(|l| (l.key, l.version)).collect();
    assert_eq!(listed, written);
}
