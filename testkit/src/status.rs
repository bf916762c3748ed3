//! The `metav1.Status` wire format: [`ApiError`], the error every handler returns, rendered
//! as the Status JSON body and HTTP code the real server sends (kube-rs parses these into
//! `kube::Error::Api(Status)`), and the success Status that `binding`/`eviction` answer with.

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::resources::ResourceDef;

/// An API error: HTTP code, `reason`, message and optional `details`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

/// The `reason` the real server uses for an HTTP code (`""` where it has none).
pub(crate) fn reason_for_code(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "",
    }
}

fn details(def: &ResourceDef, resource: &str, name: &str) -> Value {
    json!({"name": name, "group": def.group, "kind": resource})
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// An error with the reason that belongs to `code`.
    pub fn with_code(code: u16, message: impl Into<String>) -> Self {
        Self::new(code, reason_for_code(code), message)
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 404 for a path the server does not serve (the real server's generic 404 Status).
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// `pods "x" not found`
    pub fn not_found(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", def.qualified()),
        )
        .with_details(details(def, &def.plural, name))
    }

    /// `pods "x" already exists`
    pub fn already_exists(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", def.qualified()),
        )
        .with_details(details(def, &def.plural, name))
    }

    /// `Operation cannot be fulfilled on <resource> "x": <why>`; `resource` may name a
    /// subresource (`pods/binding`).
    pub fn conflict(def: &ResourceDef, resource: &str, name: &str, why: &str) -> Self {
        let qualified = if def.group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{}", def.group)
        };
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
        )
        .with_details(details(def, resource, name))
    }

    /// The optimistic-concurrency conflict (stale `metadata.resourceVersion`).
    pub fn stale(def: &ResourceDef, name: &str) -> Self {
        Self::conflict(
            def,
            &def.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422: `Pod "x" is invalid: <field>: <what>`
    pub fn invalid(def: &ResourceDef, name: &str, field: &str, what: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {field}: {what}", def.kind),
        )
        .with_details(json!({
            "name": name,
            "group": def.group,
            "kind": def.kind,
            "causes": [{"reason": "FieldValueInvalid", "message": what, "field": field}],
        }))
    }

    /// 410 Expired.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml \
                 (got {content_type:?})"
            ),
        )
    }

    /// The Status object.
    pub fn to_status(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.to_status().to_string();
        json_response(code, Bytes::from(body))
    }
}

/// `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":N}`
pub(crate) fn success_status(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

/// A JSON response with the given code.
pub(crate) fn json_response(code: StatusCode, body: Bytes) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response()
}
