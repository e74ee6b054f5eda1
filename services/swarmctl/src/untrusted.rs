//! Text from agents and hives on the operator's terminal.
//!
//! An agent's output and a hive's status are written by whoever holds that agent's or hive's
//! credential: escape sequences in them would act on the operator's terminal (OSC 52 sets the
//! clipboard, a cursor move or line erase hides what was printed, a title change or a device
//! control string talks to the terminal itself). [`TerminalFilter`] keeps what output needs to
//! read as it was printed (text, newlines, tabs, carriage returns, colours) and drops every other
//! control; [`cell`] shows a control in a table cell as its escape instead.

use std::borrow::Cow;

/// Where the filter is within an escape sequence; sequences may be split across events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// Plain text.
    #[default]
    Text,
    /// After ESC.
    Escape,
    /// Inside `ESC [`: parameters so far in [`TerminalFilter::csi`].
    Csi,
    /// Inside a string sequence (OSC, DCS, SOS, PM, APC), until BEL or ST.
    Command,
    /// After ESC inside a string sequence: `\` ends it (ST).
    CommandEscape,
}

/// The longest CSI sequence kept: longer ones are no colour a program writes.
const MAX_CSI: usize = 64;

/// Drops every control from an agent's terminal output except `\n`, `\r`, `\t`, backspace and
/// colour (SGR: `ESC [ digits;… m`).
#[derive(Debug, Default)]
pub struct TerminalFilter {
    state: State,
    csi: String,
}

impl TerminalFilter {
    /// The part of `text` safe to write, given what came before it.
    pub fn filter(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            self.state = match (self.state, c) {
                (State::Text, '\u{1b}') => State::Escape,
                // C1 controls: U+009B is a CSI, U+009D an OSC, U+0090 a DCS to a terminal reading
                // 8-bit controls; string ones are skipped to their end like their ESC forms.
                (State::Text, '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}') => State::Command,
                (State::Text, '\u{9b}') => {
                    self.csi.clear();
                    State::Csi
                }
                (State::Text, c) => {
                    if !c.is_control() || matches!(c, '\n' | '\r' | '\t' | '\u{8}') {
                        out.push(c);
                    }
                    State::Text
                }
                (State::Escape, '[') => {
                    self.csi.clear();
                    State::Csi
                }
                (State::Escape, ']' | 'P' | 'X' | '^' | '_') => State::Command,
                // Intermediate bytes (`ESC ( 0` picks a charset) come before the final one.
                (State::Escape, '\u{20}'..='\u{2f}') => State::Escape,
                // Any other escape (a charset, a keypad mode, a reset) is dropped whole.
                (State::Escape, _) => State::Text,
                (State::Csi, c @ ('0'..='9' | ';')) if self.csi.len() < MAX_CSI => {
                    self.csi.push(c);
                    State::Csi
                }
                (State::Csi, 'm') => {
                    out.push_str("\u{1b}[");
                    out.push_str(&self.csi);
                    out.push('m');
                    State::Text
                }
                // The final byte of any other CSI (cursor, erase, scroll, modes) ends it, dropped.
                (State::Csi, '\u{40}'..='\u{7e}') => State::Text,
                (State::Csi, _) => State::Csi,
                (State::Command, '\u{7}' | '\u{9c}') => State::Text,
                (State::Command, '\u{1b}') => State::CommandEscape,
                (State::Command, _) => State::Command,
                (State::CommandEscape, '\\') => State::Text,
                (State::CommandEscape, '\u{1b}') => State::CommandEscape,
                (State::CommandEscape, _) => State::Command,
            };
        }
        out
    }
}

/// A table cell from an agent or a hive: every control character shown as its escape (`\u{1b}`),
/// so a cell is one line of plain text whatever it holds.
pub fn cell(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn filtered(pieces: &[&str]) -> String {
        let mut filter = TerminalFilter::default();
        pieces.iter().map(|p| filter.filter(p)).collect()
    }

    #[test]
    fn text_and_colour_pass_as_printed() {
        let colour = "\u{1b}[1;31merror\u{1b}[0m: line\r\n\tnext\u{8}x";
        assert_eq!(filtered(&[colour]), colour);
    }

    #[test]
    fn terminal_commands_are_dropped_whole() {
        // OSC 52 writes the clipboard (ended by BEL, or by ST), a title change, a DCS.
        assert_eq!(filtered(&["a\u{1b}]52;c;ZXZpbA==\u{7}b"]), "ab");
        assert_eq!(filtered(&["a\u{1b}]0;owned\u{1b}\\b"]), "ab");
        assert_eq!(filtered(&["a\u{1b}P+q544e\u{1b}\\b"]), "ab");
        // Erasing the line, moving the cursor up, clearing the screen, a private mode, a bell.
        assert_eq!(filtered(&["kept\u{1b}[2K\u{1b}[1A\u{1b}[2J\u{1b}[?1049h\u{7}!"]), "kept!");
        // The 8-bit forms: a C1 CSI and a C1 OSC.
        assert_eq!(filtered(&["a\u{9b}2Kb\u{9d}52;c;eA==\u{9c}c"]), "abc");
        // Other escapes (charset, reset) go with the character that ends them.
        assert_eq!(filtered(&["a\u{1b}(0b\u{1b}cc"]), "abc");
    }

    #[test]
    fn a_sequence_split_across_events_is_still_dropped() {
        assert_eq!(filtered(&["a\u{1b}", "]52;c;", "ZXZpbA==", "\u{7}b"]), "ab");
        assert_eq!(filtered(&["x\u{1b}[3", "1mred\u{1b}[", "2K"]), "x\u{1b}[31mred");
    }

    #[test]
    fn a_cell_shows_controls_as_escapes() {
        assert_eq!(cell("plain"), "plain");
        assert_eq!(cell("a\u{1b}]52;c;eA==\u{7}\nb"), "a\\u{1b}]52;c;eA==\\u{7}\\nb");
    }

    proptest! {
        /// Whatever an agent prints, only SGR sequences reach the terminal with an ESC, and no
        /// other control but the four kept ones.
        #[test]
        fn nothing_but_colour_escapes_gets_through(pieces in proptest::collection::vec(any::<String>(), 0..6)) {
            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let out = filtered(&refs);
            let mut rest = out.as_str();
            while let Some(at) = rest.find('\u{1b}') {
                let sequence = &rest[at + 1..];
                prop_assert!(sequence.starts_with('['), "{out:?}");
                let end = sequence.find('m').expect("an SGR ends with m");
                prop_assert!(sequence[1..end].chars().all(|c| c.is_ascii_digit() || c == ';'), "{out:?}");
                rest = &sequence[end + 1..];
            }
            prop_assert!(out.chars().all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t' | '\u{8}' | '\u{1b}')), "{out:?}");
        }
    }
}
