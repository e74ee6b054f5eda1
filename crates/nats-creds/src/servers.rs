//! The servers a swarm member connects to: one NATS URL, or a cluster's nodes as a
//! comma-separated list (the client picks one and fails over to the others).

/// The schemes a NATS client speaks.
const SCHEMES: [&str; 4] = ["nats://", "tls://", "ws://", "wss://"];

/// Checks `text` as one NATS server URL or a comma-separated list of them, and returns the list
/// as the client takes it (no spaces around the commas).
///
/// # Errors
/// Which entry is not a NATS URL, and how to write one.
pub fn parse_server_urls(text: &str) -> Result<String, String> {
    let entries: Vec<&str> = text.split(',').map(str::trim).collect();
    for entry in &entries {
        let valid = SCHEMES.iter().any(|scheme| entry.strip_prefix(scheme).is_some_and(|rest| !rest.is_empty()))
            && !entry.contains(char::is_whitespace);
        if !valid {
            return Err(format!(
                "{entry:?} is not a NATS URL; write nats://HOST:PORT (or tls://, ws://, wss://), or a cluster's \
                 nodes separated by commas, e.g. nats://n1:4222,nats://n2:4222,nats://n3:4222"
            ));
        }
    }
    Ok(entries.join(","))
}

/// The servers of a list [`parse_server_urls`] accepted, one per node, as a client connects to
/// them (async-nats takes a list, not one comma-separated string).
pub fn server_list(urls: &str) -> Vec<String> {
    urls.split(',').map(str::trim).filter(|url| !url.is_empty()).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_url_or_a_list() {
        assert_eq!(parse_server_urls("nats://127.0.0.1:4222").unwrap(), "nats://127.0.0.1:4222");
        assert_eq!(parse_server_urls("nats://a:1, tls://b:2 ,nats://c:3").unwrap(), "nats://a:1,tls://b:2,nats://c:3");
        assert_eq!(server_list("nats://a:1,tls://b:2"), ["nats://a:1", "tls://b:2"]);
        assert_eq!(server_list("nats://a:1"), ["nats://a:1"]);
        for bad in
            ["", "localhost:4222", "http://x", "nats://", "nats://a:1,", "nats://a:1,,nats://b:2", "nats://a b:1"]
        {
            let err = parse_server_urls(bad).unwrap_err();
            assert!(err.contains("is not a NATS URL") && err.contains("separated by commas"), "{bad:?}: {err}");
        }
    }
}
