//! Request bodies in Kubernetes protobuf (`application/vnd.kubernetes.protobuf`).
//!
//! client-go's typed clients send protobuf when asked to: kubectl's `create
//! <kind>` subcommands and `drain`, and the upstream Cluster Autoscaler (its
//! `--kube-api-content-type` defaults to protobuf). They all accept JSON
//! replies (`Accept: application/vnd.kubernetes.protobuf, */*`), so the server
//! only has to *decode* protobuf: a body is turned into the JSON object the
//! same client would have sent, and from there follows the JSON path.
//!
//! The wire format is the Kubernetes envelope: the magic `k8s\0`, then a
//! `runtime.Unknown` whose `typeMeta` names the kind and whose `raw` is the
//! object's message. Field numbers, types and JSON names come from
//! `protobuf/fields.txt`, generated from the k8s-pb and k8s-openapi crates by
//! `tools/gen_protobuf_fields.py`. The table holds every group and version
//! k8s-pb knows, not only the newest: kube-apiserver takes older versions
//! too, and clients send them (every upstream Cluster Autoscaler up to 1.36
//! evicts with a `policy/v1beta1` Eviction). `tests/checks/protobuf_kinds/`
//! checks each kind a client writes against an independent encoder.
//!
//! Go's protobuf marshalling writes non-pointer fields even when they hold
//! the zero value. Empty strings are dropped here (in Go, an empty
//! non-pointer string is the same as an absent one); zero numbers and `false`
//! are kept, since for pointer fields (`replicas: 0`) they are meaningful.

use std::collections::HashMap;
use std::sync::OnceLock;

use base64::Engine;
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

/// The media type of Kubernetes protobuf.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";
const FIELDS: &str = include_str!("protobuf/fields.txt");

/// `time.Time{}.Unix()`: Go's zero time, which marshals as JSON `null`.
const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Scalar {
    String,
    Bytes,
    Int32,
    Int64,
    Bool,
    Double,
}

#[derive(Debug, Clone, Copy)]
enum Ty {
    Scalar(Scalar),
    Message(&'static str),
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Single(Ty),
    Repeated(Ty),
    Map(Ty),
}

#[derive(Debug)]
struct Field {
    /// JSON name; `None` for a field inlined into its parent (`json:",inline"`).
    json: Option<&'static str>,
    kind: Kind,
}

/// A message of the table.
#[derive(Debug, Default)]
struct Message {
    /// The name as the table spells it (`api.core.v1.Pod`).
    name: &'static str,
    fields: HashMap<u32, Field>,
}

/// Lowercased message name → message. (k8s-pb's names differ from the
/// Kubernetes kinds in case only: `CsiDriver` for `CSIDriver`.)
type Schema = HashMap<String, Message>;

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| parse_schema(FIELDS))
}

fn parse_scalar(s: &str) -> Option<Scalar> {
    Some(match s {
        "string" => Scalar::String,
        "bytes" => Scalar::Bytes,
        "int32" => Scalar::Int32,
        "int64" => Scalar::Int64,
        "bool" => Scalar::Bool,
        "double" => Scalar::Double,
        _ => return None,
    })
}

fn parse_ty(s: &'static str) -> Ty {
    parse_scalar(s).map_or(Ty::Message(s), Ty::Scalar)
}

/// Parses the generated table. Lines it does not understand are skipped: the
/// table is generated, and a test checks that every referenced message exists.
fn parse_schema(text: &'static str) -> Schema {
    let mut schema = Schema::new();
    let mut current: Option<&mut HashMap<u32, Field>> = None;
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let words: Vec<&'static str> = line.split(' ').collect();
        if words[0] == "message" && words.len() == 2 {
            let message = schema.entry(words[1].to_ascii_lowercase()).or_default();
            message.name = words[1];
            current = Some(&mut message.fields);
            continue;
        }
        let (Some(fields), Ok(tag)) = (current.as_deref_mut(), words[0].parse::<u32>()) else {
            continue;
        };
        let json = (words.get(1) != Some(&"-")).then(|| words.get(1).copied().unwrap_or(""));
        let kind = match words.get(2..).unwrap_or_default() {
            ["inline", m] => Kind::Single(Ty::Message(m)),
            ["optional", "message", m] => Kind::Single(Ty::Message(m)),
            ["repeated", "message", m] => Kind::Repeated(Ty::Message(m)),
            ["optional", s] => Kind::Single(parse_ty(s)),
            ["repeated", s] => Kind::Repeated(parse_ty(s)),
            ["map", _key, v] => Kind::Map(parse_ty(v)),
            _ => continue,
        };
        fields.insert(tag, Field { json, kind });
    }
    schema
}

/// One field as read off the wire.
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    /// A 32-bit field (float, fixed32): no Kubernetes field uses one, so it
    /// is only skipped.
    Fixed32,
    Bytes(&'a [u8]),
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for (i, byte) in self.buf.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.buf = &self.buf[i + 1..];
                return Ok(value);
            }
        }
        Err("truncated or overlong varint".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.buf.len() < n {
            return Err(format!(
                "field of {n} bytes runs past the end of the message"
            ));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn next_field(&mut self) -> Result<Option<(u32, Wire<'a>)>, String> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let tag =
            u32::try_from(key >> 3).map_err(|_| format!("field number {} too large", key >> 3))?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                Wire::Fixed64(u64::from_le_bytes(
                    b.try_into().map_err(|_| "short fixed64")?,
                ))
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| "length too large")?;
                Wire::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed32
            }
            w => return Err(format!("unsupported wire type {w} for field {tag}")),
        };
        Ok(Some((tag, wire)))
    }
}

/// Decodes a protobuf request body into the JSON object it stands for.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let bad =
        |e: String| ApiError::bad_request(format!("error decoding the protobuf request body: {e}"));
    let envelope = body.strip_prefix(MAGIC).ok_or_else(|| {
        bad("it does not start with the Kubernetes protobuf prefix \"k8s\\0\"".into())
    })?;
    let unknown = decode_message("apimachinery.pkg.runtime.Unknown", envelope).map_err(bad)?;
    let type_meta = unknown.get("typeMeta").cloned().unwrap_or(Value::Null);
    let api_version = type_meta
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = type_meta.get("kind").and_then(Value::as_str).unwrap_or("");
    if let Some(enc) = unknown.get("contentEncoding").and_then(Value::as_str) {
        return Err(bad(format!("content encoding {enc:?} is not supported")));
    }
    let message = message_for(api_version, kind).ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in protobuf, which is not supported for {api_version}, Kind={kind}; send application/json"
        ))
    })?;
    let raw = match unknown.get("raw").and_then(Value::as_str) {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| bad(e.to_string()))?,
        None => Vec::new(),
    };
    let mut object = decode_message(message, &raw).map_err(bad)?;
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::String(api_version.into()));
    out.insert("kind".into(), Value::String(kind.into()));
    out.append(&mut object);
    Ok(Value::Object(out))
}

/// The message of a built-in kind, e.g. `apps/v1` `Deployment` →
/// `api.apps.v1.Deployment`. `None` for kinds without protobuf (custom
/// resources).
fn message_for(api_version: &str, kind: &str) -> Option<&'static str> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let package = match (group, kind) {
        (_, "DeleteOptions") => "apimachinery.pkg.apis.meta".to_string(),
        ("", _) => "api.core".to_string(),
        ("apiextensions.k8s.io", _) => "apiextensions_apiserver.pkg.apis.apiextensions".to_string(),
        ("apiregistration.k8s.io", _) => "kube_aggregator.pkg.apis.apiregistration".to_string(),
        ("internal.apiserver.k8s.io", _) => "api.apiserverinternal".to_string(),
        (g, _) if !g.contains('.') || g.ends_with(".k8s.io") => {
            format!("api.{}", g.split('.').next().unwrap_or(g))
        }
        _ => return None,
    };
    let version = if kind == "DeleteOptions" {
        "v1"
    } else {
        version
    };
    let name = format!("{package}.{version}.{kind}").to_ascii_lowercase();
    schema().get(&name).map(|m| m.name)
}

fn decode_message(name: &str, bytes: &[u8]) -> Result<Map<String, Value>, String> {
    match decode_value(name, bytes)? {
        Value::Object(m) => Ok(m),
        other => Err(format!("{name} decoded to {other}, not an object")),
    }
}

/// Decodes one message, handling the types whose JSON form is not an object
/// of their fields (Time, Quantity, IntOrString, raw JSON, ...).
fn decode_value(name: &str, bytes: &[u8]) -> Result<Value, String> {
    let short = name.rsplit('.').next().unwrap_or(name);
    let qualified = |pkg: &str| name.eq_ignore_ascii_case(&format!("{pkg}.{short}"));
    let meta = "apimachinery.pkg.apis.meta.v1";
    let apiext = "apiextensions_apiserver.pkg.apis.apiextensions.v1";
    match short {
        "Time" | "MicroTime" if qualified(meta) => {
            // Go marshals the zero time as no bytes at all (metav1.Time.Marshal).
            if bytes.is_empty() {
                return Ok(Value::Null);
            }
            let f = decode_fields(name, bytes)?;
            let seconds = f.get("seconds").and_then(Value::as_i64).unwrap_or(0);
            let nanos = f.get("nanos").and_then(Value::as_i64).unwrap_or(0);
            if seconds == GO_ZERO_TIME_SECONDS && nanos == 0 {
                return Ok(Value::Null);
            }
            // metav1.Time has second precision, MicroTime microseconds;
            // both truncate, as Go's time.Format does.
            let nanos = if short == "Time" {
                0
            } else {
                nanos - nanos % 1000
            };
            let ts = jiff::Timestamp::new(seconds, i32::try_from(nanos).unwrap_or(0))
                .map_err(|e| format!("{short} out of range: {e}"))?;
            Ok(Value::String(if short == "Time" {
                format!("{ts:.0}")
            } else {
                format!("{ts:.6}")
            }))
        }
        "Duration" if qualified(meta) => {
            let f = decode_fields(name, bytes)?;
            Ok(Value::String(go_duration(
                f.get("duration").and_then(Value::as_i64).unwrap_or(0),
            )))
        }
        "Quantity" if qualified("apimachinery.pkg.api.resource") => {
            let f = decode_fields(name, bytes)?;
            Ok(f.get("string")
                .cloned()
                .unwrap_or(Value::String("0".into())))
        }
        "IntOrString" if qualified("apimachinery.pkg.util.intstr") => {
            let f = decode_fields(name, bytes)?;
            Ok(match f.get("type").and_then(Value::as_i64) {
                Some(1) => f
                    .get("strVal")
                    .cloned()
                    .unwrap_or(Value::String(String::new())),
                _ => f.get("intVal").cloned().unwrap_or(Value::from(0)),
            })
        }
        "FieldsV1" if qualified(meta) => raw_json(decode_fields(name, bytes)?.get("raw")),
        "RawExtension" if qualified("apimachinery.pkg.runtime") => {
            raw_json(decode_fields(name, bytes)?.get("raw"))
        }
        "Json" if qualified(apiext) => raw_json(decode_fields(name, bytes)?.get("raw")),
        "JsonSchemaPropsOrArray" | "JsonSchemaPropsOrBool" | "JsonSchemaPropsOrStringArray"
            if qualified(apiext) =>
        {
            let f = decode_fields(name, bytes)?;
            // Field 1 or 2 holds the schema, whichever form the message has.
            let (schema, other) = match short {
                "JsonSchemaPropsOrBool" => (f.get("schema"), f.get("allows")),
                "JsonSchemaPropsOrArray" => (f.get("schema"), f.get("jSonSchemas")),
                _ => (f.get("schema"), f.get("property")),
            };
            Ok(schema.or(other).cloned().unwrap_or(Value::Bool(false)))
        }
        _ => decode_fields(name, bytes).map(Value::Object),
    }
}

/// Embedded JSON carried as bytes (base64 after field decoding).
fn raw_json(raw: Option<&Value>) -> Result<Value, String> {
    let Some(b64) = raw.and_then(Value::as_str) else {
        return Ok(Value::Null);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| e.to_string())?;
    if bytes.starts_with(MAGIC) {
        return decode(&bytes).map_err(|e| e.message);
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("embedded JSON: {e}"))
}

/// Decodes a message's fields into a JSON object, by the table.
fn decode_fields(name: &str, bytes: &[u8]) -> Result<Map<String, Value>, String> {
    let fields = &schema()
        .get(&name.to_ascii_lowercase())
        .ok_or_else(|| format!("unknown protobuf message {name}"))?
        .fields;
    let mut out = Map::new();
    let mut reader = Reader { buf: bytes };
    while let Some((tag, wire)) = reader.next_field()? {
        // Unknown fields are skipped, as protobuf readers do.
        let Some(field) = fields.get(&tag) else {
            continue;
        };
        let at = |e: String| format!("{name} field {tag}: {e}");
        match (field.kind, field.json) {
            (Kind::Single(ty), None) => {
                if let Value::Object(mut inner) = decode_ty(ty, wire).map_err(at)? {
                    out.append(&mut inner);
                }
            }
            (Kind::Single(ty), Some(json)) => match decode_ty(ty, wire).map_err(at)? {
                Value::Null => {}
                Value::String(s) if s.is_empty() && matches!(ty, Ty::Scalar(_)) => {}
                v => {
                    out.insert(json.into(), v);
                }
            },
            (Kind::Repeated(ty), json) => {
                let list = out
                    .entry(json.unwrap_or("items"))
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(list) = list else { continue };
                match (ty, wire) {
                    // Packed numbers and bools.
                    (Ty::Scalar(s), Wire::Bytes(b))
                        if !matches!(s, Scalar::String | Scalar::Bytes) =>
                    {
                        let mut packed = Reader { buf: b };
                        while !packed.buf.is_empty() {
                            let w = if s == Scalar::Double {
                                let b = packed.take(8).map_err(at)?;
                                Wire::Fixed64(u64::from_le_bytes(
                                    b.try_into().map_err(|_| at("short double".into()))?,
                                ))
                            } else {
                                Wire::Varint(packed.varint().map_err(at)?)
                            };
                            list.push(decode_ty(ty, w).map_err(at)?);
                        }
                    }
                    (ty, wire) => list.push(decode_ty(ty, wire).map_err(at)?),
                }
            }
            (Kind::Map(value_ty), json) => {
                let Wire::Bytes(entry) = wire else {
                    return Err(at("map entry is not length-delimited".into()));
                };
                let (mut key, mut value) = (String::new(), None);
                let mut r = Reader { buf: entry };
                while let Some((t, w)) = r.next_field().map_err(at)? {
                    match t {
                        1 => {
                            if let Value::String(k) =
                                decode_ty(Ty::Scalar(Scalar::String), w).map_err(at)?
                            {
                                key = k;
                            }
                        }
                        2 => value = Some(decode_ty(value_ty, w).map_err(at)?),
                        _ => {}
                    }
                }
                let value = match (value, value_ty) {
                    (Some(v), _) => v,
                    (None, Ty::Scalar(Scalar::String | Scalar::Bytes)) => {
                        Value::String(String::new())
                    }
                    (None, Ty::Scalar(_)) => Value::from(0),
                    (None, Ty::Message(m)) => decode_value(m, &[]).map_err(at)?,
                };
                let map = out
                    .entry(json.unwrap_or("items"))
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
        }
    }
    Ok(out)
}

fn decode_ty(ty: Ty, wire: Wire<'_>) -> Result<Value, String> {
    match (ty, wire) {
        (Ty::Message(m), Wire::Bytes(b)) => decode_value(m, b),
        (Ty::Scalar(Scalar::String), Wire::Bytes(b)) => std::str::from_utf8(b)
            .map(|s| Value::String(s.into()))
            .map_err(|e| format!("string is not UTF-8: {e}")),
        (Ty::Scalar(Scalar::Bytes), Wire::Bytes(b)) => Ok(Value::String(
            base64::engine::general_purpose::STANDARD.encode(b),
        )),
        // Negative int32s are sign-extended to ten bytes: truncate.
        #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
        (Ty::Scalar(Scalar::Int32), Wire::Varint(v)) => Ok(Value::from(v as i64 as i32)),
        #[allow(clippy::cast_possible_wrap)]
        (Ty::Scalar(Scalar::Int64), Wire::Varint(v)) => Ok(Value::from(v as i64)),
        (Ty::Scalar(Scalar::Bool), Wire::Varint(v)) => Ok(Value::Bool(v != 0)),
        (Ty::Scalar(Scalar::Double), Wire::Fixed64(v)) => {
            Ok(serde_json::Number::from_f64(f64::from_bits(v)).map_or(Value::Null, Value::Number))
        }
        (ty, _) => Err(format!("wire type does not match the field's type {ty:?}")),
    }
}

/// Formats nanoseconds as Go's `time.Duration.String()` does: `1h2m3.5s`,
/// `1.5ms`, `0s`, `-2s`.
fn go_duration(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let d = std::time::Duration::from_nanos(nanos.unsigned_abs());
    format!("{sign}{}", simclock::format_go_duration(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny protobuf writer for the tests.
    fn key(tag: u32, wire: u8) -> Vec<u8> {
        varint(u64::from(tag) << 3 | u64::from(wire))
    }
    fn varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }
    fn bytes(tag: u32, b: &[u8]) -> Vec<u8> {
        let mut out = key(tag, 2);
        out.extend(varint(b.len() as u64));
        out.extend_from_slice(b);
        out
    }
    fn int(tag: u32, v: i64) -> Vec<u8> {
        let mut out = key(tag, 0);
        out.extend(varint(v as u64));
        out
    }
    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [bytes(1, api_version.as_bytes()), bytes(2, kind.as_bytes())].concat();
        let unknown = [
            bytes(1, &type_meta),
            bytes(2, raw),
            bytes(3, b""),
            bytes(4, b""),
        ]
        .concat();
        [MAGIC.to_vec(), unknown].concat()
    }

    #[test]
    fn every_referenced_message_is_in_the_table() {
        for (name, message) in schema() {
            for f in message.fields.values() {
                let (Kind::Single(Ty::Message(m))
                | Kind::Repeated(Ty::Message(m))
                | Kind::Map(Ty::Message(m))) = f.kind
                else {
                    continue;
                };
                assert!(
                    schema().contains_key(&m.to_ascii_lowercase()),
                    "{name} refers to missing {m}"
                );
            }
        }
        assert!(
            schema().len() > 300,
            "table has {} messages",
            schema().len()
        );
    }

    #[test]
    fn decodes_a_pod_disruption_budget_as_kubectl_sends_it() {
        // metadata{name, namespace, creationTimestamp: zero time}, spec{minAvailable: 1, selector}
        let zero_time = [int(1, GO_ZERO_TIME_SECONDS), int(2, 0)].concat();
        let meta = [
            bytes(1, b"web"),
            bytes(2, b""),
            bytes(3, b"default"),
            bytes(8, &zero_time),
        ]
        .concat();
        let min_available = [int(1, 0), int(2, 1), bytes(3, b"")].concat();
        let labels = [bytes(1, b"app"), bytes(2, b"web")].concat();
        let selector = bytes(1, &labels);
        let spec = [bytes(1, &min_available), bytes(2, &selector)].concat();
        let status = [int(1, 0), int(4, 0)].concat();
        let pdb = [bytes(1, &meta), bytes(2, &spec), bytes(3, &status)].concat();
        let v = decode(&envelope("policy/v1", "PodDisruptionBudget", &pdb)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
                "status": {"observedGeneration": 0, "currentHealthy": 0},
            })
        );
    }

    #[test]
    fn decodes_inline_fields_quantities_and_percentages() {
        // Volume{name, volumeSource{emptyDir{sizeLimit: 1Gi}}}
        let empty_dir = bytes(2, &bytes(1, b"1Gi"));
        let volume = [bytes(1, b"scratch"), bytes(2, &bytes(2, &empty_dir))].concat();
        let spec = bytes(1, &volume);
        let pod = [bytes(1, &bytes(1, b"p")), bytes(2, &spec)].concat();
        let v = decode(&envelope("v1", "Pod", &pod)).unwrap();
        assert_eq!(
            v["spec"]["volumes"][0],
            serde_json::json!({"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}})
        );

        let max_unavailable = [int(1, 1), int(2, 0), bytes(3, b"25%")].concat();
        let pdb = bytes(2, &bytes(3, &max_unavailable));
        let v = decode(&envelope("policy/v1", "PodDisruptionBudget", &pdb)).unwrap();
        assert_eq!(v["spec"]["maxUnavailable"], "25%");
    }

    #[test]
    fn decodes_times_and_negative_numbers() {
        let event_time = [int(1, 1_700_000_000), int(2, 123_456_000)].concat();
        let event = [
            bytes(1, &bytes(1, b"e")),
            bytes(2, &event_time),
            int(15, -1),
        ]
        .concat();
        let v = decode(&envelope("events.k8s.io/v1", "Event", &event)).unwrap();
        assert_eq!(v["eventTime"], "2023-11-14T22:13:20.123456Z");
        assert_eq!(v["deprecatedCount"], -1);
        assert_eq!(go_duration(90 * 60 * 1_000_000_000), "1h30m0s");
        assert_eq!(go_duration(1_500_000), "1.5ms");
        assert_eq!(go_duration(2_500_000_000), "2.5s");
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
        let mut truncated = envelope("v1", "ConfigMap", &bytes(1, &bytes(1, b"cm")));
        truncated.truncate(truncated.len() - 6);
        assert_eq!(decode(&truncated).unwrap_err().code, 400);
        let cr = decode(&envelope("example.com/v1", "Widget", b"")).unwrap_err();
        assert_eq!(cr.code, 415);
    }
}
