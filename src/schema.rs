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

/// The modules the OpenConfig dialect writes, implemented in one context
/// together with the identity modules its values name; what they import
/// only for groupings and types stays import-only, as on a device that
/// does not implement it (libyang's `REF_IMPLEMENTED` adds the modules
/// their defaults and `when`/`must` conditions reference).
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
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/third-party/openconfig-yang")
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

#[cfg(feature = "yang")]
mod imp {
    use std::sync::Mutex;

    use yang2::context::{Context, ContextFlags};
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

        /// Load `modules` (latest revisions, all features) from `dir`.
        pub fn load(dir: &Path, modules: &[&str]) -> Result<Schema, SchemaError> {
            let fail = |module: &str, message: String| SchemaError::Load {
                module: module.into(),
                dir: dir.to_path_buf(),
                message,
            };
            let flags = ContextFlags::REF_IMPLEMENTED | ContextFlags::DISABLE_SEARCHDIR_CWD;
            let mut ctx = Context::new(flags).map_err(|e| fail("(context)", msg(&e)))?;
            ctx.set_searchdir(dir)
                .map_err(|e| fail("(searchdir)", msg(&e)))?;
            for m in modules {
                ctx.load_module(m, None, &["*"])
                    .map_err(|e| fail(m, msg(&e)))?;
            }
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
            self.parse(
                unwrap_document(xml),
                DataParserFlags::STRICT | DataParserFlags::NO_STATE,
                DataValidationFlags::NO_STATE,
            )
        }

        /// Validate the `<config>` of an `edit-config` (RFC 6241 7.2) as
        /// `yanglint -t edit` does: strict parsing and every value's type,
        /// `nc:operation` attributes allowed; mandatory nodes and
        /// references are left to [`Schema::validate_config`] of the
        /// resulting datastore.
        pub fn validate_edit(&self, xml: &str) -> Result<(), Violation> {
            self.parse(
                unwrap_document(xml),
                DataParserFlags::STRICT | DataParserFlags::NO_VALIDATION,
                DataValidationFlags::empty(),
            )
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
