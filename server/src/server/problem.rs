//! RFC 9457 problem details: every error the API returns.
//!
//! `type` is `about:blank` (the status says what kind of problem it is,
//! RFC 9457 Section 4.2.1), `title` the status's reason phrase, `detail`
//! what went wrong in words, and the extension member `field` the request
//! field at fault, when one is.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A problem response.
#[derive(Debug, Clone)]
pub struct Problem {
    status: StatusCode,
    body: Map<String, Value>,
    /// Send `Retry-After: 1`: trying again soon may succeed.
    retry: bool,
}

impl Problem {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Problem {
        let mut body = Map::new();
        body.insert("type".into(), "about:blank".into());
        body.insert(
            "title".into(),
            status.canonical_reason().unwrap_or("Error").into(),
        );
        body.insert("status".into(), status.as_u16().into());
        body.insert("detail".into(), detail.into().into());
        Problem {
            status,
            body,
            retry: false,
        }
    }

    /// Tell the client to try again in a second (`Retry-After: 1`).
    pub fn retry_soon(mut self) -> Problem {
        self.retry = true;
        self
    }

    /// Name the request field at fault.
    pub fn field(self, field: &str) -> Problem {
        self.with("field", field.into())
    }

    /// Add an extension member.
    pub fn with(mut self, key: &str, value: Value) -> Problem {
        self.body.insert(key.into(), value);
        self
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(Value::Object(self.body))).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.retry {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}

/// A JSON request body, or a `400` naming the field at fault (its path,
/// e.g. `gpus`) and what is wrong with it. The value must be the whole
/// body: anything but whitespace after it is refused ("trailing
/// characters").
pub fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Problem> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    let value = parse_value(de)?;
    de.end().map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            format!(
                "request body: {e} after the JSON value: send one JSON object and nothing else"
            ),
        )
    })?;
    Ok(value)
}

fn parse_value<'de, T: DeserializeOwned>(
    de: &mut serde_json::Deserializer<serde_json::de::SliceRead<'de>>,
) -> Result<T, Problem> {
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let mut p = Problem::new(StatusCode::BAD_REQUEST, format!("request body: {inner}"));
        // An unknown field is named in the message, not the path.
        let msg = inner.to_string();
        if let Some(name) = msg
            .strip_prefix("unknown field `")
            .and_then(|r| r.split('`').next())
        {
            p = p.field(name);
        } else if path != "." {
            p = p.field(&path);
        }
        p
    })
}

/// The shape of a problem, for the OpenAPI document (RFC 9457 Section 3).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ProblemDoc {
    /// `about:blank`.
    r#type: String,
    /// The status's reason phrase.
    title: String,
    status: u16,
    detail: String,
    /// The request field at fault, when one is.
    field: Option<String>,
}
