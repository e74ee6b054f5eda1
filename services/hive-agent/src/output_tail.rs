//! The last bytes of a turn's output, kept while it runs for the record of the turn (its
//! history), which holds at most [`MAX_OUTPUT_BYTES`] of it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use hyperhive_hive_proto::turns::MAX_OUTPUT_BYTES;

/// The last [`MAX_OUTPUT_BYTES`] a turn wrote, stdout and stderr as they came. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct OutputTail(Arc<Mutex<Tail>>);

#[derive(Debug, Default)]
struct Tail {
    kept: VecDeque<u8>,
    dropped: u64,
}

impl OutputTail {
    /// Keeps `bytes`, dropping the oldest beyond [`MAX_OUTPUT_BYTES`].
    pub fn push(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().expect("the tail is never poisoned: pushing cannot panic");
        tail.kept.extend(bytes);
        let over = tail.kept.len().saturating_sub(MAX_OUTPUT_BYTES);
        if over > 0 {
            tail.kept.drain(..over);
            tail.dropped += over as u64;
        }
    }

    /// What is kept, as text (an invalid sequence, such as a character cut at the start, is
    /// replaced), and how many bytes came before it.
    pub fn text(&self) -> (String, u64) {
        let tail = self.0.lock().expect("the tail is never poisoned: pushing cannot panic");
        let (front, back) = tail.kept.as_slices();
        (String::from_utf8_lossy(&[front, back].concat()).into_owned(), tail.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes_and_counts_the_rest() {
        let tail = OutputTail::default();
        tail.push(b"start\n");
        assert_eq!(tail.text(), ("start\n".to_owned(), 0));
        tail.push(&vec![b'x'; MAX_OUTPUT_BYTES]);
        tail.push(b"end");
        let (text, dropped) = tail.text();
        assert_eq!(text.len(), MAX_OUTPUT_BYTES);
        assert!(text.ends_with("xend"), "{}", &text[text.len() - 10..]);
        assert_eq!(dropped, 6 + 3);
    }
}
