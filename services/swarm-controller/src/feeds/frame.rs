//! One server-sent event of a relay route.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hyperhive_hive_proto::feed::TurnHeader;
use serde_json::json;

/// Which relay of an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeedKind {
    /// `term.<agent>`: the turn command's output.
    Terminal,
    /// `turn.<agent>`: the turn header.
    Turn,
}

impl FeedKind {
    /// The subject in `RELAY`.
    pub fn subject(self, agent: &str) -> String {
        match self {
            FeedKind::Terminal => format!("term.{agent}"),
            FeedKind::Turn => format!("turn.{agent}"),
        }
    }

    /// The event name.
    pub fn event(self) -> &'static str {
        match self {
            FeedKind::Terminal => "term",
            FeedKind::Turn => "turn",
        }
    }
}

/// What a watcher is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A message of the stream: its sequence (the event id) and its data (JSON).
    Message {
        /// The stream sequence.
        seq: u64,
        /// `term`, `turn`.
        event: &'static str,
        /// The event's data.
        data: String,
    },
    /// The history asked for starts later than the event after `Last-Event-ID`: those
    /// messages were dropped from the stream (it keeps a bounded history).
    Gap {
        /// The first sequence asked for.
        from: u64,
        /// The last one missing.
        to: u64,
    },
}

impl Frame {
    /// The frame of message `seq` of `kind`, or `None` for a turn header that is not one (an
    /// agent publishes on its own subject whatever it likes; watchers get only headers).
    pub fn message(kind: FeedKind, seq: u64, payload: &[u8]) -> Option<Frame> {
        let data = match kind {
            FeedKind::Terminal => match std::str::from_utf8(payload) {
                Ok(text) => json!({ "text": text }).to_string(),
                Err(_) => json!({ "bytes": STANDARD.encode(payload) }).to_string(),
            },
            FeedKind::Turn => {
                let header: TurnHeader = serde_json::from_slice(payload).ok()?;
                serde_json::to_string(&header).expect("a header serializes")
            }
        };
        Some(Frame::Message { seq, event: kind.event(), data })
    }

    /// As a warp server-sent event.
    pub fn into_event(self) -> warp::sse::Event {
        match self {
            Frame::Message { seq, event, data } => {
                warp::sse::Event::default().id(seq.to_string()).event(event).data(data)
            }
            Frame::Gap { from, to } => {
                warp::sse::Event::default().event("gap").data(json!({ "from": from, "to": to }).to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_bytes_are_kept_losslessly() {
        let Some(Frame::Message { data, .. }) = Frame::message(FeedKind::Terminal, 7, "héllo\n".as_bytes()) else {
            panic!()
        };
        assert_eq!(data, r#"{"text":"héllo\n"}"#);
        let Some(Frame::Message { data, .. }) = Frame::message(FeedKind::Terminal, 8, &[0xff, 0x00, b'a']) else {
            panic!()
        };
        let value: serde_json::Value = serde_json::from_str(&data).unwrap();
        assert_eq!(STANDARD.decode(value["bytes"].as_str().unwrap()).unwrap(), [0xff, 0x00, b'a']);
    }

    #[test]
    fn a_turn_message_that_is_not_a_header_is_not_relayed() {
        assert_eq!(Frame::message(FeedKind::Turn, 1, b"data: injected\n\nid: 99"), None);
        let header = br#"{"state":"working","todo_id":"t","source":"s","started_at":"2026-11-30T10:00:00Z","at":"2026-11-30T10:00:00Z"}"#;
        assert!(Frame::message(FeedKind::Turn, 2, header).is_some());
    }

    #[test]
    fn an_event_has_the_sequence_as_its_id() {
        let event = Frame::message(FeedKind::Terminal, 42, b"x").unwrap().into_event().to_string();
        assert!(event.contains("id:42\n") && event.contains("event:term\n"), "{event}");
    }
}
