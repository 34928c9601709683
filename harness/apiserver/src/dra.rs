//! `resource.k8s.io/v1` as kube-apiserver defaults and validates it
//! (pkg/apis/resource: `v1/defaults.go`, `validation/validation.go`), for
//! what users meet first:
//!
//! - defaults: a request's (and each `firstAvailable` alternative's)
//!   `allocationMode` is `ExactCount`, then an `ExactCount` count of 0 or
//!   none is 1;
//! - ResourceClaim, ResourceClaimTemplate (at `spec.spec.devices`) and
//!   DeviceClass: one of `exactly`/`firstAvailable` per request, request
//!   names unique, a class name, `count`/`allocationMode` rules, selectors
//!   that have `cel` and compile in the DRA environment (`compilation
//!   failed: ERROR: <input>:...`), `matchAttribute` qualified; a claim's
//!   and a template's spec immutable;
//! - ResourceSlice: driver, pool name, `resourceSliceCount` above 0, exactly
//!   one of `nodeName`/`nodeSelector`/`allNodes`/`perDeviceNodeSelection`,
//!   at most 128 devices with unique names, each with at most 32
//!   attributes and capacities and one value per attribute;
//! - a claim's status: at most 256 `reservedFor` entries, none without an
//!   allocation, an allocation not changed once made.

use std::collections::BTreeSet;

use apimachinery::json::Lookup;
use kubecel::device::Selector;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceDef;

/// kube-apiserver's limits.
const MAX_REQUESTS: usize = 32;
const MAX_DEVICES_PER_SLICE: usize = 128;
const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
const MAX_RESERVED_FOR: usize = 256;
const MAX_CEL_LENGTH: usize = 10240;

/// Defaults and validation of a DRA object being created or updated
/// (`old`: the stored object on updates).
pub fn admit(def: &ResourceDef, name: &str, obj: &mut Value, old: Option<&Value>) -> ApiResult<()> {
    let invalid = |causes: Vec<Cause>| ApiError::invalid(&def.group, &def.kind, name, causes);
    let causes = match def.resource.as_str() {
        "resourceclaims" | "resourceclaimtemplates" => {
            let (pointer, path) = if def.resource == "resourceclaims" {
                ("/spec/devices", "spec.devices")
            } else {
                ("/spec/spec/devices", "spec.spec.devices")
            };
            if let Some(devices) = obj.pointer_mut(pointer) {
                default_requests(devices);
            }
            if let Some(old) = old
                && old.get("spec") != obj.get("spec")
            {
                return Err(invalid(vec![Cause::invalid_json(
                    "spec",
                    obj.get("spec").unwrap_or(&Value::Null),
                    "field is immutable",
                )]));
            }
            let mut causes = Vec::new();
            validate_claim_devices(obj.lookup(pointer), path, &mut causes);
            causes
        }
        "deviceclasses" => {
            let mut causes = Vec::new();
            let changed =
                old.is_none_or(|o| o.lookup("/spec/selectors") != obj.lookup("/spec/selectors"));
            if changed {
                validate_selectors(obj.lookup("/spec/selectors"), "spec.selectors", &mut causes);
            }
            causes
        }
        "resourceslices" => validate_slice(obj, old),
        _ => Vec::new(),
    };
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(causes))
    }
}

/// Validation of a claim's status write.
pub fn admit_status(def: &ResourceDef, name: &str, old: &Value, new: &Value) -> ApiResult<()> {
    if def.resource != "resourceclaims" {
        return Ok(());
    }
    let mut causes = Vec::new();
    let reserved = new
        .lookup("/status/reservedFor")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let allocation = new.lookup("/status/allocation").filter(|a| !a.is_null());
    if reserved > MAX_RESERVED_FOR {
        causes.push(Cause::too_many(
            "status.reservedFor",
            reserved,
            MAX_RESERVED_FOR,
        ));
    }
    if reserved > 0 && allocation.is_none() {
        causes.push(Cause::forbidden(
            "status.reservedFor",
            "may not be specified when `allocated` is not set",
        ));
    }
    if let (Some(before), Some(after)) = (
        old.lookup("/status/allocation").filter(|a| !a.is_null()),
        allocation,
    ) && before != after
    {
        causes.push(Cause::invalid_json(
            "status.allocation",
            after,
            "field is immutable",
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&def.group, &def.kind, name, causes))
    }
}

/// `allocationMode` `ExactCount` by default, then `count` 1 for it.
fn default_requests(devices: &mut Value) {
    let Some(requests) = devices.get_mut("requests").and_then(Value::as_array_mut) else {
        return;
    };
    let default = |r: &mut Value| {
        if !r.is_object() {
            return;
        }
        if r.get("allocationMode")
            .is_none_or(|m| m.as_str() == Some(""))
        {
            r["allocationMode"] = json!("ExactCount");
        }
        if r["allocationMode"] == "ExactCount"
            && r.get("count").is_none_or(|c| c.as_i64() == Some(0))
        {
            r["count"] = json!(1);
        }
    };
    for r in requests {
        if let Some(e) = r.get_mut("exactly") {
            default(e);
        }
        if let Some(alternatives) = r.get_mut("firstAvailable").and_then(Value::as_array_mut) {
            alternatives.iter_mut().for_each(default);
        }
    }
}

fn validate_claim_devices(devices: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let requests = devices
        .and_then(|d| d.get("requests"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if requests.len() > MAX_REQUESTS {
        causes.push(Cause::too_many(
            &format!("{path}.requests"),
            requests.len(),
            MAX_REQUESTS,
        ));
        return;
    }
    let mut names = BTreeSet::new();
    for (i, r) in requests.iter().enumerate() {
        let at = format!("{path}.requests[{i}]");
        unique_name(r, &at, &mut names, causes);
        let exactly = r.get("exactly").filter(|e| !e.is_null());
        let first = r
            .get("firstAvailable")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty());
        match (exactly, first) {
            (None, None) => causes.push(Cause::required_because(
                &at,
                "exactly one of `exactly` or `firstAvailable` is required",
            )),
            (Some(_), Some(_)) => causes.push(Cause::invalid_json(
                &at,
                &Value::Null,
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
            )),
            (Some(e), None) => validate_request(e, &format!("{at}.exactly"), causes),
            (None, Some(alternatives)) => {
                for (j, a) in alternatives.iter().enumerate() {
                    validate_request(a, &format!("{at}.firstAvailable[{j}]"), causes);
                }
            }
        }
    }
    let constraints = devices
        .and_then(|d| d.get("constraints"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, c) in constraints.iter().enumerate() {
        let at = format!("{path}.constraints[{i}].matchAttribute");
        match c.get("matchAttribute").and_then(Value::as_str) {
            None | Some("") => causes.push(Cause::required(at)),
            Some(a) if !a.contains('/') => causes.push(Cause::invalid(
                at,
                a,
                "a fully qualified name must be a domain and a name separated by a slash",
            )),
            Some(_) => {}
        }
    }
}

/// One `exactly` request or `firstAvailable` alternative (defaulted).
fn validate_request(r: &Value, at: &str, causes: &mut Vec<Cause>) {
    if r.get("deviceClassName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        causes.push(Cause::required(format!("{at}.deviceClassName")));
    }
    let count = r.get("count").and_then(Value::as_i64).unwrap_or(0);
    match r
        .get("allocationMode")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "All" if count != 0 => causes.push(Cause::invalid_json(
            &format!("{at}.count"),
            &json!(count),
            "must not be specified when allocationMode is 'All'",
        )),
        "ExactCount" if count <= 0 => causes.push(Cause::invalid_json(
            &format!("{at}.count"),
            &json!(count),
            "must be greater than zero",
        )),
        "All" | "ExactCount" => {}
        other => causes.push(Cause::not_supported(
            &format!("{at}.allocationMode"),
            other,
            &["All", "ExactCount"],
        )),
    }
    validate_selectors(r.get("selectors"), &format!("{at}.selectors"), causes);
}

/// Selectors: each has `cel`, whose expression compiles.
fn validate_selectors(selectors: Option<&Value>, at: &str, causes: &mut Vec<Cause>) {
    let list = selectors
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, s) in list.iter().enumerate() {
        let Some(cel) = s.get("cel").filter(|c| !c.is_null()) else {
            causes.push(Cause::required(format!("{at}[{i}].cel")));
            continue;
        };
        let field = format!("{at}[{i}].cel.expression");
        let expression = cel.get("expression").and_then(Value::as_str).unwrap_or("");
        if expression.len() > MAX_CEL_LENGTH {
            causes.push(Cause::too_long(&field, MAX_CEL_LENGTH));
        } else if let Err(e) = Selector::compile(expression) {
            causes.push(Cause::invalid(
                field,
                expression,
                format!("compilation failed: {e}"),
            ));
        }
    }
}

fn validate_slice(obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let text = |p: &str| spec.lookup(p).and_then(Value::as_str).unwrap_or("");
    if text("/driver").is_empty() {
        causes.push(Cause::required("spec.driver"));
    }
    if text("/pool/name").is_empty() {
        causes.push(Cause::required("spec.pool.name"));
    }
    let count = spec
        .lookup("/pool/resourceSliceCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if count <= 0 {
        causes.push(Cause::invalid_json(
            "spec.pool.resourceSliceCount",
            &json!(count),
            "must be greater than zero",
        ));
    }
    let generation = spec
        .lookup("/pool/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if generation < 0 {
        causes.push(Cause::invalid_json(
            "spec.pool.generation",
            &json!(generation),
            "must be greater than or equal to zero",
        ));
    }
    validate_node_selection(&spec, &mut causes);
    if let Some(old) = old {
        for (field, pointer) in [
            ("spec.driver", "/spec/driver"),
            ("spec.pool.name", "/spec/pool/name"),
            ("spec.nodeName", "/spec/nodeName"),
        ] {
            if old.lookup(pointer) != obj.lookup(pointer) {
                let value = obj.lookup(pointer).cloned().unwrap_or(Value::Null);
                causes.push(Cause::invalid_json(field, &value, "field is immutable"));
            }
        }
    }
    let devices = spec
        .get("devices")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if devices.len() > MAX_DEVICES_PER_SLICE {
        causes.push(Cause::too_many(
            "spec.devices",
            devices.len(),
            MAX_DEVICES_PER_SLICE,
        ));
        return causes;
    }
    let mut names = BTreeSet::new();
    for (i, d) in devices.iter().enumerate() {
        let at = format!("spec.devices[{i}]");
        unique_name(d, &at, &mut names, &mut causes);
        let attributes = d
            .get("attributes")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let capacity = d
            .get("capacity")
            .and_then(Value::as_object)
            .map_or(0, |c| c.len());
        if attributes.len() + capacity > MAX_ATTRIBUTES_AND_CAPACITIES {
            causes.push(Cause::invalid_json(
                &at,
                &json!(attributes.len() + capacity),
                "the total number of attributes and capacities must not exceed 32",
            ));
        }
        for (key, value) in &attributes {
            let set = ["int", "bool", "string", "version"]
                .iter()
                .filter(|k| value.get(**k).is_some_and(|v| !v.is_null()))
                .count();
            if set != 1 {
                causes.push(Cause::invalid(
                    format!("{at}.attributes[{key}]"),
                    "",
                    "exactly one value must be specified",
                ));
            }
        }
    }
    causes
}

/// Exactly one of `nodeName`, `nodeSelector`, `allNodes`,
/// `perDeviceNodeSelection`.
fn validate_node_selection(spec: &Value, causes: &mut Vec<Cause>) {
    let mut set = Vec::new();
    match spec.get("nodeName") {
        Some(Value::String(n)) if n.is_empty() => causes.push(Cause::invalid(
            "spec.nodeName",
            "",
            "must be either unset or set to a non-empty string",
        )),
        Some(Value::String(_)) => set.push("`nodeName`"),
        _ => {}
    }
    if spec.get("nodeSelector").is_some_and(|s| !s.is_null()) {
        set.push("`nodeSelector`");
    }
    for field in ["allNodes", "perDeviceNodeSelection"] {
        match spec.get(field) {
            Some(Value::Bool(true)) => set.push(if field == "allNodes" {
                "`allNodes`"
            } else {
                "`perDeviceNodeSelection`"
            }),
            Some(Value::Bool(false)) => causes.push(Cause::invalid_json(
                &format!("spec.{field}"),
                &json!(false),
                "must be either unset or set to true",
            )),
            _ => {}
        }
    }
    const ONE_OF: &str = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    match set.len() {
        0 => causes.push(Cause::required_because("spec", ONE_OF)),
        1 => {}
        _ => causes.push(Cause::invalid(
            "spec",
            &format!("{{{}}}", set.join(", ")),
            format!("{ONE_OF}, but multiple fields are set"),
        )),
    }
}

/// A list item's `name` (at `at`): required, and not one already `seen`.
fn unique_name(item: &Value, at: &str, seen: &mut BTreeSet<String>, causes: &mut Vec<Cause>) {
    let name = item.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        causes.push(Cause::required(format!("{at}.name")));
    } else if !seen.insert(name.to_string()) {
        causes.push(Cause::duplicate(at, name));
    }
}
