//! The UI's quick links: a short list of titled URLs the operator configures
//! (`SWARM_QUICK_LINKS_FILE`, a JSON array), served at `GET /api/quick-links`.

use serde::{Deserialize, Serialize};

/// The most links a file may list.
pub const MAX_LINKS: usize = 100;

/// One link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickLink {
    /// What the UI shows (1 to 100 characters).
    pub title: String,
    /// Where it goes: an `http://` or `https://` URL.
    pub url: String,
    /// A line under the title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Parses and checks a quick links file.
///
/// # Errors
/// What is wrong, naming the link by its position.
pub fn parse(text: &str) -> Result<Vec<QuickLink>, String> {
    let links: Vec<QuickLink> = serde_json::from_str(text)
        .map_err(|e| format!("not a JSON array of {{\"title\", \"url\", \"description\"?}}: {e}"))?;
    if links.len() > MAX_LINKS {
        return Err(format!("{} links; at most {MAX_LINKS}", links.len()));
    }
    for (i, link) in links.iter().enumerate() {
        let n = i + 1;
        if link.title.trim().is_empty() || link.title.chars().count() > 100 {
            return Err(format!("link {n}: its title must have 1 to 100 characters"));
        }
        let url = url::Url::parse(&link.url)
            .map_err(|e| format!("link {n} ({}): {:?} is not a URL: {e}", link.title, link.url))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("link {n} ({}): only http:// and https:// URLs, not {:?}", link.title, link.url));
        }
        if link.description.as_ref().is_some_and(|d| d.chars().count() > 300) {
            return Err(format!("link {n} ({}): its description is longer than 300 characters", link.title));
        }
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_checked_one_by_one() {
        let ok = r#"[{"title": "Forge", "url": "https://forge.example/swarm"}, {"title": "Docs", "url": "http://docs", "description": "how it works"}]"#;
        assert_eq!(parse(ok).unwrap().len(), 2);
        for (bad, needle) in [
            (r#"{"title": "x"}"#, "JSON array"),
            (r#"[{"title": "", "url": "https://a"}]"#, "link 1: its title"),
            (
                r#"[{"title": "a", "url": "https://a"}, {"title": "b", "url": "javascript:alert(1)"}]"#,
                "link 2 (b): only http",
            ),
            (r#"[{"title": "a", "url": "not a url"}]"#, "is not a URL"),
            (r#"[{"title": "a", "url": "https://a", "icon": "x"}]"#, "unknown field"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }
}
