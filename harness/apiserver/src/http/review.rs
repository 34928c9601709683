//! The reviews' endpoints (`authorization.k8s.io` access reviews,
//! `authentication.k8s.io` SelfSubjectReview): a POST on the collection is
//! answered by [`review::create`] with `201 Created`; nothing else is served.

use axum::http::{Method, StatusCode};
use axum::response::Response;

use super::request::{Ctx, json_response};
use crate::error::{ApiError, ApiResult};
use crate::rbac::{User, review};
use crate::registry::ResourceDef;

impl Ctx {
    /// A request on a review collection by `user` (an in-memory client,
    /// with none, is the administrator).
    pub(super) fn review(
        self,
        def: &ResourceDef,
        ns: Option<String>,
        method: &Method,
        user: Option<User>,
    ) -> ApiResult<Response> {
        if *method != Method::POST {
            return Err(ApiError::method_not_allowed(&format!(
                "{method} on {}",
                def.resource
            )));
        }
        if def.namespaced && ns.is_none() {
            return Err(ApiError::method_not_allowed(&format!(
                "POST on all-namespaces {}",
                def.resource
            )));
        }
        let body = self.json_body()?;
        let user = user.unwrap_or(User::Admin);
        let answer = review::create(&self.server, &user, def, ns.as_deref(), body)?;
        Ok(json_response(StatusCode::CREATED, &answer))
    }
}
