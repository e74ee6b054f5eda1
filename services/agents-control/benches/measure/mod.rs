//! The measurements, one module each; each returns rows for the report.

pub mod failover;
pub mod idle_store;
pub mod latency;
pub mod memory;
pub mod throughput;

/// One line of the report.
pub struct Row {
    pub measurement: String,
    pub figure: String,
    pub target: String,
}

impl Row {
    pub fn new(measurement: impl Into<String>, figure: impl Into<String>, target: impl Into<String>) -> Row {
        let row = Row { measurement: measurement.into(), figure: figure.into(), target: target.into() };
        // Printed as soon as it is known: a long run still shows what it has measured.
        println!("| {} | {} | {} |", row.measurement, row.figure, row.target);
        row
    }
}

/// A file store in a fresh directory and its `AGENTS_STORE` URL.
pub fn file_store() -> (tempfile::TempDir, std::sync::Arc<dyn hyperhive_object_store::Store>, String) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = hyperhive_object_store::file::FileStore::open(dir.path()).expect("a file store");
    let url = format!("file://{}", dir.path().display());
    (dir, std::sync::Arc::new(store), url)
}
