#!/usr/bin/env python3
"""Generate `src/protobuf/fields.txt`, the field table of the Kubernetes protobuf
messages that the API server decodes (request bodies sent as
`application/vnd.kubernetes.protobuf`, as kubectl's typed commands and the
upstream Cluster Autoscaler do).

Inputs are two crates from crates.io, as cargo unpacks them in its registry:
  * k8s-pb      (prost structs: field numbers, wire types, message types)
  * k8s-openapi (serde code: the JSON name of every field)

Usage: python3 tools/gen_protobuf_fields.py [REGISTRY_SRC_DIR] > src/protobuf/fields.txt
(The default registry directory is the first ~/.cargo/registry/src/* that holds
both crates. `cargo fetch` of a crate that depends on k8s-pb 0.9 unpacks it.)

Output, one message per block:
    message api.core.v1.Volume
    1 name optional string
    2 - inline api.core.v1.VolumeSource
    5 labels map string string
    3 containers repeated message api.core.v1.Container
A field whose JSON name is "-" is inlined into its parent's JSON object
(Go's `json:",inline"`).
"""
import glob
import os
import re
import sys

# The packages served by the API server, plus the apimachinery types they use.
PACKAGES = [
    "api/core/v1", "api/apps/v1", "api/batch/v1", "api/policy/v1",
    "api/coordination/v1", "api/events/v1", "api/scheduling/v1",
    "api/storage/v1", "api/autoscaling/v1",
    "apiextensions_apiserver/pkg/apis/apiextensions/v1",
    "apimachinery/pkg/apis/meta/v1", "apimachinery/pkg/runtime",
    "apimachinery/pkg/util/intstr", "apimachinery/pkg/api/resource",
]

FIELD_ATTR = re.compile(r'#\[prost\((?P<kind>[a-z_0-9]+)(?: = "(?P<kindarg>[^"]*)")?(?:, (?P<label>optional|repeated))?(?:, [a-z_]+ = "[^"]*")*?, tag = "(?P<tag>\d+)"\)\]')
FIELD_DECL = re.compile(r'pub (?:r#)?(?P<name>[a-z_0-9]+): ?(?P<ty>.+),$')
# k8s-openapi's newest API version knows every field k8s-pb has.
NEWEST_API = "v1_37"
STRUCT = re.compile(r'pub struct (?P<name>\w+) \{')


def norm(name):
    return re.sub(r"[^a-z0-9]", "", name.lower())


def resolve(ty, module):
    """Resolve a prost Rust type (Option<T>, Vec<T>, BTreeMap<K, T>) to the
    dotted message name of T."""
    inner = ty.replace(" ", "").rstrip(",")
    while "<" in inner:
        inner = inner[inner.index("<") + 1: inner.rindex(">")]
    inner = [p for p in inner.split(",") if p][-1]
    parts = inner.split("::")
    if len(parts) == 1:
        return ".".join(module + parts)
    path = list(module)
    while parts and parts[0] == "super":
        path.pop()
        parts.pop(0)
    return ".".join(path + parts)


def prost_messages(src):
    out = {}
    for pkg in PACKAGES:
        module = pkg.split("/")
        text = open(os.path.join(src, pkg, "mod.rs")).read().splitlines()
        current, pending, decl = None, None, ""
        for line in text:
            line = line.strip()
            if pending and (decl or line.startswith("pub ")):
                decl += line
                if not decl.endswith(",") or decl.count("<") != decl.count(">"):
                    continue
                line, decl = decl, ""
            s = STRUCT.match(line)
            if s:
                current = ".".join(module + [s.group("name")])
                out[current] = []
                continue
            a = FIELD_ATTR.match(line)
            if a:
                pending = a
                continue
            d = FIELD_DECL.match(line)
            if d and pending and current:
                kind, label = pending.group("kind"), pending.group("label") or "optional"
                field = {"tag": int(pending.group("tag")), "name": d.group("name")}
                if kind == "btree_map":
                    k, v = [x.strip() for x in pending.group("kindarg").split(",")]
                    field["label"] = "map"
                    field["key"] = k
                    field["value"] = resolve(d.group("ty"), module) if v == "message" else v
                else:
                    field["label"] = label
                    field["kind"] = kind
                    if kind == "message":
                        field["message"] = resolve(d.group("ty"), module)
                out[current].append(field)
                pending = None
    return out


def openapi_names(src):
    """Map 'api.core.v1.pod' (lowercased struct name) to its JSON field names."""
    names = {}
    for pkg in PACKAGES:
        for path in glob.glob(os.path.join(src, NEWEST_API, pkg, "*.rs")):
            text = open(path).read()
            structs = STRUCT.findall(text)
            if not structs:
                continue
            keys = re.findall(r'"([^"]+)" => Field::Key_', text)
            names[".".join(pkg.split("/") + [structs[0].lower()])] = keys
    return names


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else None
    if base is None:
        for cand in glob.glob(os.path.expanduser("~/.cargo/registry/src/*")):
            if glob.glob(cand + "/k8s-pb-0.9.*") and glob.glob(cand + "/k8s-openapi-0.29.*"):
                base = cand
    pb = glob.glob(base + "/k8s-pb-0.9.*/src")[0]
    oa = glob.glob(base + "/k8s-openapi-0.29.*/src")[0]
    messages = prost_messages(pb)
    json = openapi_names(oa)

    def json_fields(msg):
        pkg, _, name = msg.rpartition(".")
        return json.get(pkg + "." + name.lower())

    print("# Generated by tools/gen_protobuf_fields.py from the k8s-pb 0.9 and")
    print("# k8s-openapi 0.29 crates (Apache-2.0). Do not edit by hand.")
    for msg in sorted(messages):
        fields = messages[msg]
        known = json_fields(msg)
        print(f"message {msg}")
        for f in fields:
            name = None
            if known is not None:
                for k in known:
                    if norm(k) == norm(f["name"]):
                        name = k
            if name is None and known is not None:
                # A message field with no JSON name is Go's `json:",inline"`
                # (Volume.volumeSource, Probe.handler, ...): its fields are
                # the parent's.
                if f.get("kind") == "message" and f["label"] == "optional":
                    print(f'{f["tag"]} - inline {f["message"]}')
                    continue
                print(f"warning: {msg}.{f['name']} has no JSON name", file=sys.stderr)
            if name is None:
                # No k8s-openapi counterpart (apimachinery internals): lowerCamelCase.
                first, *rest = f["name"].split("_")
                name = first + "".join(p[:1].upper() + p[1:] for p in rest)
            if f["label"] == "map":
                print(f'{f["tag"]} {name} map {f["key"]} {f["value"]}')
            elif f["kind"] == "message":
                print(f'{f["tag"]} {name} {f["label"]} message {f["message"]}')
            else:
                print(f'{f["tag"]} {name} {f["label"]} {f["kind"]}')


if __name__ == "__main__":
    main()
