//! Agent icons: a PNG an operator uploads (`PUT /api/agents/{name}/icon`), kept in the KV bucket
//! `agent-icons`, or else an SVG generated from the agent's name, the same for the same name.

use std::fmt::Write;

use async_nats::jetstream::kv;
use bytes::Bytes;
use hyperhive_nats_objects::AGENT_ICONS_BUCKET;
use sha2::{Digest, Sha256};

/// The uploaded icons.
#[derive(Debug, Clone)]
pub struct IconStore {
    kv: kv::Store,
}

impl IconStore {
    /// Over the `agent-icons` bucket.
    pub fn new(kv: kv::Store) -> Self {
        Self { kv }
    }

    /// The uploaded icon of `agent`, if any.
    ///
    /// # Errors
    /// NATS failed.
    pub async fn get(&self, agent: &str) -> Result<Option<Bytes>, String> {
        self.kv.get(agent).await.map_err(|e| format!("reading {AGENT_ICONS_BUCKET}: {e}"))
    }

    /// Stores `png` (checked already) as `agent`'s icon.
    ///
    /// # Errors
    /// NATS failed.
    pub async fn put(&self, agent: &str, png: Bytes) -> Result<(), String> {
        self.kv.put(agent, png).await.map(drop).map_err(|e| format!("writing {AGENT_ICONS_BUCKET}: {e}"))
    }

    /// Removes `agent`'s icon; `false` when it had none.
    ///
    /// # Errors
    /// NATS failed.
    pub async fn remove(&self, agent: &str) -> Result<bool, String> {
        if self.get(agent).await?.is_none() {
            return Ok(false);
        }
        self.kv.delete(agent).await.map_err(|e| format!("writing {AGENT_ICONS_BUCKET}: {e}"))?;
        Ok(true)
    }
}

/// The largest icon accepted.
pub const MAX_ICON_BYTES: usize = 256 * 1024;
/// The largest width or height accepted.
pub const MAX_SIDE: u32 = 1024;

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
const IEND: &[u8] = b"\x00\x00\x00\x00IEND\xaeB`\x82";

/// Checks that `bytes` is a PNG of a sensible size: the signature, an `IHDR` chunk first with a
/// width and height of 1 to [`MAX_SIDE`], and the `IEND` chunk last.
///
/// # Errors
/// What is wrong with it.
pub fn check_png(bytes: &[u8]) -> Result<(u32, u32), String> {
    if bytes.len() > MAX_ICON_BYTES {
        return Err(format!("{} bytes; an icon is at most {MAX_ICON_BYTES}", bytes.len()));
    }
    if !bytes.starts_with(PNG_SIGNATURE) {
        return Err("not a PNG (no PNG signature); upload a PNG image".into());
    }
    let header = &bytes[PNG_SIGNATURE.len()..];
    if header.len() < 8 + 13 || &header[..8] != b"\x00\x00\x00\x0dIHDR" {
        return Err("a damaged PNG: its first chunk is not a 13-byte IHDR".into());
    }
    let side = |at: usize| u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
    let (width, height) = (side(8), side(12));
    if !(1..=MAX_SIDE).contains(&width) || !(1..=MAX_SIDE).contains(&height) {
        return Err(format!("{width}x{height} pixels; an icon is 1 to {MAX_SIDE} pixels on each side"));
    }
    if !bytes.ends_with(IEND) {
        return Err("a truncated PNG: it does not end with the IEND chunk".into());
    }
    Ok((width, height))
}

/// An entity tag for `bytes`: the start of their SHA-256, quoted.
pub fn etag(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut tag = String::from("\"");
    for byte in &digest[..12] {
        let _ = write!(tag, "{byte:02x}");
    }
    tag.push('"');
    tag
}

/// A 5x5 mirrored pattern in a colour picked from the name's hash, with the name's first letter
/// below it: distinct at a glance, the same on every controller.
pub fn generated_svg(name: &str) -> String {
    let digest = Sha256::digest(name.as_bytes());
    let hue = u16::from_be_bytes([digest[0], digest[1]]) % 360;
    let mut cells = String::new();
    for row in 0..5u8 {
        for col in 0..3u8 {
            let bit = digest[2 + usize::from(row)] >> col & 1;
            if bit == 1 {
                for x in [col, 4 - col] {
                    let _ = write!(cells, r#"<rect x="{}" y="{}" width="10" height="10"/>"#, 5 + 10 * x, 5 + 10 * row);
                }
            }
        }
    }
    let initial: String = name.chars().next().map(|c| c.to_uppercase().collect()).unwrap_or_default();
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 60 60" width="60" height="60" role="img" aria-label="{initial}"><rect width="60" height="60" rx="8" fill="hsl({hue},45%,92%)"/><g fill="hsl({hue},55%,42%)">{cells}</g></svg>"##
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1x1 PNG.
    pub(crate) fn tiny_png() -> Vec<u8> {
        let mut png = PNG_SIGNATURE.to_vec();
        png.extend(b"\x00\x00\x00\x0dIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89");
        png.extend(b"\x00\x00\x00\x0dIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N");
        png.extend(IEND);
        png
    }

    #[test]
    fn only_a_whole_png_of_a_sensible_size_is_an_icon() {
        assert_eq!(check_png(&tiny_png()), Ok((1, 1)));
        let png = tiny_png();
        assert!(check_png(b"GIF89a....").unwrap_err().contains("not a PNG"));
        assert!(check_png(&png[..png.len() - 4]).unwrap_err().contains("truncated"));
        let mut huge = png.clone();
        huge[16..20].copy_from_slice(&5000u32.to_be_bytes());
        assert!(check_png(&huge).unwrap_err().contains("5000x1"));
        assert!(check_png(&vec![0; MAX_ICON_BYTES + 1]).unwrap_err().contains("at most"));
    }

    #[test]
    fn the_generated_icon_depends_on_the_name_only() {
        assert_eq!(generated_svg("bee"), generated_svg("bee"));
        assert_ne!(generated_svg("bee"), generated_svg("wasp"));
        assert!(generated_svg("bee").starts_with("<svg") && generated_svg("bee").contains("aria-label=\"B\""));
        assert_ne!(etag(b"a"), etag(b"b"));
    }
}
