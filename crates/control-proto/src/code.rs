//! The pairing code: one copy-pasteable token (no spaces) that tells a new device where the
//! control plane is, how to recognise it, and the one-time secret that admits it.
//!
//! # Format (version 1)
//! `hhcode1.` followed by base64url (no padding) of a compact JSON object:
//! `{"url": "...", "key": "<control public key, base64url>", "pin": "<optional>",
//!   "kind": "client"|"host", "secret": "<32 bytes, base64url>"}`.
//! The version lives in the prefix so a future format can change the payload entirely; a token
//! of an unknown version is refused by name, never misread.

use crate::DeviceKind;
use crate::encoding;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// The version this build writes and reads.
pub const CODE_VERSION: u32 = 1;
const PREFIX: &str = "hhcode";
/// 256 bits: well above the 128 a bearer secret with no PAKE behind it needs.
pub const SECRET_LEN: usize = 32;
/// Codes are a few hundred bytes; anything far larger is not a code.
const MAX_TOKEN_LEN: usize = 4096;

/// What a pairing code carries.
#[derive(Clone, PartialEq, Eq)]
pub struct Code {
    pub control_url: String,
    pub control_public_key: [u8; 32],
    pub pin: Option<String>,
    pub kind: DeviceKind,
    pub secret: [u8; SECRET_LEN],
}

impl std::fmt::Debug for Code {
    // The secret is a bearer credential: never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Code")
            .field("control_url", &self.control_url)
            .field("control_public_key", &encoding::encode(&self.control_public_key))
            .field("pin", &self.pin)
            .field("kind", &self.kind)
            .field("secret", &"<redacted>")
            .finish()
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Payload {
    url: String,
    key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pin: Option<String>,
    kind: DeviceKind,
    secret: String,
}

/// Why a token is not a usable code. Messages never contain the token itself.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodeError {
    #[error("the code is empty: paste the whole line `agents-control code` printed")]
    Empty,
    #[error("the code is {0} characters long, far more than a code: paste only the code")]
    TooLong(usize),
    #[error("this is not a hyperhive code: it must start with `{PREFIX}{CODE_VERSION}.`")]
    NotACode,
    #[error(
        "the code is version {0}, this build understands version {CODE_VERSION}: make a new code or update this program"
    )]
    UnsupportedVersion(String),
    #[error("the code is damaged ({0}): copy the whole line again")]
    Damaged(String),
}

impl Code {
    /// The token form of this code.
    pub fn to_token(&self) -> String {
        let payload = Payload {
            url: self.control_url.clone(),
            key: encoding::encode(&self.control_public_key),
            pin: self.pin.clone(),
            kind: self.kind,
            secret: encoding::encode(&self.secret),
        };
        let json = serde_json::to_vec(&payload).expect("a code payload always serialises");
        format!("{PREFIX}{CODE_VERSION}.{}", URL_SAFE_NO_PAD.encode(json))
    }

    /// Reads a token; surrounding whitespace (a pasted newline) is ignored.
    pub fn parse(token: &str) -> Result<Code, CodeError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(CodeError::Empty);
        }
        if token.len() > MAX_TOKEN_LEN {
            return Err(CodeError::TooLong(token.len()));
        }
        let rest = token.strip_prefix(PREFIX).ok_or(CodeError::NotACode)?;
        let (version, body) = rest.split_once('.').ok_or(CodeError::NotACode)?;
        if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
            return Err(CodeError::NotACode);
        }
        if version != CODE_VERSION.to_string() {
            return Err(CodeError::UnsupportedVersion(version.to_owned()));
        }
        let json =
            URL_SAFE_NO_PAD.decode(body).map_err(|_| CodeError::Damaged("not base64url after the prefix".into()))?;
        let payload: Payload =
            serde_json::from_slice(&json).map_err(|e| CodeError::Damaged(format!("payload: {e}")))?;
        if payload.url.is_empty() {
            return Err(CodeError::Damaged("no control URL".into()));
        }
        let control_public_key =
            encoding::decode_exact::<32>(&payload.key).map_err(|e| CodeError::Damaged(format!("control key {e}")))?;
        let secret = encoding::decode_exact::<SECRET_LEN>(&payload.secret)
            .map_err(|e| CodeError::Damaged(format!("secret {e}")))?;
        Ok(Code { control_url: payload.url, control_public_key, pin: payload.pin, kind: payload.kind, secret })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Code {
        Code {
            control_url: "https://agents.example.com".into(),
            control_public_key: [1; 32],
            pin: Some("pinpinpin".into()),
            kind: DeviceKind::Host,
            secret: [9; 32],
        }
    }

    #[test]
    fn a_token_is_one_word_and_round_trips() {
        let token = sample().to_token();
        assert!(token.starts_with("hhcode1."));
        assert!(!token.chars().any(char::is_whitespace));
        assert_eq!(Code::parse(&format!("  {token}\n")).unwrap(), sample());
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let shown = format!("{:?}", sample());
        assert!(!shown.contains(&encoding::encode(&[9; 32])));
        assert!(shown.contains("redacted"));
    }

    #[test]
    fn bad_tokens_are_refused_by_name() {
        assert_eq!(Code::parse(" "), Err(CodeError::Empty));
        assert_eq!(Code::parse("hello"), Err(CodeError::NotACode));
        assert_eq!(Code::parse("hhcodex.abc"), Err(CodeError::NotACode));
        assert_eq!(Code::parse("hhcode2.abc"), Err(CodeError::UnsupportedVersion("2".into())));
        assert!(matches!(Code::parse("hhcode1.!!"), Err(CodeError::Damaged(_))));
        let long = "a".repeat(5000);
        assert_eq!(Code::parse(&long), Err(CodeError::TooLong(5000)));
        // A short secret is named.
        let json = r#"{"url":"u","key":"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE","kind":"client","secret":"AAAA"}"#;
        let token = format!("hhcode1.{}", URL_SAFE_NO_PAD.encode(json));
        let err = Code::parse(&token).unwrap_err().to_string();
        assert!(err.contains("secret") && err.contains("3 bytes"), "{err}");
    }

    proptest! {
        #[test]
        fn any_code_round_trips(url in "[a-z:/.0-9]{1,60}", key: [u8; 32], secret: [u8; 32],
                                pin in proptest::option::of("[A-Za-z0-9_-]{43}"), host: bool) {
            let code = Code { control_url: url, control_public_key: key, pin, secret,
                              kind: if host { DeviceKind::Host } else { DeviceKind::Client } };
            prop_assert_eq!(Code::parse(&code.to_token()).unwrap(), code);
        }

        /// Any text in the URL and the pin (the token is base64url, so nothing in them can
        /// break it), up to the token length cap.
        #[test]
        fn codes_with_any_text_round_trip(url in "\\PC{1,200}", pin in proptest::option::of("\\PC{0,80}"),
                                          key: [u8; 32], secret: [u8; 32]) {
            let code = Code { control_url: url, control_public_key: key, pin, secret, kind: DeviceKind::Client };
            let token = code.to_token();
            prop_assert!(!token.chars().any(char::is_whitespace));
            prop_assert_eq!(Code::parse(&token).unwrap(), code);
        }

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
            let _ = Code::parse(&text);
            let _ = Code::parse(&format!("hhcode1.{text}"));
        }

        /// Any bytes after the prefix (lossily made text, so invalid UTF-8 turns into
        /// replacement characters), including base64url of arbitrary bytes, which reaches the
        /// JSON decoder, and of arbitrary JSON objects, which reach the field checks.
        #[test]
        fn arbitrary_payloads_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400),
                                          json in arbitrary_json()) {
            let _ = Code::parse(&String::from_utf8_lossy(&bytes));
            let _ = Code::parse(&format!("hhcode1.{}", URL_SAFE_NO_PAD.encode(&bytes)));
            let _ = Code::parse(&format!("hhcode1.{}", URL_SAFE_NO_PAD.encode(json.to_string())));
        }

        /// A valid token with characters replaced, inserted, removed or the token cut (half the
        /// new characters from the base64url alphabet, so edits get past base64 to the JSON and
        /// field checks): parsing never panics, and anything it accepts is a whole code.
        #[test]
        fn mutated_tokens_never_panic(
            key: [u8; 32], secret: [u8; 32], host: bool,
            edits in proptest::collection::vec((any::<proptest::sample::Index>(), 0u8..4, token_char()), 1..8),
        ) {
            let code = Code { control_url: "https://agents.example.com".into(), control_public_key: key,
                              pin: None, secret, kind: if host { DeviceKind::Host } else { DeviceKind::Client } };
            let mut chars: Vec<char> = code.to_token().chars().collect();
            for (at, edit, with) in edits {
                let i = at.index(chars.len().max(1));
                match edit {
                    0 if i < chars.len() => chars[i] = with,
                    1 => chars.insert(i.min(chars.len()), with),
                    2 if i < chars.len() => { chars.remove(i); }
                    _ => chars.truncate(i),
                }
            }
            let mutated: String = chars.into_iter().collect();
            if let Ok(parsed) = Code::parse(&mutated) {
                prop_assert_eq!(Code::parse(&parsed.to_token()), Ok(parsed));
            }
        }
    }

    fn token_char() -> impl Strategy<Value = char> {
        prop_oneof![
            any::<char>(),
            proptest::char::ranges(vec!['a'..='z', 'A'..='Z', '0'..='9', '-'..='-', '_'..='_'].into())
        ]
    }

    /// JSON values a few levels deep, with the payload's field names likely.
    fn arbitrary_json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "\\PC{0,50}".prop_map(serde_json::Value::from),
            "[A-Za-z0-9_-]{43}".prop_map(serde_json::Value::from),
        ];
        let value = leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::btree_map(field_name(), inner, 0..6)
                    .prop_map(|fields| serde_json::Value::Object(fields.into_iter().collect())),
            ]
        });
        proptest::collection::btree_map(field_name(), value, 0..7)
            .prop_map(|fields| serde_json::Value::Object(fields.into_iter().collect()))
    }

    fn field_name() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => proptest::sample::select(vec!["url", "key", "pin", "kind", "secret"]).prop_map(str::to_owned),
            1 => "[a-z]{1,6}",
        ]
    }
}
