//! Turns the byte pieces a model emits into text pieces that are valid UTF-8: a character
//! split across two tokens is held back until its last byte arrives.

/// Bytes received and not yet sent as text.
#[derive(Debug, Default)]
pub struct Utf8Pieces {
    held: Vec<u8>,
}

impl Utf8Pieces {
    /// Adds `bytes` and returns the text that is complete so far (possibly empty). Bytes that
    /// can never be valid UTF-8 come out as U+FFFD, so nothing is held forever.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.held.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.held) {
                Ok(text) => {
                    out.push_str(text);
                    self.held.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // Safe: from_utf8 said these bytes are valid.
                    out.push_str(std::str::from_utf8(&self.held[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: wait for the rest.
                        None => {
                            self.held.drain(..valid);
                            return out;
                        }
                        // Bytes that no continuation can repair.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.held.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// What is left at the end of a reply (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.held).into_owned();
        self.held.clear();
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_across_pieces_waits_for_its_last_byte() {
        let mut p = Utf8Pieces::default();
        let bytes = "a€b".as_bytes(); // € is three bytes
        assert_eq!(p.push(&bytes[..2]), "a");
        assert_eq!(p.push(&bytes[2..3]), "");
        assert_eq!(p.push(&bytes[3..]), "€b");
        assert_eq!(p.finish(), "");
    }

    #[test]
    fn every_split_of_a_text_gives_the_text_back() {
        let text = "Grüße 👋🏽 from 東京, ok";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            for cut2 in cut..=bytes.len() {
                let mut p = Utf8Pieces::default();
                let mut out = p.push(&bytes[..cut]);
                out += &p.push(&bytes[cut..cut2]);
                out += &p.push(&bytes[cut2..]);
                out += &p.finish();
                assert_eq!(out, text, "cuts at {cut} and {cut2}");
            }
        }
    }

    #[test]
    fn invalid_bytes_become_replacement_characters_and_are_not_held() {
        let mut p = Utf8Pieces::default();
        assert_eq!(p.push(b"x\xffy"), "x\u{fffd}y");
        assert_eq!(p.push(b"\xe2\x82"), "");
        assert_eq!(p.finish(), "\u{fffd}");
    }
}
