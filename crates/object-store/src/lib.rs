//! The control plane's durable store (docs/control-plane/store.md): small objects under one bucket prefix or
//! one directory, changed only by conditional writes.
//!
//! # Layout
//! - [`Store`] (`store.rs`): the one interface (get, create-if-absent, replace-if-version, delete-if-version,
//!   list by prefix with each object's version), shared as `Arc<dyn Store>` by every part of a copy.
//! - [`StoreUrl`]: `s3://bucket/prefix` or `file:///path`, and [`open`] to reach it.
//! - [`file`] and [`s3`]: the two backends, with the same guarantees.
//! - [`probe`]: proves a store honours conditional create and replace (start-up and
//!   `agents-control store check`).

pub mod file;
pub mod probe;
mod retry;
pub mod s3;
mod store;
mod url;

pub use s3::{S3Credentials, S3Settings};
pub use store::{Listed, Object, Store, StoreError, StoreResult, check_key};
pub use url::{StoreUrl, StoreUrlError};

use std::sync::Arc;

/// Opens the store a URL names.
pub async fn open(url: &StoreUrl, settings: &S3Settings) -> StoreResult<Arc<dyn Store>> {
    Ok(match url {
        StoreUrl::File { path } => Arc::new(file::FileStore::open(path)?),
        StoreUrl::S3 { bucket, prefix } => Arc::new(s3::S3Store::connect(settings, bucket, prefix).await),
    })
}
