//! NETCONF message framing (RFC 6242): `]]>]]>` end-of-message framing for
//! base:1.0 and the hello exchange, chunked framing once both peers announced
//! base:1.1. A decoder is fed bytes as they arrive and yields whole messages;
//! switching its mode keeps the bytes already buffered (the peer may send its
//! first chunked message in the same packet as its hello).

use thiserror::Error;

/// The base:1.0 end-of-message marker.
pub const EOM: &str = "]]>]]>";
/// Largest chunk or message accepted, to bound memory on a hostile peer.
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
    #[error("message larger than {MAX_MESSAGE} bytes")]
    TooLarge,
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

/// Incremental decoder.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    framing: Framing,
    /// Chunks of the message being assembled (chunked mode).
    partial: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder in end-of-message mode (what the hello uses).
    pub fn new() -> Self {
        Self {
            buf: Vec::new(),
            framing: Framing::EndOfMessage,
            partial: Vec::new(),
        }
    }

    pub fn set_framing(&mut self, f: Framing) {
        self.framing = f;
    }

    pub fn framing(&self) -> Framing {
        self.framing
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete message, if one is buffered.
    pub fn next_message(&mut self) -> Result<Option<String>, FramingError> {
        if self.buf.len() + self.partial.len() > MAX_MESSAGE {
            return Err(FramingError::TooLarge);
        }
        match self.framing {
            Framing::EndOfMessage => {
                let Some(at) = find(&self.buf, EOM.as_bytes()) else {
                    return Ok(None);
                };
                let msg: Vec<u8> = self.buf.drain(..at + EOM.len()).take(at).collect();
                String::from_utf8(msg)
                    .map(Some)
                    .map_err(|_| FramingError::NotUtf8)
            }
            Framing::Chunked => loop {
                // Each step needs a full header line "\n#<len>\n" or "\n##\n".
                let Some(nl) = self.buf.iter().skip(1).position(|b| *b == b'\n') else {
                    return Ok(None);
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
                let len: usize = std::str::from_utf8(body)
                    .ok()
                    .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|s| s.parse().ok())
                    .filter(|n| *n > 0 && *n <= MAX_MESSAGE)
                    .ok_or_else(|| {
                        FramingError::BadChunk(String::from_utf8_lossy(header).into_owned())
                    })?;
                let start = nl + 2;
                if self.buf.len() < start + len {
                    return Ok(None);
                }
                self.partial
                    .extend_from_slice(&self.buf[start..start + len]);
                self.buf.drain(..start + len);
            },
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
}
