//! Listing a bucket (`nats::scan_bucket`) against a real nats-server while its keys are written:
//! every key that existed before the scan began is in it, once, with a value at least as new as
//! the one it had then.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_nats::jetstream::{self, kv};
use hyperhive_testkit::Nats;
use swarm_controller::nats::scan_bucket;

const KEYS: usize = 40;
const SCANS: usize = 300;
const REWRITTEN: [&str; 3] = ["k00", "k20", "k39"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_while_keys_are_rewritten_lists_every_key_once() {
    let nats = Nats::start().await.unwrap();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client);
    let store =
        js.create_key_value(kv::Config { bucket: "scanned".into(), history: 1, ..Default::default() }).await.unwrap();
    for i in 0..KEYS {
        store.put(format!("k{i:02}"), "0".into()).await.unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    // The last round of rewrites every key took.
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (store, stop, written) = (store.clone(), stop.clone(), written.clone());
        tokio::spawn(async move {
            let mut n = 1u64;
            while !stop.load(Ordering::Relaxed) {
                // The first, a middle and the last key, as a new entry's provisioning steps do.
                for key in REWRITTEN {
                    store.put(key, n.to_string().into()).await.unwrap();
                }
                written.store(n, Ordering::Relaxed);
                n += 1;
            }
        })
    };
    for scan in 0..SCANS {
        let before = written.load(Ordering::Relaxed);
        let listed = scan_bucket(&js, "scanned").await.unwrap();
        for kv in listed.iter().filter(|kv| REWRITTEN.contains(&kv.key.as_str())) {
            let round: u64 = std::str::from_utf8(&kv.value).unwrap().parse().unwrap();
            assert!(round >= before, "scan {scan} listed {} as of round {round}, older than {before}", kv.key);
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for kv in &listed {
            *seen.entry(kv.key.as_str()).or_default() += 1;
        }
        assert_eq!(seen.len(), KEYS, "scan {scan} missed keys: {:?}", seen.keys().collect::<Vec<_>>());
        assert!(seen.values().all(|n| *n == 1), "scan {scan} listed a key twice: {seen:?}");
    }
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
}
