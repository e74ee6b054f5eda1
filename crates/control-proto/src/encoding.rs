//! base64url (no padding) for keys, signatures and secrets: the one text encoding of binary
//! values on the wire.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub fn encode(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes base64url text of any length; the error says what was wrong.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).map_err(|e| format!("not base64url text ({e})"))
}

/// Decodes base64url text that must hold exactly `N` bytes; the error says what was wrong.
pub fn decode_exact<const N: usize>(text: &str) -> Result<[u8; N], String> {
    let bytes = decode(text)?;
    let len = bytes.len();
    bytes.try_into().map_err(|_| format!("holds {len} bytes, expected exactly {N}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_wrong_lengths() {
        let text = encode(&[7u8; 32]);
        assert_eq!(decode_exact::<32>(&text).unwrap(), [7u8; 32]);
        assert!(decode_exact::<64>(&text).unwrap_err().contains("32 bytes"));
        assert!(decode_exact::<32>("not base64!").unwrap_err().contains("base64url"));
    }
}
