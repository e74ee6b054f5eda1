//! The store URL: `s3://bucket/prefix` or `file:///absolute/path`.

use std::path::PathBuf;

/// Where the store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A bucket and a key prefix (empty, or without leading/trailing `/`).
    S3 { bucket: String, prefix: String },
    /// A directory on this machine.
    File { path: PathBuf },
}

const FORMS: &str = "use s3://bucket/prefix or file:///absolute/path";

/// Why a store URL is not usable; every message shows both accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreUrlError {
    #[error("no store given: {FORMS}")]
    Missing,
    #[error("{url:?} is not a store URL ({reason}): {FORMS}")]
    Malformed { url: String, reason: String },
}

impl StoreUrl {
    pub fn parse(text: &str) -> Result<StoreUrl, StoreUrlError> {
        let malformed = |reason: &str| StoreUrlError::Malformed { url: text.to_owned(), reason: reason.to_owned() };
        if text.trim().is_empty() {
            return Err(StoreUrlError::Missing);
        }
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let bucket_ok = (3..=63).contains(&bucket.len())
                && bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
                && !bucket.starts_with(['-', '.'])
                && !bucket.ends_with(['-', '.']);
            if !bucket_ok {
                return Err(malformed("the bucket name must be 3 to 63 lowercase letters, digits, `-` or `.`"));
            }
            let prefix = prefix.trim_end_matches('/');
            if !prefix.is_empty() {
                crate::store::check_key(prefix).map_err(|e| malformed(&format!("prefix: {e}")))?;
            }
            return Ok(StoreUrl::S3 { bucket: bucket.to_owned(), prefix: prefix.to_owned() });
        }
        if let Some(path) = text.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(malformed("the path must be absolute (three slashes: file:///)"));
            }
            if path.len() == 1 {
                return Err(malformed("the path must name a directory, not /"));
            }
            return Ok(StoreUrl::File { path: PathBuf::from(path) });
        }
        Err(malformed("unknown scheme"))
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreUrl::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            StoreUrl::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            StoreUrl::File { path } => write!(f, "file://{}", path.display()),
        }
    }
}

impl std::str::FromStr for StoreUrl {
    type Err = StoreUrlError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        StoreUrl::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_parse_and_print_back() {
        for text in ["s3://my-agents/control", "s3://my-agents", "file:///var/lib/agents"] {
            assert_eq!(StoreUrl::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(
            StoreUrl::parse("s3://bkt/a/b/").unwrap(),
            StoreUrl::S3 { bucket: "bkt".into(), prefix: "a/b".into() }
        );
    }

    #[test]
    fn malformed_urls_name_the_problem_and_both_forms() {
        for (text, needle) in [
            ("", "no store given"),
            ("http://x", "unknown scheme"),
            ("s3://", "bucket name"),
            ("s3://Upper/x", "bucket name"),
            ("s3://ok-bucket/a//b", "prefix"),
            ("file://relative", "absolute"),
            ("file:///", "directory"),
        ] {
            let message = StoreUrl::parse(text).unwrap_err().to_string();
            assert!(message.contains(needle), "{text:?}: {message}");
            assert!(message.contains("s3://bucket/prefix") && message.contains("file:///"));
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_is_refused_without_panicking(text in "\\PC{0,80}") {
            let _ = StoreUrl::parse(&text);
            let _ = StoreUrl::parse(&format!("s3://{text}"));
            let _ = StoreUrl::parse(&format!("file://{text}"));
        }

        #[test]
        fn every_parsed_url_prints_back_to_itself(bucket in "[a-z0-9][a-z0-9-]{1,20}[a-z0-9]",
                                                 prefix in "([a-z0-9_-]{1,8}(/[a-z0-9_-]{1,8}){0,3})?") {
            let text = if prefix.is_empty() { format!("s3://{bucket}") } else { format!("s3://{bucket}/{prefix}") };
            let url = StoreUrl::parse(&text).unwrap();
            proptest::prop_assert_eq!(url.to_string(), text);
        }
    }
}
