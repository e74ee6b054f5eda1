//! Reading server-sent events as they arrive, in pieces cut anywhere.

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `id:` field, when it is a number.
    pub id: Option<u64>,
    /// The `event:` field (`message` when absent).
    pub event: String,
    /// The `data:` lines, joined with newlines.
    pub data: String,
}

/// The parser's state between pieces.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    id: Option<u64>,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    /// Feeds `bytes` and returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in bytes {
            if byte != b'\n' {
                self.line.push(byte);
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    let event = self.event.take().unwrap_or_else(|| "message".into());
                    events.push(SseEvent { id: self.id, event, data });
                }
                self.event = None;
                continue;
            }
            let line = String::from_utf8_lossy(&line);
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((&line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "id" => self.id = value.parse().ok(),
                "event" => self.event = Some(value.to_owned()),
                "data" => match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.data = Some(value.to_owned()),
                },
                _ => {}
            }
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TEXT: &str = ": keepalive\n\nid: 7\nevent: term\ndata: {\"text\": \"a\"}\n\nid: 9\r\nevent: gap\r\ndata: x\r\ndata: y\r\n\r\n";

    fn expected() -> Vec<SseEvent> {
        vec![
            SseEvent { id: Some(7), event: "term".into(), data: "{\"text\": \"a\"}".into() },
            SseEvent { id: Some(9), event: "gap".into(), data: "x\ny".into() },
        ]
    }

    #[test]
    fn events_comments_and_line_endings() {
        assert_eq!(SseParser::default().push(TEXT.as_bytes()), expected());
    }

    proptest! {
        #[test]
        fn pieces_cut_anywhere_give_the_same_events(cuts in prop::collection::vec(0usize..TEXT.len(), 0..8)) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            let mut parser = SseParser::default();
            let mut events = Vec::new();
            let mut at = 0;
            for cut in cuts.into_iter().chain([TEXT.len()]) {
                events.extend(parser.push(&TEXT.as_bytes()[at..cut]));
                at = cut;
            }
            prop_assert_eq!(events, expected());
        }
    }
}
