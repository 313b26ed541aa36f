//! NETCONF message framing (RFC 6242): `]]>]]>` end-of-message framing for
//! base:1.0 and the hello exchange, chunked framing once both peers announced
//! base:1.1. A decoder is fed bytes as they arrive and yields whole messages;
//! switching its mode keeps the bytes already buffered (the peer may send its
//! first chunked message in the same packet as its hello).

use thiserror::Error;

/// The base:1.0 end-of-message marker.
pub const EOM: &str = "]]>]]>";
/// Largest message a [`Decoder::new`] accepts (the driver's bound on a
/// device's replies: generous, a full datastore dump fits).
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    EndOfMessage,
    Chunked,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FramingError {
    #[error("bad chunk header {0:?}")]
    BadChunk(String),
    /// The message being received exceeds the decoder's limit (bytes).
    #[error("message larger than {0} bytes")]
    TooLarge(usize),
    #[error("message is not UTF-8")]
    NotUtf8,
}

/// Frame one message for sending.
pub fn encode(msg: &str, framing: Framing) -> Vec<u8> {
    match framing {
        Framing::EndOfMessage => format!("{msg}{EOM}").into_bytes(),
        Framing::Chunked => format!("\n#{}\n{msg}\n##\n", msg.len()).into_bytes(),
    }
}

/// Incremental decoder with a message size limit, enforced while reading:
/// bytes that would take the buffered message past the limit are not
/// stored, and the next [`Decoder::next_message`] reports
/// [`FramingError::TooLarge`]. Memory stays below the limit plus one
/// pushed packet, whatever the peer sends.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    framing: Framing,
    /// Chunks of the message being assembled (chunked mode).
    partial: Vec<u8>,
    /// How far `buf` was searched for the end-of-message marker.
    scanned: usize,
    limit: usize,
    overflow: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder in end-of-message mode (what the hello uses), limited to
    /// [`MAX_MESSAGE`].
    pub fn new() -> Self {
        Self::with_limit(MAX_MESSAGE)
    }

    /// A decoder accepting messages of at most `limit` bytes (framing
    /// excluded).
    pub fn with_limit(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            framing: Framing::EndOfMessage,
            partial: Vec::new(),
            scanned: 0,
            limit,
            overflow: false,
        }
    }

    pub fn set_framing(&mut self, f: Framing) {
        self.framing = f;
    }

    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// The message size limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Buffer received bytes. Beyond the limit (plus room for one frame
    /// trailer or chunk header) nothing more is stored.
    pub fn push(&mut self, bytes: &[u8]) {
        // Room for a message of `limit` bytes plus its framing overhead.
        let cap = self.limit.saturating_add(64);
        if self.buf.len() + self.partial.len() + bytes.len() > cap {
            // Keep what fits: a complete message may still end in it.
            let room = cap.saturating_sub(self.buf.len() + self.partial.len());
            self.buf.extend_from_slice(&bytes[..room.min(bytes.len())]);
            self.overflow = true;
        } else {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The next complete message, if one is buffered.
    pub fn next_message(&mut self) -> Result<Option<String>, FramingError> {
        match self.framing {
            Framing::EndOfMessage => {
                let from = self.scanned.saturating_sub(EOM.len());
                let Some(at) = find(&self.buf[from..], EOM.as_bytes()).map(|i| i + from) else {
                    self.scanned = self.buf.len();
                    if self.overflow || self.buf.len() > self.limit {
                        return Err(FramingError::TooLarge(self.limit));
                    }
                    return Ok(None);
                };
                self.scanned = 0;
                if at > self.limit {
                    return Err(FramingError::TooLarge(self.limit));
                }
                let msg: Vec<u8> = self.buf.drain(..at + EOM.len()).take(at).collect();
                String::from_utf8(msg)
                    .map(Some)
                    .map_err(|_| FramingError::NotUtf8)
            }
            Framing::Chunked => loop {
                // Each step needs a full header line "\n#<len>\n" or "\n##\n".
                let Some(nl) = self.buf.iter().skip(1).take(32).position(|b| *b == b'\n') else {
                    if self.buf.len() > 32 {
                        let h = String::from_utf8_lossy(&self.buf[..32]).into_owned();
                        return Err(FramingError::BadChunk(h));
                    }
                    return self.more();
                };
                let header = &self.buf[..nl + 2];
                if !header.starts_with(b"\n#") {
                    let h = String::from_utf8_lossy(header).into_owned();
                    return Err(FramingError::BadChunk(h));
                }
                let body = &header[2..header.len() - 1];
                if body == b"#" {
                    self.buf.drain(..nl + 2);
                    let msg = std::mem::take(&mut self.partial);
                    return String::from_utf8(msg)
                        .map(Some)
                        .map_err(|_| FramingError::NotUtf8);
                }
                // RFC 6242 4.2: chunk-size is 1..4294967295 digits.
                let len: usize = std::str::from_utf8(body)
                    .ok()
                    .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|s| s.parse::<u64>().ok())
                    .filter(|n| (1..=u64::from(u32::MAX)).contains(n))
                    .ok_or_else(|| {
                        FramingError::BadChunk(String::from_utf8_lossy(header).into_owned())
                    })?
                    .try_into()
                    .unwrap_or(usize::MAX);
                if len > self.limit.saturating_sub(self.partial.len()) {
                    return Err(FramingError::TooLarge(self.limit));
                }
                let start = nl + 2;
                if self.buf.len() < start + len {
                    return self.more();
                }
                self.partial
                    .extend_from_slice(&self.buf[start..start + len]);
                self.buf.drain(..start + len);
            },
        }
    }

    /// No whole message yet: wait for more, unless bytes were refused.
    fn more(&self) -> Result<Option<String>, FramingError> {
        if self.overflow {
            Err(FramingError::TooLarge(self.limit))
        } else {
            Ok(None)
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn eom_then_chunked_split_across_pushes() {
        let mut d = Decoder::new();
        let mut wire = encode("<hello/>", Framing::EndOfMessage);
        wire.extend(encode("<rpc>ä</rpc>", Framing::Chunked));
        let (a, b) = wire.split_at(11);
        d.push(a);
        assert_eq!(d.next_message().unwrap(), None);
        d.push(b);
        assert_eq!(d.next_message().unwrap().as_deref(), Some("<hello/>"));
        d.set_framing(Framing::Chunked);
        assert_eq!(d.next_message().unwrap().as_deref(), Some("<rpc>ä</rpc>"));
        // Two chunks make one message.
        d.push(b"\n#3\n<a>\n#4\n</a>\n##\n");
        assert_eq!(d.next_message().unwrap().as_deref(), Some("<a></a>"));
        assert_eq!(d.next_message().unwrap(), None);
    }

    #[test]
    fn bad_chunk_headers_are_errors() {
        for bad in [&b"\n#x\n"[..], b"\n#0\n", b"junk\n#3\n"] {
            let mut d = Decoder::new();
            d.set_framing(Framing::Chunked);
            d.push(bad);
            assert!(d.next_message().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn messages_over_the_limit_are_refused_while_reading() {
        // End-of-message framing: no marker within the limit.
        let mut d = Decoder::with_limit(100);
        d.push(&[b'a'; 64]);
        assert_eq!(d.next_message(), Ok(None));
        for _ in 0..1000 {
            d.push(&[b'a'; 64]);
        }
        assert_eq!(d.next_message(), Err(FramingError::TooLarge(100)));
        assert!(d.buf.len() <= 100 + 64, "buffered {}", d.buf.len());
        // A message exactly at the limit passes.
        let mut d = Decoder::with_limit(100);
        d.push(&encode(&"b".repeat(100), Framing::EndOfMessage));
        assert_eq!(d.next_message().unwrap().map(|m| m.len()), Some(100));
        // Chunked: a header announcing more than the limit fails at once,
        // before any of the chunk arrives; so do chunks adding up past it.
        let mut d = Decoder::with_limit(100);
        d.set_framing(Framing::Chunked);
        d.push(b"\n#4294967295\n");
        assert_eq!(d.next_message(), Err(FramingError::TooLarge(100)));
        let mut d = Decoder::with_limit(100);
        d.set_framing(Framing::Chunked);
        d.push(&encode(&"c".repeat(60), Framing::Chunked)[..65]);
        d.push(b"\n#60\n");
        assert_eq!(d.next_message(), Err(FramingError::TooLarge(100)));
        // A header line that never ends is not buffered for ever.
        let mut d = Decoder::with_limit(100);
        d.set_framing(Framing::Chunked);
        d.push(b"\n#1111111111111111111111111111111111111");
        assert!(matches!(d.next_message(), Err(FramingError::BadChunk(_))));
    }
}
