//! The store contract on the `file://` backend.

mod suite;

use hyperhive_object_store::Store;
use hyperhive_object_store::file::FileStore;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_file_store_keeps_the_store_contract() {
    let dirs = std::sync::Mutex::new(Vec::new());
    suite::run_all(|| {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(FileStore::open(dir.path()).unwrap());
        dirs.lock().unwrap().push(dir);
        async move { store }
    })
    .await;
}

#[tokio::test]
async fn a_crashed_write_leaves_only_a_temp_file_that_is_never_listed() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    // What a crash between writing the temp file and renaming it leaves behind.
    std::fs::write(dir.path().join(".tmp/0123456789abcdef"), b"{\"half\":").unwrap();
    assert!(store.list("").await.unwrap().is_empty());
    store.create("k.json", b"{}".to_vec()).await.unwrap();
    assert_eq!(store.list("").await.unwrap(), ["k.json"]);
}

#[tokio::test]
async fn two_stores_on_one_directory_share_the_guarantees() {
    let dir = tempfile::tempdir().unwrap();
    let one = FileStore::open(dir.path()).unwrap();
    let two = FileStore::open(dir.path()).unwrap();
    one.create("shared.json", b"{\"a\":1}".to_vec()).await.unwrap();
    assert!(two.create("shared.json", b"{\"a\":2}".to_vec()).await.is_err());
}

#[tokio::test]
async fn a_missing_store_directory_is_unavailable_not_empty() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("store");
    let refused = FileStore::open(&root).unwrap_err();
    assert!(refused.is_unavailable() && refused.to_string().contains("mkdir -p"), "{refused}");
    std::fs::create_dir(&root).unwrap();
    let store = FileStore::open(&root).unwrap();
    let version = store.create("k.json", b"{}".to_vec()).await.unwrap();
    let aside = parent.path().join("aside");
    std::fs::rename(&root, &aside).unwrap();
    assert!(store.get("k.json").await.unwrap_err().is_unavailable());
    assert!(store.get("other.json").await.unwrap_err().is_unavailable());
    assert!(store.list("").await.unwrap_err().is_unavailable());
    assert!(store.create("n.json", b"{}".to_vec()).await.unwrap_err().is_unavailable());
    assert!(store.delete("k.json", &version).await.unwrap_err().is_unavailable());
    std::fs::rename(&aside, &root).unwrap();
    assert_eq!(store.list("").await.unwrap(), ["k.json"]);
}
