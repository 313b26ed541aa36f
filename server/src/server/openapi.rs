//! `GET /openapi.json`: the API's OpenAPI 3.1 document, generated from the
//! handlers' `#[utoipa::path]` attributes and the request types' schemas
//! (`utoipa`), so it changes with the code. Decisions and reports are
//! described as objects pointing at their own documentation
//! (docs/decisions.md); every `/v1` path and `/metrics` need the bearer
//! token (`security`), health and this document do not.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::problem::ProblemDoc;
use super::{PlanBody, PlanSubmit, SubmitBody};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "vclos",
        description = "The vclos control plane for schedulers: isolated slices of a GPU fabric per job (issue 17). Errors are RFC 9457 problem details.",
    ),
    paths(
        super::ready,
        super::leaderz,
        super::leader_info,
        super::list_jobs,
        super::get_job,
        super::submit,
        super::release,
        super::plan,
        super::status,
        super::events,
        super::metrics,
    ),
    components(schemas(SubmitBody, PlanBody, PlanSubmit, ProblemDoc)),
    modifiers(&Bearer),
    security(("bearer" = [])),
)]
struct ApiDoc;

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let scheme =
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build());
        api.components
            .get_or_insert_with(Default::default)
            .add_security_scheme("bearer", scheme);
    }
}

/// The document, with the crate's version.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc
}
