//! The `file://` store: the same guarantees as the bucket, on one machine.
//!
//! Every object is a file under the root directory, at its key's relative path. Writes take an
//! exclusive `flock` on `<root>/.lock` (so copies in several processes on this machine serialise),
//! compare the current version, write a temp file in `<root>/.tmp`, fsync it, rename it into
//! place and fsync the directory. A crash therefore leaves either the old object or the new one,
//! never a partial file. A version is the SHA-256 of the object's bytes.

use crate::store::{Listed, Object, Store, StoreError, StoreResult, check_key};
use futures::future::BoxFuture;
use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct FileStore {
    root: PathBuf,
}

fn io_unavailable(action: &str, path: &Path, error: std::io::Error) -> StoreError {
    StoreError::Unavailable { detail: format!("{action} {}: {error}", path.display()) }
}

fn version_of(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

impl FileStore {
    /// Opens the store directory, which must exist: a missing one is more likely an unmounted
    /// volume or a moved store than a new store, and writing a fresh store in its place would
    /// hide every record from this copy.
    pub fn open(root: &Path) -> StoreResult<FileStore> {
        let store = FileStore { root: root.to_owned() };
        store.check_root_if(true)?;
        fs::create_dir_all(root.join(".tmp")).map_err(|e| io_unavailable("creating", root, e))?;
        Ok(store)
    }

    fn path(&self, key: &str) -> StoreResult<PathBuf> {
        check_key(key)?;
        Ok(self.root.join(key))
    }

    /// An absent object is only absent if the store directory is there at all: a missing
    /// directory (an unmounted volume, a moved store) is an unavailable store, not an empty one.
    fn check_root_if(&self, absent: bool) -> StoreResult<()> {
        if absent && !self.root.is_dir() {
            return Err(StoreError::Unavailable {
                detail: format!(
                    "the store directory {0} is missing; for a new store, create it with `mkdir -p {0}`",
                    self.root.display()
                ),
            });
        }
        Ok(())
    }

    fn lock(&self) -> StoreResult<Flock<File>> {
        let path = self.root.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| io_unavailable("opening", &path, e))?;
        Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, errno)| StoreError::Unavailable { detail: format!("locking {}: {errno}", path.display()) })
    }

    fn read(path: &Path) -> StoreResult<Option<Object>> {
        match fs::read(path) {
            Ok(bytes) => Ok(Some(Object { version: version_of(&bytes), bytes })),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            // A key whose parent is a file (or a directory where a key is asked) holds no object.
            Err(e) if e.kind() == ErrorKind::NotADirectory || e.kind() == ErrorKind::IsADirectory => Ok(None),
            Err(e) => Err(io_unavailable("reading", path, e)),
        }
    }

    /// Writes `bytes` to `path` atomically and durably. The caller holds the lock.
    fn put(&self, path: &Path, bytes: &[u8]) -> StoreResult<String> {
        let parent = path.parent().expect("an object path has a parent");
        fs::create_dir_all(parent).map_err(|e| io_unavailable("creating", parent, e))?;
        let temp = self.root.join(".tmp").join(format!("{:016x}", rand::random::<u64>()));
        let write = || -> std::io::Result<()> {
            let mut file = File::create(&temp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            fs::rename(&temp, path)?;
            File::open(parent)?.sync_all()
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&temp);
            io_unavailable("writing", path, e)
        })?;
        Ok(version_of(bytes))
    }

    fn create_blocking(&self, key: &str, bytes: &[u8]) -> StoreResult<String> {
        let path = self.path(key)?;
        let _lock = self.lock()?;
        if Self::read(&path)?.is_some() {
            return Err(StoreError::AlreadyExists { key: key.into() });
        }
        self.put(&path, bytes)
    }

    fn replace_blocking(&self, key: &str, bytes: &[u8], version: &str) -> StoreResult<String> {
        let path = self.path(key)?;
        let _lock = self.lock()?;
        match Self::read(&path)? {
            Some(current) if current.version == version => self.put(&path, bytes),
            _ => Err(StoreError::VersionMismatch { key: key.into() }),
        }
    }

    fn delete_blocking(&self, key: &str, version: &str) -> StoreResult<()> {
        let path = self.path(key)?;
        let _lock = self.lock()?;
        match Self::read(&path)? {
            Some(current) if current.version == version => {
                fs::remove_file(&path).map_err(|e| io_unavailable("deleting", &path, e))?;
                let parent = path.parent().expect("an object path has a parent");
                File::open(parent).and_then(|dir| dir.sync_all()).map_err(|e| io_unavailable("syncing", parent, e))
            }
            _ => Err(StoreError::VersionMismatch { key: key.into() }),
        }
    }

    fn list_blocking(&self, prefix: &str) -> StoreResult<Vec<String>> {
        let mut keys = Vec::new();
        let mut pending = vec![self.root.clone()];
        while let Some(dir) = pending.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                // A subdirectory removed while listing is fine; the root missing is not.
                Err(e) if e.kind() == ErrorKind::NotFound && dir != self.root => continue,
                Err(e) => return Err(io_unavailable("listing", &dir, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| io_unavailable("listing", &dir, e))?;
                let name = entry.file_name();
                // The store's own files (.lock, .tmp) start with a dot; keys never do.
                if name.to_string_lossy().starts_with('.') {
                    continue;
                }
                let path = entry.path();
                let is_dir = entry.file_type().map_err(|e| io_unavailable("listing", &path, e))?.is_dir();
                if is_dir {
                    pending.push(path);
                    continue;
                }
                let Ok(relative) = path.strip_prefix(&self.root) else {
                    continue;
                };
                let key = relative.to_string_lossy().into_owned();
                if key.starts_with(prefix) && check_key(&key).is_ok() {
                    keys.push(key);
                }
            }
        }
        keys.sort();
        Ok(keys)
    }

    /// The version is the content hash, so listing it reads every listed file: local reads, no
    /// lock, cheap for small records. A file removed since the walk is left out, as it would be
    /// from a later listing.
    fn list_versions_blocking(&self, prefix: &str) -> StoreResult<Vec<Listed>> {
        let mut listed = Vec::new();
        for key in self.list_blocking(prefix)? {
            if let Some(object) = Self::read(&self.root.join(&key))? {
                listed.push(Listed { key, version: object.version });
            }
        }
        Ok(listed)
    }
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    store: &FileStore,
    work: impl FnOnce(FileStore) -> StoreResult<T> + Send + 'static,
) -> StoreResult<T> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || work(store))
        .await
        .map_err(|e| StoreError::Unavailable { detail: format!("file store task failed: {e}") })?
}

impl Store for FileStore {
    fn describe(&self) -> String {
        format!("file://{}", self.root.display())
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Object>>> {
        Box::pin(async move {
            let path = self.path(key)?;
            blocking(self, move |store| {
                let found = FileStore::read(&path)?;
                store.check_root_if(found.is_none())?;
                Ok(found)
            })
            .await
        })
    }

    fn create<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<String>> {
        let key = key.to_owned();
        Box::pin(blocking(self, move |store| store.create_blocking(&key, &bytes)))
    }

    fn replace<'a>(&'a self, key: &'a str, bytes: Vec<u8>, version: &'a str) -> BoxFuture<'a, StoreResult<String>> {
        let (key, version) = (key.to_owned(), version.to_owned());
        Box::pin(blocking(self, move |store| store.replace_blocking(&key, &bytes, &version)))
    }

    fn delete<'a>(&'a self, key: &'a str, version: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        let (key, version) = (key.to_owned(), version.to_owned());
        Box::pin(blocking(self, move |store| store.delete_blocking(&key, &version)))
    }

    fn list_versions<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<Listed>>> {
        let prefix = prefix.to_owned();
        Box::pin(blocking(self, move |store| store.list_versions_blocking(&prefix)))
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        let prefix = prefix.to_owned();
        Box::pin(blocking(self, move |store| store.list_blocking(&prefix)))
    }
}
