//! A small owned XML element tree for NETCONF messages, on quick-xml.
//!
//! NETCONF payloads are data trees (no mixed content), so an element holds
//! either child elements or trimmed text. Names are kept as written
//! (`nc:operation`, prefixes and all) and matched on their local part, which
//! is how the base protocol elements are looked up whatever prefix a client
//! chose. Shared by the NETCONF driver and the emulator's NETCONF server so
//! both sides of the wire agree on parsing and escaping.

use std::fmt::Write as _;

use quick_xml::events::Event;
use quick_xml::Reader;
use thiserror::Error;

/// The base NETCONF namespace.
pub const NS_BASE: &str = "urn:ietf:params:xml:ns:netconf:base:1.0";

/// Deepest element nesting [`Element::parse`] accepts. Data trees of the
/// OpenConfig models are a few dozen levels deep; the bound keeps every
/// recursive walk over a parsed tree (serialising, merging, dropping) far
/// from the end of a thread's stack whatever a peer sends.
pub const MAX_DEPTH: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("malformed XML at byte {position}: {message}")]
pub struct XmlError {
    pub position: u64,
    pub message: String,
    /// The document exceeds the parser's depth or element-count limit.
    pub too_big: bool,
}

/// One element: name as written, attributes in order, children, text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
    pub text: String,
}

fn local_of(name: &str) -> &str {
    name.rsplit(':').next().unwrap_or(name)
}

impl Element {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            ..Self::default()
        }
    }

    /// Builder: add an attribute.
    pub fn attr(mut self, k: &str, v: &str) -> Self {
        self.attrs.push((k.to_string(), v.to_string()));
        self
    }

    /// Builder: set the text.
    pub fn text(mut self, t: &str) -> Self {
        self.text = t.to_string();
        self
    }

    /// Builder: add a child.
    pub fn child(mut self, c: Element) -> Self {
        self.children.push(c);
        self
    }

    /// The name without its prefix.
    pub fn local(&self) -> &str {
        local_of(&self.name)
    }

    /// The first child with this local name.
    pub fn find(&self, local: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.local() == local)
    }

    /// The value of the attribute with this local name (any prefix).
    pub fn get_attr(&self, local: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| local_of(k) == local && !k.starts_with("xmlns"))
            .map(|(_, v)| v.as_str())
    }

    /// Parse a document and return its root element, refusing nesting
    /// deeper than [`MAX_DEPTH`]. Declarations, comments and processing
    /// instructions are skipped.
    pub fn parse(text: &str) -> Result<Element, XmlError> {
        Self::parse_limited(text, MAX_DEPTH, usize::MAX)
    }

    /// [`Element::parse`] with a nesting limit of `max_depth` elements (the
    /// root is depth 1) and at most `max_elements` elements. The parser
    /// itself is iterative; the limits protect what walks the tree
    /// afterwards, and the memory a tree takes (about 120 bytes an element).
    pub fn parse_limited(
        text: &str,
        max_depth: usize,
        max_elements: usize,
    ) -> Result<Element, XmlError> {
        let mut count = 0usize;
        let mut reader = Reader::from_str(text);
        let mut stack: Vec<Element> = Vec::new();
        let mut root: Option<Element> = None;
        let err = |r: &Reader<&[u8]>, m: String| XmlError {
            position: r.buffer_position(),
            message: m,
            too_big: false,
        };
        loop {
            let ev = reader
                .read_event()
                .map_err(|e| err(&reader, e.to_string()))?;
            let empty = matches!(ev, Event::Empty(_));
            match ev {
                Event::Start(s) | Event::Empty(s) => {
                    let name = s.name().as_ref().to_string();
                    let mut el = Element::new(&name);
                    for a in s.attributes() {
                        let a = a.map_err(|e| err(&reader, e.to_string()))?;
                        let v = a
                            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                            .map_err(|e| err(&reader, e.to_string()))?;
                        el.attrs.push((a.key.as_ref().to_string(), v.into_owned()));
                    }
                    if root.is_some() {
                        return Err(err(&reader, "content after the root element".into()));
                    }
                    count += 1;
                    let too_big = if stack.len() >= max_depth {
                        Some(format!("elements nested deeper than {max_depth}"))
                    } else if count > max_elements {
                        Some(format!("more than {max_elements} elements"))
                    } else {
                        None
                    };
                    if let Some(m) = too_big {
                        return Err(XmlError {
                            too_big: true,
                            ..err(&reader, m)
                        });
                    }
                    if empty {
                        close(&mut stack, &mut root, el);
                    } else {
                        stack.push(el);
                    }
                }
                Event::End(_) => {
                    let mut el = stack
                        .pop()
                        .ok_or_else(|| err(&reader, "unexpected end tag".into()))?;
                    el.text = if el.children.is_empty() {
                        el.text.trim().to_string()
                    } else {
                        String::new()
                    };
                    close(&mut stack, &mut root, el);
                }
                Event::Text(t) => {
                    let s = t.xml10_content();
                    match stack.last_mut() {
                        Some(top) => top.text.push_str(&s),
                        None if s.trim().is_empty() => {}
                        None => return Err(err(&reader, "text outside the root element".into())),
                    }
                }
                Event::CData(t) => {
                    if let Some(top) = stack.last_mut() {
                        top.text.push_str(&t.xml10_content());
                    }
                }
                Event::GeneralRef(r) => {
                    let c = resolve_entity(&r).map_err(|m| err(&reader, m))?;
                    if let Some(top) = stack.last_mut() {
                        top.text.push(c);
                    }
                }
                Event::Eof => break,
                _ => {}
            }
        }
        if !stack.is_empty() {
            return Err(err(&reader, "unexpected end of document".into()));
        }
        root.ok_or_else(|| err(&reader, "no root element".into()))
    }

    /// Serialise compactly.
    pub fn to_xml(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, None, 0);
        out
    }

    /// Serialise with one element per line, indented by two spaces per level
    /// (used for datastore dumps, so line diffs are meaningful).
    pub fn to_pretty(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, Some(2), 0);
        out
    }

    fn write(&self, out: &mut String, indent: Option<usize>, depth: usize) {
        let pad = indent.map_or(String::new(), |i| " ".repeat(i * depth));
        let _ = write!(out, "{pad}<{}", self.name);
        for (k, v) in &self.attrs {
            let _ = write!(out, " {k}=\"{}\"", quick_xml::escape::escape(v.as_str()));
        }
        let nl = if indent.is_some() { "\n" } else { "" };
        if self.children.is_empty() && self.text.is_empty() {
            let _ = write!(out, "/>{nl}");
        } else if self.children.is_empty() {
            let _ = write!(
                out,
                ">{}</{}>{nl}",
                quick_xml::escape::escape(self.text.as_str()),
                self.name
            );
        } else {
            let _ = write!(out, ">{nl}");
            for c in &self.children {
                c.write(out, indent, depth + 1);
            }
            let _ = write!(out, "{pad}</{}>{nl}", self.name);
        }
    }
}

fn close(stack: &mut [Element], root: &mut Option<Element>, el: Element) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(el),
        None => *root = Some(el),
    }
}

/// The character an entity or character reference stands for (quick-xml
/// reports `&amp;`, `&#38;` and friends as separate events).
pub fn resolve_entity(r: &quick_xml::events::BytesRef<'_>) -> Result<char, String> {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return Ok(c);
    }
    match r.xml10_content().as_ref() {
        "amp" => Ok('&'),
        "lt" => Ok('<'),
        "gt" => Ok('>'),
        "quot" => Ok('"'),
        "apos" => Ok('\''),
        other => Err(format!("unknown entity &{other};")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_prefixes_entities_and_round_trips() {
        let doc = r#"<?xml version="1.0"?>
<nc:rpc xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0" message-id="7">
  <nc:get-config><nc:source><nc:running/></nc:source></nc:get-config>
  <x a="1 &amp; 2">R&amp;D &lt;lab&gt; &#65;</x>
</nc:rpc>"#;
        let e = Element::parse(doc).unwrap();
        assert_eq!(e.local(), "rpc");
        assert_eq!(e.get_attr("message-id"), Some("7"));
        assert!(e
            .find("get-config")
            .unwrap()
            .find("source")
            .unwrap()
            .find("running")
            .is_some());
        let x = e.find("x").unwrap();
        assert_eq!(x.text, "R&D <lab> A");
        assert_eq!(x.get_attr("a"), Some("1 & 2"));
        assert_eq!(Element::parse(&e.to_xml()).unwrap(), e);
        assert_eq!(Element::parse(&e.to_pretty()).unwrap(), e);
    }

    #[test]
    fn malformed_documents_are_errors() {
        for bad in [
            "<a><b></a>",
            "<a>",
            "",
            "<a/><b/>",
            "text",
            "<a>&bogus;</a>",
        ] {
            assert!(Element::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn nesting_past_the_limit_is_refused() {
        let doc = |n: usize| format!("{}{}", "<a>".repeat(n), "</a>".repeat(n));
        assert!(Element::parse_limited(&doc(3), 3, 3).is_ok());
        let e = Element::parse_limited(&doc(4), 3, 10).unwrap_err();
        assert!(e.too_big, "{e}");
        let e = Element::parse(&doc(MAX_DEPTH + 1)).unwrap_err();
        assert!(e.too_big, "{e}");
        assert!(!Element::parse("<a>").unwrap_err().too_big);
        let flat = format!("<r>{}</r>", "<a/>".repeat(10));
        assert!(Element::parse_limited(&flat, 3, 11).is_ok());
        assert!(Element::parse_limited(&flat, 3, 10).unwrap_err().too_big);
    }
}
