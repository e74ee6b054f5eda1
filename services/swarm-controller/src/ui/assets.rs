//! The swarm UI's files, embedded in the binary at build time and served at `/`: nothing to
//! install beside the controller, nothing fetched from elsewhere (the page's policy forbids it).

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Its `Content-Type`.
    pub media_type: &'static str,
    /// Its bytes.
    pub body: &'static str,
}

const INDEX: Asset = Asset { media_type: "text/html; charset=utf-8", body: include_str!("../../ui/index.html") };
const SCRIPT: Asset = Asset { media_type: "text/javascript; charset=utf-8", body: include_str!("../../ui/app.js") };
const STYLE: Asset = Asset { media_type: "text/css; charset=utf-8", body: include_str!("../../ui/app.css") };
const ICON: Asset = Asset { media_type: "image/svg+xml", body: include_str!("../../ui/favicon.svg") };

/// The page's content security policy: its own files and its own API only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The policy of an agent's icon: an image, never a document. An SVG opened on its own runs in a
/// sandbox with no script, style sheet or fetch of its own; an uploaded PNG is checked to be one.
pub const ICON_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; sandbox";

/// The file served at `path` (`/`, `/index.html`, `/app.js`, `/app.css`, the favicon).
pub fn asset(path: &str) -> Option<Asset> {
    match path {
        "/" | "/index.html" => Some(INDEX),
        "/app.js" => Some(SCRIPT),
        "/app.css" => Some(STYLE),
        "/favicon.svg" | "/favicon.ico" => Some(ICON),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_files() {
        let index = asset("/").unwrap().body;
        assert!(index.contains(r#"src="app.js""#) && index.contains(r#"href="app.css""#));
        for file in ["/", "/app.js", "/app.css"] {
            // The SVG namespace (the job graph's drawing) is a name, never fetched.
            let body = asset(file).unwrap().body.replace("http://www.w3.org/2000/svg", "");
            assert!(!body.contains("http://") && !body.contains("https://"), "{file} refers to another origin");
        }
        let icon = asset("/favicon.svg").unwrap().body;
        assert!(
            !icon.replace("http://www.w3.org/2000/svg", "").contains("http"),
            "the favicon refers to another origin"
        );
        assert!(asset("/../Cargo.toml").is_none());
    }
}
