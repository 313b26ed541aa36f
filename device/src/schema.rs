//! YANG schema validation with libyang (RFC 7950 data, RFC 6241 edits).
//!
//! One seam for everything that asks "would a model-driven device accept
//! this?": the emulated NETCONF server validates every edit and every
//! resulting datastore with it, and the tests validate every rendered
//! OpenConfig payload and every running configuration with it. The rule
//! source is the published models themselves, parsed by libyang (the
//! `yang2` crate, the binding holo uses), never a copy of them: the models
//! are found at run time in a folder ([`openconfig_dir`]), which
//! `.ci/third-party.sh` fills from PyPI's `ydk-models-openconfig`.
//!
//! Two gaps of that bundle are closed here, each citing where upstream
//! closed it:
//!
//! - It has no `openconfig-policy-forwarding` (its
//!   `openconfig-network-instance` is 0.6.0, 2017-01-13, from before
//!   network instances carried `policy-forwarding`), so
//!   [`Schema::validate_config`] and [`Schema::validate_edit`] cut every
//!   `network-instances/network-instance/policy-forwarding` subtree out,
//!   give the rest to libyang, and check the subtrees with the rules of
//!   [`policy_forwarding`] (openconfig-policy-forwarding 0.2.1,
//!   2018-11-21, encoded by hand).
//! - Its network-instance `when` conditions on protocol instances cannot
//!   hold under RFC 7950 (wrong context node, unprefixed identity), which
//!   makes every static route invalid; the module is loaded with the text
//!   upstream later gave them ([`fix_protocol_whens`]), patched in memory.
//!
//! The pattern anchors the bundle's `pattern` statements carry (POSIX `^`
//! and `$`, which XSD regular expressions do not have, RFC 7950 Section
//! 9.4.5) are removed when `.ci/third-party.sh` installs the models
//! (`.ci/unanchor-patterns.py`).
//!
//! libyang is optional (cargo feature `yang`, since it builds C code with
//! cmake). Without it, or without the models, [`Schema::openconfig`]
//! answers [`SchemaError::Unavailable`] and callers fall back to their own
//! structural checks; tests then skip with a notice (or fail in CI).
//!
//! Error tags follow RFC 6241 Appendix A, with RFC 7950 Section 15 for
//! what a model adds: an element the model does not define is
//! `unknown-element`, a namespace no loaded module owns is
//! `unknown-namespace`, a value outside its type (pattern, range,
//! identity) is `invalid-value`, a missing mandatory node or list key is
//! `missing-element`, a leafref without its target is `data-missing`
//! (RFC 7950 Section 15.5), anything else libyang refuses is
//! `operation-failed`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use thiserror::Error;

pub mod policy_forwarding;

/// The modules the OpenConfig dialect writes, implemented in one context
/// together with the identity modules its values name; what they import
/// only for groupings and types stays import-only, as on a device that
/// does not implement it (libyang's `REF_IMPLEMENTED` adds the modules
/// their defaults and `when`/`must` conditions reference).
/// `openconfig-vlan` (1.0.2, 2016-05-26) types the tag of a sub-interface
/// (`subinterfaces/subinterface/vlan/config/vlan-id`, its augment of
/// openconfig-interfaces); its other augments (switched and routed VLANs)
/// load with it, vclos writes none of them.
pub const OPENCONFIG_MODULES: &[&str] = &[
    "ietf-netconf",
    "iana-if-type",
    "openconfig-interfaces",
    "openconfig-if-ethernet",
    "openconfig-if-ip",
    "openconfig-system",
    "openconfig-network-instance",
    "openconfig-network-instance-types",
    "openconfig-policy-types",
    "openconfig-types",
    "openconfig-vlan",
];

/// An RFC 6241 `error-tag` for a schema violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorTag {
    /// An element the model does not define (or in the wrong place).
    UnknownElement,
    /// An element in a namespace no loaded module owns.
    UnknownNamespace,
    /// A value its type refuses.
    InvalidValue,
    /// A mandatory node or list key is missing.
    MissingElement,
    /// A reference (leafref) points at nothing.
    DataMissing,
    /// Any other refusal.
    OperationFailed,
}

impl ErrorTag {
    /// The tag as written in `<error-tag>`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorTag::UnknownElement => "unknown-element",
            ErrorTag::UnknownNamespace => "unknown-namespace",
            ErrorTag::InvalidValue => "invalid-value",
            ErrorTag::MissingElement => "missing-element",
            ErrorTag::DataMissing => "data-missing",
            ErrorTag::OperationFailed => "operation-failed",
        }
    }
}

/// One refusal by the models.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}: {message}{}", tag.as_str(), path.as_deref().map(|p| format!(" (at {p})")).unwrap_or_default())]
pub struct Violation {
    /// The RFC 6241 error tag.
    pub tag: ErrorTag,
    /// The data path libyang names, when it names one.
    pub path: Option<String>,
    /// libyang's message.
    pub message: String,
}

/// Why no schema could be had.
#[derive(Debug, Error)]
pub enum SchemaError {
    /// Built without the `yang` feature, or no models folder.
    #[error("YANG validation unavailable: {0}")]
    Unavailable(String),
    /// libyang could not load a module.
    #[error("loading YANG module {module} from {dir}: {message}")]
    Load {
        /// The module.
        module: String,
        /// The folder searched.
        dir: PathBuf,
        /// libyang's message.
        message: String,
    },
}

/// Where the OpenConfig models are: `$VCLOS_YANG_DIR`, else
/// `$VCLOS_THIRD_PARTY/openconfig-yang`, else `target/third-party/openconfig-yang`
/// of the source tree this binary was built from (what `.ci/third-party.sh`
/// fills). `None` when that folder has no `openconfig-interfaces.yang`.
pub fn openconfig_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("VCLOS_YANG_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("VCLOS_THIRD_PARTY").map(|d| PathBuf::from(d).join("openconfig-yang"))
        })
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/third-party/openconfig-yang")
        });
    dir.join("openconfig-interfaces.yang")
        .is_file()
        .then_some(dir)
}

/// The process-wide OpenConfig schema, loaded once from [`openconfig_dir`];
/// `None` (and the reason, logged once) when unavailable.
pub fn shared_openconfig() -> Option<Arc<Schema>> {
    static SHARED: OnceLock<Option<Arc<Schema>>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let loaded = openconfig_dir()
                .ok_or_else(|| SchemaError::Unavailable("no OpenConfig models folder".into()))
                .and_then(|dir| Schema::openconfig(&dir));
            match loaded {
                Ok(s) => Some(Arc::new(s)),
                Err(e) => {
                    tracing::info!("{e}; emulated NETCONF checks structure only");
                    None
                }
            }
        })
        .clone()
}

/// Strip a NETCONF `<config>` or `<data>` wrapper, if any, so the content
/// (the top-level data nodes) is what libyang parses.
pub fn unwrap_document(xml: &str) -> &str {
    let t = xml.trim();
    for tag in ["config", "data"] {
        if let Some(rest) = t.strip_prefix(&format!("<{tag}")) {
            if let (Some(open_end), Some(inner_end)) =
                (rest.find('>'), rest.rfind(&format!("</{tag}>")))
            {
                if !rest[..open_end].ends_with('/') && open_end < inner_end {
                    return &rest[open_end + 1..inner_end];
                }
            }
        }
    }
    t
}

/// The text fix of `fixed_network_instance` (feature `yang`): each
/// `when "../config/identifier = 'ID'"` becomes
/// `when "./config/identifier = 'oc-pol-types:ID'"`. `None` when the
/// module does not import openconfig-policy-types as `oc-pol-types` or has
/// no such condition.
pub fn fix_protocol_whens(module: &str) -> Option<String> {
    const OLD: &str = "when \"../config/identifier = '";
    const NEW: &str = "when \"./config/identifier = 'oc-pol-types:";
    let imports = module
        .split("import openconfig-policy-types")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .is_some_and(|stmt| stmt.contains("\"oc-pol-types\"") || stmt.contains(" oc-pol-types;"));
    (imports && module.contains(OLD)).then(|| module.replace(OLD, NEW))
}

/// The content of a NETCONF document ([`unwrap_document`]) with the prefix
/// declarations (`xmlns:p="..."`) of a stripped `<config>`/`<data>`
/// wrapper copied onto each top-level element that does not declare that
/// prefix itself, so values and attributes using them (`nc:operation`)
/// stay bound. Text the scanner cannot read is returned as unwrapped,
/// for libyang to refuse.
pub fn document_content(xml: &str) -> std::borrow::Cow<'_, str> {
    use quick_xml::events::Event;
    let inner = unwrap_document(xml);
    let t = xml.trim();
    let wrapper = &t[..t.len() - inner.len().min(t.len())];
    let decls: Vec<(String, String)> = if inner.len() == t.len() {
        Vec::new()
    } else {
        let mut r = quick_xml::Reader::from_str(wrapper);
        match r.read_event() {
            Ok(Event::Start(s)) => s
                .attributes()
                .flatten()
                .filter_map(|a| {
                    let key: &str = a.key.as_ref();
                    key.starts_with("xmlns:").then(|| {
                        let v = a
                            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                            .map(|v| v.into_owned())
                            .unwrap_or_default();
                        (key.to_string(), v)
                    })
                })
                .collect(),
            _ => Vec::new(),
        }
    };
    if decls.is_empty() {
        return inner.into();
    }
    let mut r = quick_xml::Reader::from_str(inner);
    let mut depth = 0usize;
    let mut inserts: Vec<(usize, String)> = Vec::new();
    loop {
        let pos = r.buffer_position() as usize;
        let ev = r.read_event();
        let start = matches!(ev, Ok(Event::Start(_)));
        match ev {
            Ok(Event::Start(s)) | Ok(Event::Empty(s)) if depth == 0 => {
                let own: Vec<String> = s
                    .attributes()
                    .flatten()
                    .map(|a| AsRef::<str>::as_ref(&a.key).to_string())
                    .collect();
                let add: String = decls
                    .iter()
                    .filter(|(k, _)| !own.contains(k))
                    .map(|(k, v)| format!(" {k}=\"{}\"", quick_xml::escape::escape(v.as_str())))
                    .collect();
                let name = s.name();
                inserts.push((pos + 1 + AsRef::<str>::as_ref(&name).len(), add));
                if start {
                    depth += 1;
                }
            }
            Ok(Event::Start(_)) => depth += 1,
            Ok(Event::End(_)) => depth = depth.saturating_sub(1),
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(_) => return inner.into(),
        }
    }
    let mut out = String::with_capacity(inner.len() + inserts.len() * 64);
    let mut from = 0;
    for (at, add) in inserts {
        out.push_str(&inner[from..at]);
        out.push_str(&add);
        from = at;
    }
    out.push_str(&inner[from..]);
    out.into()
}

#[cfg(feature = "yang")]
mod imp {
    use std::sync::Mutex;

    use std::collections::HashMap;

    use yang2::context::{Context, ContextFlags, EmbeddedModuleKey, EmbeddedModules};
    use yang2::data::{DataFormat, DataParserFlags, DataTree, DataValidationFlags};

    use super::*;

    /// A loaded set of YANG modules.
    pub struct Schema {
        ctx: Mutex<Context>,
        modules: Vec<(String, Option<String>, String)>,
    }

    impl std::fmt::Debug for Schema {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Schema")
                .field("modules", &self.modules.len())
                .finish()
        }
    }

    impl Schema {
        /// Load [`OPENCONFIG_MODULES`] (and what they import) from `dir`.
        pub fn openconfig(dir: &Path) -> Result<Schema, SchemaError> {
            Schema::load(dir, OPENCONFIG_MODULES)
        }

        /// Load `modules` (latest revisions, all features) from `dir`,
        /// `openconfig-network-instance` with its `when` fix (see
        /// `fixed_network_instance`).
        pub fn load(dir: &Path, modules: &[&str]) -> Result<Schema, SchemaError> {
            Schema::load_with(dir, modules, true)
        }

        /// [`Schema::load`], with or without the `when` fix.
        pub(super) fn load_with(
            dir: &Path,
            modules: &[&str],
            fix_whens: bool,
        ) -> Result<Schema, SchemaError> {
            let fail = |module: &str, message: String| SchemaError::Load {
                module: module.into(),
                dir: dir.to_path_buf(),
                message,
            };
            let flags = ContextFlags::REF_IMPLEMENTED | ContextFlags::DISABLE_SEARCHDIR_CWD;
            let mut ctx = Context::new(flags).map_err(|e| fail("(context)", msg(&e)))?;
            ctx.set_searchdir(dir)
                .map_err(|e| fail("(searchdir)", msg(&e)))?;
            // Modules with the upstream `when` fixes applied (see
            // `fixed_network_instance`), offered to libyang before the
            // folder; only while loading, the map lives no longer.
            let mut embedded = EmbeddedModules::new();
            if let Some(text) = fixed_network_instance(dir).filter(|_| fix_whens) {
                embedded.insert(
                    EmbeddedModuleKey::new("openconfig-network-instance", None, None, None),
                    text,
                );
            }
            ctx.set_embedded_modules(&embedded);
            let loaded = modules.iter().try_for_each(|m| {
                ctx.load_module(m, None, &["*"])
                    .map(drop)
                    .map_err(|e| fail(m, msg(&e)))
            });
            ctx.unset_embedded_modules();
            drop(embedded);
            loaded?;
            let modules = ctx
                .modules(true)
                .filter(|m| m.is_implemented())
                .map(|m| {
                    (
                        m.name().to_string(),
                        m.revision().map(str::to_string),
                        m.namespace().to_string(),
                    )
                })
                .collect();
            Ok(Schema {
                ctx: Mutex::new(ctx),
                modules,
            })
        }

        /// NETCONF `<capability>` URIs of the implemented modules
        /// (RFC 6020 Section 5.6.4: `ns?module=name&revision=date`).
        pub fn capabilities(&self) -> Vec<String> {
            self.modules
                .iter()
                .map(|(name, rev, ns)| match rev {
                    Some(r) => format!("{ns}?module={name}&revision={r}"),
                    None => format!("{ns}?module={name}"),
                })
                .collect()
        }

        /// Whether some loaded module owns namespace `ns`.
        pub fn knows_namespace(&self, ns: &str) -> bool {
            self.modules.iter().any(|(_, _, n)| n == ns)
        }

        /// Validate a whole configuration datastore (its top-level nodes,
        /// or a `<config>`/`<data>` document): strict parsing, every type,
        /// mandatory node, key, leafref and `when`/`must` checked.
        pub fn validate_config(&self, xml: &str) -> Result<(), Violation> {
            let split = policy_forwarding::split(&document_content(xml))?;
            self.parse(
                &split.rest,
                DataParserFlags::STRICT | DataParserFlags::NO_STATE,
                DataValidationFlags::NO_STATE,
            )?;
            policy_forwarding::check(&split, policy_forwarding::Mode::Config, &|ns| {
                self.knows_namespace(ns)
            })
        }

        /// Validate the `<config>` of an `edit-config` (RFC 6241 7.2) as
        /// `yanglint -t edit` does: strict parsing and every value's type,
        /// `nc:operation` attributes allowed; mandatory nodes and
        /// references are left to [`Schema::validate_config`] of the
        /// resulting datastore.
        pub fn validate_edit(&self, xml: &str) -> Result<(), Violation> {
            let split = policy_forwarding::split(&document_content(xml))?;
            self.parse(
                &split.rest,
                DataParserFlags::STRICT | DataParserFlags::NO_VALIDATION,
                DataValidationFlags::empty(),
            )?;
            policy_forwarding::check(&split, policy_forwarding::Mode::Edit, &|ns| {
                self.knows_namespace(ns)
            })
        }

        fn parse(
            &self,
            xml: &str,
            p: DataParserFlags,
            v: DataValidationFlags,
        ) -> Result<(), Violation> {
            let ctx = self.ctx.lock().unwrap_or_else(|e| e.into_inner());
            // libyang reads a C string: yang2 passes the bytes as they are,
            // so the terminating NUL is ours to add (without it libyang
            // reads past the end of the buffer).
            let mut text = Vec::with_capacity(xml.len() + 1);
            text.extend_from_slice(xml.as_bytes());
            text.push(0);
            DataTree::parse_string(&ctx, text, DataFormat::XML, p, v)
                .map(drop)
                .map_err(|e| violation(&e))
        }
    }

    /// `openconfig-network-instance` from `dir` with its `when` conditions
    /// on protocol instances fixed as upstream later fixed them, or `None`
    /// when the module there needs no fix (or cannot be read).
    ///
    /// The bundle's revision (0.6.0, 2017-01-13) guards the static-route
    /// container with `uses oc-loc-rt:local-static-top { when
    /// "../config/identifier = 'STATIC'" }`. Under RFC 7950 Section 7.21.5
    /// the context node of a `when` on a `uses` is the list entry
    /// (`protocol`), so `../config` names nothing, and RFC 7950 Section
    /// 9.10.3 makes the identityref's value `oc-pol-types:STATIC`, not
    /// `STATIC`: libyang, which follows both, refuses every static route.
    /// openconfig/public fixed the path in commit dde2c1c3 (0.13.2,
    /// 2019-11-28, "Revert incorrect paths in when statements") and the
    /// prefix in commit 7d8d7f4e (0.16.1, 2021-07-22, "Add prefix to
    /// qualify when statements"), giving `when "./config/identifier =
    /// 'oc-pol-types:STATIC'"`; this applies that same text to each
    /// `../config/identifier = '<ID>'` condition (STATIC, LOCAL_AGGREGATE,
    /// BGP, ISIS) when the module imports openconfig-policy-types as
    /// `oc-pol-types`. The text is patched in memory, never written; one
    /// copy per models folder is kept for the life of the process
    /// (libyang's import callback takes `'static` text).
    fn fixed_network_instance(dir: &Path) -> Option<&'static str> {
        static FIXED: OnceLock<Mutex<HashMap<PathBuf, Option<&'static str>>>> = OnceLock::new();
        let mut fixed = FIXED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *fixed.entry(dir.to_path_buf()).or_insert_with(|| {
            let text =
                std::fs::read_to_string(dir.join("openconfig-network-instance.yang")).ok()?;
            let patched = fix_protocol_whens(&text)?;
            Some(Box::leak(patched.into_boxed_str()))
        })
    }

    fn msg(e: &yang2::Error) -> String {
        e.msg
            .clone()
            .unwrap_or_else(|| format!("libyang error {}", e.errcode))
    }

    fn violation(e: &yang2::Error) -> Violation {
        let message = msg(e);
        Violation {
            tag: classify(&message),
            path: e.path.clone(),
            message,
        }
    }

    /// Map libyang 2.2's messages to RFC 6241 tags (see the module doc).
    fn classify(m: &str) -> ErrorTag {
        let has = |s: &str| m.contains(s);
        if has("namespace") && (has("No module") || has("Unknown")) {
            ErrorTag::UnknownNamespace
        } else if has("not found as a child")
            || has("Unknown element")
            || has("not found") && has("Node")
        {
            ErrorTag::UnknownElement
        } else if has("Mandatory node") || has("missing its key") || has("missing key") {
            ErrorTag::MissingElement
        } else if has("no target instance") || has("leafref") && has("instance") {
            ErrorTag::DataMissing
        } else if has("Invalid")
            || has("Unsatisfied")
            || has("out of")
            || has("does not conform")
            || has("identity")
        {
            ErrorTag::InvalidValue
        } else {
            ErrorTag::OperationFailed
        }
    }
}

#[cfg(not(feature = "yang"))]
mod imp {
    use super::*;

    /// A loaded set of YANG modules (this build has no libyang).
    #[derive(Debug)]
    pub struct Schema(());

    impl Schema {
        /// Always [`SchemaError::Unavailable`]: built without `yang`.
        pub fn openconfig(dir: &Path) -> Result<Schema, SchemaError> {
            Schema::load(dir, OPENCONFIG_MODULES)
        }

        /// Always [`SchemaError::Unavailable`]: built without `yang`.
        pub fn load(_dir: &Path, _modules: &[&str]) -> Result<Schema, SchemaError> {
            Err(SchemaError::Unavailable(
                "built without the `yang` feature (cargo build --features yang)".into(),
            ))
        }

        /// No capabilities.
        pub fn capabilities(&self) -> Vec<String> {
            Vec::new()
        }

        /// Never reached (no `Schema` can be built).
        pub fn knows_namespace(&self, _ns: &str) -> bool {
            false
        }

        /// Never reached (no `Schema` can be built).
        pub fn validate_config(&self, _xml: &str) -> Result<(), Violation> {
            Ok(())
        }

        /// Never reached (no `Schema` can be built).
        pub fn validate_edit(&self, _xml: &str) -> Result<(), Violation> {
            Ok(())
        }
    }
}

pub use imp::Schema;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwraps_netconf_documents() {
        assert_eq!(unwrap_document("<config xmlns=\"x\"><a/></config>"), "<a/>");
        assert_eq!(unwrap_document(" <data><a/><b/></data>\n"), "<a/><b/>");
        assert_eq!(unwrap_document("<a/>"), "<a/>");
        assert_eq!(unwrap_document("<config/>"), "<config/>");
    }

    #[test]
    fn wrapper_prefixes_stay_bound() {
        let doc = "<config xmlns=\"urn:nc\" xmlns:nc=\"urn:nc\"><a xmlns=\"urn:a\"><b nc:operation=\"delete\"/></a>\
                   <c xmlns:nc=\"urn:other\"/><d/></config>";
        assert_eq!(
            document_content(doc),
            "<a xmlns:nc=\"urn:nc\" xmlns=\"urn:a\"><b nc:operation=\"delete\"/></a>\
             <c xmlns:nc=\"urn:other\"/><d xmlns:nc=\"urn:nc\"/>"
        );
        assert_eq!(document_content("<data><a/></data>"), "<a/>");
        assert_eq!(document_content("<a/>"), "<a/>");
    }

    #[test]
    fn protocol_whens_are_fixed_as_upstream_did() {
        let m = "import openconfig-policy-types { prefix \"oc-pol-types\"; }\n\
                 uses a { when \"../config/identifier = 'STATIC'\" { } }\n\
                 uses b { when \"../config/identifier = 'BGP'\" { } }";
        let fixed = fix_protocol_whens(m).unwrap();
        assert!(fixed.contains("when \"./config/identifier = 'oc-pol-types:STATIC'\""));
        assert!(fixed.contains("when \"./config/identifier = 'oc-pol-types:BGP'\""));
        assert!(!fixed.contains("../config/identifier"));
        // Already fixed, or the types module imported under another
        // prefix: left alone.
        assert_eq!(fix_protocol_whens(&fixed), None);
        assert_eq!(
            fix_protocol_whens(&m.replace("\"oc-pol-types\"", "\"pt\"")),
            None
        );
    }

    #[cfg(feature = "yang")]
    #[test]
    fn static_routes_need_the_when_fix() {
        let Some(dir) = openconfig_dir() else {
            assert!(std::env::var_os("VCLOS_REQUIRE_INTEROP").is_none());
            eprintln!("SKIPPED: no OpenConfig models (bash .ci/third-party.sh)");
            return;
        };
        let pt = "xmlns:oc-pol-types=\"http://openconfig.net/yang/policy-types\"";
        let id = format!("<identifier {pt}>oc-pol-types:STATIC</identifier>");
        let doc = format!(
            "<network-instances xmlns=\"http://openconfig.net/yang/network-instance\">\
             <network-instance><name>v</name><config><name>v</name>\
             <type xmlns:t=\"http://openconfig.net/yang/network-instance-types\">t:L3VRF</type>\
             </config><protocols><protocol>{id}<name>S</name><config>{id}<name>S</name></config>\
             <static-routes><static><prefix>10.1.0.0/24</prefix><config><prefix>10.1.0.0/24</prefix>\
             </config></static></static-routes></protocol></protocols></network-instance>\
             </network-instances>"
        );
        let fixed = Schema::load_with(&dir, OPENCONFIG_MODULES, true).unwrap();
        fixed.validate_config(&doc).unwrap();
        let published = Schema::load_with(&dir, OPENCONFIG_MODULES, false).unwrap();
        let e = published.validate_config(&doc).unwrap_err();
        assert!(e.message.contains("When condition"), "{e}");
    }

    #[cfg(feature = "yang")]
    #[test]
    fn openconfig_models_refuse_what_devices_refuse() {
        let Some(dir) = openconfig_dir() else {
            assert!(
                std::env::var_os("VCLOS_REQUIRE_INTEROP").is_none(),
                "OpenConfig models required (run .ci/third-party.sh)"
            );
            eprintln!("SKIPPED: no OpenConfig models (bash .ci/third-party.sh)");
            return;
        };
        let s = Schema::openconfig(&dir).expect("models load");
        assert!(s.knows_namespace("http://openconfig.net/yang/interfaces"));
        assert!(s
            .capabilities()
            .iter()
            .any(|c| c.contains("module=openconfig-network-instance")));
        let iface = |ty: &str, extra: &str| {
            format!(
                "<interfaces xmlns=\"http://openconfig.net/yang/interfaces\"><interface><name>e1</name>\
                 <config><name>e1</name>{ty}{extra}</config></interface></interfaces>"
            )
        };
        let ty = "<type xmlns:ianaift=\"urn:ietf:params:xml:ns:yang:iana-if-type\">ianaift:ethernetCsmacd</type>";
        s.validate_config(&iface(ty, ""))
            .expect("a typed interface is valid");
        let missing = s.validate_config(&iface("", "")).unwrap_err();
        assert_eq!(missing.tag, ErrorTag::MissingElement, "{missing}");
        let unknown = s
            .validate_config(&iface(ty, "<colour>red</colour>"))
            .unwrap_err();
        assert_eq!(unknown.tag, ErrorTag::UnknownElement, "{unknown}");
        let bad = s
            .validate_config(&iface("<type>ethernetCsmacd</type>", ""))
            .unwrap_err();
        assert_eq!(bad.tag, ErrorTag::InvalidValue, "{bad}");
        // An edit may omit mandatory nodes; its values are still typed.
        s.validate_edit(&iface("", ""))
            .expect("partial edits are fine");
        let ns = s
            .validate_edit("<interfaces xmlns=\"urn:example:nope\"><interface/></interfaces>")
            .unwrap_err();
        assert_eq!(ns.tag, ErrorTag::UnknownNamespace, "{ns}");
    }
}
