//! The reviews: create-only resources that store nothing and answer from
//! the same authorizer the server enforces ([`super::policy`]), as
//! kube-apiserver's `pkg/registry/authorization/*` and
//! `pkg/registry/authentication/selfsubjectreview` answer them.
//!
//! - `authorization.k8s.io/v1` `selfsubjectaccessreviews` (`kubectl auth
//!   can-i`), `subjectaccessreviews`, `localsubjectaccessreviews`
//!   (namespaced): the request object with `status` (`allowed`, `reason`);
//! - `authorization.k8s.io/v1` `selfsubjectrulesreviews` (`kubectl auth
//!   can-i --list`): the rules the requester holds in `spec.namespace`;
//! - `authentication.k8s.io/v1` `selfsubjectreviews` (`kubectl auth
//!   whoami`): who the requester is.
//!
//! Invalid specs are refused with kube-apiserver's 422 (its
//! `pkg/apis/authorization/validation` causes and messages).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::attributes::Access;
use super::policy::{Decision, decide, rules_for};
use super::user::{User, UserInfo};
use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceDef;
use crate::server::Server;

const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTHENTICATION: &str = "authentication.k8s.io";

/// Whether `def` is one of the reviews answered here.
pub fn is_review(def: &ResourceDef) -> bool {
    def.create_only && (def.group == AUTHORIZATION || def.group == AUTHENTICATION)
}

/// Answers the creation of a review of resource `def` by `user` (the
/// requester, impersonated or not), in namespace `ns` for a
/// LocalSubjectAccessReview: the object kube-apiserver returns with `201
/// Created`.
pub fn create(
    server: &Server,
    user: &User,
    def: &ResourceDef,
    ns: Option<&str>,
    mut body: Value,
) -> ApiResult<Value> {
    let obj = check_type(def, &mut body)?;
    let namespace = object_namespace(obj, def, ns)?;
    let kind = def.kind.as_str();
    match (def.group.as_str(), def.resource.as_str()) {
        (AUTHENTICATION, "selfsubjectreviews") => Ok(json!({
            "kind": kind,
            "apiVersion": def.api_version(),
            "metadata": {"creationTimestamp": simclock::format_rfc3339(server.clock.now())},
            "status": {"userInfo": user.info().to_json()},
        })),
        (AUTHORIZATION, "selfsubjectrulesreviews") => self_rules(server, def, &user.info(), obj),
        (AUTHORIZATION, "selfsubjectaccessreviews") => {
            let access = access_review(def, obj, &namespace, Review::OfSelf)?;
            Ok(answer(
                obj,
                decide(server, &user.info(), &access)?,
                &namespace,
            ))
        }
        (AUTHORIZATION, "subjectaccessreviews") => {
            let access = access_review(def, obj, &namespace, Review::OfSubject)?;
            let subject = subject_of(def, obj)?;
            Ok(answer(obj, decide(server, &subject, &access)?, &namespace))
        }
        (AUTHORIZATION, "localsubjectaccessreviews") => {
            let access = access_review(def, obj, &namespace, Review::Local)?;
            let subject = subject_of(def, obj)?;
            Ok(answer(obj, decide(server, &subject, &access)?, &namespace))
        }
        _ => Err(ApiError::method_not_allowed(&def.resource)),
    }
}

/// The body as an object whose `kind` and `apiVersion` are the
/// resource's (400 when it gives others).
fn check_type<'a>(def: &ResourceDef, body: &'a mut Value) -> ApiResult<&'a mut Map<String, Value>> {
    let Some(m) = body.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    if let Some(k) = m.get("kind").and_then(Value::as_str)
        && k != def.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            def.kind
        )));
    }
    if let Some(v) = m.get("apiVersion").and_then(Value::as_str)
        && v != def.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({})",
            def.api_version()
        )));
    }
    m.insert("kind".into(), json!(def.kind));
    m.insert("apiVersion".into(), json!(def.api_version()));
    Ok(m)
}

/// The object's namespace after the create handler's check: the URL's
/// when the body gives none (400 when they differ); none for
/// cluster-scoped reviews.
fn object_namespace(
    obj: &mut Map<String, Value>,
    def: &ResourceDef,
    ns: Option<&str>,
) -> ApiResult<String> {
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| decode_error(def, "object", "metadata", "ObjectMeta"))?;
    let url_ns = if def.namespaced { ns.unwrap_or("") } else { "" };
    let body_ns = meta
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !body_ns.is_empty() && !url_ns.is_empty() && body_ns != url_ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if url_ns.is_empty() {
        meta.remove("namespace");
    } else {
        meta.insert("namespace".into(), json!(url_ns));
    }
    Ok(url_ns.to_string())
}

/// The 400 kube-apiserver answers for a body its JSON decoder refuses:
/// `got` (a JSON type) where `field` (`spec.resourceAttributes.verb`) is
/// of `go_type`, named after the Go struct that holds the field.
fn decode_error(def: &ResourceDef, got: &str, field: &str, go_type: &str) -> ApiError {
    let parent = field
        .rsplit_once('.')
        .map(|(path, _)| path.rsplit('.').next().unwrap_or(path));
    let owner = match parent {
        None => def.kind.clone(),
        // LocalSubjectAccessReview's spec is a SubjectAccessReviewSpec.
        Some("spec") => format!("{}Spec", def.kind.trim_start_matches("Local")),
        Some("resourceAttributes") => "ResourceAttributes".into(),
        Some("nonResourceAttributes") => "NonResourceAttributes".into(),
        Some(other) => other.to_string(),
    };
    ApiError::bad_request(format!(
        "{kind} in version \"v1\" cannot be handled as a {kind}: json: cannot unmarshal {got} into Go struct field {owner}.{field} of type {go_type}",
        kind = def.kind
    ))
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The object at `obj[key]` (`None` when absent or null); 400 when it is
/// no object.
fn object_at<'a>(
    def: &ResourceDef,
    obj: &'a Map<String, Value>,
    key: &str,
    field: &str,
    go_type: &str,
) -> ApiResult<Option<&'a Map<String, Value>>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(other) => Err(decode_error(def, json_type(other), field, go_type)),
    }
}

/// The string at `obj[key]` (`""` when absent or null); 400 when it is no
/// string.
fn string_at(
    def: &ResourceDef,
    obj: &Map<String, Value>,
    key: &str,
    field: &str,
) -> ApiResult<String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(decode_error(def, json_type(other), field, "string")),
    }
}

/// Which access review is validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Review {
    OfSelf,
    OfSubject,
    Local,
}

/// Go's `%#v` of the internal `NonResourceAttributes` a cause names.
fn go_non_resource(attrs: &Map<String, Value>) -> String {
    let s = |k: &str| {
        attrs
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    format!(
        "authorization.NonResourceAttributes{{Path:{:?}, Verb:{:?}}}",
        s("path"),
        s("verb")
    )
}

/// Whether metadata is empty as `apiequality.Semantic.DeepEqual` sees it
/// against `ObjectMeta{}` (nil and empty alike), with `managedFields` and,
/// for a local review, `namespace` left out.
fn metadata_empty(meta: &Map<String, Value>, local: bool) -> bool {
    meta.iter().all(|(k, v)| {
        k == "managedFields"
            || (local && k == "namespace")
            || match v {
                Value::Null => true,
                Value::String(s) => s.is_empty(),
                Value::Number(n) => n.as_f64() == Some(0.0),
                Value::Array(a) => a.is_empty(),
                Value::Object(o) => o.is_empty(),
                Value::Bool(b) => !b,
            }
    })
}

/// Validates an access review's spec and metadata as kube-apiserver's
/// `ValidateSelfSubjectAccessReview`, `ValidateSubjectAccessReview` and
/// `ValidateLocalSubjectAccessReview` do, and returns the access asked about.
fn access_review(
    def: &ResourceDef,
    obj: &Map<String, Value>,
    namespace: &str,
    review: Review,
) -> ApiResult<Access> {
    let empty = Map::new();
    // LocalSubjectAccessReview's spec is a SubjectAccessReviewSpec.
    let spec_type = format!("v1.{}Spec", def.kind.trim_start_matches("Local"));
    let spec = object_at(def, obj, "spec", "spec", &spec_type)?.unwrap_or(&empty);
    let resource = object_at(
        def,
        spec,
        "resourceAttributes",
        "spec.resourceAttributes",
        "v1.ResourceAttributes",
    )?;
    let non_resource = object_at(
        def,
        spec,
        "nonResourceAttributes",
        "spec.nonResourceAttributes",
        "v1.NonResourceAttributes",
    )?;
    let mut causes = Vec::new();
    if let (Some(_), Some(nr)) = (resource, non_resource) {
        causes.push(invalid_struct(
            "spec.nonResourceAttributes",
            &go_non_resource(nr),
            "cannot be specified in combination with resourceAttributes",
        ));
    }
    if resource.is_none() && non_resource.is_none() {
        causes.push(Cause::invalid(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    if review != Review::OfSelf {
        let user = string_at(def, spec, "user", "spec.user")?;
        let no_groups = spec
            .get("groups")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if user.is_empty() && no_groups {
            causes.push(Cause::invalid(
                "spec.user",
                "",
                "at least one of user or group must be specified",
            ));
        }
    }
    let meta = obj
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if !metadata_empty(meta, review == Review::Local) {
        let detail = if review == Review::Local {
            "must be empty except for namespace"
        } else {
            "must be empty"
        };
        causes.push(invalid_struct(
            "metadata",
            &Value::Object(meta.clone()).to_string(),
            detail,
        ));
    }
    let access = match (resource, non_resource) {
        (Some(r), _) => Access::Resource {
            verb: string_at(def, r, "verb", "spec.resourceAttributes.verb")?,
            group: string_at(def, r, "group", "spec.resourceAttributes.group")?,
            resource: string_at(def, r, "resource", "spec.resourceAttributes.resource")?,
            subresource: string_at(def, r, "subresource", "spec.resourceAttributes.subresource")?,
            namespace: string_at(def, r, "namespace", "spec.resourceAttributes.namespace")?,
            name: string_at(def, r, "name", "spec.resourceAttributes.name")?,
        },
        (None, Some(nr)) => Access::NonResource {
            verb: string_at(def, nr, "verb", "spec.nonResourceAttributes.verb")?,
            path: string_at(def, nr, "path", "spec.nonResourceAttributes.path")?,
        },
        (None, None) => Access::NonResource {
            verb: String::new(),
            path: String::new(),
        },
    };
    if review == Review::Local {
        if let Access::Resource {
            namespace: asked, ..
        } = &access
            && asked != namespace
        {
            causes.push(Cause::invalid(
                "spec.resourceAttributes.namespace",
                asked,
                "must match metadata.namespace",
            ));
        }
        if let Some(nr) = non_resource {
            causes.push(invalid_struct(
                "spec.nonResourceAttributes",
                &go_non_resource(nr),
                "disallowed on this kind of request",
            ));
        }
    }
    if causes.is_empty() {
        Ok(access)
    } else {
        Err(invalid_review(def, causes))
    }
}

/// A `FieldValueInvalid` cause whose value is rendered bare, as Go renders
/// a struct.
fn invalid_struct(field: &str, rendered: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {rendered}: {detail}"),
        field: field.into(),
    }
}

/// The 422 for a review: `<Kind>.<group> "" is invalid: ...`, as
/// `apierrors.NewInvalid` names a group's kind.
fn invalid_review(def: &ResourceDef, causes: Vec<Cause>) -> ApiError {
    let mut e = ApiError::invalid(&def.group, &def.kind, "", causes);
    let qualified = format!("{}.{}", def.kind, def.group);
    if !e.message.starts_with(&qualified) {
        e.message = e.message.replacen(&def.kind, &qualified, 1);
    }
    e
}

/// The user a SubjectAccessReview asks about: its spec's user, groups, uid
/// and extra, as they are (no group is added).
fn subject_of(def: &ResourceDef, obj: &Map<String, Value>) -> ApiResult<UserInfo> {
    let empty = Map::new();
    let spec = obj.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let extra: BTreeMap<String, Vec<String>> = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
        .unwrap_or_default();
    Ok(UserInfo {
        name: string_at(def, spec, "user", "spec.user")?,
        uid: string_at(def, spec, "uid", "spec.uid")?,
        groups: spec.get("groups").map(strings).unwrap_or_default(),
        extra,
    })
}

/// The review object returned: the request with `status`.
fn answer(obj: &Map<String, Value>, decision: Decision, namespace: &str) -> Value {
    let mut out = obj.clone();
    let mut meta = json!({"creationTimestamp": null});
    if !namespace.is_empty() {
        meta["namespace"] = json!(namespace);
    }
    out.insert("metadata".into(), meta);
    out.entry("spec").or_insert_with(|| json!({}));
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    out.insert("status".into(), status);
    Value::Object(out)
}

/// A SelfSubjectRulesReview: the rules `user` holds in `spec.namespace`.
fn self_rules(
    server: &Server,
    def: &ResourceDef,
    user: &UserInfo,
    obj: &Map<String, Value>,
) -> ApiResult<Value> {
    let empty = Map::new();
    let spec =
        object_at(def, obj, "spec", "spec", "v1.SelfSubjectRulesReviewSpec")?.unwrap_or(&empty);
    let namespace = string_at(def, spec, "namespace", "spec.namespace")?;
    if namespace.is_empty() {
        return Err(ApiError::bad_request("no namespace on request"));
    }
    let rules = rules_for(server, user, &namespace)?;
    let mut status = json!({
        "resourceRules": rules.resource,
        "nonResourceRules": rules.non_resource,
        "incomplete": false,
    });
    if !rules.evaluation_error.is_empty() {
        status["evaluationError"] = json!(rules.evaluation_error);
    }
    // kube-apiserver answers a new object: the spec is not echoed.
    Ok(json!({
        "kind": def.kind,
        "apiVersion": def.api_version(),
        "metadata": {"creationTimestamp": null},
        "spec": {},
        "status": status,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn def(resource: &str) -> std::sync::Arc<ResourceDef> {
        Registry::with_builtins()
            .get(AUTHORIZATION, "v1", resource)
            .unwrap()
    }

    #[test]
    fn a_mistyped_field_is_refused_as_the_json_decoder_refuses_it() {
        let ssar = def("selfsubjectaccessreviews");
        let mut body = json!({"spec": {"resourceAttributes": "pods"}});
        let obj = check_type(&ssar, &mut body).unwrap();
        let e = access_review(&ssar, obj, "", Review::OfSelf).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "SelfSubjectAccessReview in version \"v1\" cannot be handled as a SelfSubjectAccessReview: json: cannot unmarshal string into Go struct field SelfSubjectAccessReviewSpec.spec.resourceAttributes of type v1.ResourceAttributes"
            )
        );
        let lsar = def("localsubjectaccessreviews");
        let mut body = json!({"spec": {"user": 7}});
        let obj = check_type(&lsar, &mut body).unwrap();
        assert!(
            subject_of(&lsar, obj)
                .unwrap_err()
                .message
                .ends_with("cannot unmarshal number into Go struct field SubjectAccessReviewSpec.spec.user of type string")
        );
        let mut wrong = json!({"kind": "SubjectAccessReview"});
        assert_eq!(check_type(&ssar, &mut wrong).unwrap_err().code, 400);
    }

    #[test]
    fn metadata_is_empty_as_semantic_equality_sees_it() {
        let meta = |v: Value| v.as_object().cloned().unwrap();
        assert!(metadata_empty(
            &meta(json!({"creationTimestamp": null, "labels": {}, "generation": 0})),
            false
        ));
        assert!(!metadata_empty(&meta(json!({"name": "x"})), false));
        assert!(!metadata_empty(&meta(json!({"namespace": "a"})), false));
        assert!(metadata_empty(&meta(json!({"namespace": "a"})), true));
    }
}
